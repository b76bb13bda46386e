/**
 * An OS tree that carries an Elemental boot chain, for tests: Debian's signed shim, MokManager and
 * grub (fetched with apt-get download into the build cache, as make iso does), grub modules from
 * this machine's grub-efi-amd64-bin, and the /etc/cos/grub.cfg and bootargs.cfg of
 * test/fixtures/image-boot-chain written from Elemental's contract.
 */
import { appendFile, copyFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fetchSignedBootChain, type SignedBootChain } from '../../../iso-build/signed-boot.js';
import { IMAGE_GRUB_MODULES } from '../../../installer/bootloader/image-chain.js';

export const REPO = path.resolve(import.meta.dirname, '../../..');
export const FIXTURE = path.join(REPO, 'test/fixtures/image-boot-chain');
const CACHE = process.env.HV_E2E_CACHE ?? '/var/cache/hvinstall/iso-build';
export const GRUB_ENTRY = 'Fixture OS 1.2';

export function signedChain(): Promise<SignedBootChain> {
  return fetchSignedBootChain(CACHE);
}

export interface ChainParts {
  shim?: boolean;
  grub?: boolean;
  mokManager?: boolean;
  grubCfg?: string | false;
  modules?: readonly string[];
}

/** Adds the boot chain (or the parts asked for) to a tree. */
export async function addImageChain(tree: string, parts: ChainParts = {}): Promise<SignedBootChain> {
  const chain = await signedChain();
  const put = async (from: string, rel: string) => {
    await mkdir(path.dirname(path.join(tree, rel)), { recursive: true });
    await copyFile(from, path.join(tree, rel));
  };
  if (parts.shim ?? true) await put(chain.shim, 'usr/lib/shim/shimx64.efi.signed');
  if (parts.mokManager ?? true) await put(chain.mokManager, 'usr/lib/shim/mmx64.efi.signed');
  if (parts.grub ?? true) await put(chain.grub, 'usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed');
  for (const m of parts.modules ?? IMAGE_GRUB_MODULES) await put(path.join('/usr/lib/grub/x86_64-efi', m), `usr/lib/grub/x86_64-efi/${m}`);
  await mkdir(path.join(tree, 'etc/cos'), { recursive: true });
  if (parts.grubCfg !== false) {
    if (typeof parts.grubCfg === 'string') await writeFile(path.join(tree, 'etc/cos/grub.cfg'), parts.grubCfg);
    else await put(path.join(FIXTURE, 'grub.cfg'), 'etc/cos/grub.cfg');
  }
  await put(path.join(FIXTURE, 'bootargs.cfg'), 'etc/cos/bootargs.cfg');
  await appendFile(path.join(tree, 'etc/os-release'), `GRUB_ENTRY_NAME="${GRUB_ENTRY}"\n`);
  return chain;
}
