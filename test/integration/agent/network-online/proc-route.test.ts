/**
 * network-online reads the default routes from /proc/net/route instead of running `ip -4 route
 * show default` at every look: in a network namespace of its own, with the routes a node has (via
 * a gateway on the bridge, a device route, one that is down), the parse must list what iproute2
 * lists, checked against `ip -j` itself.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseProcNetRoute, type IpRoute } from '../../../../agent/network/assess.js';
import { run } from '../../../../lib/exec.js';

let ns: string;
const ip = (...args: string[]) => run('ip', ['-n', ns, ...args], { timeoutMs: 10_000 });

beforeEach(async () => {
  ns = `hvroute-${randomBytes(3).toString('hex')}`;
  await run('ip', ['netns', 'add', ns], { timeoutMs: 10_000 });
  await ip('link', 'add', 'mgmt-br', 'type', 'bridge');
  await ip('link', 'add', 'dummy1', 'type', 'bridge'); // no dummy module here: a second bridge
  for (const l of ['lo', 'mgmt-br', 'dummy1']) await ip('link', 'set', l, 'up');
  await ip('addr', 'add', '10.0.2.15/24', 'dev', 'mgmt-br');
  await ip('addr', 'add', '192.168.77.5/24', 'dev', 'dummy1');
});

afterEach(async () => {
  await run('ip', ['netns', 'del', ns], { timeoutMs: 10_000 }).catch(() => undefined);
});

async function both(): Promise<{ parsed: IpRoute[]; iproute2: IpRoute[] }> {
  const table = await run('ip', ['netns', 'exec', ns, 'cat', '/proc/net/route'], { timeoutMs: 10_000 });
  const listed = JSON.parse((await ip('-j', '-4', 'route', 'show', 'default')).stdout || '[]') as Array<IpRoute & Record<string, unknown>>;
  return { parsed: parseProcNetRoute(table.stdout), iproute2: listed.map((r) => ({ dst: r.dst, ...(r.gateway ? { gateway: r.gateway } : {}), dev: r.dev })) };
}

describe('default routes from /proc/net/route', () => {
  it('lists none where iproute2 lists none', async () => {
    const { parsed, iproute2 } = await both();
    expect(iproute2).toEqual([]);
    expect(parsed).toEqual([]);
  });

  it('lists a default route via a gateway, and a second one on another device with a higher metric, as iproute2 does', async () => {
    await ip('route', 'add', 'default', 'via', '10.0.2.2', 'dev', 'mgmt-br', 'metric', '425');
    await ip('route', 'add', 'default', 'dev', 'dummy1', 'metric', '900');
    const { parsed, iproute2 } = await both();
    expect(parsed).toEqual([
      { dst: 'default', gateway: '10.0.2.2', dev: 'mgmt-br' },
      { dst: 'default', dev: 'dummy1' },
    ]);
    expect(parsed).toEqual(iproute2);
  });

  it('leaves out routes that are not default ones', async () => {
    await ip('route', 'add', '172.16.0.0/12', 'via', '10.0.2.2');
    const { parsed, iproute2 } = await both();
    expect(parsed).toEqual([]);
    expect(iproute2).toEqual([]);
  });
});
