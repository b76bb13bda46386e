/**
 * The after-install-chroot step: cOS/active.img loop-mounted read-write, the kernel filesystems and
 * COS_OEM/COS_PERSISTENT bound into it (chroot-plan.ts), an SELinux relabel when the image carries
 * a policy and setfiles, then each of os.after_install_chroot_commands in `chroot … /bin/sh -c`.
 * Every mount comes off again, in reverse, whatever happened; output goes to the install log
 * through the redacting logger. A command that fails fails the install, named with its exit status.
 */
import { imageDigestOnDisk } from '../deploy/index.js';
import { access, mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import type { InstallContext, Step } from './context.js';
import { chrootCommands, chrootMounts, fileContextsPath, outputTail, selinuxPolicyType, setfilesArgs } from './chroot-plan.js';
import { withMounted } from './mounted.js';
import { mount, mountDir, unmount } from './mounts.js';

/** A user command may install packages or build things; it still gets a deadline. */
export const CHROOT_COMMAND_TIMEOUT_MS = 30 * 60_000;
const RELABEL_TIMEOUT_MS = 30 * 60_000;
/** The environment a chrooted command starts with: nothing of the installer's own. */
const CHROOT_ENV = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', HOME: '/root', LANG: 'C.UTF-8' };

async function present(p: string): Promise<boolean> {
  return access(p).then(
    () => true,
    () => false,
  );
}

/** The relabel the image asks for: its policy's file_contexts and a setfiles, or why none runs. */
async function relabelPlan(root: string): Promise<{ fileContexts: string; setfiles: string } | { none: string }> {
  const config = await readFile(path.join(root, 'etc/selinux/config'), 'utf8').catch(() => undefined);
  if (config === undefined) return { none: 'the image has no /etc/selinux/config' };
  const type = selinuxPolicyType(config);
  if (!type) return { none: 'SELinux is disabled or has no SELINUXTYPE in the image' };
  const fileContexts = fileContextsPath(type);
  if (!(await present(path.join(root, fileContexts)))) return { none: `the image has no ${fileContexts}` };
  for (const setfiles of ['/usr/sbin/setfiles', '/sbin/setfiles']) if (await present(path.join(root, setfiles))) return { fileContexts, setfiles };
  return { none: 'the image has no setfiles' };
}

async function bindInto(root: string, source: string, target: string): Promise<string> {
  const dir = path.join(root, target);
  await mkdir(dir, { recursive: true });
  await run('mount', ['--bind', source, dir], { timeoutMs: 120_000 });
  // Private, so nothing mounted in the chroot propagates back to the host's /dev or /run.
  await run('mount', ['--make-private', dir], { timeoutMs: 120_000 });
  return dir;
}

async function withChroot<T>(ctx: InstallContext, imageFile: string, dirs: { oem: string; persistent: string }, fn: (root: string) => Promise<T>): Promise<T> {
  const root = mountDir(ctx.runDir, 'chroot');
  await mount(imageFile, root, ['loop']);
  const bound: string[] = [];
  try {
    await run('mount', ['--make-private', root], { timeoutMs: 120_000 });
    for (const m of chrootMounts(dirs)) bound.push(await bindInto(root, m.source, m.target));
    return await fn(root);
  } finally {
    for (const dir of bound.reverse()) await run('umount', [dir], { allowFailure: true, timeoutMs: 120_000 }).then((r) => (r.exitCode === 0 ? r : run('umount', ['-l', dir], { allowFailure: true })));
    await run('sync', ['-f', root], { allowFailure: true });
    await unmount(root).catch(() => run('umount', ['-l', root], { allowFailure: true }));
  }
}

async function runInChroot(ctx: InstallContext, root: string, what: string, argv: string[], timeoutMs: number): Promise<void> {
  const r = await run('chroot', [root, ...argv], { allowFailure: true, timeoutMs, env: CHROOT_ENV, redactor: ctx.redactor, signal: ctx.signal });
  ctx.log.info('after-install-chroot output', { what, exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr });
  if (r.exitCode === 0) return;
  const output = ctx.redactor.redactString(outputTail(`${r.stdout}\n${r.stderr}`));
  throw new HvError(`${what} failed with exit status ${r.exitCode}${output.trim() ? `:\n${output.replace(/^/gm, '    ')}` : ''}`, {
    where: 'after-install-chroot',
    hint: 'fix the command in os.after_install_chroot_commands (it runs in a chroot of the installed system, without DNS), then run the install again',
    exitCode: ExitCode.installFailed,
  });
}

/**
 * Fails before anything runs when the chroot has no working /bin/sh. Asked of chroot itself, so an
 * absolute symlink (/bin/sh -> /usr/bin/dash) resolves inside the image, not on the host.
 */
async function requireShell(root: string): Promise<void> {
  const r = await run('chroot', [root, '/bin/sh', '-c', ':'], { allowFailure: true, timeoutMs: 60_000, env: CHROOT_ENV });
  if (r.exitCode === 0) return;
  throw new HvError(`the installed system has no working /bin/sh (chroot exit status ${r.exitCode}${r.stderr.trim() ? `: ${r.stderr.trim()}` : ''}), so os.after_install_chroot_commands cannot run in it`, {
    where: 'after-install-chroot',
    hint: 'install from an image with a shell at /bin/sh, or remove os.after_install_chroot_commands',
    exitCode: ExitCode.installFailed,
  });
}

export const chrootStep: Step = {
  name: 'chroot',
  async run(ctx) {
    const commands = chrootCommands(ctx.config);
    const active = ctx.plan.images.find((i) => i.label === 'COS_ACTIVE');
    if (!active) throw new HvError('the plan has no COS_ACTIVE image', { where: 'chroot', exitCode: ExitCode.installFailed });
    return withMounted(ctx.plan, ctx.runDir, ['COS_STATE', 'COS_OEM', 'COS_PERSISTENT'], async (dirs) => {
      const imageFile = path.join(dirs.COS_STATE, active.file);
      // Only look, read-only, when no command is to run: an unchanged image keeps its deployed digest.
      if (commands.length === 0) {
        const root = mountDir(ctx.runDir, 'chroot');
        await mount(imageFile, root, ['loop', 'ro']);
        const relabel = await relabelPlan(root).finally(() => unmount(root).catch(() => run('umount', ['-l', root], { allowFailure: true })));
        if ('none' in relabel) {
          ctx.bus.emit({ type: 'message', level: 'info', step: 'chroot', message: `no after-install-chroot commands; no SELinux relabel: ${relabel.none}` });
          return { commands: 0, relabel: relabel.none };
        }
      }
      const detail = await withChroot(ctx, imageFile, { oem: dirs.COS_OEM, persistent: dirs.COS_PERSISTENT }, async (root) => {
        if (commands.length > 0) await requireShell(root);
        const relabel = await relabelPlan(root);
        if ('none' in relabel) {
          ctx.bus.emit({ type: 'message', level: 'info', step: 'chroot', message: `no SELinux relabel: ${relabel.none}` });
        } else {
          const excluded = chrootMounts({ oem: '', persistent: '' }).map((m) => m.target);
          await runInChroot(ctx, root, `SELinux relabel (setfiles with ${relabel.fileContexts})`, [relabel.setfiles, ...setfilesArgs(relabel.fileContexts, excluded)], RELABEL_TIMEOUT_MS);
          ctx.bus.emit({ type: 'message', level: 'info', step: 'chroot', message: `relabelled the image with ${relabel.fileContexts}` });
        }
        for (const [i, command] of commands.entries()) {
          const what = `after-install-chroot command ${i + 1} of ${commands.length} (${ctx.redactor.redactString(command)})`;
          ctx.bus.emit({ type: 'message', level: 'info', step: 'chroot', message: `running ${what}` });
          await runInChroot(ctx, root, what, ['/bin/sh', '-c', command], CHROOT_COMMAND_TIMEOUT_MS);
        }
        return { commands: commands.length, relabel: 'none' in relabel ? relabel.none : relabel.fileContexts };
      });
      // The commands changed active.img: what it now is, read back, for a resume to check it by.
      return { ...detail, activeDigest: await imageDigestOnDisk(imageFile) };
    });
  },
};
