/**
 * The byte ranges both artifact senders (file-stream.ts, zero-copy-send.ts) are checked with, of a
 * 10 000-byte file: the whole file, one byte, a span across small chunks, the tail.
 */
export const BODY_SIZE = 10_000;
export const BODY_RANGES: ReadonlyArray<readonly [start: number, end: number]> = [
  [0, BODY_SIZE - 1],
  [3, 3],
  [5, 20],
  [BODY_SIZE - 10, BODY_SIZE - 1],
];
