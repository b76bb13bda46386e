/** `hvpxe machines`: the admin listener's /machines, with the operator's token, as a table. */
import { ExitCode, HvError } from '../lib/errors.js';

interface Shown {
  name: string;
  group: string;
  lastSeen?: string;
  lastAddress?: string;
  progress?: { event: string; summary?: string };
  installed?: { at: string };
  hold?: { why: string };
  refusals?: Array<{ at: string; what: string; reason: string }>;
  nodeReport?: { event: string; at: string; summary: string };
  boot: { next: string; why: string; loop?: string };
}

/** The table of machines: one line each, then what needs the operator (held, looping, refused). Pure. */
export function machinesTable(machines: Shown[]): string {
  const rows = [['MACHINE', 'GROUP', 'NEXT BOOT', 'LAST SEEN', 'PROGRESS'], ...machines.map((m) => [m.name, m.group, m.boot.next, m.lastSeen ? `${m.lastSeen} ${m.lastAddress ?? ''}`.trim() : '-', m.progress?.summary ?? m.progress?.event ?? '-'])];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const lines = rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  '));
  for (const m of machines) {
    if (m.hold) lines.push(`${m.name}: held on local boot: ${m.hold.why}; \`hvpxe rearm ${m.name}\` installs it`);
    if (m.boot.loop) lines.push(`${m.name}: ${m.boot.loop}`);
    if (m.nodeReport) lines.push(`${m.name}: reported ${m.nodeReport.at}: ${m.nodeReport.summary}`);
    const last = m.refusals?.at(-1);
    if (last) lines.push(`${m.name}: ${m.refusals!.length} refused request${m.refusals!.length === 1 ? '' : 's'}, the last ${last.at}: ${last.what}: ${last.reason}`);
  }
  return lines.join('\n') + '\n';
}

export async function listMachines(adminUrl: string, token: string, json: boolean): Promise<string> {
  const url = `${adminUrl.replace(/\/+$/, '')}/machines`;
  let res: Response;
  try {
    res = await fetch(url, { headers: { Authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    throw new HvError(`cannot reach hvpxe's admin listener at ${adminUrl}: ${((err as Error).cause as Error | undefined)?.message ?? (err as Error).message}`, { hint: 'is hvpxe serve running? pass the address of its --admin-listen with --admin-url', exitCode: ExitCode.usage });
  }
  const text = await res.text();
  if (res.status === 401) throw new HvError(`${url}: the operator token was refused`, { hint: 'pass the --admin-token-file hvpxe serve uses', exitCode: ExitCode.usage });
  if (!res.ok) throw new HvError(`${url}: HTTP ${res.status}: ${text.slice(0, 200)}`, { exitCode: ExitCode.usage });
  if (json) return text;
  return machinesTable((JSON.parse(text) as { machines: Shown[] }).machines);
}
