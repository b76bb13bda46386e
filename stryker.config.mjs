// Mutation testing (`make mutation`, docs/testing.md). One scope per run, chosen by HV_MUTATION_SCOPE,
// so each folder can be run (and re-run) on its own on a shared 2-core machine.
const SCOPES = {
  // The decision modules of config where a wrong product destroys a disk without consent,
  // leaks a secret or lets a setting pass that then fails to render (docs/testing.md, "the config
  // scope"): the whole folder is ~3,600 mutants, about 8 hours on two shared cores.
  config: [
    'config/cmdline.ts',
    'config/containerd-registry.ts',
    'config/server-url.ts',
    'config/secrets.ts',
    'lib/own-keys.ts',
    'config/rules.ts:31-31', // the placeholder pattern
    'config/rules.ts:49-86', // commonCheck; automatic only from the command line
    'config/rules.ts:378-410', // SSH-key and placeholder checks
  ],
  // The next slice of config: how a key's spelling finds its field (Harvester's FuzzyNames),
  // the removed keys' lookup, and how a scalar becomes a string, a boolean or a number (normalise.ts:
  // a wrong answer there silently changes a setting's meaning). Same tests as `config`.
  'config-spellings': [
    'config/spellings.ts',
    'config/legacy.ts:94-98', // removedKey (the table above it is data)
    'config/normalise.ts:34-35', // the words Harvester reads as true and as false
    'config/normalise.ts:370-426', // toStringValue, toBool, toInt, flattenDotted
  ],
  disk: ['installer/disk/**/*.ts', '!installer/disk/types.ts', '!installer/disk/contracts.ts'],
  // hvagent's decisions (docs/testing.md, "the agent scope"): a wrong one fights a controller of the
  // cluster, waits forever or starts a second RKE2. The effects around them (systemd, containerd,
  // the kube client) are the integration tests' business.
  agent: [
    'agent/network/assess.ts:81-202', // assessNetwork and what it reads (links, addresses, resolv.conf, leases)
    'agent/preload/plan.ts',
    'agent/preload/diagnosis.ts',
    'agent/registries/ownership.ts:39-53', // registriesOwner
    'agent/registries/ownership.ts:91-113', // explainClusterFile
    'agent/runner.ts:125-140', // waitForDependencies: which guard runs when
    'agent/runner.ts:166-215', // reconcileUntilDeadline: retry, backoff, the deadline
    'agent/time/clock.ts:68-182', // judgeClock, the offsets, chronyc and timesyncd parsers
    'agent/identity/address.ts',
    'agent/identity/nics.ts',
    'agent/rke2/role.ts',
    'agent/rke2/dropins.ts:49-64', // checkDropIns
    'agent/promote/server-dropin.ts',
    'agent/guards/promotion.ts:46-55', // judgePromotionUnderRancherd
  ],
  'redact-safe-path': ['lib/redact.ts', 'pxe/safe-path.ts'],
  // hvpxe's decision modules (docs/testing.md, "the pxe scope"): who gets a config and when (boot
  // credentials, TPM attestation), what a network boot gets (the history's holds), what is kept of
  // an event, fleet conflicts, TFTP's limits, who a machine is, which server may serve an install.
  // Their effects (the HTTP and TFTP servers, the history file) are the integration tests'.
  pxe: [
    'pxe/credentials.ts',
    'pxe/event-body.ts',
    'pxe/event-history.ts',
    'pxe/boot-decision.ts',
    'pxe/history-document.ts',
    'pxe/fleet-conflicts.ts',
    'pxe/tftp-protocol.ts',
    'pxe/tpm/*.ts',
    'pxe/admin.ts:44-70', // authorised, healthReport
    'pxe/profiles.ts:114-135', // normaliseMac, normaliseUuid, macHex, defaultMachineName
    'pxe/profiles.ts:227-320', // buildCatalog, matchMachine, machineByName, requestIdentifies
    // A fleet of servers on one store (docs/fleet.md): one install per arm, the orphaned install,
    // the compare-and-swap transaction and the keys, the origin cache's bound.
    'pxe/install-claim.ts',
    'pxe/etcd-layout.ts',
    'pxe/etcd-client.ts:90-94', // prefixEnd
    'pxe/artifact-origin.ts:40-49', // evictionsFor
  ],
};
const scope = process.env.HV_MUTATION_SCOPE ?? 'redact-safe-path';
if (!SCOPES[scope]) throw new Error(`HV_MUTATION_SCOPE=${scope}: use one of ${Object.keys(SCOPES).join(', ')}`);

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts', related: true },
  coverageAnalysis: 'perTest',
  mutate: SCOPES[scope],
  concurrency: Number(process.env.HV_MUTATION_CONCURRENCY ?? 2),
  timeoutMS: 30_000,
  tempDirName: '.stryker-tmp',
  // The sandbox is a copy of the tree: not what the unit tests never read (the sysfs-like fixture
  // trees hold symlinked directories the copy cannot follow; preflight is outside every scope).
  // The e2e outputs too: a stage's sparse 260 GiB disk image would be copied whole.
  ignorePatterns: ['/test/fixtures/sysroot', '/test/integration', '/test/e2e', '/test/unit/preflight', '/iso-build/out', '/bench', '/demo-out', '/out', '/.e2e-out', '/.e2e-cache', '/reports'],
  cleanTempDir: 'always',
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: `reports/mutation/${scope}.json` },
  clearTextReporter: { allowColor: false, logTests: false, reportScoreTable: true, reportMutants: true },
  thresholds: { high: 90, low: 75, break: null },
};
