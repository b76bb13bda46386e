/** Which kernel modules the systemd test OS keeps (iso-build/systemd-os/modules.ts). */
import { describe, expect, it } from 'vitest';
import { KEPT_MODULE_DIRS, KEPT_MODULES, moduleName, parseModulesDep, selectModules } from '../../../iso-build/systemd-os/modules.js';
import { COS_INITRD_MODULES } from '../../../iso-build/systemd-os/initrd.js';

// A slice of Debian 6.1's modules.dep, as depmod writes it.
const DEP = `kernel/drivers/nvme/host/nvme.ko: kernel/drivers/nvme/host/nvme-core.ko kernel/block/t10-pi.ko kernel/lib/crc64-rocksoft.ko
kernel/drivers/nvme/host/nvme-core.ko: kernel/block/t10-pi.ko kernel/lib/crc64-rocksoft.ko
kernel/block/t10-pi.ko: kernel/lib/crc64-rocksoft.ko
kernel/lib/crc64-rocksoft.ko:
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/drivers/net/bonding/bonding.ko: kernel/net/tls/tls.ko
kernel/net/tls/tls.ko:
kernel/net/bridge/bridge.ko: kernel/net/802/stp.ko kernel/net/llc/llc.ko
kernel/net/802/stp.ko: kernel/net/llc/llc.ko
kernel/net/llc/llc.ko:
kernel/fs/squashfs/squashfs.ko:
kernel/drivers/gpu/drm/tiny/bochs.ko: kernel/drivers/gpu/drm/drm_vram_helper.ko kernel/drivers/gpu/drm/drm.ko
kernel/drivers/gpu/drm/drm_vram_helper.ko: kernel/drivers/gpu/drm/drm.ko
kernel/drivers/gpu/drm/drm.ko:
kernel/arch/x86/kvm/kvm-amd.ko: kernel/arch/x86/kvm/kvm.ko
kernel/arch/x86/kvm/kvm.ko:
kernel/drivers/char/ipmi/ipmi_msghandler.ko:
`;

describe('the kernel modules of the test OS', () => {
  const dep = parseModulesDep(DEP);

  it("names modules as modprobe does: the file's basename, '-' read as '_'", () => {
    expect(moduleName('kernel/drivers/nvme/host/nvme-core.ko')).toBe('nvme_core');
    expect(moduleName('kernel/fs/ext4/ext4.ko.xz')).toBe('ext4');
    expect(moduleName('kernel/lib/crc64-rocksoft.ko.zst')).toBe('crc64_rocksoft');
  });

  it('reads modules.dep: each module and what it needs', () => {
    expect(dep.size).toBe(19);
    expect(dep.get('kernel/drivers/net/virtio_net.ko')).toEqual(['kernel/drivers/net/net_failover.ko', 'kernel/net/core/failover.ko']);
    expect(dep.get('kernel/lib/crc64-rocksoft.ko')).toEqual([]);
  });

  it('keeps the named drivers with every module they need, and whole the directories of modules loaded by name', () => {
    const sel = selectModules(dep, [], ['nvme', 'virtio-net'], ['kernel/fs/', 'kernel/net/']);
    expect([...sel.keep].sort()).toEqual([
      'kernel/block/t10-pi.ko',
      'kernel/drivers/net/net_failover.ko',
      'kernel/drivers/net/virtio_net.ko',
      'kernel/drivers/nvme/host/nvme-core.ko',
      'kernel/drivers/nvme/host/nvme.ko',
      'kernel/fs/squashfs/squashfs.ko',
      'kernel/lib/crc64-rocksoft.ko',
      'kernel/net/802/stp.ko',
      'kernel/net/bridge/bridge.ko',
      'kernel/net/core/failover.ko',
      'kernel/net/llc/llc.ko',
      'kernel/net/tls/tls.ko',
    ]);
    expect(sel.unknown).toEqual([]);
  });

  it("removes the devices' drivers nobody asked for: the VGA's DRM, KVM, the rest", () => {
    const sel = selectModules(dep, [], ['nvme'], ['kernel/fs/']);
    expect(sel.remove).toContain('kernel/drivers/gpu/drm/tiny/bochs.ko');
    expect(sel.remove).toContain('kernel/drivers/gpu/drm/drm.ko');
    expect(sel.remove).toContain('kernel/arch/x86/kvm/kvm-amd.ko');
    expect(sel.remove).toContain('kernel/arch/x86/kvm/kvm.ko');
    expect(sel.remove).toContain('kernel/drivers/char/ipmi/ipmi_msghandler.ko');
    expect(sel.remove).toContain('kernel/drivers/net/bonding/bonding.ko');
    // a dependency of a kept module is never removed, and every module is in exactly one list
    expect(sel.remove).not.toContain('kernel/lib/crc64-rocksoft.ko');
    expect(sel.keep.size + sel.remove.length).toBe(dep.size);
  });

  it('names a wanted module the kernel neither has nor builds in; a built-in one is fine', () => {
    const sel = selectModules(dep, ['kernel/drivers/block/virtio_blk.ko'], ['virtio_blk', 'no_such_driver', 'nvme']);
    expect(sel.unknown).toEqual(['no_such_driver']);
  });

  it("keeps what the initramfs loads and the node's NIC, bond and fw_cfg, and no GPU, sound or KVM directory", () => {
    for (const m of [...COS_INITRD_MODULES, 'virtio_net', 'bonding', 'qemu_fw_cfg']) expect(KEPT_MODULES).toContain(m);
    for (const d of ['kernel/fs/', 'kernel/net/', 'kernel/crypto/']) expect(KEPT_MODULE_DIRS).toContain(d);
    expect(KEPT_MODULE_DIRS.some((d) => /drivers|sound|arch/.test(d))).toBe(false);
  });
});
