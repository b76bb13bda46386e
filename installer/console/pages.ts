/**
 * The console's pages in Harvester's order, with Harvester's titles, labels and notes
 * (harvester/harvester-installer pkg/console/constant.go, install_panels.go): what each page shows
 * for the current answers and the machine, and when it applies. The checks are in checks.ts, the
 * network probes in probes.ts; this file only lays pages out.
 */
import type { DiskChoice } from '../preflight/disk-select.js';
import type { FieldMessage, Item, Option } from '../../lib/tui/form.js';
import { BOND_MODES } from '../../config/rules.js';
import type { HarvesterConfig } from '../../config/types.js';
import { LEGACY_BIOS_CHECK, type PreflightCheck } from '../preflight/index.js';
import type { MachineFacts } from '../preflight/types.js';
import type { Answers } from './answers.js';
import { defaultPersistentSize, diskName, diskOptions, findListedDisk, listedDisks, nicOptions, staleInstallDisks } from './machine.js';
import type { Summary } from './summary.js';
import type { RemoteConfig } from './checks.js';
import type { FoundVolume } from '../remote/config-volume.js';
import { CONFIG_VOLUME_KINDS } from '../../config/config-volume.js';

export interface ConsoleState {
  answers: Answers;
  facts: MachineFacts;
  /** The kernel command line's harvester.* keys (pre-filled answers; kept under them). */
  base: HarvesterConfig;
  remote?: RemoteConfig;
  skipchecks: boolean;
  /** hvinstall.legacy_bios on the kernel command line: legacy BIOS can be acknowledged like the other checks. */
  allowLegacyBios?: boolean;
  /** The machine checks that did not pass (the Hardware Checks page). */
  hardware: PreflightCheck[];
  /** What the command line's disk rules (install.device_selector, data_disk_selector) chose, and why. */
  diskChoices?: DiskChoice[];
  summary?: Summary;
  /** The first page's config (config-first.ts): the media found at start, the choice, what was taken. */
  configFirst: ConfigFirstState;
}

export interface ConfigFirstState {
  /** The page is in the walk: config media were found at start, or F2 on the mode page opened it. */
  shown: boolean;
  /** The config volumes found at start (or by F5 on the page). */
  volumes: FoundVolume[];
  /** Why looking for them failed, when it did. */
  problem?: string;
  /** The option chosen: `dev:<device>`, `paste`, `label`, `keep` or `none`. */
  choice: string;
  /** The label typed for "Read the volume labelled". */
  label: string;
  /** Where the config taken came from (its name in findings), once one was taken. */
  taken?: string;
}

export type SubmitResult = { ok: true } | { ok: false; field: string; messages: FieldMessage[]; confirmable?: boolean };

export interface PageDef {
  id: string;
  title(s: ConsoleState): string;
  applies(s: ConsoleState): boolean;
  items(s: ConsoleState): Item[];
  /** Fields whose change re-lays the page (the static fields appear with the Static method). */
  relayout?: string[];
  /** The key line; a function when it depends on what the page shows. */
  help?: string | ((s: ConsoleState) => string);
}

const cluster = (s: ConsoleState): boolean => s.answers.mode === 'create' || s.answers.mode === 'join';

const NOTES = {
  clusterNetwork:
    'Note: Leave blank to use the default pod CIDR 10.52.0.0/16, service CIDR 10.53.0.0/16 and cluster DNS 10.53.0.10. If the service CIDR is changed, the DNS IP must be updated to be within the service CIDR.',
  tokenCreate: 'Note: The token is used for adding nodes to the cluster',
  tokenJoin: 'Note: Input the token of the existing cluster',
  serverUrl: 'Note: Input VIP/domain name of the management node',
  proxy: 'Note: In the form of "http://[[user][:pass]@]host[:port]/".',
  sshKey: 'For example: https://github.com/<username>.keys',
  ntp: "Note: It's recommended to configure NTP servers to make sure the time is synced among all nodes. You can use comma to add more NTP servers.",
  dns: 'Note: You can use comma to add more DNS servers. Leave blank to use default DNS.',
  bond: 'Note: Select one or more NICs for the Management NIC. Use the default value for the Bond Mode if only one NIC is selected. Space ticks a NIC; F5 rescans the NICs.',
  forceMbr: 'Note: GPT is used by default. You can use MBR if you encountered compatibility issues.',
  persistentSize:
    'Note: persistent partition stores data like system package and container images, not the VM data. You can specify a size like 200Gi or 153600Mi. Leave it blank to use the default value.',
};

