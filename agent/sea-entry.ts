/** The entry of the bundled, self-contained hvagent (agent/payload/build.ts): the CLI, nothing else. */
import { runCli } from '../lib/run-cli.js';
import { main } from './cli.js';

void runCli(main, 'hvagent');
