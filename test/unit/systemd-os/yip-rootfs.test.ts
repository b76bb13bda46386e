/**
 * The test OS initramfs's reader of yip's rootfs stage (iso-build/systemd-os/files/yip-stage.awk
 * and yip-rootfs.sh), run as the initramfs runs it: busybox sh and busybox awk. The oracle for
 * the golden 90_custom.yaml files is the `yaml` library's reading of the same file, and for the
 * hand-written ones the values written out here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { run } from '../../../lib/exec.js';
import { systemdOsFile } from '../../../iso-build/systemd-os/files.js';

const BUSYBOX = '/bin/busybox';
const FIXTURES = path.resolve(import.meta.dirname, '../../fixtures/render');
let work: string;

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'hv-yip-'));
});
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

interface StageRun {
  /** The variables of /run/cos/cos-layout.env as sh reads them back. */
  env: Record<string, string>;
  /** The environment file as written. */
  file: string;
  log: string[];
}

let runs = 0;
/** Writes the files (dir → name → content), runs the rootfs stage over the dirs in order, reads the layout back with sh. */
async function rootfsStage(dirs: Array<[string, Record<string, string>]>, extra = ''): Promise<StageRun> {
  const base = path.join(work, `run-${++runs}`);
  const out = path.join(base, 'out');
  const order: string[] = [];
  for (const [dir, files] of dirs) {
    const d = path.join(base, dir);
    await mkdir(d, { recursive: true });
    for (const [name, content] of Object.entries(files)) await writeFile(path.join(d, name), content);
    order.push(d);
  }
  const script = `
    yip_log() { printf 'LOG %s\\n' "$*"; }
    YIP_AWK='${systemdOsFile('yip-stage.awk')}'
    YIP_ROOT='${out}'
    ${extra}
    . '${systemdOsFile('yip-rootfs.sh')}'
    yip_run_stage rootfs ${order.map((d) => `'${d}'`).join(' ')} '${path.join(base, 'missing')}'
    f='${out}/run/cos/cos-layout.env'
    if [ -f "$f" ]; then
      ( . "$f"; for k in $(sed -n 's/=.*//p' "$f"); do eval "printf 'VAR %s=%s\\\\0' \\"$k\\" \\"\\$$k\\""; done )
    fi`;
  const r = await run(BUSYBOX, ['sh', '-c', script]);
  const env: Record<string, string> = {};
  const log: string[] = [];
  for (const chunk of r.stdout.split(/\0|\n/)) {
    if (chunk.startsWith('VAR ')) {
      const kv = chunk.slice(4);
      env[kv.slice(0, kv.indexOf('='))] = kv.slice(kv.indexOf('=') + 1);
    } else if (chunk.startsWith('LOG ')) log.push(chunk.slice(4));
  }
  const file = await readFile(path.join(out, 'run/cos/cos-layout.env'), 'utf8').catch(() => '');
  return { env, file, log };
}

/** What yip would put in each environment_file for the rootfs stage of one document, per the yaml library. */
function expectedLayout(doc: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  const stages = (doc as { stages?: Record<string, unknown[]> }).stages ?? {};
  for (const stage of ['rootfs.before', 'rootfs', 'rootfs.after']) {
    for (const e of (stages[stage] ?? []) as Array<{ environment_file?: string; environment?: Record<string, unknown> }>) {
      if (e.environment_file !== '/run/cos/cos-layout.env') continue;
      for (const [k, v] of Object.entries(e.environment ?? {})) out[k] = String(v).replace(/\n/g, ' ');
    }
  }
  return out;
}

