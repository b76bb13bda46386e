#!/usr/bin/env node
// Reads the TAP the systemd test OS's boot report wrote to the second serial port
// (iso-build/systemd-os/files/hvtest-report) with tap-parser, prints each check, and exits 0
// only when the report is complete (its plan seen, every planned check there) and every check
// passed. Usage: node first-boot-tap.mjs TAP-FILE [--summary FILE.json]
import { readFileSync, writeFileSync } from 'node:fs';
import { Parser } from 'tap-parser';

const [file, ...rest] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: node first-boot-tap.mjs TAP-FILE [--summary FILE.json]\n');
  process.exit(2);
}
const summaryFile = rest[0] === '--summary' ? rest[1] : undefined;
let text;
try {
  // OVMF also writes its console to the second serial port before the OS takes it: the report
  // starts at its own (last) version line.
  text = readFileSync(file, 'utf8').replace(/\r/g, '');
  const start = text.lastIndexOf('TAP version 14\n');
  if (start >= 0) text = text.slice(start);
} catch (err) {
  process.stdout.write(`no TAP report: cannot read ${file} (${err.code ?? err.message}): the guest never reached its boot report\n`);
  process.exit(1);
}

const checks = [];
const parser = new Parser();
parser.on('assert', (a) => checks.push({ id: a.id, ok: a.ok, name: a.name, diag: a.diag ?? undefined, notes: [] }));
// A comment right after a check is what that check saw; `# hvtest timing k=v ...` is the boot's
// timings (seconds since the kernel started), `# hvtest guards ...` each guard's, `# hvtest cpu ...`
// where the guest's CPU went.
const timing = {};
let cpu;
let guards;
parser.on('comment', (c) => {
  const note = c.replace(/^#\s?/, '').trimEnd();
  if (note.startsWith('hvtest guards ')) {
    guards = note.slice('hvtest guards '.length);
    return;
  }
  if (note.startsWith('hvtest cpu ')) {
    cpu = note.slice('hvtest cpu '.length);
    return;
  }
  if (note.startsWith('hvtest timing ')) {
    for (const kv of note.slice('hvtest timing '.length).split(/\s+/)) {
      const [k, v] = kv.split('=');
      if (k && v) timing[k] = Number(v);
    }
    return;
  }
  if (checks.length && !note.startsWith('hvtest report') && !note.startsWith('test count(')) checks[checks.length - 1].notes.push(note);
});
const done = new Promise((resolve) => parser.on('complete', resolve));
parser.end(text);
const result = await done;

for (const c of checks) {
  process.stdout.write(`${c.ok ? 'ok' : 'NOT OK'} ${c.id} - ${c.name}\n`);
  for (const n of c.notes) process.stdout.write(`      ${n}\n`);
  if (!c.ok && c.diag) {
    for (const [k, v] of Object.entries(c.diag)) process.stdout.write(`      ${k}: ${String(v).trimEnd().replace(/\n/g, '\n        ')}\n`);
  }
}
if (guards) process.stdout.write(`guards, seconds since the kernel started (first start-last finish): ${guards}\n`);
if (cpu) process.stdout.write(`guest CPU seconds: ${cpu}\n`);
const failed = checks.filter((c) => !c.ok);
let verdict;
if (checks.length === 0) verdict = 'the report has no checks: the boot report did not run (see the console log)';
else if (!result.plan || result.plan.end === undefined || result.plan.end < 1) verdict = `the report stopped after check ${checks.length} with no plan line: the guest died or the reporter was killed`;
else if (result.count !== result.plan.end) verdict = `the plan says ${result.plan.end} checks but ${result.count} ran`;
else if (failed.length) verdict = `${failed.length} of ${checks.length} checks failed: ${failed.map((c) => `"${c.name}"`).join(', ')}`;
if (summaryFile) writeFileSync(summaryFile, JSON.stringify({ ok: !verdict, verdict: verdict ?? 'all passed', checks, timing, guards, cpu }, null, 1) + '\n');
if (verdict) {
  process.stdout.write(`FAIL: ${verdict}\n`);
  process.exit(1);
}
process.stdout.write(`all ${checks.length} checks passed\n`);
