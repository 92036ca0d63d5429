/**
 * The one place that builds Redis key and channel names (DESIGN.md §4, §9). No other
 * module concatenates a key string: they ask a {@link Keys} for it.
 *
 * Every key of one user is `<prefix>{<uid>}:<role>`. The `{uid}` hash tag puts all of a
 * user's keys in one Redis Cluster slot, so every script touches a single slot
 * (Redis Cluster spec, "Hash tags").
 */
import { invalid } from '../errors.js';

/** The default key prefix (DESIGN.md §4, setting `redisPrefix`). */
export const DEFAULT_PREFIX = 'px:';

/** Longest user id accepted, in UTF-16 code units: keys stay short enough to log. */
export const MAX_UID_LENGTH = 256;

const BRACES = /[{}%]/;
const BRACES_G = /[{}%]/g;
const ESCAPES: Readonly<Record<string, string>> = { '{': '%7B', '}': '%7D', '%': '%25' };
function escapeChar(c: string): string {
  return ESCAPES[c] ?? c;
}

/** Same rule as the `redisPrefix` setting: 1–32 chars, no braces, no whitespace. */
export const PREFIX_RULE = /^[^{}\s]{1,32}$/;

/**
 * The names of one user's keys. Each name is built when read, so a caller that needs
 * three of them allocates three strings (the append path runs this per recipient).
 */
export class UserKeys {
  /** `<prefix>{uid}`: the part every key of the user starts with. */
  readonly #tag: string;

  /** Use {@link Keys.user}, which validates the uid. */
  constructor(tag: string) {
    this.#tag = tag;
  }

  /** Stream: entry ID `<seq>-0`, fields `id` (MsgID), `kind`, `room` when given, `exp` (the record's expiry, ms; append-13.lua on) when given. */
  get inbox(): string {
    return `${this.#tag}:inbox`;
  }

  /**
   * Hash: `epoch`, `seq` (last assigned), `created` (ms since the Unix epoch), `keep`
   * (when the keys expire, append-13.lua), `resume_rotated` (when a resume claim last
   * rotated the epoch, ms by Redis's clock: rotate-7.lua's cool-down), `gen` (the inbox
   * generation the epoch was made under, append-13.lua; absent: 0), `lineage` (the
   * epoch a rotation replaced and the seq the new one continues from, rotate-7.lua and
   * append-13.lua: src/inbox/lineage.ts), `cursor <device>` ("<seq> <epoch>": a device's
   * ack cursor a rotation kept of the epoch it replaced, until the device acks under the
   * new one; src/inbox/codec.ts `keptCursorField`).
   */
  get meta(): string {
    return `${this.#tag}:meta`;
  }

  /** Hash: device → highest acked seq. */
  get acks(): string {
    return `${this.#tag}:acks`;
  }

  /** Sorted set: MsgID → seq, the retained window only. */
  get ids(): string {
    return `${this.#tag}:ids`;
  }

  /** Hash: conn → presence record (DESIGN.md §4; used by presence, not by the inbox). */
  get conns(): string {
    return `${this.#tag}:conns`;
  }

  /**
   * Hash: conn → `<untilMs>|<code>|<reason>`, the connections `DELETE
   * /v1/users/{uid}/connections` closed, until `untilMs` (Redis's clock): their node
   * closes them with that code and reason rather than writing their presence entry back
   * (src/cluster/lua/presence-close-1.lua, presence-refresh-4.lua; used by presence).
   */
  get closed(): string {
    return `${this.#tag}:closed`;
  }

  /**
   * Hash: conn id of a new connection → `["<untilMs>", conn, entry, …]` (JSON), the
   * connections its presence add replaced, until its entry's expiry (Redis's clock):
   * what its node kicks should the add's reply not reach it
   * (src/cluster/lua/presence-add-2.lua, presence-settle-2.lua; used by presence).
   */
  get replaced(): string {
    return `${this.#tag}:replaced`;
  }

  /** Every key, by role. */
  toJSON(): Record<'inbox' | 'meta' | 'acks' | 'ids' | 'conns' | 'closed' | 'replaced', string> {
    return { inbox: this.inbox, meta: this.meta, acks: this.acks, ids: this.ids, conns: this.conns, closed: this.closed, replaced: this.replaced };
  }
}

/**
 * Builds key names under one prefix.
 *
 * A uid must be 1–{@link MAX_UID_LENGTH} characters. The API allows braces in user ids
 * (its rule is only: no whitespace or control characters), but a brace inside the hash
 * tag would end the tag early, and an empty tag makes Redis hash the whole key,
 * scattering one user's keys over several slots. So `{`, `}` and `%` are
 * percent-encoded inside the tag (`%7B`, `%7D`, `%25`): an injective mapping, so two
 * users never share keys, and every tag is a non-empty brace-free string.
 */
