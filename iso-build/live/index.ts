export { buildLiveInstaller, productionPackages, LIVE_APP_DIR, LIVE_MEDIUM_DIR, type LiveBuild, type LiveBuildOptions } from './build-live.js';
export { buildIsoImage, type IsoImageOptions } from './iso-image.js';
export { chooseVersion, publishArtifacts } from './artifacts.js';
export { LIVE_INIT } from './init-script.js';
export { INITRAMFS_INIT, LIVE_LABEL, LIVE_SQUASHFS_PATH } from './initramfs-init.js';
export { INITRAMFS_MODULES, LIVE_MODULES, LIVE_TOOLS } from './tools.js';
