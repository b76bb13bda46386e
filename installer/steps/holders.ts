/**
 * Which holders of the target (dm-*, md*) are busy: mounted, swap, or themselves held (an LV under
 * a crypt device, say). Busy holders refuse the install; idle ones — an old LVM volume group the live
 * system auto-activated — are deactivated by the clear step, as Harvester's blkdeactivate does.
 */
import { Host } from '../../lib/host.js';

export async function busyHolders(holders: string[], host: Host = new Host('/')): Promise<Array<{ holder: string; why: string }>> {
  if (!holders.length) return [];
  const text = async (p: string): Promise<string> => (await host.readText(p))?.trim() ?? '';
  const mountinfo = await text('/proc/self/mountinfo');
  const swaps = await text('/proc/swaps');
  const busy: Array<{ holder: string; why: string }> = [];
  for (const h of holders) {
    const devno = await text(`/sys/class/block/${h}/dev`);
    const dmName = await text(`/sys/class/block/${h}/dm/name`);
    const names = [`/dev/${h}`, ...(dmName ? [`/dev/mapper/${dmName}`] : [])];
    const mount = mountinfo.split('\n').find((l) => {
      const f = l.split(' ');
      return f[2] === devno || names.includes(f[f.indexOf('-') + 2] ?? '');
    });
    if (mount) {
      busy.push({ holder: h, why: `mounted at ${mount.split(' ')[4]}` });
      continue;
    }
    if (swaps.split('\n').some((l) => names.includes(l.split(/\s+/)[0] ?? ''))) {
      busy.push({ holder: h, why: 'active swap' });
      continue;
    }
    const above = await host.list(`/sys/class/block/${h}/holders`);
    if (above.length) busy.push({ holder: h, why: `held by ${above.join(', ')}` });
  }
  return busy;
}
