import { describe, expect, it } from 'vitest';
import { desiredRole, isWitness, nodeNameOf, PROMOTED_MARKER, serverUrlHost } from '../../../agent/rke2/role.js';
import { BASE_PERSISTENT_STATE_PATHS, persistentLocation } from '../../../node/layout.js';

describe('the role decisions at their edges', () => {
  it('a config without an install section runs no RKE2 and is no witness', () => {
    expect(desiredRole({}, false)).toBeUndefined();
    expect(desiredRole({}, true)).toBeUndefined();
    expect(isWitness({})).toBe(false);
    expect(isWitness({ install: {} })).toBe(false);
  });

  it('only the witness role (any case) is a witness', () => {
    expect(isWitness({ install: { role: 'witness' } })).toBe(true);
    expect(isWitness({ install: { role: 'Witness' } })).toBe(true);
    expect(isWitness({ install: { role: 'WITNESS' } })).toBe(true);
    expect(isWitness({ install: { role: 'default' } })).toBe(false);
    expect(isWitness({ install: { role: 'management' } })).toBe(false);
    expect(isWitness({ install: { role: '' } })).toBe(false);
  });

  it('the host of server_url: scheme optional, http accepted, spaces ignored, nothing for no URL', () => {
    expect(serverUrlHost(undefined)).toBeUndefined();
    expect(serverUrlHost('')).toBeUndefined();
    expect(serverUrlHost('http://10.0.0.9:443')).toBe('10.0.0.9');
    expect(serverUrlHost('https://vip.example.com')).toBe('vip.example.com');
    expect(serverUrlHost('  https://10.0.0.9:443  ')).toBe('10.0.0.9');
    // A scheme later in the string is a path, not this URL's scheme.
    expect(serverUrlHost('vip.example.com/x?next=https://other.example')).toBe('vip.example.com');
  });

  it('the node name falls back to the live hostname without a config', () => {
    expect(nodeNameOf(undefined, 'live')).toBe('live');
    expect(nodeNameOf({ os: { hostname: '' } }, 'live')).toBe('live');
  });

  it('the promotion marker survives a reboot of the A/B image (under a persistent state path)', () => {
    expect(PROMOTED_MARKER.startsWith('/')).toBe(true);
    expect(persistentLocation(PROMOTED_MARKER, BASE_PERSISTENT_STATE_PATHS)).toBe('.state/var-lib-rancher.bind/hvagent/promoted');
  });
});
