/**
 * Messages whose producer has already given up on them (docs/api.md, "Messages": a
 * request whose client left before its message was stored). A request can wait long on
 * a starved node, or behind a Redis that does not answer; its producer's timeout fires
 * meanwhile, it closes the connection and retries on another node. Run to the end, the
 * first attempt raced that retry: after a Redis restore it found no claim for its
 * `client_msg_id` and stored the message a second time under another id (the cluster
 * tester's F2, the attempt ~56 s late). So the message is looked at once more right
 * before it is stored (claimed-store.ts `putOnce`): when its client is gone, nothing is
 * stored and nothing answered ({@link RequestAbandoned}). Once the store has the
 * message, the request is finished as any other, appends included, with one exception:
 * a later item of a batch, stored, whose appends had not gone out when an earlier item
 * was dropped so is held back as after a 503 ({@link handedOn}), not appended, so that
 * it reaches no inbox ahead of the earlier one's retry. Nothing acknowledged is lost by
 * this: nothing was answered.
 */
import { PixiuError } from '../errors.js';

/**
 * Asked right before a message is stored: true when nobody waits for its answer any
 * more (the request's connection is closed or half-closed: src/api/abandoned-requests.ts).
 * Once true it stays true.
 */
export type ClientGone = () => boolean;

/**
 * A message not stored because its request's client had left ({@link ClientGone}). An
 * UNAVAILABLE, so that in a batch it holds back the later items' appends as a 503 does
 * (ingest.ts `sendBatch`: the producer's retry must append them in the batch's order),
 * but never answered: the route drops the request (src/api/abandoned-requests.ts) and
 * counts it `abandoned`. Only the item itself fails with it: the later items it holds
 * back fail with an error of their own ({@link handedOn}).
 */
export class RequestAbandoned extends PixiuError {
  constructor() {
    super('UNAVAILABLE', 'the client left before its message was stored: nothing stored');
    this.name = 'RequestAbandoned';
  }
}

/**
 * The error the later items of a batch are failed with when an earlier item failed
 * with `err` before its appends (ingest.ts `sendBatch`, `#failedBeforeAppends`; their
 * appends must not go ahead of its retry's). An earlier item's 503 is handed on as it is;
 * a {@link RequestAbandoned} is not: those items are stored (only a stored item has
 * appends to hold back), so they fail with a plain UNAVAILABLE of their own, counted as
 * a 503 item is (src/api/routes/messages.ts), not as `abandoned` ("not stored").
 * docs/api.md, "Messages".
 * @param err the earlier item's failure
 * @returns `err`, or for a RequestAbandoned one new UNAVAILABLE to hand on to all of them
 */
export function handedOn(err: unknown): unknown {
  if (!(err instanceof RequestAbandoned)) return err;
  return new PixiuError('UNAVAILABLE', 'not appended: an earlier message of this batch was not stored (its client left), '
    + 'and no later one may reach an inbox ahead of its retry; a retry appends it in order');
}
