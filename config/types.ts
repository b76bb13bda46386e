/**
 * The canonical, normalised Harvester config (scheme_version 1), keyed by Harvester's Go `json`
 * tags (camelCase). Every loader path (file, URL, stdin, kernel command line, /oem/harvester.config)
 * ends in this shape; every consumer (preflight, planner, renderers, agent, PXE server) reads it.
 * schemas/harvester-config.v1.schema.json describes the same shape and is checked against these
 * types at compile time.
 */
export type InstallMode = 'create' | 'join' | 'install' | 'upgrade';
export type VipMode = 'static' | 'dhcp' | 'none';
export type NodeRole = 'default' | 'management' | 'worker' | 'witness';
export type NetworkMethod = 'dhcp' | 'static';
export type WebhookEvent = 'STARTED' | 'SUCCEEDED' | 'FAILED';

export interface WriteFile {
  encoding?: string;
  content?: string;
  owner?: string;
  path: string;
  /** Octal string, e.g. "0644". */
  permissions?: string;
}

export interface Sshd {
  sftp?: boolean;
  disablePasswordAuth?: boolean;
}

export interface MultipathDevice {
  vendor?: string;
  product?: string;
}

export interface MultipathBlacklistConfig {
  blacklist?: MultipathDevice[];
  blacklistWwids?: string[];
  blacklistExceptions?: MultipathDevice[];
  blacklistExceptionWwids?: string[];
}

export interface ExternalStorageConfig {
  enabled?: boolean;
  /** Option 1: a list of devices (rendered as negated blacklist entries); option 2: the full shape. */
  multiPathConfig?: MultipathDevice[] | MultipathBlacklistConfig;
}

export interface OS {
  sshAuthorizedKeys?: string[];
  writeFiles?: WriteFile[];
  hostname?: string;
  modules?: string[];
  sysctls?: Record<string, string>;
  ntpServers?: string[];
  dnsNameservers?: string[];
  password?: string;
  environment?: Record<string, string>;
  labels?: Record<string, string>;
  sshd?: Sshd;
  persistentStatePaths?: string[];
  afterInstallChrootCommands?: string[];
  externalStorageConfig?: ExternalStorageConfig;
  additionalKernelArguments?: string;
}

export interface NetworkInterface {
  name?: string;
  hwAddr?: string;
}

export interface ManagementInterface {
  interfaces?: NetworkInterface[];
  method?: NetworkMethod | string;
  ip?: string;
  subnetMask?: string;
  gateway?: string;
  /** Ignored by Harvester (json:"-"); present because yaml.v3 writes it to /oem/harvester.config. */
  defaultRoute?: boolean;
  /** Bond options as strings (mode, miimon, …); default {mode: active-backup, miimon: "100"}. */
  bondOptions?: Record<string, string>;
  mtu?: number;
  vlanId?: number;
}

export interface BasicAuth {
  user?: string;
  password?: string;
}

export interface Webhook {
  event?: WebhookEvent | string;
  method?: string;
  headers?: Record<string, string[]>;
  url?: string;
  payload?: string;
  insecure?: boolean;
  basicAuth?: BasicAuth;
}

export interface Addon {
  enabled?: boolean;
  valuesContent?: string;
}

export interface HarvesterChartValues {
  storageClass?: { replicaCount?: number };
  longhorn?: {
    defaultSettings?: {
      guaranteedEngineManagerCPU?: number;
      guaranteedReplicaManagerCPU?: number;
      guaranteedInstanceManagerCPU?: number;
      storageReservedPercentageForDefaultDisk?: number;
    };
  };
  enableGoCoverDir?: boolean;
}

/** A rule choosing a disk from the machine's facts (docs/config.md "Choosing disks by rules"). */
export interface DiskSelector {
  /** Inclusive bounds: `500GB` (10^9), `465Gi` (2^30), or bytes. */
  minSize?: string;
  maxSize?: string;
  /** Globs (`*`, `?`), case-insensitive. */
  model?: string;
  vendor?: string;
  serial?: string;
  transport?: DiskTransport | string;
  rotational?: boolean;
  /** The start of the disk's /dev/disk/by-path name. */
  byPathPrefix?: string;
  tieBreak?: DiskTieBreak | string;
}
export type DiskTransport = 'nvme' | 'sata' | 'sas' | 'scsi' | 'usb' | 'virtio' | 'mmc';
export type DiskTieBreak = 'smallest' | 'largest' | 'first_by_path';

