import { describe, expect, it } from 'vitest';
import { automaticOsSource } from '../../../installer/remote/automatic.js';

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
