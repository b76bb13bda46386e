/**
 * hvpxe /metrics: each value follows the event that should move it (a scrape before and after), and
 * the text passes promtool's parser and linter (Debian's prometheus package).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { PxeServer } from '../../../pxe/server.js';
import { ADMIN_TOKEN, bootIpxe, postEvent, startFixtureServer } from './helpers.js';

let dir: string;
let server: PxeServer;

beforeAll(async () => {
  ({ dir, server } = await startFixtureServer('hv-pxe-metrics-'));
});
afterAll(async () => {
  await server.close();
  await rm(dir, { recursive: true, force: true });
});

/** One scrape, as sample line -> value (written independently of the product's formatter). */
async function scrape(): Promise<{ text: string; value: (series: string) => number | undefined }> {
  const r = await fetch(`${server.adminUrl}/metrics`, { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
  const text = await r.text();
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (m) values.set(m[1]!, Number(m[2]));
  }
  return { text, value: (series) => values.get(series) };
}

function promtool(text: string): { status: number | null; out: string } {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (r.error) throw new Error(`promtool is missing (Debian package prometheus, in .ci/apt-packages.txt): ${r.error.message}`);
  return { status: r.status, out: r.stdout + r.stderr };
}

describe('hvpxe /metrics', () => {
  it('machines by state, artifact bytes, requests by route and code, reloads: each moves with its event', async () => {
    const before = await scrape();
    expect(before.value('hvpxe_machines{state="unseen"}')).toBe(4);
    expect(before.value('hvpxe_machines{state="booting"}')).toBe(0);
    expect(before.value('hvpxe_machines{state="installed"}')).toBe(0);
    expect(before.value('hvpxe_artifact_bytes_served_total')).toBe(0);
    expect(before.value('hvpxe_artifact_downloads_total{via="sendfile"}')).toBe(0);
    expect(before.value('hvpxe_artifact_downloads_total{via="streamed"}')).toBe(0);
    expect(before.value('hvpxe_reloads_total{result="ok"}')).toBe(0);
    expect(before.value('hvpxe_last_reload_refused')).toBe(0);

    expect(await (await fetch(`${server.url}/artifacts/k/vmlinuz`)).text()).toBe('k/vmlinuz');
    const ranged = await fetch(`${server.url}/artifacts/harvester.iso`, { headers: { Range: 'bytes=0-3' } });
    expect(ranged.status).toBe(206);
    expect(await ranged.text()).toBe('harv');
    expect((await fetch(`${server.url}/nothing-here`)).status).toBe(404);
    // A 404 under /artifacts/ sends a body, but no artifact: it is not counted as artifact bytes.
    expect((await fetch(`${server.url}/artifacts/k/not-there`)).status).toBe(404);
    await (await fetch(`${server.url}/ipxe/auto?mac=52:54:00:00:00:01`)).text();
    const node2 = await bootIpxe(server, 'mac=52:54:00:00:00:02');
    expect(await postEvent(node2.events!, { event: 'SUCCEEDED' })).toBe(204);
    expect(await postEvent(node2.events!.replace(/credential=.*/, 'credential=x'), { event: 'STARTED' })).toBe(404);
    expect((await fetch(node2.config!)).status).toBe(200);
    expect((await fetch(node2.config!)).status).toBe(403);

    const after = await scrape();
    expect(after.value('hvpxe_artifact_bytes_served_total')).toBe('k/vmlinuz'.length + 4);
    // Both bodies went out through the sendfile addon (built by make build); the 404 is no download.
    expect(after.value('hvpxe_artifact_downloads_total{via="sendfile"}')).toBe(2);
    expect(after.value('hvpxe_artifact_downloads_total{via="streamed"}')).toBe(0);
    expect(after.value('hvpxe_http_requests_total{route="/artifacts/",code="200"}')).toBe(1);
    expect(after.value('hvpxe_http_requests_total{route="/artifacts/",code="206"}')).toBe(1);
    expect(after.value('hvpxe_http_requests_total{route="/artifacts/",code="404"}')).toBe(1);
    expect(after.value('hvpxe_http_requests_total{route="other",code="404"}')).toBe(1);
    expect(after.value('hvpxe_http_requests_total{route="/ipxe/auto",code="200"}')).toBe(2);
    expect(after.value('hvpxe_http_requests_total{route="/events/",code="204"}')).toBe(1);
    expect(after.value('hvpxe_refused_total{what="events",reason="malformed"}')).toBe(1);
    expect(after.value('hvpxe_refused_total{what="config",reason="used"}')).toBe(1);
    expect(after.value('hvpxe_configs_served_total')).toBe(1);
    // The admin listener's own requests are not the boot server's.
    expect(after.value('hvpxe_http_requests_total{route="/metrics",code="200"}')).toBeUndefined();
    expect(after.value('hvpxe_machines{state="booting"}')).toBe(1);
    expect(after.value('hvpxe_machines{state="installed"}')).toBe(1);
    expect(after.value('hvpxe_machines{state="unseen"}')).toBe(2);

    expect(await server.reload()).toBe(true);
    const profiles = path.join(dir, 'profiles.yaml');
    const good = await readFile(profiles, 'utf8');
    await writeFile(profiles, 'profiles: [not, a, map\n');
    expect(await server.reload()).toBe(false);
    expect((await scrape()).value('hvpxe_last_reload_refused')).toBe(1);
    await writeFile(profiles, good);
    const reloaded = await scrape();
    expect(reloaded.value('hvpxe_reloads_total{result="ok"}')).toBe(1);
    expect(reloaded.value('hvpxe_reloads_total{result="refused"}')).toBe(1);
    expect(reloaded.value('hvpxe_last_reload_refused')).toBe(1);
    // The machine store: writable, nothing refused for it (the etcd outage is etcd-store.test.ts's).
    expect(reloaded.text).toMatch(/^hvpxe_store_available\{store="(file|memory)"\} 1$/m);
    expect(reloaded.text).toMatch(/^hvpxe_store_refused_total\{what="script"\} 0$/m);
    expect(reloaded.text).toMatch(/^hvpxe_store_refused_total\{what="config"\} 0$/m);
    expect(reloaded.text).toMatch(/^hvpxe_build_info\{version="[^"]+",commit="[^"]+"\} 1$/m);

    const lint = promtool(reloaded.text);
    expect(lint).toEqual({ status: 0, out: '' });
  });

  it('promtool is a real oracle: it rejects a malformed exposition', () => {
    expect(promtool('# TYPE x counter\nx{a="b} 1\n').status).not.toBe(0);
  });
});
