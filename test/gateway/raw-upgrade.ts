/**
 * A WebSocket client made of bytes on a TCP socket, for what `ws` will not do: client
 * frames written in the same packet as the upgrade request (so that they arrive before
 * `welcome`), and floods written as fast as the socket takes them. Server frames are
 * read as they come: text frames parsed as JSON, the close frame's code kept.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import type { Frame } from '../harness/ws-client.js';

/** A client text frame (masked with a zero key, which RFC 6455 §5.3 allows). */
export function clientFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  assert.ok(payload.length < 126);
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length, 0, 0, 0, 0]), payload]);
}

/** An empty client pong control frame (RFC 6455 §5.5.3), masked with a zero key. */
export const PONG_FRAME = Buffer.from([0x8a, 0x80, 0, 0, 0, 0]);

/** Splits server frames (unmasked) off `buf`; returns their texts, the code and reason of a close frame among them, and the rest. */
function serverFrames(buf: Buffer): { texts: string[]; closeCode: number | undefined; closeReason: string | undefined; rest: Buffer } {
  const texts: string[] = [];
  let closeCode: number | undefined;
  let closeReason: string | undefined;
  let at = 0;
  for (;;) {
    if (buf.length < at + 2) break;
    let len = (buf[at + 1] as number) & 0x7f;
    let head = 2;
    if (len === 126) {
      if (buf.length < at + 4) break;
      len = buf.readUInt16BE(at + 2);
      head = 4;
    } else if (len === 127) {
      if (buf.length < at + 10) break;
      len = Number(buf.readBigUInt64BE(at + 2));
      head = 10;
    }
    if (buf.length < at + head + len) break;
    const opcode = (buf[at] as number) & 0x0f;
    if (opcode === 1) texts.push(buf.subarray(at + head, at + head + len).toString());
    if (opcode === 8 && len >= 2) {
      closeCode = buf.readUInt16BE(at + head);
      closeReason = buf.subarray(at + head + 2, at + head + len).toString();
    }
    at += head + len;
  }
  return { texts, closeCode, closeReason, rest: buf.subarray(at) };
}

/** A raw connection (see the module's doc). */
export interface RawConnection {
  readonly socket: net.Socket;
  /** The text frames received so far, parsed. */
  readonly frames: Frame[];
  /** The code of the server's close frame, once received. */
  closeCode(): number | undefined;
  /** The reason of the server's close frame, once received. */
  closeReason(): string | undefined;
  /** Resolves once `cond` holds on what was received (checked at each packet), or the close frame came; rejects if the socket closes first. */
  until(cond: (frames: Frame[]) => boolean): Promise<void>;
}

/**
 * Opens a WebSocket to `baseUrl`'s `/v1/connect` with `token`, writing `frames` in the
 * same packet as the upgrade request.
 */
export function rawUpgrade(baseUrl: string, token: string, frames: Buffer[] = []): RawConnection {
  const { port } = new URL(baseUrl);
  const socket = net.connect(Number(port), '127.0.0.1');
  const got: Frame[] = [];
  let closeCode: number | undefined;
  let closeReason: string | undefined;
  let failed: Error | undefined;
  const waiters = new Set<() => void>();
  let buf: Buffer = Buffer.alloc(0);
  let upgraded = false;
  const wake = (): void => { for (const w of waiters) w(); };
  socket.on('data', (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    if (!upgraded) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const status = buf.subarray(0, buf.indexOf('\r\n')).toString();
      if (!status.includes(' 101 ')) failed = new Error(status);
      upgraded = true;
      buf = buf.subarray(end + 4);
    }
    const read = serverFrames(buf);
    buf = read.rest;
    for (const t of read.texts) got.push(JSON.parse(t) as Frame);
    if (closeCode === undefined && read.closeCode !== undefined) {
      closeCode = read.closeCode;
      closeReason = read.closeReason;
    }
    wake();
  });
  socket.on('error', (err) => { failed ??= err; wake(); });
  socket.on('close', () => { failed ??= new Error(`closed after ${JSON.stringify(got).slice(0, 500)}`); wake(); });
  socket.write(Buffer.concat([
    Buffer.from([
      'GET /v1/connect HTTP/1.1', `Host: 127.0.0.1:${port}`, 'Upgrade: websocket', 'Connection: Upgrade',
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`, 'Sec-WebSocket-Version: 13',
      `Authorization: Bearer ${token}`, '', '',
    ].join('\r\n')),
    ...frames,
  ]));
  return {
    socket,
    frames: got,
    closeCode: () => closeCode,
    closeReason: () => closeReason,
    until: (cond) => new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (closeCode !== undefined || cond(got)) {
          waiters.delete(check);
          resolve();
        } else if (failed !== undefined) {
          waiters.delete(check);
          reject(failed);
        }
      };
      waiters.add(check);
      check();
    }),
  };
}
