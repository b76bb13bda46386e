/**
 * What a TFTP name means (the Secure Boot chain, grub.ts): grub's bootstrap (the same for every
 * machine), a machine's grub script (grub/auto?mac=…&uuid=…, its installer with a boot credential
 * or its disk, routes-boot.ts), or a file under --root.
 */
import { GRUB_AUTO, GRUB_BOOTSTRAP, renderGrubBootstrap, renderGrubNoMatchScript } from './grub.js';
import { matchMachine } from './profiles.js';
import { checkRequestPath, openInsideRoot } from './safe-path.js';
import { machineScript, matchQuery, noMatch } from './routes-boot.js';
import type { ServeContext } from './serve-context.js';
import type { ServedState } from './state.js';
import type { TftpSource } from './tftp.js';

async function grubAuto(ctx: ServeContext, state: ServedState, query: URLSearchParams, client: string): Promise<string> {
  const q = matchQuery(query);
  const match = matchMachine(state.catalog, q);
  if (!match) {
    noMatch(ctx, q, client, 'grub');
    return renderGrubNoMatchScript(q);
  }
  const platform = query.get('platform') === 'pc' ? 'pcbios' : 'efi';
  return machineScript(ctx, state, match.machine, { kind: 'grub', platform, arch: query.get('arch') ?? undefined }, client, match.by);
}

export function tftpResolver(ctx: ServeContext, current: () => ServedState | undefined): (filename: string, client: string) => Promise<TftpSource | undefined> {
  return async (filename, client) => {
    const state = current();
    if (!state) return undefined;
    const name = filename.replace(/^\/+/, '');
    if (name === GRUB_BOOTSTRAP) return { data: Buffer.from(renderGrubBootstrap(ctx.tftpDevice())) };
    if (name === GRUB_AUTO || name.startsWith(`${GRUB_AUTO}?`)) return { data: Buffer.from(await grubAuto(ctx, state, new URLSearchParams(name.slice(GRUB_AUTO.length + 1)), client)) };
    const check = checkRequestPath(name);
    if (!check.ok) return undefined;
    const rel = check.segments.join('/');
    const declared = state.artifactsByPath.get(rel);
    const file = (await openInsideRoot(state.rootReal, check.segments)) ?? (declared?.origin && ctx.origin ? await ctx.origin.open(rel, declared.sha256) : undefined);
    if (!file) return undefined;
    ctx.book.fetched(client, check.segments.join('/'), { status: 200, bytes: file.stat.size });
    return { fh: file.fh, size: file.stat.size };
  };
}
