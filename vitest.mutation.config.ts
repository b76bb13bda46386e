import { defineConfig } from 'vitest/config';

// Stryker's test run (`make mutation`): the unit tests only (no root), one worker per mutant run.
// The config scopes (config, config-spellings) run the tests of config, of the registry setting's rendering and of
// redaction; not the robustness properties (they assert "never crashes", not a decision, and are the
// slowest) nor the CLI's tests (they spawn the built dist/, which no mutant reaches), nor the
// renderer's error tests (8 s a run; they check templates, and meet these modules only on the way). The semantic property (a config keeps its meaning) stays in.
const CONFIG_TESTS = ['test/unit/config/**/*.test.ts', 'test/unit/render/registries.test.ts', 'test/unit/lib.redact.test.ts'];
const CONFIG_EXCLUDED = ['test/unit/config/property.test.ts', 'test/unit/config/any-input.property.test.ts', 'test/unit/config/validate-cli.test.ts'];
const configScope = process.env.HV_MUTATION_SCOPE === 'config' || process.env.HV_MUTATION_SCOPE === 'config-spellings';
// The agent scope runs the agent's unit tests, without the ones that spawn the built dist/ (no mutant reaches it).
const AGENT_TESTS = ['test/unit/agent/**/*.test.ts', 'test/unit/agent-rke2/**/*.test.ts', 'test/unit/agent-preload/**/*.test.ts'];
const agentScope = process.env.HV_MUTATION_SCOPE === 'agent';

export default defineConfig({
  test: {
    include: configScope ? CONFIG_TESTS : agentScope ? AGENT_TESTS : ['test/unit/**/*.test.ts'],
    // Preflight reads the sysfs-like fixture trees, which the mutation sandbox leaves out.
    exclude: ['test/unit/preflight/**', '**/node_modules/**', ...(configScope ? CONFIG_EXCLUDED : [])],
    testTimeout: 60_000,
  },
});