export interface Install {
  automatic?: boolean;
  skipchecks?: boolean;
  mode?: InstallMode | string;
  managementInterface?: ManagementInterface;
  vip?: string;
  vipHwAddr?: string;
  vipMode?: VipMode | string;
  clusterPodCidr?: string;
  clusterServiceCidr?: string;
  clusterDns?: string;
  forceEfi?: boolean;
  device?: string;
  /** hvinstall, beyond Harvester: the installation disk chosen by a rule (config/disk-selector.ts). */
  deviceSelector?: DiskSelector;
  configUrl?: string;
  silent?: boolean;
  isoUrl?: string;
  powerOff?: boolean;
  noFormat?: boolean;
  debug?: boolean;
  tty?: string;
  forceGpt?: boolean;
  role?: NodeRole | string;
  withNetImages?: boolean;
  wipeAllDisks?: boolean;
  wipeDisksList?: string[];
  forceMbr?: boolean;
  dataDisk?: string;
  /** hvinstall, beyond Harvester: the Longhorn data disk chosen by a rule. */
  dataDiskSelector?: DiskSelector;
  webhooks?: Webhook[];
  addons?: Record<string, Addon>;
  harvester?: HarvesterChartValues;
  rawDiskImagePath?: string;
  /** `^\d+(Mi|Gi)$`, e.g. "150Gi". */
  persistentPartitionSize?: string;
  cordoned?: boolean;
  /**
   * hvinstall, beyond Harvester: the initial UI admin password (create mode). Clear text or a
   * `$pbkdf2-sha3-512$` hash (installer/render/admin-password.ts); stored on the node as the hash.
   */
  adminPassword?: string;
}

export interface HarvesterConfig {
  schemeVersion?: number;
  serverUrl?: string;
  token?: string;
  sans?: string[];
  os?: OS;
  install?: Install;
  runtimeVersion?: string;
  rancherVersion?: string;
  harvesterChartVersion?: string;
  monitoringChartVersion?: string;
  loggingChartVersion?: string;
  kubeovnChartVersion?: string;
  systemSettings?: Record<string, string>;
}

/** One finding of the validator, pointing into the source where it can. */
export interface Finding {
  severity: 'error' | 'warning';
  /** Canonical dotted path, e.g. `install.management_interface.interfaces[0].hwAddr` in the user's spelling where known. */
  path: string;
  message: string;
  hint?: string;
  /** Set on the findings a caller acts on by kind: hvpxe refuses to serve a placeholder to a fleet. */
  kind?: 'placeholder';
  /** Source name (file path, URL, `<stdin>`, `<cmdline>`). */
  source?: string;
  line?: number;
  column?: number;
}

export interface ValidationResult {
  valid: boolean;
  errors: Finding[];
  warnings: Finding[];
  /** The normalised, merged config (present even when invalid, as far as it could be built). */
  config: HarvesterConfig;
}

/** How loadConfig reads a source (config/load.ts). */
export interface LoadOptions {
  /** Kernel command line text (`harvester.*` parameters merged over the file). */
  cmdline?: string;
  /** Read the command line from a file (e.g. /proc/cmdline). */
  cmdlineFile?: string;
  /** For http(s) sources: extra CA bundle (PEM file), expected sha256 of the body, per-attempt timeout and attempts. */
  caFile?: string;
  /** Where caFile came from, for messages: the kernel command line's hvinstall.ca_file (set by loadConfig). */
  caFileFrom?: 'option' | 'cmdline';
  sha256?: string;
  timeoutMs?: number;
  attempts?: number;
  retryDelayMs?: number;
  /** On the already-installed path some rules (iso_url in automatic mode) do not apply. */
  alreadyInstalled?: boolean;
  /** DHCP pools of the management network, when the operator knows them: the VIP must be outside. */
  dhcpRanges?: Array<{ first: string; last: string }>;
  /** The name findings give a file source (a config read off a volume: `LABEL(/dev/sr1):config.yaml`). */
  sourceName?: string;
}

export interface LoadedConfig extends ValidationResult {
  /** What was read: a path, a URL, `<stdin>`, or `<cmdline>` when only the command line was given. */
  source: string;
}
