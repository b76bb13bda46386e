export { buildTestOsTree, type TestOsTree, type TestOsTreeOptions } from './test-os-tree.js';
export { BUSYBOX } from './host-tools.js';
export { addBootChain, type BootChainOptions } from './boot-chain.js';