describe('the rootfs stage of the installer-rendered 90_custom.yaml', () => {
  it('gives the layout variables the yaml library reads from every golden render', async () => {
    const cases = await readdir(FIXTURES);
    expect(cases.length).toBeGreaterThan(5);
    for (const c of cases) {
      const text = await readFile(path.join(FIXTURES, c, 'tree/oem/90_custom.yaml'), 'utf8');
      const want = expectedLayout(parse(text));
      expect(Object.keys(want)).toEqual(expect.arrayContaining(['VOLUMES', 'RW_PATHS', 'PERSISTENT_STATE_PATHS', 'PERSISTENT_STATE_BIND']));
      const got = await rootfsStage([['oem', { '90_custom.yaml': text }]]);
      expect(got.env, c).toEqual(want);
      // the other stages' entries are not part of the rootfs stage; nothing there is reported as skipped
      expect(got.log.filter((l) => l.includes('not run here'))).toEqual([]);
    }
  });

  it('skips the layout in recovery mode, as its `if` says', async () => {
    const text = await readFile(path.join(FIXTURES, 'create-dhcp/tree/oem/90_custom.yaml'), 'utf8');
    const marker = path.join(work, 'recovery_mode');
    await writeFile(marker, '1');
    const got = await rootfsStage([['oem', { '90_custom.yaml': text.replace('/run/cos/recovery_mode', marker) }]]);
    expect(got.env).toEqual({});
    expect(got.log.join('\n')).toMatch(/entry 'Layout configuration': skipped, if: \[ ! -f /);
  });
});

const IMAGE_DEFAULTS = `name: image defaults
stages:
  rootfs:
  - name: Layout defaults
    if: '[ -d / ]'
    environment_file: /run/cos/cos-layout.env
    environment:
      VOLUMES: LABEL=COS_OEM:/oem LABEL=COS_PERSISTENT:/usr/local
      OVERLAY: "tmpfs:25%"
      RW_PATHS: /var /etc /srv
      PERSISTENT_STATE_PATHS: >-
        /etc/systemd
        /etc/ssh
      PERSISTENT_STATE_BIND: "true"
`;

describe('yip semantics', () => {
  it('reads later directories and files over earlier ones, variable by variable', async () => {
    const got = await rootfsStage([
      ['system/oem', { '00_rootfs.yaml': IMAGE_DEFAULTS }],
      ['oem', {
        '91_more.yaml': 'stages:\n  rootfs:\n    - environment_file: /run/cos/cos-layout.env\n      environment:\n        OVERLAY: tmpfs:40%\n',
        '90_custom.yaml': 'stages:\n  rootfs:\n    - environment_file: /run/cos/cos-layout.env\n      environment:\n        OVERLAY: tmpfs:30%\n        RW_PATHS: /var /etc\n',
        'notes.txt': 'stages: {rootfs: [broken',
      }],
    ]);
    expect(got.env).toEqual({
      VOLUMES: 'LABEL=COS_OEM:/oem LABEL=COS_PERSISTENT:/usr/local',
      OVERLAY: 'tmpfs:40%',
      RW_PATHS: '/var /etc',
      PERSISTENT_STATE_PATHS: '/etc/systemd /etc/ssh',
      PERSISTENT_STATE_BIND: 'true',
    });
    // one line per variable, each once
    expect(got.file.split('\n').filter(Boolean).map((l) => l.split('=')[0]).sort()).toEqual(['OVERLAY', 'PERSISTENT_STATE_BIND', 'PERSISTENT_STATE_PATHS', 'RW_PATHS', 'VOLUMES']);
  });

  it('runs rootfs.before, rootfs and rootfs.after in that order across all files', async () => {
    const got = await rootfsStage([
      ['a', { '1.yaml': 'stages:\n  rootfs.after:\n    - environment_file: /run/cos/cos-layout.env\n      environment: {}\n' }],
    ]);
    expect(got.log.join('\n')).toMatch(/environment must be a block mapping; file skipped/);
    const ordered = await rootfsStage([
      ['a', { '1.yaml': 'stages:\n  rootfs.after:\n    - environment_file: /run/cos/cos-layout.env\n      environment:\n        X: after\n' }],
      ['b', { '2.yaml': 'stages:\n  "rootfs":\n    - environment_file: /run/cos/cos-layout.env\n      environment:\n        X: main\n  rootfs.before:\n    - environment_file: /run/cos/cos-layout.env\n      environment:\n        X: before\n        Y: before\n' }],
    ]);
    expect(ordered.env).toEqual({ X: 'after', Y: 'before' });
  });

  it('reads the YAML scalar forms real configs use', async () => {
    const yaml = [
      '# a comment',
      '---',
      'stages:',
      '  rootfs:',
      '    - name: "Layout"   # a trailing comment',
      '      environment_file: "/run/cos/cos-layout.env"',
      '      environment:',
      "        SINGLE: 'it''s \"quoted\" #not a comment'",
      '        DOUBLE: "a\\"b\\\\c $HOME `x`"',
      '        PLAIN: value # comment',
      '        FOLDED: >-',
      '          /etc/a',
      '          /etc/b',
      '',
      '          /etc/c',
      '        LITERAL: |',
      '          /var/a',
      '          /var/b',
      '        CONTINUED: one',
      '          two',
      '        EMPTY: ""',
      '        EMPTY_BLOCK: |',
      "        'QUOTED_KEY': yes",
      '      commands:',
      '        - |',
      '          echo "- not: yaml"',
      '          environment:',
      '      files:',
      '        - path: /etc/x',
      '          content: "x"',
    ].join('\n');
    const got = await rootfsStage([['oem', { '90.yaml': yaml }]]);
    expect(got.env).toEqual({
      SINGLE: `it's "quoted" #not a comment`,
      DOUBLE: 'a"b\\c $HOME `x`',
      PLAIN: 'value',
      FOLDED: '/etc/a /etc/b /etc/c',
      LITERAL: '/var/a /var/b ',
      CONTINUED: 'one two',
      EMPTY: '',
      EMPTY_BLOCK: '',
      QUOTED_KEY: 'yes',
    });
    expect(got.log.join('\n')).toMatch(/entry 'Layout': not run here: commands files/);
    // the yaml library agrees on the values (line breaks become spaces in the env file)
    expect(got.env).toEqual(expectedLayout(parse(yaml)));
  });

  it('ignores an entry without environment_file and a variable that is not a name, saying so', async () => {
    const got = await rootfsStage([['oem', { '1.yaml': 'stages:\n  rootfs:\n    - name: no file\n      environment:\n        A: b\n    - environment_file: /run/cos/cos-layout.env\n      environment:\n        "BAD-NAME": x\n        GOOD: y\n' }]]);
    expect(got.env).toEqual({ GOOD: 'y' });
    expect(got.log.join('\n')).toMatch(/entry 'no file': environment without environment_file; ignored/);
    expect(got.log.join('\n')).toMatch(/'BAD-NAME' is not a variable name; ignored/);
  });

  it('does not let a value run code when the file is read back', async () => {
    const canary = path.join(work, 'canary');
    const got = await rootfsStage([['oem', { '1.yaml': `stages:\n  rootfs:\n    - environment_file: /run/cos/cos-layout.env\n      environment:\n        A: "$(touch ${canary})"\n        B: '\`touch ${canary}\`'\n        C: "'; touch ${canary}; '"\n` }]]);
    expect(got.env.A).toBe(`$(touch ${canary})`);
    expect(got.env.B).toBe(`\`touch ${canary}\``);
    await expect(readFile(canary)).rejects.toThrow();
  });
});

describe('files the reader cannot read are skipped whole, naming file and line', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['a flow mapping as environment', 'stages:\n  rootfs:\n    - environment_file: /run/cos/cos-layout.env\n      environment: {OVERLAY: x}\n', /:4: environment must be a block mapping; file skipped/],
    ['a flow sequence as a value', 'stages:\n  rootfs:\n    - environment_file: /run/cos/cos-layout.env\n      environment:\n        OVERLAY: [a, b]\n', /:5: flow collections are not supported for OVERLAY/],
    ['an alias', 'stages:\n  rootfs:\n    - environment_file: /run/cos/cos-layout.env\n      environment:\n        OVERLAY: *size\n', /:5: anchors, aliases and tags are not supported for OVERLAY/],
    ['an unterminated quote', 'stages:\n  rootfs:\n    - environment_file: /run/cos/cos-layout.env\n      environment:\n        OVERLAY: "tmpfs\n', /:5: unterminated quoted string/],
    ['a tab in the indentation', 'stages:\n  rootfs:\n\t- environment_file: /x\n', /:3: a tab in the indentation/],
    ['two documents', 'stages: {}\n---\nstages: {}\n', /:2: more than one YAML document/],
    ['a scalar stage entry', 'stages:\n  rootfs:\n    - just a string\n', /:3: a stage entry must be a mapping/],
  ];
  for (const [what, text, message] of cases) {
    it(what, async () => {
      const got = await rootfsStage([
        ['system/oem', { '00_rootfs.yaml': IMAGE_DEFAULTS }],
        ['oem', { '90_custom.yaml': text + 'more: 1\n' }],
      ]);
      expect(got.log.join('\n')).toMatch(new RegExp(`90_custom\\.yaml${message.source}`));
      // the image's defaults stand; nothing of the broken file got in
      expect(got.env.OVERLAY).toBe('tmpfs:25%');
      expect(got.env.RW_PATHS).toBe('/var /etc /srv');
    });
  }
});
