/** Direct I/O needs buffers, offsets and lengths aligned to the device's logical block size (at most 4 KiB). */
export const DIRECT_IO_ALIGN = 4096;

const WASM_PAGE = 64 * 1024;

/** The part of the WebAssembly global used here (the project's lib settings do not declare it). */
declare const WebAssembly: {
  Memory: new (d: { initial: number; maximum: number; shared: boolean }) => { buffer: SharedArrayBuffer };
};

/**
 * A Buffer over new shared memory whose address is page-aligned, so it can be written with
 * O_DIRECT and handed to worker threads without a copy. Node's own buffers (and plain
 * SharedArrayBuffers) come from malloc and are not aligned; WebAssembly memory is mapped in whole
 * pages, so its base is.
 */
export function alignedSharedBuffer(bytes: number): Buffer {
  const pages = Math.max(1, Math.ceil(bytes / WASM_PAGE));
  const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
  return Buffer.from(memory.buffer, 0, bytes);
}
