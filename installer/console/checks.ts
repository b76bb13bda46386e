/**
 * The message under a field as it is left. Three sources, in this order, and no rule of our own
 * where one of them has it:
 *  1. Harvester's console-only checks (harvester/harvester-installer pkg/console/install_panels.go),
 *     in its words, for what a config cannot even express or `validate` does not ask: the password
 *     typed twice, a hostname, at least one NIC, numbers typed as numbers.
 *  2. The one validator (config validateLayers, what `hvinstall validate` runs) on the
 *     config the answers make, keeping the findings about this field.
 *  3. Preflight's checks (disk sizes, NIC links and speeds) and the planner (persistent size), for
 *     what depends on the machine.
 * When (1) finds an error, (2) and (3) are not shown for that field: one message at a time.
 */
import type { FieldMessage } from '../../lib/tui/form.js';
import { formatFinding, validateLayers, type ConfigLayer } from '../../config/index.js';
import type { Finding, HarvesterConfig, ValidationResult } from '../../config/types.js';
import { runPreflightChecks } from '../preflight/index.js';
import type { MachineFacts } from '../preflight/types.js';
import { applyAnswers, type Answers } from './answers.js';
import { findListedDisk } from './machine.js';

export type FieldId = keyof Answers;

export interface RemoteConfig {
  url: string;
  text: string;
}

export interface CheckContext {
  answers: Answers;
  facts: MachineFacts;
  /** The kernel command line's harvester.* keys. */
  base: HarvesterConfig;
  /** The remote config (config_url) once fetched and found valid: its text, merged under the answers. */
  remote?: RemoteConfig;
  skipchecks: boolean;
  /** hvinstall.legacy_bios on the kernel command line: this run consents to a legacy-BIOS install (docs/preflight.md). */
  allowLegacyBios?: boolean;
}

/** Config paths (as findings print them, compared without case or underscores) each field answers for. */
const FIELD_PATHS: Partial<Record<FieldId, string[]>> = {
  mode: ['install.mode'],
  role: ['install.role', 'install.cordoned'],
  password: ['os.password'],
  device: ['install.device', 'install.forcembr'],
  dataDisk: ['install.datadisk'],
  persistentSize: ['install.persistentpartitionsize'],
  wipeDisks: ['install.wipediskslist', 'install.wipealldisks'],
  nics: ['install.managementinterface.interfaces'],
  vlan: ['install.managementinterface.vlanid'],
  bondMode: ['install.managementinterface.bondoptions'],
  method: ['install.managementinterface.method'],
  address: ['install.managementinterface.ip'],
  mask: ['install.managementinterface.subnetmask'],
  gateway: ['install.managementinterface.gateway'],
  mtu: ['install.managementinterface.mtu'],
  podCidr: ['install.clusterpodcidr'],
  serviceCidr: ['install.clusterservicecidr'],
  clusterDns: ['install.clusterdns'],
  hostname: ['os.hostname'],
  dns: ['os.dnsnameservers'],
  vipMode: ['install.vipmode'],
  vipHwAddr: ['install.viphwaddr'],
  vip: ['install.vip'],
  serverUrl: ['serverurl'],
  token: ['token'],
  ntp: ['os.ntpservers', 'systemsettings.ntp-servers'],
  proxy: ['os.environment'],
  sshKeyUrl: ['os.sshauthorizedkeys', 'os.sshd'],
  configUrl: ['install.configurl'],
};

/** The name findings about the answers carry (a remote config's carry its URL). */
export const CONSOLE_SOURCE = 'console';

const norm = (p: string): string => p.toLowerCase().replace(/_/g, '');

/** True when a finding's path is one of the field's paths or below it. */
export function findingIsAbout(f: Finding, field: FieldId): boolean {
  const p = norm(f.path);
  return (FIELD_PATHS[field] ?? []).some((q) => p === q || p.startsWith(q + '.') || p.startsWith(q + '['));
}

/** The config the answers make, validated with the one validator (and merged over the remote config). */
export async function validateAnswers(ctx: CheckContext, passwordAs?: (clear: string) => string): Promise<ValidationResult & { raw: Record<string, unknown> }> {
  const macOf = (nic: string): string | undefined => ctx.facts.nics.find((n) => n.name === nic)?.mac;
  const raw = applyAnswers(ctx.base, ctx.answers, { macOf, passwordAs });
  const layers: ConfigLayer[] = [{ raw, source: CONSOLE_SOURCE }];
  if (ctx.remote) layers.push({ text: ctx.remote.text, source: ctx.remote.url });
  return { ...(await validateLayers(layers)), raw };
}

