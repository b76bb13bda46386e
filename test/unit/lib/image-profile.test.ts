import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Host } from '../../../lib/host.js';
import { bootstrapperFacts, chooseBootstrapper } from '../../../lib/image-profile.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function tree(files: string[]): Promise<Host> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'hv-image-profile-'));
  dirs.push(root);
  for (const f of files) {
    await mkdir(path.dirname(path.join(root, f)), { recursive: true });
    await writeFile(path.join(root, f), '');
  }
  return new Host(root);
}

describe('chooseBootstrapper', () => {
  it('rancherd bootstraps a Harvester image (binary and unit)', async () => {
    const facts = await bootstrapperFacts(await tree(['usr/bin/rancherd', 'usr/lib/systemd/system/rancherd.service']));
    expect(facts).toEqual({ binaries: ['/usr/bin/rancherd'], units: ['/usr/lib/systemd/system/rancherd.service'] });
    const c = chooseBootstrapper(facts);
    expect(c.bootstrapper).toBe('rancherd');
    expect(c.why).toContain('/usr/bin/rancherd');
  });

  it('hvagent drives RKE2 on an image without rancherd', async () => {
    const c = chooseBootstrapper(await bootstrapperFacts(await tree(['usr/bin/containerd'])));
    expect(c).toEqual({ bootstrapper: 'hvagent', why: 'the image carries no rancherd: hvagent drives RKE2 itself' });
  });

  it('a binary without its unit, or a unit without its binary, is not a bootstrapper, and says which half is missing', async () => {
    const binOnly = chooseBootstrapper(await bootstrapperFacts(await tree(['usr/local/bin/rancherd'])));
    expect(binOnly.bootstrapper).toBe('hvagent');
    expect(binOnly.why).toContain('/usr/local/bin/rancherd but no rancherd.service');
    const unitOnly = chooseBootstrapper(await bootstrapperFacts(await tree(['etc/systemd/system/rancherd.service'])));
    expect(unitOnly.bootstrapper).toBe('hvagent');
    expect(unitOnly.why).toContain('/etc/systemd/system/rancherd.service but no rancherd binary');
  });
});
