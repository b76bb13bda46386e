/**
 * An agent SIGKILLed in the middle of an import over containerd's API leaves its lease and what it
 * had written; the next agent's sweep deletes that lease (and another boot's), containerd's
 * garbage collection takes the content with it, and the leases of a running agent and of anyone
 * else stay. Real containerd (Debian's), a real import in a child process (the built dist/), a
 * FIFO that hands over half the archive and then holds it open.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { sweepStaleImportLeasesOnce } from '../../../agent/preload/lease-sweep.js';
import { Logger, MemorySink } from '../../../lib/logger.js';
import { writeDockerArchive } from '../../fixtures/preload/image-archive.mjs';
import { TestContainerd, containerdPerTest } from './harness.js';

const MiB = 1024 * 1024;
const OTHER_BOOT = '99999999-8888-7777-6666-555555555555';
const STREAM_IMPORT = path.resolve('dist/agent/preload/stream-import.js');

let dir: string;
let containerd: TestContainerd;
containerdPerTest((d, c) => {
  dir = d;
  containerd = c;
});

const started: ChildProcess[] = [];
afterEach(() => {
  for (const p of started.splice(0)) {
    if (p.exitCode !== null || p.signalCode !== null || !p.pid) continue;
    try {
      process.kill(-p.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

const ctr = (...args: string[]) => execa('ctr', ['-a', containerd.socket, '-n', 'k8s.io', ...args]);
const lines = (s: string) => s.split('\n').filter(Boolean);

async function until(what: string, check: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** An import over the API in a process of its own (its own process group), reading `archive` plain. */
function importInChild(archive: string): ChildProcess {
  const script = `
    import { importArchiveOnce } from ${JSON.stringify(STREAM_IMPORT)};
    await importArchiveOnce({
      archive: { id: 'big.tar', section: 'common', archivePath: process.env.ARCHIVE, compression: 'none', images: [] },
      target: { ctr: 'ctr', socket: process.env.SOCKET, namespace: 'k8s.io' },
      zstd: 'zstd', unpack: false, importer: 'api', stallTimeoutMs: 600000, finishTimeoutMs: 600000,
      signal: new AbortController().signal,
    });`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, ARCHIVE: archive, SOCKET: containerd.socket }, detached: true, stdio: 'ignore' });
  started.push(child);
  return child;
}

describe('the sweep of stale import leases, on a real containerd', () => {
  it("deletes the lease of an agent killed mid-import and another boot's, with their content, and keeps the rest", async () => {
    const real = path.join(dir, 'big.tar');
    const out = createWriteStream(real);
    // The small image's layer and config are whole within the half the FIFO hands over: committed blobs.
    await writeDockerArchive(out, [
      { ref: 'docker.io/hv/small:1', size: MiB, kind: 'random' },
      { ref: 'docker.io/hv/big:1', size: 8 * MiB, kind: 'random' },
    ]);
    out.end();
    await once(out, 'finish');
    const fifo = path.join(dir, 'fifo.tar');
    await execa('mkfifo', [fifo]);
    const half = Math.floor((await stat(real)).size / 2);
    const feeder = spawn('bash', ['-c', 'exec 3>"$1"; head -c "$2" "$3" >&3; exec sleep 600', 'feeder', fifo, String(half), real], { detached: true, stdio: 'ignore' });
    started.push(feeder);

    const agent = importInChild(fifo);
    // The lease is there and containerd is taking the half it was given.
    await until('no import lease with an active write past the small image', async () => lines((await ctr('content', 'active')).stdout).length > 1 && lines((await ctr('content', 'ls', '-q')).stdout).length === 2, 30_000);
    const leases = lines((await ctr('leases', 'ls')).stdout);
    const bootId = (await readFile('/proc/sys/kernel/random/boot_id', 'utf8')).trim();
    const killed = leases.find((l) => l.startsWith('hvagent-import-'));
    expect(killed).toContain(`hvinstall.io/hvagent=${bootId} ${agent.pid} `);
    const killedId = killed!.split(/\s+/)[0]!;
    const exited = once(agent, 'exit');
    process.kill(-agent.pid!, 'SIGKILL');
    await exited;
    // The feeder gone, the import's own process group reads the end of the FIFO and ends.
    process.kill(-feeder.pid!, 'SIGKILL');
    expect(lines((await ctr('leases', 'ls', '-q')).stdout)).toEqual([killedId]);
    // What it had written is still held: the small image's two blobs and the big layer's write in progress.
    expect(lines((await ctr('content', 'active')).stdout).slice(1)).toEqual([expect.stringContaining(`${killedId}/`)]);
    expect(lines((await ctr('content', 'ls', '-q')).stdout)).toHaveLength(2);

    const ticks = (await readFile('/proc/self/stat', 'utf8')).trim().split(') ')[1]!.split(' ')[19];
    await ctr('leases', 'create', '--id', 'hvagent-import-earlier-boot', `hvinstall.io/hvagent=${OTHER_BOOT} ${process.pid} ${ticks}`);
    await ctr('leases', 'create', '--id', 'hvagent-import-running', `hvinstall.io/hvagent=${bootId} ${process.pid} ${ticks}`);
    await ctr('leases', 'create', '--id', 'someone-else', `hvinstall.io/hvagent=${OTHER_BOOT} 1 1`);

    const sink = new MemorySink();
    await sweepStaleImportLeasesOnce(containerd.socket, 'k8s.io', new Logger(sink, undefined, 'debug'), { connectTimeoutMs: 10_000, timeoutMs: 60_000 });

    const logged = sink.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(logged).toEqual([
      expect.objectContaining({
        level: 'info',
        msg: 'stale import leases deleted, with what they held',
        leases: expect.arrayContaining([
          `${killedId}: made by hvagent PID ${agent.pid} of this boot, which is no longer running`,
          `hvagent-import-earlier-boot: made by hvagent (PID ${process.pid}) in an earlier boot (${OTHER_BOOT})`,
        ]),
      }),
    ]);
    expect((logged[0]!.leases as string[]).length).toBe(2);
    expect(lines((await ctr('leases', 'ls', '-q')).stdout).sort()).toEqual(['hvagent-import-running', 'someone-else']);
    // What the killed import had written went with its lease: no write in progress, no blob.
    expect(lines((await ctr('content', 'active')).stdout).slice(1)).toEqual([]);
    expect(lines((await ctr('content', 'ls', '-q')).stdout)).toEqual([]);
  });
});
