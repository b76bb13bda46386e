/**
 * The grub scripts of the Secure Boot chain (pxe/grub.ts): read back word by word as grub would
 * (single quotes keep everything, nothing expands), checked by grub's own grub-script-check, and
 * compared with what the iPXE chain boots: the same kernel arguments from the one list.
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { buildCatalog, machineByName, parseProfiles } from '../../../pxe/profiles.js';
import { renderMachineScript } from '../../../pxe/ipxe.js';
import {
  grubQuote,
  renderGrubBootstrap,
  renderGrubLocalBootScript,
  renderGrubMachineScript,
  renderGrubNoMatchScript,
  renderGrubUnsupportedArchScript,
  tftpDevice,
} from '../../../pxe/grub.js';
import { profilesText } from './helpers.js';

const URL_ = 'http://10.0.0.1:8080';
const TFTP = '(tftp,10.0.0.1)';

/** Splits one grub command line into its words: '…' literal, "…" and bare words as written (no variables here), \\x the character x. */
function grubWords(line: string): string[] {
  const words: string[] = [];
  let cur: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (ch === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new Error(`unterminated quote in ${line}`);
      cur = (cur ?? '') + line.slice(i + 1, end);
      i = end;
    } else if (ch === '"') {
      const end = line.indexOf('"', i + 1);
      cur = (cur ?? '') + line.slice(i + 1, end);
      i = end;
    } else if (ch === '\\') {
      cur = (cur ?? '') + line[++i];
    } else if (ch === ' ') {
      if (cur !== undefined) words.push(cur);
      cur = undefined;
    } else {
      cur = (cur ?? '') + ch;
    }
  }
  if (cur !== undefined) words.push(cur);
  return words;
}

function command(script: string, name: string): string[] {
  const line = script.split('\n').find((l) => l.startsWith(`${name} `));
  if (!line) throw new Error(`no ${name} line in\n${script}`);
  return grubWords(line).slice(1);
}

