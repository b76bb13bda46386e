import { describe, expect, it } from 'vitest';
import { automaticOsSource } from '../../../installer/remote/automatic.js';
import { openAutomaticMedia } from '../../../installer/remote/automatic-media.js';
import { Logger, MemorySink } from '../../../lib/logger.js';

const url = { kind: 'url' as const, url: 'http://pxe/hv.iso' };
const local = { kind: 'local' as const };
const none = { kind: 'none' as const };

describe('automaticOsSource', () => {
  it('takes an explicit --source over everything', () => {
    expect(automaticOsSource(url, '/src', '/fb')).toEqual({ from: 'given', path: '/src' });
    expect(automaticOsSource(local, '/src')).toEqual({ from: 'given', path: '/src' });
  });

  it('takes the ISO at an http(s) iso_url over the fallback the live installer passes', () => {
    expect(automaticOsSource(url, undefined, '/run/live/os.squashfs')).toEqual({ from: 'iso' });
    expect(automaticOsSource(url)).toEqual({ from: 'iso' });
  });

  it('takes the fallback for iso_url local or none, else the boot medium or the default', () => {
    expect(automaticOsSource(local, undefined, '/fb')).toEqual({ from: 'fallback', path: '/fb' });
    expect(automaticOsSource(none, undefined, '/fb')).toEqual({ from: 'fallback', path: '/fb' });
    expect(automaticOsSource(local)).toEqual({ from: 'iso' });
    expect(automaticOsSource(none)).toEqual({ from: 'default' });
  });
});

describe('openAutomaticMedia: the log line saying where the OS comes from', () => {
  async function logged(media: { kind: 'url'; url: string } | { kind: 'local' } | { kind: 'none' }): Promise<Record<string, unknown>> {
    const sink = new MemorySink();
    // --source given: nothing is downloaded, only the choice is logged.
    const m = await openAutomaticMedia({ media }, { given: '/srv/os.squashfs', isoToDisk: false, trust: { allowUnverified: false }, log: new Logger(sink) });
    expect(m.source).toBe('/srv/os.squashfs');
    const line = sink.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((r) => r.msg === 'automatic install: where the OS comes from');
    expect(line).toBeDefined();
    return line!;
  }

  it("names install.iso_url itself, not its kind (it once printed \"isoUrl\":\"url\")", async () => {
    expect(await logged(url)).toMatchObject({ from: 'given', path: '/srv/os.squashfs', isoUrl: 'http://pxe/hv.iso' });
    expect(await logged(local)).toMatchObject({ isoUrl: 'local' });
    expect(await logged(none)).toMatchObject({ isoUrl: '(none)' });
  });

  it('a password in iso_url never reaches the line', async () => {
    const line = await logged({ kind: 'url', url: 'http://ops:s3cret-pw@pxe/hv.iso' });
    expect(JSON.stringify(line)).not.toContain('s3cret-pw');
    expect(String(line.isoUrl)).toMatch(/^http:\/\/.*pxe\/hv\.iso$/);
  });
});