/** Harvester's console-only checks for a field (its wording). */
export function consoleOnlyChecks(field: FieldId, a: Answers): string[] {
  switch (field) {
    case 'password':
      return a.password ? [] : ['Password is required'];
    case 'passwordConfirm':
      return a.password && a.password !== a.passwordConfirm ? ['Password mismatching'] : [];
    case 'hostname':
      return a.hostname.trim() ? [] : ['Must specify hostname.'];
    case 'nics':
      return a.nics.length ? [] : ['Must select at least one interface'];
    case 'vlan':
      return /^\d*$/.test(a.vlan.trim()) ? [] : ['VLAN ID should be a number 1 ~ 4094.'];
    case 'mtu':
      return a.method !== 'static' || /^\d*$/.test(a.mtu.trim()) ? [] : ['MTU should be a number.'];
    default:
      return [];
  }
}

function fromFinding(f: Finding): FieldMessage {
  return { level: f.severity === 'error' ? 'error' : 'warning', text: f.hint ? `${f.message} (${f.hint})` : f.message };
}

/** Preflight's verdict on the chosen disks and NICs, for the field that chose them. */
export function machineMessages(field: FieldId, ctx: CheckContext, config: HarvesterConfig): FieldMessage[] {
  if (field !== 'device' && field !== 'dataDisk' && field !== 'nics') return [];
  const report = runPreflightChecks(ctx.facts, { config, profile: 'testing' });
  const prefix = field === 'device' ? ['device.'] : field === 'dataDisk' ? ['data-disk.'] : ['nic.'];
  const out: FieldMessage[] = [];
  for (const c of report.checks) {
    if (!prefix.some((p) => c.id.startsWith(p)) || c.result === 'pass') continue;
    if (c.id.endsWith('.exists') && c.result === 'fail' && field !== 'nics') continue; // the validator said it
    const soft = c.skippable && ctx.skipchecks;
    const level = c.result === 'fail' && !soft && (c.id.endsWith('.size') || c.id === 'nic.any-link' || !c.skippable) ? 'error' : 'warning';
    const text = [c.message, c.whatToDo && level === 'error' ? c.whatToDo : '', soft && c.result === 'fail' ? '(allowed: install.skipchecks is set)' : ''].filter(Boolean).join(' ');
    out.push({ level, text });
  }
  return out;
}

/** The planner's refusals about the persistent partition (its upper limit depends on the disk). */
export async function planMessages(field: FieldId, ctx: CheckContext, config: HarvesterConfig): Promise<FieldMessage[]> {
  if (field !== 'persistentSize' || !findListedDisk(ctx.facts, config.install?.device)) return [];
  const { planInstall, PlanRefusedError } = await import('../disk/plan.js');
  try {
    planInstall(config, ctx.facts);
    return [];
  } catch (err) {
    if (!(err instanceof PlanRefusedError)) throw err;
    return err.problems.filter((p) => /partition size/.test(p)).map((text) => ({ level: 'error' as const, text }));
  }
}

/** Every message for one field, as it is left. */
export async function fieldMessages(field: FieldId, ctx: CheckContext): Promise<FieldMessage[]> {
  const own = consoleOnlyChecks(field, ctx.answers);
  if (own.length) return own.map((text) => ({ level: 'error', text }));
  const result = await validateAnswers(ctx);
  const findings = [...result.errors, ...result.warnings].filter((f) => findingIsAbout(f, field) && f.source !== ctx.remote?.url).map(fromFinding);
  if (findings.some((m) => m.level === 'error')) return findings;
  return [...findings, ...machineMessages(field, ctx, result.config), ...(await planMessages(field, ctx, result.config))];
}

/** A config that is refused (remote, volume, pasted): what it is, then each of its findings with its line number. */
export function refusal(source: string, findings: Finding[], field: string, outcome: string): { ok: false; field: string; messages: FieldMessage[] } {
  return {
    ok: false,
    field,
    messages: [
      { level: 'error', text: `${source} is not a valid config (${findings.length} error(s)); ${outcome}:` },
      ...findings.map((f) => ({ level: 'error' as const, text: formatFinding(f).replace(/\n\s*/g, ' ') })),
    ],
  };
}
