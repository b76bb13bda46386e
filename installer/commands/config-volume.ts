/**
 * `hvinstall config-volume --config F --out config.iso [--label L] [--cmdline STR] [--force]`: the
 * config medium for an unattended install without PXE or a web server. An operator hands a BMC two
 * ISOs (the installer and this one) and boots with harvester.install.automatic=true; the installer
 * finds the config by the volume's label (installer/remote/config-volume.ts). The config is validated
 * first (a refused config never reaches a medium) and the ISO is written atomically, 0600: it holds
 * the cluster token and the password.
 */
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, open, readFile, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';
import { hasCommand, run } from '../../lib/exec.js';
import { fsyncDir, writeFileAtomic } from '../../lib/atomic-write.js';
import { formatFinding, loadConfig } from '../../config/index.js';
import { CONFIG_VOLUME_LABEL, parseVolumeUrl } from '../../config/config-volume.js';
import { mediumFiles, mediumIsoArgs } from '../remote/config-volume-plan.js';
import { parseCommandArgs } from './args.js';
import type { OptionDefs } from '../../lib/cli/definition.js';

export const USAGE = `usage: hvinstall config-volume --config FILE --out CONFIG.iso [--label LABEL] [--cmdline STR] [--force]

Writes an ISO holding FILE for an install without PXE or a web server: attach it beside the installer
ISO (a BMC's second virtual CD, a USB stick written with dd) and boot with harvester.install.automatic=true;
the installer finds it by its label (or name it: harvester.install.config_url=volume:LABEL).
  --config FILE     the config.yaml; validated first (with --cmdline merged over it, as the installer will),
                    refused with its findings (file:line:col) when invalid. Its bytes go onto the medium unchanged
  --out F           the ISO to write (0600: it holds the token and passwords); written atomically.
                    An existing F is refused unless --force
  --label LABEL     the volume id (default ${CONFIG_VOLUME_LABEL}, the config at /config.yaml); cidata writes
                    a NoCloud seed (/user-data, /meta-data), config-2 an OpenStack config drive
                    (/openstack/latest/user_data, meta_data.json); any other label: /config.yaml
  --cmdline STR     the harvester.* kernel parameters the install will boot with, merged over FILE for the check
  --force           replace an existing --out
Needs xorriso. Exit codes: 0 written, 1 the config is invalid, 2 usage or environment (xorriso missing).`;

/** What the parser accepts: --help, completion and the man page read the same object. */
export const OPTIONS = {
  config: { type: 'string' },
  out: { type: 'string' },
  label: { type: 'string' },
  cmdline: { type: 'string' },
  force: { type: 'boolean' },
} as const satisfies OptionDefs;

export default async function configVolume(argv: string[]): Promise<number> {
  const args = parseCommandArgs(argv, OPTIONS, USAGE);
  if (!args) return ExitCode.ok;
  const { config, out, force, cmdline } = args.values;
  const label = args.values.label ?? CONFIG_VOLUME_LABEL;
  const usage = (message: string): HvError => new HvError(message, { hint: USAGE, exitCode: ExitCode.usage });
  if (!config) throw usage('--config is required');
  if (!out) throw usage('--out is required');
  const parsed = parseVolumeUrl(`volume:${label}`);
  if (!parsed.ok) throw usage(`--label: ${parsed.message}`);
  if (!force && (await stat(out).then(() => true, () => false))) {
    throw new HvError(`${out} exists`, { hint: 'pass --force to replace it, or choose another --out', exitCode: ExitCode.usage });
  }
  if (!(await hasCommand('xorriso'))) {
    throw new HvError('xorriso is not installed: it writes the config medium', { hint: 'install it (Debian: apt-get install xorriso) and run again', exitCode: ExitCode.usage });
  }
  const loaded = await loadConfig(config, cmdline !== undefined ? { cmdline } : {});
  for (const f of [...loaded.errors, ...loaded.warnings]) process.stderr.write(`${formatFinding(f)}\n`);
  if (!loaded.valid) {
    process.stderr.write(`hvinstall: ${config} is not a valid config (${loaded.errors.length} error(s)); no medium was written\n`);
    return ExitCode.checkFailed;
  }
  const bytes = await readFile(config);
  await writeMedium(label, bytes, out);
  process.stdout.write(`wrote ${out}: volume ${label}, ${mediumFiles(label, bytes, 'x').map((f) => `/${f.path}`).join(', ')}; ` +
    `boot the installer with harvester.install.automatic=true${label === CONFIG_VOLUME_LABEL ? '' : ` harvester.install.config_url=volume:${label}`}\n`);
  return ExitCode.ok;
}

/** Stages the medium's files, has xorriso write the ISO beside --out, fsyncs it and renames it into place. */
async function writeMedium(label: string, config: Uint8Array, out: string): Promise<void> {
  const outDir = path.dirname(path.resolve(out));
  await mkdir(outDir, { recursive: true });
  const staging = await mkdtemp(path.join(os.tmpdir(), 'hvinstall-config-volume-'));
  const tmp = path.join(outDir, `.${path.basename(out)}.${process.pid}.tmp`);
  try {
    // The instance id cloud-init keys its per-instance state on: the config's digest, so a changed config is a new instance.
    const instanceId = `hvinstall-${createHash('sha256').update(config).digest('hex').slice(0, 16)}`;
    for (const f of mediumFiles(label, config, instanceId)) await writeFileAtomic(path.join(staging, f.path), f.data, { mode: 0o600 });
    await rm(tmp, { force: true });
    await run('xorriso', mediumIsoArgs(label, staging, tmp), { timeoutMs: 5 * 60_000 });
    const fh = await open(tmp, 'r+');
    try {
      await fh.chmod(0o600);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, out);
    await fsyncDir(outDir);
  } finally {
    await rm(tmp, { force: true });
    await rm(staging, { recursive: true, force: true });
  }
}
