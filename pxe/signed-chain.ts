/**
 * The signed binaries the Secure Boot chain (`boot: grub-signed`) needs under hvpxe's --root, and
 * the Debian packages they come from. Firmware with Microsoft's keys runs shim (signed by
 * Microsoft's UEFI CA); shim loads grubx64.efi from the TFTP directory it came from and runs it
 * when Debian's key signed it; Debian's network grub image is grubnetx64.efi.signed (its plain
 * grubx64.efi.signed has no TFTP). `hvpxe serve` refuses to start without them: a machine would
 * otherwise stop in its firmware with a TFTP error and nothing on hvpxe's side would say why.
 */
import { open } from 'node:fs/promises';
import path from 'node:path';
import { SIGNED_BOOT_FILES } from '../iso-build/signed-boot.js';

export const SIGNED_CHAIN_FILES = [
  { served: 'shimx64.efi', pkg: SIGNED_BOOT_FILES.shim.pkg, from: SIGNED_BOOT_FILES.shim.file, what: "shim, signed by Microsoft's UEFI CA" },
  { served: 'grubx64.efi', pkg: SIGNED_BOOT_FILES.grub.pkg, from: '/usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed', what: "Debian's signed grub network image (shim loads grubx64.efi from its own directory)" },
] as const;

/** The boot file a Secure Boot client is handed (DHCP option 67 / dnsmasq's boot file). */
export const SHIM_BOOT_FILE = SIGNED_CHAIN_FILES[0].served;

/** Problems with the signed binaries under the root (empty when all are there and are EFI executables). */
export async function checkSignedChain(rootReal: string): Promise<string[]> {
  const problems: string[] = [];
  for (const f of SIGNED_CHAIN_FILES) {
    const file = path.join(rootReal, f.served);
    const fix = `copy ${f.from} from the Debian package ${f.pkg} there as ${f.served}`;
    try {
      const fh = await open(file, 'r');
      try {
        const st = await fh.stat();
        const head = Buffer.alloc(2);
        const { bytesRead } = st.isFile() ? await fh.read(head, 0, 2, 0) : { bytesRead: 0 };
        if (!st.isFile()) problems.push(`${file} (${f.what}) is not a regular file: ${fix}`);
        else if (bytesRead < 2 || head.toString('latin1') !== 'MZ') problems.push(`${file} (${f.what}) is not an EFI executable: ${fix}`);
      } finally {
        await fh.close();
      }
    } catch (err) {
      problems.push(`${file} (${f.what}) is missing or unreadable (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): ${fix}`);
    }
  }
  return problems;
}
