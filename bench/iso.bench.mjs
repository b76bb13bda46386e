// `make iso`'s build, and booting what it built (root: QEMU under TCG). In the same run:
// 1. build time and sizes, cold (an empty package cache: Debian's kernel, shim-signed,
//    shim-helpers-amd64-signed and grub-efi-amd64-signed are downloaded) and cached (a second build
//    with the packages in the cache), the cached time as a ratio of the cold one; the two builds
//    must give the same sha256 for every artifact (same inputs, same bytes);
// 2. power-on to the live installer's prompt (`HV-LIVE: live system ready`) under OVMF/TCG, booting
//    the ISO as a CD-ROM (firmware -> shim -> grub -> kernel -> initramfs finds the medium -> live
//    root) and as a USB stick with Secure Boot enforced, each as a ratio to the baseline: QEMU
//    loading the same kernel and initramfs itself (-kernel/-initrd) with the ISO attached, so the
//    live root still comes from the medium. Rounds alternate the kinds. The builds for this bench
//    use --grub-timeout 0 and --extra-cmdline console=ttyS0: the menu's wait (10 s by default) is
//    the operator's, not the boot's, and the serial line is where the prompt is read.
// Targets: cached build ≤ 0.9× cold; ISO boot ≤ 1.5× the -kernel/-initrd boot.
// Needs `make build`. HV_BENCH_ISO_ROUNDS (default 2), HV_BENCH_OUT (default .bench-out/iso).
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cli = path.join(root, 'dist/iso-build/live/cli.js');
const out = path.resolve(process.env.HV_BENCH_OUT ?? path.join(root, '.bench-out/iso'));
const ROUNDS = Number(process.env.HV_BENCH_ISO_ROUNDS ?? 2);
const BOOT_DEADLINE_S = 900;
const TARGET_CACHED = 0.9;
const TARGET_BOOT = 1.5;

if (!existsSync(cli)) {
  console.error(`iso bench: ${cli} is missing; run 'make build' first`);
  process.exit(2);
}
if (process.getuid?.() !== 0) {
  console.error('iso bench: needs root (QEMU boots read the ISO as a disk; apt-get download as root is quieter)');
  process.exit(2);
}

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const args = ['--grub-timeout', '0', '--extra-cmdline', 'console=ttyS0'];

function build(name, cache) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(process.execPath, [cli, '--out', path.join(out, name), '--cache', cache, ...args], {
    encoding: 'utf8',
    env: { ...process.env, TMPDIR: out },
    maxBuffer: 16 * 1024 * 1024,
  });
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  if (r.status !== 0) {
    console.error(`iso bench: the ${name} build failed (${r.status}): ${r.stderr}`);
    process.exit(2);
  }
  return { s, report: JSON.parse(r.stdout) };
}

const cache = path.join(out, 'cache');
const cold = build('cold', cache);
const cached = build('cached', cache);
const list = (b) => readFileSync(b.report.checksums.sha256, 'utf8');
const same = list(cold) === list(cached);
const mib = (f) => (statSync(f).size / 1048576).toFixed(1);
const live = cached.report.live;
console.log(`build, cold (packages downloaded): ${cold.s.toFixed(1)} s`);
console.log(`build, cached:                     ${cached.s.toFixed(1)} s (${(cached.s / cold.s).toFixed(2)}x cold)`);
console.log(`sizes: ISO ${mib(cached.report.iso)} MiB, initramfs ${mib(live.initrd)} MiB, live root ${mib(live.liveSquashfs)} MiB, OS image ${mib(live.osSquashfs)} MiB, PXE initrd ${mib(live.pxeInitrd)} MiB`);
console.log(`reproducible: the two builds' sha256 lists are ${same ? 'identical' : 'DIFFERENT'}`);

