/**
 * `hvinstall render --config F --out DIR [--facts FILE] [--seeds FILE] [--source S] [--release FILE]`:
 * writes the installed node's files under DIR exactly as they land on the node (DIR/oem/…,
 * DIR/etc/rancher/…) with their modes, and prints what it wrote: the files the install writes,
 * and those the initramfs stage of 90_custom.yaml writes at every boot (rancherd's). Re-running
 * gives byte-identical files: the seeds used are recorded in DIR/oem/hvinstall/render-seeds.json
 * and read back on the next run.
 */
import { readFile, rm, stat } from 'node:fs/promises';
import { createHash, randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import { HELP_OPTION, type OptionDefs } from '../../lib/cli/definition.js';
import { describeParseError } from '../../lib/cli/parse-error.js';
import { renderNode, SEEDS_PATH } from '../render/index.js';
import type { ImageFacts, RenderedFile, RenderFacts, RenderSeeds } from '../render/types.js';
import { imageFactsOf, machineArch } from '../steps/image-facts.js';
import { resolveSource } from '../steps/source.js';

export const MANIFEST_PATH = '/oem/hvinstall/render-manifest.json';

export const USAGE = `usage: hvinstall render --config FILE --out DIR [--facts FILE] [--seeds FILE]
                        [--source DIR|SQUASHFS] [--release FILE]

Renders the installed node's files (yip, NetworkManager, RKE2, kube-vip, registries.yaml,
harvester.config, and rancherd's config and bootstrap resources) under DIR as they land on the
node, and prints a table (BY: install = written by the install, boot = by 90_custom.yaml's
initramfs stage at every boot).

  --config FILE   the node's config.yaml (file, http(s) URL or -)
  --out DIR       where to write (DIR/oem/..., DIR/etc/...); usable as hvagent --root
  --facts FILE    JSON {cpuCount, nics:[{name,mac,permMac?}], hasDataPartition?, dhcpHostname?, managementAddress?, arch?};
                  default: this machine's CPU count and architecture and no NIC lookup
  --seeds FILE    JSON {seed?, hostnameSuffix?, passwordSalt?}; default: the seeds recorded
                  in DIR by an earlier render, else fresh random ones
  --source S      the OS image to install (directory tree or squashfs): whether it carries
                  rancherd, and its /etc/harvester-release.yaml; default: not inspected, rendered
                  as for an image without rancherd
  --release FILE  a harvester-release.yaml from the ISO root, read with the image's own`;

/** What the parser accepts: --help, completion and the man page read the same object. */
export const OPTIONS = { config: { type: 'string' }, out: { type: 'string' }, facts: { type: 'string' }, seeds: { type: 'string' }, source: { type: 'string' }, release: { type: 'string' } } as const satisfies OptionDefs;

export interface ManifestEntry {
  path: string;
  mode: string;
  owner: string;
  secret: boolean;
  size: number;
  sha256: string;
  /** install: the install writes it; boot: the initramfs stage of /oem/90_custom.yaml does, at every boot. */
  by: 'install' | 'boot';
}

async function readJson(file: string, what: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new HvError(`cannot read ${what} ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { where: file, exitCode: ExitCode.usage });
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new HvError(`${what} ${file} is not JSON: ${(err as Error).message}`, { where: file, exitCode: ExitCode.usage });
  }
}

/** Checks a facts document by hand: it is small, and every mistake should name its field. */
export function parseFacts(raw: unknown, where: string): RenderFacts {
  const fail = (msg: string): never => {
    throw new HvError(`facts: ${msg}`, { where, hint: 'facts are {"cpuCount": 8, "nics": [{"name": "eno1", "mac": "aa:bb:cc:dd:ee:ff"}]}', exitCode: ExitCode.usage });
  };
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) fail('must be a JSON object');
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!['cpuCount', 'nics', 'hasDataPartition', 'dhcpHostname', 'managementAddress', 'arch'].includes(k)) fail(`unknown key "${k}"`);
  if (!Number.isInteger(o.cpuCount) || (o.cpuCount as number) < 1) fail('cpuCount must be a positive integer');
  const nics = o.nics ?? [];
  if (!Array.isArray(nics)) fail('nics must be a list');
  const parsed = (nics as unknown[]).map((n, i) => {
    const nic = n as Record<string, unknown>;
    if (!nic || typeof nic.name !== 'string' || !nic.name) fail(`nics[${i}].name must be a non-empty string`);
    for (const k of ['mac', 'permMac']) {
      if (nic[k] !== undefined && (typeof nic[k] !== 'string' || !/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/i.test(nic[k]))) fail(`nics[${i}].${k} must be a MAC like aa:bb:cc:dd:ee:ff`);
    }
    const permMac = nic.permMac as string | undefined;
    return { name: nic.name as string, mac: ((nic.mac as string | undefined) ?? '').toLowerCase(), ...(permMac ? { permMac: permMac.toLowerCase() } : {}) };
  });
  if (o.hasDataPartition !== undefined && typeof o.hasDataPartition !== 'boolean') fail('hasDataPartition must be true or false');
  if (o.dhcpHostname !== undefined && typeof o.dhcpHostname !== 'string') fail('dhcpHostname must be a string');
  if (o.arch !== undefined && o.arch !== 'amd64' && o.arch !== 'arm64') fail('arch must be amd64 or arm64');
  if (o.managementAddress !== undefined && (typeof o.managementAddress !== 'string' || !/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/.test(o.managementAddress))) fail('managementAddress must be an IPv4 address with prefix length, like 10.0.0.5/24');
  return {
    cpuCount: o.cpuCount as number,
    nics: parsed,
    hasDataPartition: o.hasDataPartition as boolean | undefined,
    dhcpHostname: o.dhcpHostname as string | undefined,
    ...(o.managementAddress ? { managementAddress: o.managementAddress as string } : {}),
    ...(o.arch ? { arch: o.arch as 'amd64' | 'arm64' } : {}),
  };
}

function parseSeeds(raw: unknown, where: string): RenderSeeds {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new HvError('seeds must be a JSON object', { where, exitCode: ExitCode.usage });
  const o = raw as Record<string, unknown>;
  const out: RenderSeeds = {};
  for (const k of ['seed', 'hostnameSuffix', 'passwordSalt'] as const) {
    if (o[k] === undefined) continue;
    if (typeof o[k] !== 'string') throw new HvError(`seeds: ${k} must be a string`, { where, exitCode: ExitCode.usage });
    out[k] = o[k] as string;
  }
  return out;
}

function fileBytes(f: RenderedFile): Buffer {
  return typeof f.content === 'string' ? Buffer.from(f.content, 'utf8') : Buffer.from(f.content);
}

export function manifestOf(files: RenderedFile[], bootFiles: RenderedFile[] = []): ManifestEntry[] {
  const entry = (f: RenderedFile, by: ManifestEntry['by']): ManifestEntry => {
    const b = fileBytes(f);
    return { path: f.path, mode: `0${f.mode.toString(8)}`, owner: f.owner, secret: f.secret, size: b.length, sha256: createHash('sha256').update(b).digest('hex'), by };
  };
  return [...files.map((f) => entry(f, 'install')), ...bootFiles.map((f) => entry(f, 'boot'))].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

export function formatTable(entries: ManifestEntry[]): string {
  const rows = [['MODE', 'OWNER', 'SIZE', 'SECRET', 'BY', 'PATH'], ...entries.map((e) => [e.mode.padStart(4, '0'), e.owner, String(e.size), e.secret ? 'yes' : 'no', e.by, e.path])];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n');
}

/** Resolves a node path under DIR, refusing anything that would escape it. */
function under(dir: string, nodePath: string): string {
  const p = path.resolve(dir, `.${nodePath}`);
  if (!p.startsWith(path.resolve(dir) + path.sep)) throw new HvError(`refusing to write ${nodePath} outside ${dir}`, { exitCode: ExitCode.installFailed });
  return p;
}

/**
 * Writes the file set under DIR (atomic, final modes), the boot-written files as they will land,
 * and removes files an earlier render wrote that this one no longer does.
 */
export async function writeRenderedTree(dir: string, files: RenderedFile[], bootFiles: RenderedFile[] = []): Promise<ManifestEntry[]> {
  const manifest = manifestOf(files, bootFiles);
  const previous = (await readFile(under(dir, MANIFEST_PATH), 'utf8').then((t) => JSON.parse(t) as { files?: ManifestEntry[] }, () => undefined))?.files ?? [];
  for (const f of [...files, ...bootFiles]) await writeFileAtomic(under(dir, f.path), f.content, { mode: f.mode });
  const now = new Set(manifest.map((f) => f.path));
  for (const old of previous) if (typeof old.path === 'string' && !now.has(old.path)) await rm(under(dir, old.path), { force: true });
  await writeFileAtomic(under(dir, MANIFEST_PATH), JSON.stringify({ version: 1, files: manifest }, null, 2) + '\n', { mode: 0o644 });
  return manifest;
}

/** What a render without --source or --facts assumed, in the words it is said to the operator. */
export function assumptions(noSource: boolean, noFacts: boolean, cpuCount: number): string[] {
  const out: string[] = [];
  if (noSource) {
    out.push(
      "no --source: rendered for an OS image without rancherd (hvagent drives RKE2, a static kube-vip pod announces the VIP, the token goes in an RKE2 drop-in). Harvester's ISO makes another node (rancherd bootstraps RKE2, Rancher and Harvester, the harvester chart's kube-vip owns the VIP): pass --source with the OS image (the ISO's rootfs.squashfs) to render that one",
    );
  }
  if (noFacts) out.push(`no --facts: kubelet's reserved CPU is computed for this machine's ${cpuCount} CPUs, and the management NICs are not matched to any machine's`);
  return out;
}

/** --source and --release: the image facts, or undefined when the image is not inspected. */
async function inspectImage(source: string | undefined, release: string | undefined): Promise<ImageFacts | undefined> {
  if (release !== undefined && source === undefined) throw new HvError('--release needs --source: the release metadata is read for an image that carries rancherd', { hint: USAGE, exitCode: ExitCode.usage });
  if (source === undefined) return undefined;
  return imageFactsOf(await resolveSource(source), release === undefined ? {} : { isoRelease: release, isoReleaseRequired: true });
}

export default async function render(argv: string[]): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { ...OPTIONS, ...HELP_OPTION },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    process.stderr.write(`hvinstall render: ${describeParseError(err, { ...OPTIONS, ...HELP_OPTION }) ?? (err as Error).message}\n\n${USAGE}\n`);
    return ExitCode.usage;
  }
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return ExitCode.ok;
  }
  if (typeof values.config !== 'string' || typeof values.out !== 'string') {
    process.stderr.write(`hvinstall render: --config and --out are required\n\n${USAGE}\n`);
    return ExitCode.usage;
  }
  const out = path.resolve(values.out);

  const given = typeof values.facts === 'string' ? parseFacts(await readJson(values.facts, 'facts file'), values.facts) : { cpuCount: availableParallelism(), nics: [] };
  const assumed = assumptions(values.source === undefined, values.facts === undefined, given.cpuCount);
  // Said first, on stderr, before anything else: the preview is not of the node the operator may think.
  for (const a of assumed) process.stderr.write(`warning: ${a}\n`);
  const image = await inspectImage(values.source as string | undefined, values.release as string | undefined);
  const facts: RenderFacts = { ...given, arch: given.arch ?? machineArch(), ...(image ? { image } : {}) };
  let seeds: RenderSeeds;
  if (typeof values.seeds === 'string') seeds = parseSeeds(await readJson(values.seeds, 'seeds file'), values.seeds);
  else {
    const recorded = await readFile(under(out, SEEDS_PATH), 'utf8').then((t) => JSON.parse(t) as unknown, () => undefined);
    seeds = recorded ? parseSeeds(recorded, path.join(out, SEEDS_PATH)) : { seed: randomBytes(16).toString('hex') };
  }

  const { loadConfig } = await import('../../config/index.js');
  const loaded = await loadConfig(values.config === '-' ? '-' : values.config);
  for (const w of loaded.warnings) process.stderr.write(`warning: ${w.path}: ${w.message}\n`);
  if (!loaded.valid) {
    for (const e of loaded.errors) process.stderr.write(`error: ${e.source ?? loaded.source}${e.line ? `:${e.line}:${e.column ?? 0}` : ''}: ${e.path}: ${e.message}${e.hint ? `\n  hint: ${e.hint}` : ''}\n`);
    process.stderr.write(`hvinstall render: ${loaded.source} is not a valid config; nothing was written\n`);
    return ExitCode.checkFailed;
  }
  const report = renderNode(loaded.config, facts, seeds);
  for (const w of report.warnings) process.stderr.write(`warning: ${w}\n`);
  // Checked before the first write so an unusable target fails with nothing half-written.
  const target = await stat(out).catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? undefined : Promise.reject(err)));
  if (target && !target.isDirectory()) throw new HvError(`--out ${out} exists and is not a directory`, { where: out, hint: 'give a directory (it is created when missing)', exitCode: ExitCode.usage });
  let manifest: ManifestEntry[];
  try {
    manifest = await writeRenderedTree(out, report.files, report.yipFiles);
  } catch (err) {
    throw new HvError(`cannot write the rendered files under ${out}: ${(err as Error).message}`, { where: out, hint: 'check the directory is writable and has space', exitCode: ExitCode.usage, cause: err });
  }
  const v = report.bootstrap.versions;
  const versions = v ? `\nversions: ${(['kubernetes', 'rancher', 'harvesterChart', 'monitoringChart', 'loggingChart'] as const).map((k) => `${k} ${v[k]} (${v.from[k]})`).join(', ')}` : '';
  process.stdout.write(`${assumed.map((a) => `ASSUMED: ${a}\n`).join('')}${assumed.length ? '\n' : ''}${formatTable(manifest)}\n\nhostname ${report.hostname.name} (${report.hostname.source}); ${manifest.length} files under ${out}\nbootstrap: ${report.bootstrap.why}${versions}\n`);
  return ExitCode.ok;
}