function checkLines(checks: PreflightCheck[]): string[] {
  return checks.flatMap((c) => [`${c.result === 'fail' ? 'FAIL' : 'WARN'} ${c.message}`, ...(c.whatToDo ? [`     What to do: ${c.whatToDo}`] : [])]);
}

export function hardFailures(s: ConsoleState): PreflightCheck[] {
  return s.hardware.filter((c) => c.result === 'fail' && !c.skippable && !(s.allowLegacyBios && c.id === LEGACY_BIOS_CHECK));
}

export const MACHINE_CHECKS = new Set(['cpu.cores', 'memory', 'virt.cpu-flags', 'virt.kvm', 'virt.host', 'firmware.uefi', 'firmware.secure-boot']);

export const PAGES: PageDef[] = [
  {
    id: 'hardware',
    title: () => 'Hardware Checks',
    applies: (s) => s.hardware.length > 0,
    // A machine nothing can make installable has one way on: halt (and reboot), as Harvester's "No" does.
    help: (s) => (hardFailures(s).length ? 'Enter: halt and reboot  Ctrl-C: quit' : 'Enter: next  Up/Down: choose  Ctrl-C: quit'),
    items: (s) => {
      const hard = hardFailures(s);
      return [
        { kind: 'static', id: 'checks', lines: [...checkLines(s.hardware), ''] },
        hard.length
          ? { kind: 'static', id: 'stop', lines: ['This machine cannot take a Harvester install: nothing can override the failures above.'] }
          : { kind: 'select', id: 'proceed', label: 'Do you wish to proceed?', value: 'yes', options: [{ value: 'yes', label: 'Yes' }, { value: 'no', label: 'No' }] },
      ];
    },
  },
  {
    id: 'config',
    title: () => 'Optional: start from a Harvester config',
    applies: (s) => s.configFirst.shown,
    relayout: ['configSource'],
    help: 'Enter: take  Up/Down: choose  F2: paste a config  F5: look again  Ctrl-C: quit',
    items: (s) => configItems(s),
  },
  {
    id: 'mode',
    title: () => 'Choose installation mode',
    applies: () => true,
    help: 'Enter: next  Up/Down: choose  F2: start from a config  Ctrl-C: quit',
    items: (s) => [
      {
        kind: 'select',
        id: 'mode',
        label: '',
        value: s.answers.mode ?? 'create',
        options: [
          { value: 'create', label: 'Create a new Harvester cluster' },
          { value: 'join', label: 'Join an existing Harvester cluster' },
          { value: 'install', label: 'Install Harvester binaries only' },
        ],
      },
    ],
  },
  {
    id: 'role',
    title: () => 'Choose installation role',
    applies: (s) => s.answers.mode === 'join',
    items: (s) => [
      {
        kind: 'select',
        id: 'role',
        label: '',
        value: s.answers.role,
        options: [
          { value: 'default', label: 'Default Role (Management or Worker)' },
          { value: 'management', label: 'Management Role' },
          { value: 'witness', label: 'Witness Role' },
          { value: 'worker', label: 'Worker Role' },
        ],
      },
    ],
  },
  {
    id: 'password',
    title: () => 'Configure the password to access the node',
    applies: () => true,
    items: (s) => [
      { kind: 'text', id: 'password', label: 'Password', value: s.answers.password, secret: true },
      { kind: 'text', id: 'passwordConfirm', label: 'Confirm password', value: s.answers.passwordConfirm, secret: true },
    ],
  },
  {
    id: 'disk',
    title: () => 'Choose installation target and data disk. Device will be formatted',
    applies: () => true,
    relayout: ['device', 'dataDisk'],
    help: 'Enter: next  Tab: next field  Up/Down: choose  F5: rescan disks  Esc: back',
    items: (s) => diskItems(s),
  },
  {
    id: 'network',
    title: () => 'Configure network',
    applies: cluster,
    relayout: ['method', 'nics', 'address'],
    help: 'Enter: next  Space: tick a NIC  Tab: next field  F5: rescan NICs  Esc: back',
    items: (s) => {
      const a = s.answers;
      const items: Item[] = [];
      const opts = nicOptions(s.facts);
      if (opts.length === 0) items.push({ kind: 'static', id: 'no-nic', lines: ['No network interface found: attach one (F5 rescans).'] });
      else if (!s.facts.nics.some((n) => !n.loopback && (n.operState === 'up' || n.carrier === true))) {
        items.push({ kind: 'static', id: 'no-link', lines: ['No NIC has a link: plug in a network cable or check the switch port, then F5 rescans.', ''] });
      }
      items.push(
        { kind: 'multi', id: 'nics', label: 'Management NIC', options: opts, values: a.nics, note: NOTES.bond, requireOne: true },
        { kind: 'text', id: 'vlan', label: 'VLAN ID (optional)', value: a.vlan },
        { kind: 'select', id: 'bondMode', label: 'Bond Mode', value: a.bondMode, options: BOND_MODES.map((m) => ({ value: m, label: m })) },
        {
          kind: 'select',
          id: 'method',
          label: 'IPv4 Method',
          value: a.method,
          options: [
            { value: 'dhcp', label: 'Automatic (DHCP)' },
            { value: 'static', label: 'Static' },
          ],
        },
      );
      if (a.method === 'static') {
        items.push(
          { kind: 'text', id: 'address', label: 'IPv4 Address', value: a.address, note: 'An address, or address/prefix (192.168.1.10/24) to fill the mask.' },
          { kind: 'text', id: 'mask', label: 'IPv4 Mask', value: a.mask },
          { kind: 'text', id: 'gateway', label: 'Gateway', value: a.gateway },
          { kind: 'text', id: 'mtu', label: 'MTU (optional)', value: a.mtu },
        );
      }
      return items;
    },
  },
  {
    id: 'cluster-network',
    title: () => 'Configure cluster network',
    applies: (s) => s.answers.mode === 'create',
    items: (s) => [
      { kind: 'text', id: 'podCidr', label: 'Pod CIDR', value: s.answers.podCidr },
      { kind: 'text', id: 'serviceCidr', label: 'Service CIDR', value: s.answers.serviceCidr },
      { kind: 'text', id: 'clusterDns', label: 'Cluster DNS IP', value: s.answers.clusterDns },
      { kind: 'static', id: 'note', lines: [NOTES.clusterNetwork] },
    ],
  },
  {
    id: 'hostname',
    title: () => 'Configure hostname for this instance',
    applies: cluster,
    items: (s) => [{ kind: 'text', id: 'hostname', label: 'HostName', value: s.answers.hostname }],
  },
  {
    id: 'dns',
    title: () => 'Configure DNS servers',
    applies: cluster,
    items: (s) => [{ kind: 'text', id: 'dns', label: 'DNS Servers', value: s.answers.dns, note: NOTES.dns }],
  },
  {
    id: 'vip',
    title: () => 'Configure VIP',
    applies: (s) => s.answers.mode === 'create',
    relayout: ['vipMode'],
    items: (s) => {
      const a = s.answers;
      const items: Item[] = [
        {
          kind: 'select',
          id: 'vipMode',
          label: 'VIP Mode',
          value: a.vipMode,
          options: [
            { value: 'dhcp', label: 'DHCP' },
            { value: 'static', label: 'Static' },
          ],
        },
      ];
      if (a.vipMode === 'dhcp') items.push({ kind: 'text', id: 'vipHwAddr', label: 'MAC Address', value: a.vipHwAddr, note: 'The VIP is leased by DHCP for this hardware address when the page is left.' });
      items.push({ kind: 'text', id: 'vip', label: 'VIP', value: a.vip, note: a.vipMode === 'dhcp' ? 'Leave blank: the DHCP lease fills it in.' : undefined });
      return items;
    },
  },
  {
    id: 'server-url',
    title: () => 'Configure management address',
    applies: (s) => s.answers.mode === 'join',
    items: (s) => [{ kind: 'text', id: 'serverUrl', label: 'Management address', value: s.answers.serverUrl, note: NOTES.serverUrl }],
  },
  {
    id: 'token',
    title: () => 'Configure cluster token',
    applies: cluster,
    items: (s) => [
      { kind: 'text', id: 'token', label: 'Cluster token', value: s.answers.token, secret: true, note: s.answers.mode === 'join' ? NOTES.tokenJoin : NOTES.tokenCreate },
    ],
  },
  {
    id: 'ntp',
    title: () => 'Configure NTP servers',
    applies: cluster,
    items: (s) => [{ kind: 'text', id: 'ntp', label: 'NTP Servers', value: s.answers.ntp, note: NOTES.ntp }],
  },
  {
    id: 'proxy',
    title: () => 'Optional: configure proxy',
    applies: cluster,
    items: (s) => [{ kind: 'text', id: 'proxy', label: 'Proxy address', value: s.answers.proxy, note: NOTES.proxy }],
  },
  {
    id: 'ssh',
    title: () => 'Optional: import SSH keys',
    applies: cluster,
    relayout: ['sshKeyUrl'],
    items: (s) => {
      const items: Item[] = [{ kind: 'text', id: 'sshKeyUrl', label: 'HTTP URL', value: s.answers.sshKeyUrl, note: NOTES.sshKey }];
      if (s.answers.sshKeys.length) {
        items.push(
          { kind: 'static', id: 'keys', lines: [`${s.answers.sshKeys.length} ${s.answers.sshKeys.length === 1 ? 'key' : 'keys'} imported.`] },
          {
            kind: 'select',
            id: 'passwordAuth',
            label: 'Password auth',
            value: s.answers.passwordAuth,
            options: [
              { value: 'enabled', label: 'Enabled' },
              { value: 'disabled', label: 'Disabled' },
            ],
          },
        );
      }
      return items;
    },
  },
  {
    id: 'config-url',
    title: () => 'Optional: remote Harvester config',
    applies: cluster,
    help: 'Enter: next  F2: paste a config  Esc: back  Ctrl-C: quit',
    items: (s) => [
      {
        kind: 'text',
        id: 'configUrl',
        label: 'HTTP URL',
        value: s.answers.configUrl,
        note: 'An http(s) URL, or volume:LABEL for a config medium (volume:HARVESTER_CONFIG, volume:cidata); F2 to paste one. Its content is read, checked and merged under what you typed here.',
      },
    ],
  },
  {
    id: 'summary',
    title: () => 'Confirm installation options',
    applies: () => true,
    help: 'Enter: choose  Up/Down: Yes/No  PgUp/PgDn: scroll  Esc: back',
    items: (s) => summaryItems(s),
  },
];

