/** `node dist/agent/payload/build-cli.js [--out DIR]`: builds the hvagent payload (make build runs it). */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runCli } from '../../lib/run-cli.js';
import { formatBytes } from '../../config/disk-sizes.js';
import { buildAgentPayload } from './build.js';
import { payloadSize, releaseId } from '../../node/payload-layout.js';

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { out: { type: 'string' } }, strict: true });
  const repoDir = path.resolve(import.meta.dirname, '../../..');
  const r = await buildAgentPayload({ repoDir, outDir: values.out });
  const size = payloadSize(r.manifest);
  process.stdout.write(`hvagent payload ${releaseId(r.manifest)} (node ${r.manifest.node}, ${size.files} files, ${formatBytes(size.bytes)}) ${r.reused ? 'up to date' : 'built'} at ${path.relative(process.cwd(), r.dir) || r.dir}\n`);
  return 0;
}

void runCli(main, 'build-agent-payload');
