/** Renders a preflight report as a table for people. Pure. */
import type { PreflightReport } from './report.js';
import { formatDiskChoice } from './disk-select.js';

const MARK = { pass: 'pass', warn: 'WARN', fail: 'FAIL' } as const;

function table(rows: string[][]): string[] {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd(),
  );
}

export function formatPreflightReport(report: PreflightReport): string {
  const rows = [['CHECK', 'RESULT', 'MEASURED', 'THRESHOLD', 'WHAT TO DO']];
  for (const c of report.checks) {
    rows.push([c.subject ? `${c.id} ${c.subject}` : c.id, MARK[c.result], c.measured, c.threshold || '-', c.whatToDo || '-']);
  }
  const lines = [`Preflight (profile: ${report.profile}${report.sysroot !== '/' ? `, sysroot: ${report.sysroot}` : ''})`, '', ...table(rows)];
  const findings = report.checks.filter((c) => c.result !== 'pass');
  if (findings.length) {
    lines.push('', 'Findings:');
    for (const c of findings) lines.push(`  ${MARK[c.result]} ${c.id}${c.subject ? ` ${c.subject}` : ''}: ${c.message}`);
  }
  if (report.diskChoices?.length) lines.push('', 'Disk rules (* taken):', ...report.diskChoices.flatMap((c) => formatDiskChoice(c).map((l) => `  ${l}`)));
  if (report.suggestedDevice) lines.push('', `Suggested install device: ${report.suggestedDevice}`);
  const { pass, warn, fail } = report.summary;
  lines.push('', `${pass} passed, ${warn} warnings, ${fail} failed`);
  return lines.join('\n') + '\n';
}
