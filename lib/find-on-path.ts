import { stat } from 'node:fs/promises';
import path from 'node:path';

/** The first regular file named `tool` in the directories of `pathVar` (a PATH-style list), as a shell would find it. */
export async function findOnPath(tool: string, pathVar = process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'): Promise<string | undefined> {
  for (const dir of pathVar.split(':').filter(Boolean)) {
    const p = path.join(dir, tool);
    if (await stat(p).then((s) => s.isFile()).catch(() => false)) return p;
  }
  return undefined;
}
