/**
 * `hvinstall upgrade --source S`: Elemental's A/B upgrade of an installed node (the new image to
 * active.img, the old active to passive.img), journaled and resumable, the new image read back
 * before the switch, and boot assessment armed for the next boot (docs/upgrade.md).
 */
import { readFile } from 'node:fs/promises';
import { ExitCode, HvError } from '../../lib/errors.js';
import { chooseLogFormat, Logger } from '../../lib/logger.js';
import { Redactor } from '../../lib/redact.js';
import type { OptionDefs } from '../../lib/cli/definition.js';
import { formatUpgradePlan } from '../upgrade/plan.js';
import { runUpgrade } from '../upgrade/run.js';
import { parseCommandArgs } from './args.js';

export const USAGE = `usage: hvinstall upgrade --source DIR|SQUASHFS|ISO|URL [--sha256 HEX] [--ca-file F] [--device DISK]
                         [--system-size MIB] [--run-dir DIR] [--dry-run] [--yes]

Upgrades an installed node as Elemental does: builds the new image, reads it back, moves
cOS/active.img to cOS/passive.img and the new image to cOS/active.img, updates state.yaml, and
arms boot assessment so the next boot tries the new image once (hvagent commits it when the node
is healthy; otherwise grub boots the previous image). Reboot afterwards to try it.

  --source S        a directory tree, a squashfs (rootfs.squashfs), an ISO (its rootfs.squashfs),
                    or an http(s) URL of a squashfs or ISO
  --sha256 HEX      the URL's sha256 (default: <URL>.sha256, which must exist)
  --ca-file F       an extra CA bundle for an https source
  --device DISK     the node's disk, when it is not the running node (e.g. a loop-attached image);
                    default: the COS_STATE and COS_OEM of this machine
  --system-size MIB active.img's size (default: the tree plus headroom, at least 3072)
  --run-dir DIR     scratch mounts and downloads (default /run/hvinstall/upgrade)
  --dry-run         print the plan and what would be refused; change nothing
  --yes             consent: passive.img (the image before the current one) is replaced

Exit codes: 0 upgraded (or the dry run's plan may run), 1 refused (an attempt or a fallback is
pending, not an installed node), 2 usage, 3 the upgrade failed (re-run the same command to resume).`;

export const OPTIONS = {
  source: { type: 'string' },
  sha256: { type: 'string' },
  'ca-file': { type: 'string' },
  device: { type: 'string' },
  'system-size': { type: 'string' },
  'run-dir': { type: 'string' },
  'dry-run': { type: 'boolean' },
  yes: { type: 'boolean' },
} as const satisfies OptionDefs;

function usageError(msg: string): HvError {
  return new HvError(msg, { hint: "run 'hvinstall upgrade --help'", exitCode: ExitCode.usage });
}

export default async function upgrade(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs(argv, OPTIONS, USAGE);
  if (!parsed) return ExitCode.ok;
  const v = parsed.values;
  if (!v.source) throw usageError('--source is required');
  if (v.sha256 !== undefined && !/^[0-9a-fA-F]{64}$/.test(v.sha256)) throw usageError(`--sha256 must be 64 hex digits, got ${JSON.stringify(v.sha256)}`);
  const size = v['system-size'];
  if (size !== undefined && !/^[1-9]\d*$/.test(size)) throw usageError(`--system-size must be a whole number of MiB, got ${JSON.stringify(size)}`);
  const dryRun = v['dry-run'] === true;
  if (!dryRun && !v.yes) throw usageError('an upgrade replaces cOS/passive.img: pass --yes to go ahead, or --dry-run to see the plan');
  const log = new Logger(undefined, new Redactor(), 'info', { component: 'upgrade' }, undefined, chooseLogFormat(undefined));
  const outcome = await runUpgrade({
    source: v.source,
    sha256: v.sha256?.toLowerCase(),
    caFile: v['ca-file'],
    device: v.device,
    systemSizeMiB: size === undefined ? undefined : Number(size),
    dryRun,
    runDir: v['run-dir'] ?? '/run/hvinstall/upgrade',
    log,
    cmdline: await readFile('/proc/cmdline', 'utf8').catch(() => ''),
  });
  if (dryRun) {
    process.stdout.write(formatUpgradePlan(outcome.plan));
    return outcome.plan.refusals.length > 0 ? ExitCode.checkFailed : ExitCode.ok;
  }
  const built = outcome.journal?.built;
  process.stdout.write(`upgraded: ${built?.name ?? 'the new image'} is cOS/active.img, ${outcome.journal?.from?.name ?? 'the previous image'} is cOS/passive.img\n`);
  process.stdout.write(outcome.plan.arm ? 'boot assessment armed: reboot to try the new image once (hvagent status shows the verdict)\n' : `boot assessment NOT armed: ${outcome.plan.armWhy}\n`);
  return ExitCode.ok;
}
