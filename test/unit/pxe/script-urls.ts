/** The URLs an hvpxe script hands its machine (config, events, attestation) and its boot credential; unit and integration tests read scripts with it. */
export function scriptUrls(script: string): { config?: string; events?: string; attest?: string; credential?: string } {
  const arg = (k: string): string | undefined => new RegExp(`${k.replace(/\./g, '\\.')}=([^\\s']+)`).exec(script)?.[1];
  const config = arg('harvester.install.config_url');
  return { config, events: arg('hvinstall.events_url'), attest: arg('hvinstall.attest_url'), credential: config ? /credential=([A-Za-z0-9_-]{43})/.exec(config)?.[1] : undefined };
}
