/**
 * Which side stalled: the target disk is stuck when it has requests in flight and completes none
 * of them (the block layer's own counters, /sys/class/block/<dev>/stat), whatever the writer
 * process looks like. A stall of the source's reads and one of the target's writes look the same
 * from mke2fs's progress (the image stops growing); these counters tell them apart, so the error
 * blames the disk that stopped answering and the hint fits it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { StallWatchdog } from '../../lib/stall-watchdog.js';

export interface BlockCounters {
  /** Reads and writes completed. */
  completed: number;
  inFlight: number;
}

/** Parses /sys/class/block/<dev>/stat (Documentation/block/stat.rst): fields 1, 5 and 9. */
export function parseBlockStat(text: string): BlockCounters | undefined {
  const f = text.trim().split(/\s+/).map(Number);
  if (f.length < 11 || f.some((n) => !Number.isFinite(n))) return undefined;
  return { completed: f[0]! + f[4]!, inFlight: f[8]! };
}

function readCounters(device: string): BlockCounters | undefined {
  try {
    return parseBlockStat(readFileSync(`/sys/class/block/${path.basename(device)}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

/** The device and its partitions (the kernel counts a partition's requests in flight on the partition only). */
function withPartitions(device: string): string[] {
  const name = path.basename(device);
  try {
    return [device, ...readdirSync(`/sys/class/block/${name}`).filter((e) => e.startsWith(name)).map((e) => `/dev/${e}`)];
  } catch {
    return [device];
  }
}

/** Watches target devices (and their partitions); stuck() names one whose requests have not completed for the timeout. */
export class TargetWatch {
  private readonly dogs = new Map<string, { wd: StallWatchdog; last?: BlockCounters; quiet: number }>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly devices: ReadonlyArray<string | undefined>,
    readonly timeoutMs: number,
    intervalMs = Math.max(20, Math.min(1000, Math.floor(timeoutMs / 8))),
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  private sample(): void {
    for (const dev of this.devices.filter((d): d is string => !!d).flatMap(withPartitions)) {
      const c = readCounters(dev);
      if (!c) continue;
      let s = this.dogs.get(dev);
      if (!s) this.dogs.set(dev, (s = { wd: new StallWatchdog(this.timeoutMs), quiet: 0 }));
      // Nothing in flight is no stall (the disk is idle, waiting on someone else): keep the clock fresh.
      s.wd.observe(c.inFlight === 0 ? -++s.quiet : c.completed);
      s.last = c;
    }
  }

  /** The first device with requests in flight and none completed for the timeout, as a sentence. */
  stuck(): string | undefined {
    this.sample();
    for (const [dev, s] of this.dogs) {
      if (s.wd.stalled() && s.last && s.last.inFlight > 0) return `${dev} has had ${s.last.inFlight} request(s) in flight and completed none for ${Math.round(s.wd.idleMs() / 1000)} s`;
    }
    return undefined;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/** `what`: the work that stalled, e.g. "writing cOS/active.img", "the bootloader step". */
export function targetStalled(what: string, stuck: string): HvError {
  return new HvError(`${what} stalled: the target disk stopped answering (${stuck}); the OS source is not at fault`, {
    where: stuck.split(' ')[0],
    hint: 'check the target disk and its controller (dmesg: timeouts, resets); once it answers again, run the same install again to resume',
    exitCode: ExitCode.installFailed,
  });
}

/**
 * Settles with `work`, or rejects as soon as the watch finds the target stuck: a write hung in the
 * kernel cannot be cancelled, so the install fails now, naming the disk, instead of hanging with it.
 */
export function beforeTargetStalls<T>(watch: TargetWatch, what: string, work: Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setInterval(() => {
      const stuck = watch.stuck();
      if (!stuck) return;
      clearInterval(timer);
      reject(targetStalled(what, stuck));
    }, Math.max(20, Math.min(1000, Math.floor(watch.timeoutMs / 4))));
    work.then(
      (v) => {
        clearInterval(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearInterval(timer);
        reject(err);
      },
    );
  });
}
