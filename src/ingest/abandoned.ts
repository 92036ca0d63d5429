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
 * message, the request is finished as any other, appends included: a stored message
 * always reaches its inboxes. Nothing acknowledged is lost by this: nothing was answered.
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
 * but never answered: the route drops the request (src/api/abandoned-requests.ts).
 */
export class RequestAbandoned extends PixiuError {
  constructor() {
    super('UNAVAILABLE', 'the client left before its message was stored: nothing stored');
    this.name = 'RequestAbandoned';
  }
}

