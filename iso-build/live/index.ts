export { buildLiveInstaller, productionPackages, LIVE_APP_DIR, LIVE_OS_IMAGE, type LiveBuild, type LiveBuildOptions } from './build-live.js';
export { LIVE_INIT } from './init-script.js';
export { LIVE_MODULES, LIVE_TOOLS } from './tools.js';
