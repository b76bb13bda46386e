/** What every hvpxe route reads besides the request: the book of machines, the log, the metrics, where hvpxe is. */
import type { Logger } from '../lib/logger.js';
import type { MachineBook } from './machine-book.js';
import type { PxeMetrics } from './metrics.js';
import type { Attestations } from './tpm/attestation.js';
import type { ArtifactOrigin } from './artifact-origin.js';

export interface ServeContext {
  readonly log: Logger;
  readonly metrics: PxeMetrics;
  readonly book: MachineBook;
  readonly attestations: Attestations;
  /** The URL machines reach hvpxe at (known once the listener is up). */
  readonly url: string;
  /** --artifacts-origin: where declared artifacts missing under --root come from. */
  readonly origin?: ArtifactOrigin;
  /** grub's device for hvpxe's own TFTP server, as machines reach it. */
  tftpDevice(): string;
}
