import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { LIVE_INIT } from '../../../iso-build/live/init-script.js';

/** The live init's shown_url, run by a POSIX sh as the live system's busybox runs it. */
function shownUrl(url: string): string {
  const fn = /^shown_url\(\) \{\n[\s\S]*?\n\}\n/m.exec(LIVE_INIT)?.[0];
  expect(fn, 'shown_url in the live init').toBeDefined();
  return execFileSync('sh', ['-c', `${fn}\nshown_url "$1"`, 'sh', url], { encoding: 'utf8' }).trimEnd();
}

describe("the live console's URLs", () => {
  it("never prints hvpxe's config credential nor anything in a query", () => {
    const url = 'http://10.79.0.3:8080/config/hv-e2e-pxe.yaml?credential=hgXtnQ5NfwpAXHBAPb9y_OtJUTGZjG0Xoqr2hSJKaiI';
    expect(shownUrl(url)).toBe('http://10.79.0.3:8080/config/hv-e2e-pxe.yaml?<query hidden>');
    expect(shownUrl('https://h/c.yaml?a=1&token=s3cret')).not.toContain('s3cret');
  });

  it('hides userinfo in the authority, and only there', () => {
    expect(shownUrl('https://admin:pa55@config.example/c.yaml')).toBe('https://<userinfo hidden>@config.example/c.yaml');
    expect(shownUrl('http://host/images/v1@2/rootfs.squashfs')).toBe('http://host/images/v1@2/rootfs.squashfs');
  });

  it('prints a plain URL as it is', () => {
    expect(shownUrl('http://10.79.0.3:8080/artifacts/harvester-v0.1.0-rootfs-amd64.squashfs')).toBe('http://10.79.0.3:8080/artifacts/harvester-v0.1.0-rootfs-amd64.squashfs');
  });
});
