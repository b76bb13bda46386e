export { buildTestOsTree, BUSYBOX, type TestOsTree, type TestOsTreeOptions } from './test-os-tree.js';
export { addBootChain, type BootChainOptions } from './boot-chain.js';
