/**
 * What the console's parts share: the options `hvinstall console` starts it with, and the context
 * the page steps and the install hand-off work in (the terminal app, the answers and the machine).
 */
import type { App } from '../../lib/tui/app.js';
import type { Logger } from '../../lib/logger.js';
import type { MachineFacts } from '../preflight/types.js';
import type { ConsoleState } from './pages.js';

export interface ConsoleOptions {
  facts: MachineFacts;
  /** hvinstall.legacy_bios on the kernel command line (docs/preflight.md). */
  allowLegacyBios?: boolean;
  /** Re-reads the machine (F5 on the disk and network pages). */
  rescan: () => Promise<MachineFacts>;
  /** The kernel command line's harvester.* keys (the pages start from them). */
  base: ConsoleState['base'];
  /** The installed system's console when no config names one: the first active console (Harvester's default). */
  defaultTty?: string;
  /**
   * Where config media are looked for at start (every block device, or only `among`: devices or
   * image files); absent: not at start (a captured machine's media are not this host's).
   */
  configVolumes?: { among?: string[] };
  log: Logger;
  logFile?: string;
  dryRun: boolean;
  /** Where the config is written (--write-config; default under runDir). */
  configFile: string;
  runDir: string;
  stateDir: string;
  source?: string;
  bundle?: string;
  agent?: string;
  systemSizeMiB?: number;
  noReboot: boolean;
  /**
   * DHCP on the management NIC and for the VIP runs (false with captured facts: those NICs are not
   * this machine's). URL fetches, /ping and NTP run either way, from this machine.
   */
  probeLinks: boolean;
  dhcp: { client: string[]; script?: string; timeoutMs: number };
  /** The crypt hash of a password (SHA-512 crypt with this run's salt, as Harvester's console stores it). */
  hashPassword: (clear: string, salt: string) => string;
}

export interface ConsoleContext {
  readonly app: App;
  readonly state: ConsoleState;
  readonly opts: ConsoleOptions;
}