/** The config up front: the media found (each a choice), a paste, a label, or none (hvinstall, beyond Harvester). */
function configItems(s: ConsoleState): Item[] {
  const c = s.configFirst;
  const labels = CONFIG_VOLUME_KINDS.map((k) => k.label).join(', ');
  const lines = [
    c.volumes.length === 0 ? `No config medium found (a filesystem labelled ${labels}).` : `${c.volumes.length === 1 ? 'A config medium is' : 'Config media are'} attached (labelled ${labels}):`,
    ...(c.problem ? [`Looking for config media failed: ${c.problem}`] : []),
    ...(c.taken ? [`Taken: ${c.taken}. Its values are the answers on the pages that follow.`] : []),
    '',
  ];
  const options: Option[] = [
    ...(c.taken ? [{ value: 'keep', label: `Keep the config taken (${c.taken})` }] : []),
    ...c.volumes.map((v) => ({ value: `dev:${v.device}`, label: `Use the config on ${v.device} (${v.fsType ?? 'unknown'} "${v.label}")` })),
    { value: 'paste', label: 'Paste a config' },
    { value: 'label', label: 'Read the volume labelled...' },
    { value: 'none', label: c.taken ? 'Go on without a config (drops the one taken and its answers)' : 'Go on without a config' },
  ];
  const items: Item[] = [
    { kind: 'static', id: 'found', lines },
    {
      kind: 'select',
      id: 'configSource',
      label: 'Config',
      value: c.choice,
      options,
      note: "The config is checked first; its findings are shown with their line numbers and nothing is taken until it has none. Its values then fill the pages, which you review; what it leaves open is asked. The kernel command line's harvester.* keys win over it.",
    },
  ];
  if (c.choice === 'label') items.push({ kind: 'text', id: 'configLabel', label: 'Volume label', value: c.label, note: `e.g. ${labels.split(', ')[0]}; waited for a few seconds.` });
  return items;
}

