/**
 * Runs deployImages in its own process so a test can SIGKILL it part-way. Arguments come as one
 * JSON object in argv[2] (a DeployRequest without callbacks). Prints "progress DONE TOTAL" lines;
 * each progress report holds the event loop for `stallMs`, so the copy is slow enough to be
 * interrupted at a chosen point.
 */
import { deployImages } from '../../../installer/deploy/index.js';

const req = JSON.parse(process.argv[2]) as Parameters<typeof deployImages>[0] & { stallMs?: number };
const stall = req.stallMs ?? 0;
await deployImages({
  ...req,
  onProgress: (done, total) => {
    process.stdout.write(`progress ${done} ${total}\n`);
    const until = Date.now() + stall;
    while (Date.now() < until) {
      /* holding the event loop on purpose: see above */
    }
  },
});
process.stdout.write('deployed\n');
