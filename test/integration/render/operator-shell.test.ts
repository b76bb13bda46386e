/**
 * The operators' profile.d file in real login shells (bash -l and dash -l, through this machine's
 * /etc/profile), in a private mount namespace where /etc/profile.d holds only the rendered file and
 * RKE2's /var/lib/rancher/rke2/bin and /opt/rke2/bin hold stand-ins of kubectl, crictl, ctr and
 * rke2 that print what they were started with. The file comes out of the rendered 90_custom.yaml,
 * as yip writes it at boot. This machine's own kubectl and ctr (/usr/bin) are hidden in the namespace
 * (/dev/null bound over them: not executable, so PATH lookups pass them by), as a node has none.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../../lib/exec.js';
import { renderNode, OPERATOR_PROFILE_PATH } from '../../../installer/render/index.js';
import { CASES } from '../../unit/render/cases.js';

let dir: string;
let profile: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'hv-operator-shell-'));
  const c = CASES.find((x) => x.name === 'create-static')!;
  const yip = renderNode(c.config, c.facts, c.seeds).files.find((f) => f.path === '/oem/90_custom.yaml')!;
  const doc = parse(String(yip.content)) as { stages: { initramfs: Array<{ files: Array<{ path: string; content: string; permissions: number }> }> } };
  const file = doc.stages.initramfs[0]!.files.find((f) => f.path === OPERATOR_PROFILE_PATH)!;
  expect(file.permissions).toBe(0o644);
  profile = path.join(dir, 'profile.sh');
  await writeFile(profile, file.content);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Runs `command` in a login shell of `shell` inside a private mount namespace set up as a node. */
async function loginShell(shell: string, command: string, env: Record<string, string> = {}): Promise<string> {
  const stub = (name: string) => `printf '%s\\n' '#!/bin/sh' 'echo "${name} KUBECONFIG=$KUBECONFIG CRI=$CONTAINER_RUNTIME_ENDPOINT CTR=$CONTAINERD_ADDRESS NS=$CONTAINERD_NAMESPACE"' > $d/${name}; chmod 755 $d/${name}`;
  const setup = [
    'set -e',
    'mount -t tmpfs none /etc/profile.d',
    `cp '${profile}' ${OPERATOR_PROFILE_PATH}`,
    'mount -t tmpfs none /var/lib',
    'mount -t tmpfs none /opt',
    'for t in kubectl crictl ctr rke2; do for p in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin; do if [ -e $p/$t ]; then mount --bind /dev/null $p/$t; fi; done; done',
    'd=/var/lib/rancher/rke2/bin; mkdir -p $d',
    ...['kubectl', 'crictl', 'ctr'].map(stub),
    'd=/opt/rke2/bin; mkdir -p $d',
    stub('rke2'),
    `exec env -i HOME=/root PATH=/usr/bin:/bin ${Object.entries(env).map(([k, v]) => `${k}='${v}'`).join(' ')} ${shell} -l -c '${command}'`,
  ].join('\n');
  const r = await run('unshare', ['--mount', '--propagation', 'slave', 'sh', '-c', setup], { timeoutMs: 30_000 });
  return r.stdout;
}

describe('a login shell on the node', () => {
  it.each(['bash', 'dash'])('%s finds kubectl, crictl, ctr and rke2 with the environment they need', async (shell) => {
    const out = await loginShell(shell, 'kubectl; crictl; ctr; rke2; command -v kubectl');
    const env = 'KUBECONFIG=/etc/rancher/rke2/rke2.yaml CRI=unix:///run/k3s/containerd/containerd.sock CTR=/run/k3s/containerd/containerd.sock NS=k8s.io';
    expect(out.split('\n')).toEqual([`kubectl ${env}`, `crictl ${env}`, `ctr ${env}`, `rke2 ${env}`, '/var/lib/rancher/rke2/bin/kubectl', '']);
  });

  it('keeps what the operator set, and does not add the directories twice', async () => {
    const out = await loginShell('bash', '. /etc/profile.d/90-hvinstall-rke2.sh; kubectl; echo "$PATH"', { KUBECONFIG: '/root/.kube/config' });
    const [line, pathLine] = out.split('\n');
    expect(line).toMatch(/^kubectl KUBECONFIG=\/root\/\.kube\/config /);
    expect(pathLine!.split(':').filter((p) => p === '/var/lib/rancher/rke2/bin')).toHaveLength(1);
    expect(pathLine!.split(':').filter((p) => p === '/opt/rke2/bin')).toHaveLength(1);
  });
});
