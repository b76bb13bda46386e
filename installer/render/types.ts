/**
 * The renderer's contract: a validated HarvesterConfig plus a few facts about the machine in, the
 * exact set of files the installed node boots with out. The install engine writes each file at its
 * node path (through `placeRenderedFile` for paths that live on COS_PERSISTENT); the agent's
 * registries guard calls `renderRegistriesYaml` itself.
 */
import type { Bootstrapper } from '../../lib/image-profile.js';
import type { BootstrapVersions, MediaRelease } from './release.js';
import type { HarvesterTemplates } from './harvester-templates.js';

/** One file of the installed node. `path` is the absolute path as the node sees it once booted. */
export interface RenderedFile {
  /** Absolute node path, e.g. `/oem/90_custom.yaml`, `/etc/rancher/rke2/config.yaml.d/90-harvester-agent.yaml`. */
  path: string;
  /** Permission bits, e.g. 0o600. Every file holding a secret is 0o600. */
  mode: number;
  /** `user:group` on the node; always `root:root` today. */
  owner: string;
  content: string | Uint8Array;
  /** True when the content holds a secret (token, password hash, registry or webhook credentials). */
  secret: boolean;
}

/** A network interface of the machine that will become the node. */
export interface RenderNic {
  name: string;
  /** Lowercase colon-separated MAC; empty when unknown. */
  mac: string;
  /**
   * Its permanent MAC (lowercase), which pins its name on the installed node (nic-names.ts); a bond
   * member's own, not the bond's. Absent: the same as `mac`. Empty: not known (a random or assigned
   * address), so the name cannot be pinned.
   */
  permMac?: string;
}

/** The few machine facts rendering needs; everything else comes from the config. */
export interface RenderFacts {
  /** Logical CPUs of the machine (Harvester uses the installer's NumCPU) — drives the reserved-resources formula. */
  cpuCount: number;
  /** NIC name <-> MAC map, used to resolve management interfaces given only by name or only by MAC. */
  nics: RenderNic[];
  /**
   * Whether the Longhorn default disk has its own HARV_LH_DEFAULT filesystem (a data partition or a
   * separate data disk). Default: `defaultHasDataPartition(config)` (no for witness, and for MBR
   * without a data disk).
   */
  hasDataPartition?: boolean;
  /** Hostname the DHCP server gave during the install (used when os.hostname is empty; `rancher` counts as none). */
  dhcpHostname?: string;
  /**
   * The IPv4 address with prefix ("10.0.0.5/24") a management NIC had during a DHCP install:
   * recorded in the node identity, so the agent can say when DHCP hands out another one.
   */
  managementAddress?: string;
  /** Machine architecture in Go's names; Harvester adds the multus node selector on arm64 only. Default amd64. */
  arch?: 'amd64' | 'arm64';
  /** What the OS image being installed brings (who bootstraps, its release metadata). Default: no rancherd. */
  image?: ImageFacts;
}

/**
 * The facts of the install media that shape the node's bootstrap, gathered from the source tree
 * (and the ISO root) by the caller so rendering stays pure.
 */
export interface ImageFacts {
  /** lib/image-profile.ts chooseBootstrapper: rancherd when the image carries its binary and unit. */
  bootstrapper: Bootstrapper;
  /** Why, in one line (shown by `hvinstall render` and the install log). */
  why: string;
  /** The media's harvester-release.yaml, when there is one. */
  release?: MediaRelease;
  /** The addon and dashboard templates of the image's harvester-installer, when it carries them. */
  templates?: HarvesterTemplates;
}

/**
 * Randomness, made explicit so rendering stays pure: the same config, facts and seeds give
 * byte-identical files. Missing values are derived from `seed`; a missing `seed` is derived from the
 * config and facts. The values used are recorded in `/oem/hvinstall/render-seeds.json`.
 */
export interface RenderSeeds {
  /** Any string; hostname suffix and password salt are derived from it. */
  seed?: string;
  /** 5 lowercase alphanumerics for `harvester-<suffix>` when no hostname is given or learned by DHCP. */
  hostnameSuffix?: string;
  /** crypt salt (≤16 chars of `./0-9A-Za-z`) for hashing a clear-text os.password. */
  passwordSalt?: string;
}

/** What was decided while rendering, besides the files. */
export interface RenderReport {
  files: RenderedFile[];
  /** The seeds actually used (also written to /oem/hvinstall/render-seeds.json). */
  seeds: Required<Pick<RenderSeeds, 'seed' | 'hostnameSuffix' | 'passwordSalt'>>;
  /** The node's hostname as rendered, and where it came from. */
  hostname: { name: string; source: 'config' | 'dhcp' | 'generated' };
  /** Non-fatal findings (e.g. a write_files permission that is not octal: 0600 used, as Harvester does). */
  warnings: string[];
  /**
   * Files the initramfs stage of /oem/90_custom.yaml writes at every boot (rancherd's config and
   * bootstrap resources), as they land on the node; not written to disk by the install itself.
   */
  yipFiles: RenderedFile[];
  /** Who bootstraps the node, and the versions rancherd gets (when it does). */
  bootstrap: { bootstrapper: Bootstrapper; why: string; versions?: BootstrapVersions };
  /** The management NICs' names pinned by permanent MAC in /oem/grubenv (nic-names.ts). */
  nicPins: Array<{ name: string; mac: string }>;
}