/** Boots, returns seconds from spawn to the prompt line on the serial console. */
function boot(kind) {
  const iso = cached.report.iso;
  const vars = path.join(out, `vars-${kind}.fd`);
  const sb = kind === 'usb-sb';
  copyFileSync(sb ? '/usr/share/OVMF/OVMF_VARS_4M.ms.fd' : '/usr/share/OVMF/OVMF_VARS_4M.fd', vars);
  const code = sb ? '/usr/share/OVMF/OVMF_CODE_4M.ms.fd' : '/usr/share/OVMF/OVMF_CODE_4M.fd';
  const a = ['-machine', sb ? 'q35,smm=on' : 'q35', '-accel', 'tcg', '-cpu', 'max', '-m', '2048', '-smp', '2', '-nographic', '-no-reboot', '-nic', 'none'];
  if (sb) a.push('-global', 'driver=cfi.pflash01,property=secure,value=on');
  a.push('-drive', `if=pflash,format=raw,readonly=on,file=${code}`, '-drive', `if=pflash,format=raw,file=${vars}`);
  // With -kernel, QEMU's linuxboot option ROM holds boot index 0 itself: the CD is attached without one.
  const cd = (bootindex) => ['-drive', `file=${iso},if=none,id=cd0,media=cdrom,readonly=on,format=raw`, '-device', `ide-cd,drive=cd0${bootindex}`];
  if (kind === 'kernel-initrd') a.push('-kernel', live.kernel, '-initrd', live.initrd, '-append', 'console=ttyS0', ...cd(''));
  else if (kind === 'cd') a.push(...cd(',bootindex=0'));
  else a.push('-device', 'qemu-xhci,id=xhci', '-drive', `if=none,id=stick,format=raw,readonly=on,file=${iso}`, '-device', 'usb-storage,bus=xhci.0,drive=stick,bootindex=0');
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const q = spawn('qemu-system-x86_64', a, { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    let stderr = '';
    const timer = setTimeout(() => q.kill('SIGKILL'), BOOT_DEADLINE_S * 1000);
    q.stderr.on('data', (d) => {
      stderr += d.toString('utf8');
    });
    q.stdout.on('data', (d) => {
      log += d.toString('latin1');
      if (/HV-LIVE: live system ready/.test(log)) {
        const s = Number(process.hrtime.bigint() - t0) / 1e9;
        clearTimeout(timer);
        q.kill('SIGKILL');
        resolve({ s, log });
      }
    });
    q.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ s: undefined, log, stderr, exit: signal ?? code });
    });
  });
}

const kinds = ['kernel-initrd', 'cd', 'usb-sb'];
const times = Object.fromEntries(kinds.map((k) => [k, []]));
for (let r = 0; r < ROUNDS; r++) {
  // Rotate the order each round so a change in machine load does not fall on one kind only.
  for (const k of [...kinds.slice(r % kinds.length), ...kinds.slice(0, r % kinds.length)]) {
    const { s, log, stderr, exit } = await boot(k);
    if (s === undefined) {
      const why = exit === 'SIGKILL' ? `did not reach the prompt within ${BOOT_DEADLINE_S} s` : `QEMU exited (${exit}) before the prompt`;
      console.error(`iso bench: ${k} boot ${why}; QEMU's stderr:\n${stderr.trim() || '(empty)'}\nconsole tail:\n${log.slice(-2000) || '(empty)'}`);
      process.exit(2);
    }
    if (k === 'usb-sb' && !/Secure boot enabled/.test(log)) {
      console.error('iso bench: the USB boot was not under Secure Boot');
      process.exit(2);
    }
    times[k].push(s);
  }
}
const best = (k) => Math.min(...times[k]);
const base = best('kernel-initrd');
console.log(`boot to the prompt, -kernel/-initrd + ISO as CD (baseline): best ${base.toFixed(1)} s of ${ROUNDS} (${times['kernel-initrd'].map((s) => s.toFixed(1)).join(', ')})`);
for (const [k, label] of [['cd', 'ISO as a CD-ROM, OVMF'], ['usb-sb', 'ISO as a USB stick, OVMF + Secure Boot']]) {
  console.log(`boot to the prompt, ${label}: best ${best(k).toFixed(1)} s (${(best(k) / base).toFixed(2)}x baseline; ${times[k].map((s) => s.toFixed(1)).join(', ')})`);
}
const okBuild = cached.s / cold.s <= TARGET_CACHED;
const okBoot = best('cd') / base <= TARGET_BOOT;
console.log(`targets: cached build <= ${TARGET_CACHED}x cold -> ${okBuild ? 'met' : 'MISSED'}; ISO CD boot <= ${TARGET_BOOT}x -kernel/-initrd -> ${okBoot ? 'met' : 'MISSED'}; reproducible -> ${same ? 'met' : 'MISSED'}`);
rmSync(path.join(out, 'cold'), { recursive: true, force: true });
process.exit(okBuild && okBoot && same ? 0 : 1);
