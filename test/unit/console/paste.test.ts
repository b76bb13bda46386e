/**
 * A pasted config on the remote-config page (F2): taken line by line as a serial line or a KVM sends
 * it, checked with the one validator merged under the answers, refused with its line numbers until
 * it has no errors of its own, then merged.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { KeyDecoder } from '../../../lib/tui/keys.js';
import { pastedLines } from '../../../installer/console/paste-screen.js';
import { KEYS, type Session } from './session.js';
import { TITLES, fill, startDryRun, walkCreate } from './walk.js';

let s: Session | undefined;
afterEach(() => s?.kill());

const F2 = '\x1b[12~';
const CTRL_D = '\x04';
const PASTE = 'Paste a Harvester config';

describe('pasted lines', () => {
  it('CR, LF and CR LF each end a line; backspace joins a line back; a tab is kept for the validator to find', () => {
    const keys = new KeyDecoder().feed(Buffer.from('a: 1\r\nb: 2\rc:\n\td\x7f\x7f  d: 3\x7f4'));
    expect(pastedLines(keys)).toEqual(['a: 1', 'b: 2', 'c:', '  d: 4']);
    expect(pastedLines(new KeyDecoder().feed(Buffer.from('x\r\x7f\x7f')))).toEqual(['']);
  });
});

describe('hvinstall console: a pasted config', () => {
  it('is refused with its findings at their line numbers, then merged once valid; Esc merges nothing', async () => {
    const { s: sess, configFile } = startDryRun({ sysroot: 'prod-nvme' });
    s = sess;
    await walkCreate(s, { stopAfter: 'ssh' });
    await s.page(TITLES.configUrl);
    await s.keys(F2);
    await s.page(PASTE);
    await s.type('scheme_version: 1\ros:\r  labels:\r    rack: r1\r');
    await s.keys(KEYS.esc);
    await s.page(TITLES.configUrl);
    await s.keys(F2);
    await s.page(PASTE);
    expect(s.flat()).not.toContain('rack: r1');
    await s.type('scheme_version: 1\ros:\r  persistent_state_paths: [var/x]\r  labels:\r    "bad key!": x\r');
    await s.keys(CTRL_D);
    const bad = await s.waitForText('is not a valid config');
    expect(bad).toContain('<pasted> is not a valid config (2 error(s)); nothing was merged:');
    expect(bad).toContain('<pasted>:3:28: error: os.persistent_state_paths[0]: Invalid path.');
    expect(bad).toContain(`<pasted>:5:17: error: os.labels["bad key!"]: invalid label name 'bad key!'`);
    await s.keys(KEYS.ctrlU);
    await s.type('#cloud-config\rscheme_version: 1\ros:\r  labels:\r    rack: r42\r');
    await s.keys(CTRL_D);
    await s.page(TITLES.configUrl);
    // Leaving the URL empty keeps the pasted config.
    await fill(s, '');
    await s.page(TITLES.summary);
    await s.waitForText('Continue?');
    expect(await s.scrolledText()).toContain('remote config: <pasted> (merged under the answers)');
    await s.keys(KEYS.down, KEYS.up, KEYS.enter);
    await s.page('Dry run complete');
    await s.keys(KEYS.enter);
    expect(await s.exit()).toBe(0);
    const cfg = parse(readFileSync(configFile, 'utf8'));
    expect(cfg.os.labels).toEqual({ rack: 'r42' });
    expect(cfg.os.hostname).toBe('node-1');
    expect(cfg.install.configUrl).toBeUndefined();
  }, 90_000);
});
