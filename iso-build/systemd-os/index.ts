export { buildSystemdOs, imageOsRelease, IMAGE_FILES, MIRROR_PROBE, type SystemdOsImage } from './image.js';
export { buildCosInitrd, COS_INITRD_MODULES, type CosInitrd, type CosInitrdOptions } from './initrd.js';
export { systemdOsFile } from './files.js';
