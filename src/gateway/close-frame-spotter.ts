/**
 * Spots the client's close frame among bytes the server drops unparsed, once it has
 * closed a connection 4003 (receiver-refusals.ts `dropClientBytes`): only the frame
 * headers are walked (RFC 6455 §5.2), payloads are skipped by count, never read nor
 * unmasked. The client answering the close (RFC 6455 §5.5.1) then ends the connection
 * at once instead of at the close's grace: a client following RFC 6455 §7.1.1 waits for
 * the server to close TCP first, and stayed in CLOSING for the whole 5 s.
 */

/** RFC 6455 §5.2, §11.8: the opcode of a close control frame. */
const CLOSE_OPCODE = 0x8;

/**
 * Walks client frame headers (RFC 6455 §5.2) across the chunks they arrive in, and
 * tells when a whole close frame (opcode 0x8, §5.5.1) has arrived. A header is
 * byte 0 (FIN, RSV1 – 3, the opcode in its low 4 bits), byte 1 (the MASK bit and a
 * 7-bit length: 126 says a 2-byte length follows, 127 an 8-byte one, network byte
 * order), then the 4-byte masking key when MASK is set (§5.3); the payload that follows
 * is skipped by its length. A header cut across chunks is kept until it is whole (at
 * most 14 bytes). Nothing is validated: the connection is already closed for abuse,
 * and a frame the walk misreads at worst ends it early or leaves it to the grace.
 * It must start at a frame's first byte, or be told where in a frame it starts
 * ({@link CloseFrameSpotter.midFrame}): started inside a payload, it would read
 * payload bytes as headers.
 */
export class CloseFrameSpotter {
  /** The bytes of the header being read, kept across chunks (at most 14). */
  #header: number[] = [];
  /** Payload bytes of the current frame still to skip; 0 between frames. */
  #payloadLeft = 0;
  /** Whether the frame whose payload is being skipped is a close frame. */
  #inClose = false;
  #spotted = false;

  /**
   * A spotter that starts inside a frame whose header was read elsewhere (by `ws`'s
   * receiver before it was taken off): `payloadLeft` bytes of it are still to come,
   * then the next frame's header.
   * @param opcode the frame's opcode (RFC 6455 §5.2)
   * @param payloadLeft bytes of the frame still to come (mask bytes left included), ≥ 0
   */
  static midFrame(opcode: number, payloadLeft: number): CloseFrameSpotter {
    const spotter = new CloseFrameSpotter();
    spotter.#payloadLeft = payloadLeft;
    spotter.#inClose = opcode === CLOSE_OPCODE;
    if (payloadLeft === 0) spotter.#frameDone();
    return spotter;
  }

  /** True once a whole close frame has arrived; it stays true. */
  get spotted(): boolean {
    return this.#spotted;
  }

  /**
   * Walks `chunk`, the next bytes the client sent.
   * @returns true once a whole close frame has arrived (in this chunk or before)
   */
  push(chunk: Uint8Array): boolean {
    let at = 0;
    while (!this.#spotted && at < chunk.length) {
      if (this.#payloadLeft > 0) {
        const skip = Math.min(this.#payloadLeft, chunk.length - at);
        this.#payloadLeft -= skip;
        at += skip;
        if (this.#payloadLeft === 0) this.#frameDone();
        continue;
      }
      this.#header.push(chunk[at] as number);
      at += 1;
      this.#headerByte();
    }
    return this.#spotted;
  }

  /** A header byte was added: once the header is whole, starts skipping its payload. */
  #headerByte(): void {
    const h = this.#header;
    if (h.length < 2) return;
    const b1 = h[1] as number;
    const len7 = b1 & 0x7f;
    const lengthBytes = len7 === 126 ? 2 : len7 === 127 ? 8 : 0;
    const maskBytes = (b1 & 0x80) !== 0 ? 4 : 0;
    if (h.length < 2 + lengthBytes + maskBytes) return;
    let length = len7;
    if (lengthBytes > 0) {
      // Past 2^53 a Number rounds: the byte cap has cut the connection long before.
      length = 0;
      for (let i = 2; i < 2 + lengthBytes; i++) length = length * 256 + (h[i] as number);
    }
    this.#inClose = ((h[0] as number) & 0x0f) === CLOSE_OPCODE;
    this.#header = [];
    this.#payloadLeft = length;
    if (length === 0) this.#frameDone();
  }

  /** The current frame's last byte has arrived. */
  #frameDone(): void {
    if (this.#inClose) this.#spotted = true;
    this.#inClose = false;
  }
}
