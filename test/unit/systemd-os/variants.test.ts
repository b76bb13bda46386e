import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { resolveSettings } from '../../../agent/settings.js';
import { gateSettings } from '../../../agent/assessment/settings.js';
import { V3_AGENT_SETTINGS, VARIANT_AGENT_SETTINGS, variantFiles } from '../../../iso-build/systemd-os/variants.js';

const OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nIMAGE_ID=hvtest-systemd\nIMAGE_VERSION=abc123\n';

describe('the upgrade variants of the systemd test OS', () => {
  it('each has its own IMAGE_VERSION and the agent settings; only v3 changes NetworkManager', () => {
    for (const v of ['v2', 'v3', 'v4', 'v5'] as const) {
      const f = variantFiles(v, OS_RELEASE);
      expect(f['usr/lib/os-release']).toContain(`IMAGE_VERSION=abc123-${v}\n`);
      expect(f['usr/lib/os-release']).toContain('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"');
      expect(f['etc/hvagent/config.yaml']).toBe(v === 'v3' ? V3_AGENT_SETTINGS : VARIANT_AGENT_SETTINGS);
      expect(Object.keys(f).some((p) => p.includes('NetworkManager'))).toBe(v === 'v3');
    }
    // Not in a persistent path: after a fallback, v2 must not inherit v3's broken network.
    expect(Object.keys(variantFiles('v3', OS_RELEASE)).find((p) => p.includes('NetworkManager'))).toMatch(/^usr\/lib\//);
  });

  it("the agent settings are valid hvagent settings with the gate's and network-online's short deadlines", () => {
    const s = resolveSettings(parse(VARIANT_AGENT_SETTINGS), 'variant');
    expect(gateSettings(s.common)).toMatchObject({ deadlineMs: 8 * 60_000, pollMs: 2000 });
    expect(s.guards['network-online']).toMatchObject({ deadline: '90s' });
  });

  it("v3's settings differ only in network-online's deadline: 30 s, a few of the guard's tries, well inside the gate's", () => {
    const s = resolveSettings(parse(V3_AGENT_SETTINGS), 'v3');
    expect(gateSettings(s.common)).toMatchObject({ deadlineMs: 8 * 60_000, pollMs: 2000 });
    expect(s.guards['network-online']).toMatchObject({ deadline: '30s' });
    expect(V3_AGENT_SETTINGS.replace('deadline: 30s', 'deadline: 90s')).toBe(VARIANT_AGENT_SETTINGS);
  });
});