async function grubScriptCheck(script: string): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'hv-grub-check-'));
  try {
    await writeFile(path.join(dir, 'x.cfg'), script);
    await promisify(execFile)('grub-script-check', [path.join(dir, 'x.cfg')]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function catalog(edit: (t: string) => string = (t) => t) {
  return buildCatalog(await parseProfiles(edit(profilesText())));
}

describe('grub scripts (boot: grub-signed)', () => {
  it("boots the machine's kernel and initrd by TFTP with its kernel arguments, each one grub word", async () => {
    const cat = await catalog();
    const script = renderGrubMachineScript(cat, machineByName(cat, 'node-2')!, URL_, TFTP, { matchedBy: 'mac' });
    const [kernel, ...args] = command(script, 'linux');
    expect(kernel).toBe('(tftp,10.0.0.1)/k/vmlinuz');
    expect(args).toEqual([
      'ip=dhcp',
      'net.ifnames=1',
      'rd.cos.disable',
      `root=live:${URL_}/artifacts/rootfs.squashfs`,
      'harvester.install.automatic=true',
      `harvester.install.config_url=${URL_}/config/node-2.yaml?mac=52:54:00:00:00:02`,
      `hvinstall.events_url=${URL_}/events/node-2`,
      'rd.net.dhcp.retry=3',
      'console=ttyS0',
    ]);
    expect(command(script, 'initrd')).toEqual(['(tftp,10.0.0.1)/k/initrd.img']);
    // The order a failure needs: boot, and only if it returns the message and the exit.
    const lines = script.split('\n');
    expect(lines.indexOf('boot')).toBeGreaterThan(lines.findIndex((l) => l.startsWith('initrd ')));
    expect(lines.slice(lines.indexOf('boot') + 1, -1)).toEqual([expect.stringMatching(/^echo 'hvpxe: downloading or booting the installer for node-2 failed/), 'sleep 30', 'exit 1']);
    await grubScriptCheck(script);
  });

  it('passes the iPXE chain\'s kernel arguments (less initrd=, which grub hands over itself)', async () => {
    const cat = await catalog();
    const m = machineByName(cat, 'node-3')!;
    const ipxeLine = renderMachineScript(cat, m, URL_, { platform: 'efi' }).split('\n').find((l) => l.startsWith('kernel '))!;
    const ipxeArgs = ipxeLine.replace(/ \|\| goto failed$/, '').split(' ').slice(2);
    expect(ipxeArgs[0]).toBe('initrd=initrd.img');
    const [, ...grubArgs] = command(renderGrubMachineScript(cat, m, URL_, TFTP), 'linux');
    expect(grubArgs).toEqual(ipxeArgs.slice(1));
    expect(grubArgs).toContain(`harvester.install.config_url=${URL_}/config/node-3.yaml?uuid=11111111-2222-3333-4444-555555555555`);
  });

  it('a kernel argument with quotes, $ and ; reaches the kernel as written, not as grub commands', async () => {
    const nasty = `x.y='a;reboot'$(b)\${prefix}`;
    const cat = await catalog((t) => t.replace('kernel_args: [rd.net.dhcp.retry=3, console=ttyS0]', `kernel_args: ["${nasty.replace(/\\/g, '\\\\')}"]`));
    const script = renderGrubMachineScript(cat, machineByName(cat, 'node-1')!, URL_, TFTP);
    expect(command(script, 'linux').at(-1)).toBe(nasty);
    expect(script.split('\n').filter((l) => /^\s*reboot\b/.test(l))).toEqual([]);
    await grubScriptCheck(script);
    expect(grubWords(grubQuote("it's"))).toEqual(["it's"]);
  });

  it('the bootstrap every machine reads names no machine and asks hvpxe with its MAC, UUID and CPU', async () => {
    const boot = renderGrubBootstrap(tftpDevice('http://10.0.0.5:8080', 69));
    expect(command(boot, 'source')).toEqual(['(tftp,10.0.0.5)/grub/auto?mac=${net_default_mac}&uuid=${hvpxe_uuid}&arch=${grub_cpu}&platform=${grub_platform}']);
    expect(command(boot, 'smbios')).toEqual(['--type', '1', '--get-uuid', '8', '--set', 'hvpxe_uuid']);
    // What follows source runs only when the fetch failed: a message, then back to the firmware.
    const after = boot.split('\n').slice(boot.split('\n').findIndex((l) => l.startsWith('source ')) + 1, -1);
    expect(after.at(-1)).toBe('exit 1');
    expect(grubWords(after[0]).slice(1)).toEqual(["hvpxe: could not fetch this machine's boot script from (tftp,10.0.0.5) (TFTP)"]);
    expect(tftpDevice('http://10.0.0.5:8080', 6969)).toBe('(tftp,10.0.0.5:6969)');
    await grubScriptCheck(boot);
  });

  it('an unknown machine, an unserved architecture and an installed machine each say so and hand back to the firmware', async () => {
    const cat = await catalog();
    const m = machineByName(cat, 'node-1')!;
    const none = renderGrubNoMatchScript({ mac: '52:54:00:aa:bb:cc', uuid: "x'\nreboot" });
    expect(none.split('\n').filter((l) => l.startsWith('echo ')).map((l) => grubWords(l).slice(1).join(' '))[0]).toBe('hvpxe: no profile matches this machine (MAC 52:54:00:aa:bb:cc, UUID unknown).');
    const arch = renderGrubUnsupportedArchScript(m, 'arm64');
    expect(arch).toMatch(/node-1 booted as arm64, but profile hv serves an x86_64 installer only/);
    const local = renderGrubLocalBootScript(m, { kind: 'local', installedAt: '2026-01-01T00:00:00Z', loop: 'asked for a local boot 3 times' });
    expect(local.trim().split('\n').at(-1)).toBe('exit 0');
    for (const s of [none, arch, local]) {
      expect(s.trim().split('\n').at(-1)).toMatch(/^exit [01]$/);
      expect(s).not.toMatch(/^(linux|initrd|boot)\b/m);
      await grubScriptCheck(s);
    }
  });
});
