import { describe, expect, it } from 'vitest';
import { convertArgs, imageFormatOf, imageSizeBytes, oneDiskProblems, parseImageSize, scratchPaths } from '../../../installer/image/decide.js';

const GiB = 1024 ** 3;

describe('hvinstall image decisions', () => {
  it('the format follows the extension; anything else is a usage error', () => {
    expect(imageFormatOf('/x/node.qcow2')).toBe('qcow2');
    expect(imageFormatOf('node.RAW')).toBe('raw');
    expect(() => imageFormatOf('node.vmdk')).toThrow(/NAME.qcow2 or NAME.raw/);
  });

  it('sizes: bytes and binary units', () => {
    expect(parseImageSize('260G')).toBe(260 * GiB);
    expect(parseImageSize('260GiB')).toBe(260 * GiB);
    expect(parseImageSize('250Gi')).toBe(250 * GiB);
    expect(parseImageSize('1T')).toBe(1024 * GiB);
    expect(parseImageSize('1048576')).toBe(1048576);
    expect(() => parseImageSize('2.5G')).toThrow(/whole number/);
    expect(() => parseImageSize('-1G')).toThrow(/whole number/);
  });

  it("the default and the floor are Harvester's install-disk minimum: 250 GiB, 180 GiB for a witness", () => {
    expect(imageSizeBytes({} as never, undefined)).toBe(250 * GiB);
    expect(imageSizeBytes({ install: { role: 'witness' } } as never, undefined)).toBe(180 * GiB);
    expect(imageSizeBytes({} as never, '250G')).toBe(250 * GiB);
    expect(() => imageSizeBytes({} as never, '249G')).toThrow("--size 249G is below Harvester's minimum install disk of 250 GiB");
    expect(() => imageSizeBytes({ install: { role: 'witness' } } as never, '179G')).toThrow('minimum install disk of 180 GiB for the witness role');
    expect(imageSizeBytes({ install: { role: 'witness' } } as never, '180G')).toBe(180 * GiB);
  });

  it('refuses the keys that name other disks', () => {
    expect(oneDiskProblems({ install: { dataDisk: '/dev/sdb', wipeDisksList: ['/dev/sdc'] } } as never)).toEqual([
      'install.data_disk (/dev/sdb): an image is a single disk; leave data_disk out',
      'install.wipe_disks_list: an image is a single disk; there is nothing else to wipe',
    ]);
    expect(oneDiskProblems({ install: { wipeDisksList: [] } } as never)).toEqual([]);
    expect(oneDiskProblems({ install: { dataDiskSelector: { transport: 'sata' } } } as never)).toEqual(['install.data_disk_selector: an image is a single disk; leave data_disk_selector out']);
  });

  it('scratch files live hidden beside --out; qemu-img writes raw sparse', () => {
    expect(scratchPaths('/o/node.qcow2')).toEqual({ work: '/o/.node.qcow2.hvinstall-work.raw', partial: '/o/.node.qcow2.hvinstall-partial' });
    expect(convertArgs('w', 'p', 'qcow2')).toEqual(['convert', '-f', 'raw', '-O', 'qcow2', 'w', 'p']);
    expect(convertArgs('w', 'p', 'raw')).toEqual(['convert', '-f', 'raw', '-O', 'raw', '-S', '4k', 'w', 'p']);
  });
});
