import { readFile } from 'node:fs/promises';

/** systemd is in charge when /run/systemd/system is a directory (sd_booted(3)). */
export async function systemdBooted(): Promise<boolean> {
  return readFile('/run/systemd/system', 'utf8').then(
    () => true,
    (e: NodeJS.ErrnoException) => e.code === 'EISDIR',
  );
}
