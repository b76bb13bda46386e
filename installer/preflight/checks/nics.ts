/** Management NIC checks (harvester/harvester-installer pkg/console/validator.go checkNetworks, the TUI's NIC checks, pkg/preflight/checks.go NIC speed). Pure. */
import type { HarvesterConfig } from '../../../config/types.js';
import type { MachineFacts, NicFacts } from '../types.js';
import type { PreflightCheck, Profile } from '../report.js';
import { THRESHOLDS } from '../thresholds.js';

function describeNic(n: NicFacts): string {
  const speed = n.speedMbps ? `${n.speedMbps}Mb/s` : 'speed n/a';
  return `${n.operState ?? 'unknown'}, ${speed}${n.driver ? `, ${n.driver}` : ''}`;
}

function formatGbps(mbps: number): string {
  return `${Number((mbps / 1000).toFixed(3))}`;
}

export function checkNicSpeed(n: NicFacts, profile: Profile): PreflightCheck {
  const { testing, production } = THRESHOLDS;
  const base = {
    id: 'nic.speed',
    title: 'NIC link speed',
    subject: n.name,
    threshold: `>= ${THRESHOLDS[profile].nicMbps}Mb/s`,
    skippable: true,
  };
  const s = n.speedMbps;
  if (s === undefined) {
    // Harvester only logs speeds below 1 (virtio reports -1): nothing to compare.
    return {
      ...base,
      result: 'warn',
      measured: 'not reported',
      message: `Link speed of ${n.name} is not reported by its driver${n.driver ? ` (${n.driver})` : ''}; it cannot be checked.`,
      whatToDo: 'Check the link speed on the switch side; virtual NICs report none.',
    };
  }
  if (s < testing.nicMbps) {
    return {
      ...base,
      result: 'fail',
      measured: `${s}Mb/s`,
      message: `Link speed of ${n.name} is only ${s}Mbps. Harvester requires at least 1Gbps for testing and 10Gbps for production use.`,
      whatToDo: `Use a NIC and switch port of at least ${THRESHOLDS[profile].nicMbps / 1000}Gbps (install.skipchecks lets an automatic install go on anyway).`,
    };
  }
  if (s < production.nicMbps) {
    return {
      ...base,
      result: profile === 'production' ? 'fail' : 'warn',
      measured: `${s}Mb/s`,
      message: `Link speed of ${n.name} is ${formatGbps(s)}Gbps. Harvester requires at least 10Gbps for production use.`,
      whatToDo: profile === 'production' ? 'Use 10Gbps or faster NICs for the management network in production.' : 'Enough for testing; production needs 10Gbps.',
    };
  }
  return { ...base, result: 'pass', measured: `${s}Mb/s`, message: `Link speed of ${n.name} is ${formatGbps(s)}Gbps.`, whatToDo: '' };
}

function checkLink(n: NicFacts): PreflightCheck {
  const up = n.operState === 'up' || n.carrier === true;
  const noCable = n.carrier === false;
  return {
    id: 'nic.link',
    title: 'NIC link',
    subject: n.name,
    result: up ? 'pass' : 'warn',
    measured: up ? 'up' : `${n.operState ?? 'unknown'}${noCable ? ', no carrier' : ''}`,
    threshold: 'up',
    message: up ? `NIC ${n.name} is up.` : noCable ? `NIC ${n.name} is down. Network cable isn't plugged in.` : `NIC ${n.name} is down`,
    whatToDo: up ? '' : noCable ? 'Plug in the cable or check the switch port.' : `Bring the link up (ip link set ${n.name} up) and check the cabling.`,
    skippable: true,
  };
}