/** The rule, the disk it chose (or why none), and why each other disk was not taken: the operator may still pick another. */
function diskRuleLines(choices: DiskChoice[]): string[] {
  const lines = choices.flatMap((c) => [
    c.path ? `The ${c.role === 'device' ? 'installation' : 'data'} disk was chosen by ${c.key} (${c.rule}): ${c.recorded ?? c.path}` : `${c.problem}: choose the disk below.`,
    ...c.candidates.map((v) => `  ${v.taken ? '*' : '-'} ${v.path}: ${v.why}`),
  ]);
  return [...lines, 'A disk chosen below replaces the rule; the config records the disk by path.', ''];
}

function diskItems(s: ConsoleState): Item[] {
  const a = s.answers;
  const disks = listedDisks(s.facts);
  const items: Item[] = [];
  const devOpts = diskOptions(s.facts, 'device');
  if (disks.length === 0) {
    items.push({ kind: 'static', id: 'no-disk', lines: ['No disk detected. Harvester requires at least one disk.', 'Attach a disk and press F5 to rescan.'] });
    return items;
  }
  if (devOpts.every((o) => o.disabled)) {
    items.push({ kind: 'static', id: 'no-usable-disk', lines: ['No disk can take the install (each says why below). Free or attach a disk, then press F5 to rescan.', ''] });
  }
  if (s.diskChoices?.length) items.push({ kind: 'static', id: 'disk-rules', lines: diskRuleLines(s.diskChoices) });
  items.push({ kind: 'select', id: 'device', label: 'Installation disk', value: a.device ?? '', options: devOpts });
  const witness = a.mode === 'join' && a.role === 'witness';
  const dev = findListedDisk(s.facts, a.device);
  const others = diskOptions(s.facts, 'data-disk').filter((o) => findListedDisk(s.facts, o.value)?.path !== dev?.path);
  // Only a disk that could take the data is a choice: the boot medium (a USB stick, a virtual disk)
  // is listed with why on the installation disk's list, not offered as a data disk of its own.
  if (others.some((o) => !o.disabled) && !witness && a.mode !== 'install') {
    const own: Option = { value: a.device ?? '', label: `Use the installation disk (${a.device ?? '-'})` };
    items.push({ kind: 'select', id: 'dataDisk', label: 'Data disk', value: a.dataDisk ?? a.device ?? '', options: [own, ...others] });
  }
  const shared = !a.dataDisk || a.dataDisk === a.device;
  if (shared && !witness && a.mode !== 'install') {
    const dev = findListedDisk(s.facts, a.device);
    items.push({ kind: 'text', id: 'persistentSize', label: 'Persistent size', value: a.persistentSize || defaultPersistentSize(dev), note: NOTES.persistentSize });
  }
  const stale = staleInstallDisks(s.facts, [a.device ?? '', a.dataDisk ?? '']);
  if (stale.length) {
    items.push({
      kind: 'multi',
      id: 'wipeDisks',
      label: 'Wipe Disks (Additional Harvester installations detected)',
      values: a.wipeDisks,
      options: stale.map((d) => ({ value: diskName(d), label: diskName(d), detail: [`carries ${[...new Set(d.partitions.map((p) => p.label).filter(Boolean))].join(', ')}`] })),
      note: 'Space ticks a disk to wipe: an old install left on another disk makes the new node boot or mount the wrong partitions.',
    });
  }
  if (!s.facts.firmware.uefi) {
    items.push({
      kind: 'select',
      id: 'forceMbr',
      label: 'Use MBR partitioning scheme',
      value: a.forceMbr ? 'yes' : 'no',
      options: [
        { value: 'no', label: 'No' },
        { value: 'yes', label: 'Yes' },
      ],
      note: NOTES.forceMbr,
    });
  }
  return items;
}

