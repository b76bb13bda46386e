/**
 * The real `hvpxe serve` (built, real validator) with a boot: grub-signed profile: refused at
 * start without Debian's signed shim and grub (exit 1, naming each file and its package) or without
 * --tftp (exit 2); with them, curl's TFTP client gets grub's bootstrap (grub-script-check accepts
 * it), the machine's own script by MAC and the binaries byte for byte.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { curl, freePort, makeTree, profilesYaml, runHvpxe, startHvpxe, stopHvpxe, type Running, type Tree } from './harness.js';

let dir: string;
let tree: Tree;
let profiles: string;
const SHIM = Buffer.concat([Buffer.from('MZ'), randomBytes(40_000)]);
const GRUB = Buffer.concat([Buffer.from('MZ'), randomBytes(70_001)]);

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-pxe-sb-'));
  tree = await makeTree(dir);
  profiles = path.join(dir, 'profiles.yaml');
  await writeFile(profiles, profilesYaml(tree).replace('    kernel_args:', '    boot: grub-signed\n    kernel_args:'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const serveArgs = (extra: string[]): string[] => ['serve', '--root', tree.root, '--profiles', profiles, '--listen', '127.0.0.1:0', '--state-dir', path.join(dir, 'state'), ...extra];

describe('hvpxe serve, boot: grub-signed', () => {
  it('refuses to start without shim and grub, naming each file and the Debian package', async () => {
    const r = await runHvpxe(serveArgs(['--tftp', '127.0.0.1:0']));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${tree.root}/shimx64.efi (shim, signed by Microsoft's UEFI CA) is missing or unreadable (ENOENT): copy /usr/lib/shim/shimx64.efi.signed from the Debian package shim-signed there as shimx64.efi`);
    expect(r.stderr).toMatch(/grubx64\.efi \(Debian's signed grub network image .*\) is missing or unreadable \(ENOENT\): copy \/usr\/lib\/grub\/x86_64-efi-signed\/grubnetx64\.efi\.signed from the Debian package grub-efi-amd64-signed/);
    expect(r.stdout).not.toMatch(/serving/);
  });

  it('refuses to start without --tftp', async () => {
    await writeFile(path.join(tree.root, 'shimx64.efi'), SHIM);
    await writeFile(path.join(tree.root, 'grubx64.efi'), GRUB);
    const r = await runHvpxe(serveArgs([]));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/profile hv selects boot: grub-signed, whose signed grub fetches everything over TFTP: hvpxe serve needs --tftp/);
  });

  describe('with them', () => {
    let hv: Running | undefined;
    let tftp: string;
    beforeAll(async () => {
      await writeFile(path.join(tree.root, 'shimx64.efi'), SHIM);
      await writeFile(path.join(tree.root, 'grubx64.efi'), GRUB);
      // A UDP port: freePort() finds a free TCP one, which is free for UDP too unless something else holds it.
      const port = await freePort();
      hv = await startHvpxe(serveArgs(['--tftp', `127.0.0.1:${port}`]));
      tftp = `tftp://127.0.0.1:${port}`;
    });
    afterAll(async () => {
      await stopHvpxe(hv);
    });

    it("serves grub's bootstrap, which grub-script-check accepts", async () => {
      const r = curl(['-sS', `${tftp}/grub/grub.cfg`]);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^source "\(tftp,127\.0\.0\.1:\d+\)\/grub\/auto\?mac=\$\{net_default_mac\}/m);
      const f = path.join(dir, 'bootstrap.cfg');
      await writeFile(f, r.stdout);
      execFileSync('grub-script-check', [f]);
    });

    it("serves the machine's own script by MAC (the name's ? as %3F for curl)", async () => {
      const r = curl(['-sS', `${tftp}/grub/auto%3Fmac=52:54:00:00:00:02&arch=x86_64&platform=efi`]);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^linux '\(tftp,127\.0\.0\.1:\d+\)\/k\/vmlinuz' .*'harvester\.install\.config_url=http:\/\/127\.0\.0\.1:\d+\/config\/node-2\.yaml\?credential=[A-Za-z0-9_-]{43}'/m);
      expect(r.stdout).not.toMatch(/cluster-token-xyz123|root-password-secret/);
    });

    it('serves shim and grub byte for byte, and nothing outside the root', async () => {
      for (const [name, want] of [['shimx64.efi', SHIM], ['grubx64.efi', GRUB]] as const) {
        const out = path.join(dir, `got-${name}`);
        expect(curl(['-sS', '--tftp-blksize', '1468', '-o', out, `${tftp}/${name}`]).code).toBe(0);
        expect(execFileSync('cmp', [out, '-'], { input: want }).length).toBe(0);
      }
      expect(curl(['-sS', `${tftp}/escape`]).code).not.toBe(0);
      expect(curl(['-sS', `${tftp}/.hidden`]).code).not.toBe(0);
    });
  });
});