export class Keys {
  readonly prefix: string;

  /**
   * @param prefix key prefix, default `px:`
   * @throws PixiuError INVALID_REQUEST when the prefix breaks the `redisPrefix` rule
   */
  constructor(prefix: string = DEFAULT_PREFIX) {
    if (!PREFIX_RULE.test(prefix)) throw invalid('redis key prefix must be 1-32 characters without braces or whitespace');
    this.prefix = prefix;
  }

  /** All keys of one user. @throws PixiuError INVALID_REQUEST for a bad uid */
  user(uid: string): UserKeys {
    return new UserKeys(this.#tag(uid));
  }

  /** `<prefix>{uid}:inbox`, the stream. @throws PixiuError INVALID_REQUEST for a bad uid */
  inbox(uid: string): string {
    return this.user(uid).inbox;
  }

  /** `<prefix>{uid}:meta`, the epoch and counter hash. @throws PixiuError INVALID_REQUEST for a bad uid */
  meta(uid: string): string {
    return this.user(uid).meta;
  }

  /** `<prefix>{uid}:acks`, the device cursors. @throws PixiuError INVALID_REQUEST for a bad uid */
  acks(uid: string): string {
    return this.user(uid).acks;
  }

  /** `<prefix>{uid}:ids`, MsgID → seq. @throws PixiuError INVALID_REQUEST for a bad uid */
  ids(uid: string): string {
    return this.user(uid).ids;
  }

  /** `<prefix>{uid}:conns`, presence. @throws PixiuError INVALID_REQUEST for a bad uid */
  conns(uid: string): string {
    return this.user(uid).conns;
  }

  /** `<prefix>{uid}:closed`, connections a DELETE closed. @throws PixiuError INVALID_REQUEST for a bad uid */
  closed(uid: string): string {
    return this.user(uid).closed;
  }

  /** `<prefix>{uid}:replaced`, what each presence add replaced. @throws PixiuError INVALID_REQUEST for a bad uid */
  replaced(uid: string): string {
    return this.user(uid).replaced;
  }

  /**
   * String: the inbox generation, an integer (absent: 0), raised when Redis went back in
   * time (src/inbox/generation.ts): an inbox appended under a higher generation than it
   * recorded gets a new epoch (append-13.lua). Nodes read it and pass it to the append
   * script, which touches no key outside the user's slot.
   */
  inboxGeneration(): string {
    return `${this.prefix}inbox-generation`;
  }

  /** Sorted set of live nodes: node id → registration expiry, ms (DESIGN.md §9). */
  nodes(): string {
    return `${this.prefix}nodes`;
  }

  /** Hash of node id → the node's shared settings as JSON (src/cluster/shared-settings.ts). */
  nodeSettings(): string {
    return `${this.prefix}node-settings`;
  }

  /** Pub/Sub channel of one node: notifies and kicks addressed to it (DESIGN.md §9). */
  nodeChannel(node: string): string {
    return `${this.prefix}node:${node}`;
  }

  /** The capped broadcast stream (DESIGN.md §8): one for all nodes. */
  broadcast(): string {
    return `${this.prefix}broadcast`;
  }

  /**
   * String: the marker of a broadcast sent with a `client_msg_id`, `<bseq>|<tag filter>`,
   * set with the stream entry in one script and expiring with the stored broadcast
   * (src/broadcast/lua/broadcast-publish-2.lua): a retry that finds it appends nothing.
   * Its hash tag is the stream's whole key name: the stream's key has no braces, so
   * Redis Cluster hashes all of it, and the marker lands in the same slot (Redis Cluster
   * spec, "Hash tags").
   * @param msgId the broadcast's MsgID (16 hex digits, from the store)
   */
  broadcastMarker(msgId: string): string {
    return `${this.prefix}bcast:{${this.broadcast()}}:${msgId}`;
  }

  /**
   * A room's members: sorted set of user id → join time, ms (DESIGN.md §8). Its own
   * hash tag, `room:{<room>}`. @throws PixiuError INVALID_REQUEST for a bad room id
   */
  roomMembers(room: string): string {
    return `${this.prefix}room:${this.#hashTag(room, 'room id')}:members`;
  }

  /**
   * A room's cut: the `ts` of its latest room message, ms, which no later join slot
   * falls within (`src/rooms/lua/room-time-1.lua`); expires a minute after Redis's clock
   * passes it. Hash tag `room:{<room>}`, as its members'. @throws PixiuError INVALID_REQUEST for a bad room id
   */
  roomCut(room: string): string {
    return `${this.prefix}room:${this.#hashTag(room, 'room id')}:cut`;
  }

  /**
   * A room's top: the highest join slot it has given (`src/rooms/lua/room-add-5.lua`),
   * so that no later member takes the slot of one removed since (a page cursor); expires
   * a minute after Redis's clock passes it, as the cut does. Hash tag `room:{<room>}`, as
   * its members'. @throws PixiuError INVALID_REQUEST for a bad room id
   */
  roomTop(room: string): string {
    return `${this.prefix}room:${this.#hashTag(room, 'room id')}:top`;
  }

  /** A channel's capped history stream (DESIGN.md §8). @throws PixiuError INVALID_REQUEST for a bad channel */
  channelHistory(channel: string): string {
    return `${this.prefix}ch:${this.#hashTag(channel, 'channel')}:history`;
  }

  /**
   * String: the marker of a channel publication sent with a `client_msg_id`,
   * `<id>|<content fingerprint>`, set with the publication in one script and expiring
   * with the channel's history (src/channels/lua/channel-publish-4.lua). Hash tag
   * `ch:{<channel>}`, as the history's. @throws PixiuError INVALID_REQUEST for a bad channel
   * @param clientMsgId the producer's key, 1–128 printable ASCII characters (checked before)
   */
  channelMarker(channel: string, clientMsgId: string): string {
    return `${this.prefix}ch:${this.#hashTag(channel, 'channel')}:cmid:${clientMsgId}`;
  }

  /** A channel's Pub/Sub topic (not a key: Pub/Sub names live outside the keyspace). */
  channelTopic(channel: string): string {
    return `${this.prefix}ch:${channel}`;
  }

  /**
   * Hash of store partition claims: MsgID partition byte (decimal) → store id
   * (DESIGN.md §9; src/cluster/lua/partition-claim-3.lua). The store keys share the
   * hash tag `{store}`, so the claim script touches one Cluster slot; they begin with
   * `xiu:`, where no user key does (those begin with `{`).
   */
  storePartitions(): string {
    return `${this.prefix}xiu:{store}:partitions`;
  }

  /** Hash: store id → JSON description of the store (data dir, host), for messages. */
  storeDescriptions(): string {
    return `${this.prefix}xiu:{store}:stores`;
  }

  /**
   * Hash: MsgID partition byte (decimal) → the last counter the store minted there, as
   * its node last wrote it (every lease renewal and at shutdown), so a data dir that is
   * behind it (an older copy) is refused at start (src/cluster/store-ownership.ts).
   * @param storeId `[A-Za-z0-9._-]{1,64}` (checked by the layout file)
   */
  storeMinted(storeId: string): string {
    return `${this.prefix}xiu:{store}:minted:${storeId}`;
  }

  /**
   * String: when the partition claims were first written since Redis last lost them
   * (ms, Redis's clock; SET NX by every claim and re-assertion), so a new data dir can
   * wait for the nodes still running to re-assert theirs before it claims a block
   * (src/cluster/store-ownership.ts).
   */
  claimsSince(): string {
    return `${this.prefix}xiu:{store}:claims-since`;
  }

  /**
   * String with a TTL: a store's lease, JSON `{url, node, …}` — where the node owning the
   * store reads it for others, renewed by that node's heartbeat (DESIGN.md §9).
   * @param storeId `[A-Za-z0-9._-]{1,64}` (checked by the layout file)
   */
  storeLease(storeId: string): string {
    return `${this.prefix}xiu:{store}:lease:${storeId}`;
  }

  /**
   * String: which store claimed a `client_msg_id`, `P|<store id>` while it writes the
   * message, then its MsgID (src/cluster/client-id-claims.ts). Its own hash tag.
   * @throws PixiuError INVALID_REQUEST for an empty or over-long id
   */
  clientIdClaim(clientMsgId: string): string {
    return `${this.prefix}cmid:${this.#hashTag(clientMsgId, 'client_msg_id')}`;
  }

  /** String, TTL 60 s: written by every `GET /readyz` to see that Redis takes writes (src/api/routes/health.ts). */
  readinessProbe(): string {
    return `${this.prefix}readyz`;
  }

  /** String: the secret nodes present to each other's internal routes (DESIGN.md §9). */
  clusterSecret(): string {
    return `${this.prefix}cluster:secret`;
  }

  #tag(uid: string): string {
    return `${this.prefix}${this.#hashTag(uid, 'user id')}`;
  }

  /** `{id}` with braces and `%` escaped (see the class comment). */
  #hashTag(id: string, what: string): string {
    if (typeof id !== 'string' || id.length === 0 || id.length > MAX_UID_LENGTH) {
      throw invalid(`${what} must be 1-${MAX_UID_LENGTH} characters`);
    }
    return `{${BRACES.test(id) ? id.replace(BRACES_G, escapeChar) : id}}`;
  }
}
