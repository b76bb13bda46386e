/**
 * What `sgdisk --verify` says about a GPT read back from the disk. It exits 0 whatever it finds;
 * "Identified N problems!" names damage in the tables' contents, and a header whose signature or
 * CRC is bad it rebuilds in memory from the other copy, prints "No problems found" on stdout and
 * reports the damaged copy only on stderr (`Backup header: ERROR`).
 */

/** Why the table is not whole, or undefined when both headers and both entry arrays read back good. */
export function gptVerifyProblem(exitCode: number, stdout: string, stderr: string): string | undefined {
  // sgdisk rings the terminal bell (BEL) before its warnings.
  const lines = `${stdout}\n${stderr}`.split('\n').map((l) => l.replace(/[\x00-\x1f]/g, '').trim());
  const damaged = lines.filter((l) => /^(Main|Backup) (header|partition table): ERROR$/.test(l));
  if (exitCode === 0 && /No problems found/.test(stdout) && damaged.length === 0) return undefined;
  const said = lines.filter((l) => l && !damaged.includes(l) && !/^\*+$/.test(l) && !/^(Caution|Warning!? |Identified|(Main|Backup) (header|partition table): OK)/.test(l));
  return `sgdisk --verify: ${[...damaged, ...said].slice(0, 6).join(' ') || `status ${exitCode}`}`;
}