function summaryItems(s: ConsoleState): Item[] {
  const sum = s.summary;
  if (!sum) return [{ kind: 'static', id: 'wait', lines: ['Checking the whole configuration...'] }];
  const a = s.answers;
  const lines: string[] = [];
  lines.push(`install mode: ${a.mode}`);
  if (a.mode !== 'install') lines.push(`install role: ${a.mode === 'create' ? 'default' : a.role}`);
  if (sum.config.os?.hostname) lines.push(`hostname: ${sum.config.os.hostname}`);
  if (a.dns) lines.push(`dns servers: ${a.dns}`);
  if (a.ntp && a.mode !== 'install') lines.push(`ntp servers: ${a.ntp}`);
  if (a.proxy) lines.push(`proxy address: ${a.proxy}`);
  if (a.sshKeyUrl) lines.push(`ssh key url: ${a.sshKeyUrl}`);
  if (s.configFirst.taken) lines.push(`config taken at start: ${s.configFirst.taken} (its values filled the pages)`);
  if (s.remote) lines.push(`remote config: ${s.remote.url} (merged under the answers)`);
  const install = sum.config.install ?? {};
  lines.push(`install disk: ${install.device ?? '-'}`);
  if (install.tty) lines.push(`console of the installed system: ${install.tty}`);
  if (install.dataDisk) lines.push(`data disk: ${install.dataDisk}`);
  if (install.managementInterface?.interfaces?.length) {
    const mi = install.managementInterface;
    lines.push(
      `management NIC: ${mi.interfaces!.map((i) => i.name ?? i.hwAddr).join(', ')} (${mi.method}${mi.method === 'static' ? ` ${mi.ip}/${mi.subnetMask} via ${mi.gateway}` : ''}${mi.vlanId ? `, VLAN ${mi.vlanId}` : ''}, bond ${mi.bondOptions?.mode}, MTU ${mi.mtu || '1500 (default)'})`,
    );
  }
  if (a.mode === 'create') lines.push(`VIP: ${install.vip ?? '(leased by DHCP at install)'} (${install.vipMode})`);
  if (a.mode === 'join') lines.push(`management address: ${sum.config.serverUrl}`);
  lines.push('');
  if (sum.destroys.length) {
    lines.push('EVERYTHING ON THESE DISKS WILL BE DESTROYED:');
    for (const d of sum.destroys) lines.push(`  - ${d}`);
    lines.push('');
  }
  const problems = [
    ...sum.errors.map((f) => `error: ${f.path ? `${f.path}: ` : ''}${f.message}${f.hint ? ` (${f.hint})` : ''}`),
    ...sum.planProblems.map((p) => `error: ${p}`),
    ...sum.blocking.map((c) => `error: ${c.message}${c.whatToDo ? ` What to do: ${c.whatToDo}` : ''}`),
  ];
  const notes = [
    ...sum.acknowledge.map((c) => `check failed: ${c.message}${c.whatToDo ? ` What to do: ${c.whatToDo}` : ''}`),
    ...sum.overridden.map((c) => `allowed by ${c.id === LEGACY_BIOS_CHECK ? 'hvinstall.legacy_bios' : 'install.skipchecks'}: ${c.message}`),
    ...sum.warnings.map((f) => `warning: ${f.path ? `${f.path}: ` : ''}${f.message}`),
  ];
  if (problems.length) {
    lines.push(`${problems.length} problem(s) stop the install:`);
    lines.push(...problems, '');
  }
  if (notes.length) {
    lines.push(`${notes.length} note(s):`);
    lines.push(...notes, '');
  }
  const items: Item[] = [{ kind: 'static', id: 'summary', lines }];
  if (sum.canInstall) {
    const text =
      a.mode === 'install'
        ? 'Harvester will be copied to local disk. No configuration will be performed. Continue?'
        : 'Your disk will be formatted and Harvester will be installed with the above configuration. Continue?';
    items.push({ kind: 'static', id: 'ask', lines: [sum.acknowledge.length ? `${text} (Continuing acknowledges the failed checks above.)` : text] });
    items.push({ kind: 'select', id: 'confirm', label: '', value: 'yes', options: [{ value: 'yes', label: 'Yes' }, { value: 'no', label: 'No (Reboot)' }] });
  } else {
    items.push({ kind: 'static', id: 'cannot', lines: ['The install cannot proceed: Esc goes back to fix it.'] });
    items.push({ kind: 'select', id: 'confirm', label: '', value: 'back', options: [{ value: 'back', label: 'Go back' }, { value: 'no', label: 'No (Reboot)' }] });
  }
  return items;
}
