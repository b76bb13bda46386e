// After tsc: writes the man pages and shell completions of hvinstall, hvagent and hvpxe into
// dist/share (man/man1, bash-completion/completions, zsh/site-functions, fish/vendor_completions.d),
// generated from the same command definitions as the parsers and --help. The live ISO copies dist/,
// and the hvagent payload (agent/payload/build.ts, the next build step) carries hvagent's page and
// bash completion onto the node.
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
const load = (p) => import(pathToFileURL(path.join(dist, p)).href);

const { manPage } = await load('lib/cli/manpage.js');
const { completionScript } = await load('lib/cli/completion.js');
const { versionInfo } = await load('lib/cli/version.js');
const programs = [(await load('installer/cli.js')).program, (await load('agent/cli.js')).program, (await load('pxe/cli.js')).program];

const share = path.join(dist, 'share');
for (const p of programs) {
  const def = await p.define();
  const v = versionInfo(p.name);
  const files = {
    [`man/man1/${p.name}.1`]: manPage(def, `${v.version} (${v.commit.slice(0, 12)})`),
    [`bash-completion/completions/${p.name}`]: completionScript(def, 'bash'),
    [`zsh/site-functions/_${p.name}`]: completionScript(def, 'zsh'),
    [`fish/vendor_completions.d/${p.name}.fish`]: completionScript(def, 'fish'),
  };
  for (const [rel, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(share, rel)), { recursive: true });
    await writeFile(path.join(share, rel), text);
  }
}