export function checkNics(facts: MachineFacts, config: HarvesterConfig | undefined, profile: Profile): PreflightCheck[] {
  const wanted = config?.install?.managementInterface?.interfaces ?? [];
  if (!config || wanted.length === 0) return checkMachineNics(facts, profile);
  const out: PreflightCheck[] = [];
  const found: NicFacts[] = [];
  for (const want of wanted) {
    const nic = checkWantedNic(facts, want, out);
    if (!nic) continue;
    found.push(nic);
    out.push(checkLink(nic), checkNicSpeed(nic, profile));
  }
  const anyLink = checkAnyLink(found);
  return anyLink ? [...out, anyLink] : out;
}

/** Physical NICs only: a bond, bridge, veth or ifb (under /sys/devices/virtual) is no management NIC. */
function physicalNics(facts: MachineFacts): NicFacts[] {
  return facts.nics.filter((n) => !n.loopback && !n.virtual);
}

/** Machine alone: report the physical NICs and judge the fastest one as the likely management NIC. */
function checkMachineNics(facts: MachineFacts, profile: Profile): PreflightCheck[] {
  const physical = physicalNics(facts);
  const out: PreflightCheck[] = [{
    id: 'nics.present',
    title: 'network interfaces',
    result: physical.length ? 'pass' : 'fail',
    measured: physical.length ? physical.map((n) => `${n.name} (${describeNic(n)})`).join('; ') : 'none',
    threshold: 'at least one physical NIC',
    message: physical.length ? `${physical.length} physical network interface(s) found.` : 'No physical network interface found.',
    whatToDo: physical.length ? '' : 'Attach a network interface: Harvester needs a management network.',
    skippable: false,
  }];
  const fastest = [...physical].sort((a, b) => (b.speedMbps ?? 0) - (a.speedMbps ?? 0))[0];
  if (fastest) out.push(checkNicSpeed(fastest, profile));
  return out;
}

type WantedNic = NonNullable<NonNullable<NonNullable<HarvesterConfig['install']>['managementInterface']>['interfaces']>[number];

/** Whether a configured management NIC exists and is no loopback; the NIC to check further, if so. */
function checkWantedNic(facts: MachineFacts, want: WantedNic, out: PreflightCheck[]): NicFacts | undefined {
  const label = want.name || want.hwAddr || '(empty)';
  const nic = facts.nics.find((n) => (want.name && n.name === want.name) || (want.hwAddr && n.mac?.toLowerCase() === want.hwAddr.toLowerCase()));
  const exists = { id: 'nic.exists', title: 'management NIC exists', subject: label, threshold: 'present', skippable: false } as const;
  if (!nic) {
    const candidates = physicalNics(facts).map((n) => `${n.name} (${n.mac ?? 'no MAC'})`).join(', ');
    out.push({ ...exists, result: 'fail', measured: 'not found', message: `interface not found: ${label}`, whatToDo: `Use one of: ${candidates || '(no physical NIC found)'}.` });
    return undefined;
  }
  out.push({ ...exists, result: 'pass', measured: `${nic.name} ${nic.mac ?? ''}`.trim(), message: `${label} is ${nic.name}.`, whatToDo: '' });
  if (!nic.loopback) return nic;
  out.push({
    id: 'nic.loopback',
    title: 'management NIC is not loopback',
    subject: nic.name,
    result: 'fail',
    measured: 'loopback',
    threshold: 'not loopback',
    message: `interface is a loopback interface: ${nic.name}`,
    whatToDo: 'Name a physical NIC in install.management_interface.interfaces.',
    skippable: false,
  });
  return undefined;
}

function checkAnyLink(found: NicFacts[]): PreflightCheck | undefined {
  if (found.length === 0 || found.some((n) => n.operState === 'up' || n.carrier === true)) return undefined;
  return {
    id: 'nic.any-link',
    title: 'management network link',
    result: 'fail',
    measured: `all down (${found.map((n) => n.name).join(', ')})`,
    threshold: 'at least one management NIC up',
    message: 'None of the management NICs has a link: the node cannot reach the network.',
    whatToDo: 'Connect at least one management NIC to the switch.',
    skippable: true,
  };
}
