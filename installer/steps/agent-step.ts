/**
 * The `agent` install step: the self-contained hvagent onto COS_PERSISTENT (/usr/local on the node),
 * its units (hvagent.service, hvagent-console.service) linked into the persistent /etc/systemd and enabled (agent-deploy.ts does the work and
 * says why it is crash safe). Resumable: a killed copy continues where it stopped; a completed step
 * is kept only while the agent on disk still matches its manifest file by file (sha256) and the
 * payload of this run is the same one.
 */
import { releaseId, UNIT_NAMES } from '../../node/payload-layout.js';
import { formatBytes } from '../../config/disk-sizes.js';
import { copyProgress, type Step } from './context.js';
import { deployAgent, installedAgentProblem, removeAgent } from './agent-deploy.js';
import { describeAgent } from './agent-source.js';
import { withMounted } from './mounted.js';

export const agentStep: Step = {
  name: 'agent',
  async run(ctx) {
    const agent = ctx.agent;
    const statePaths = ctx.plan.persistentStatePaths;
    return withMounted(ctx.plan, ctx.runDir, ['COS_PERSISTENT'], async (dirs) => {
      if (agent.kind === 'none') {
        // An agent an earlier run of this install put there must not stay enabled.
        const removed = await removeAgent(dirs.COS_PERSISTENT, statePaths);
        ctx.bus.emit({ type: 'message', level: 'warn', step: 'agent', message: `${describeAgent(agent)}${removed.length ? ` (removed what an earlier run installed: ${removed.join(', ')})` : ''}` });
        return { agent: 'none', why: agent.why };
      }
      const r = await deployAgent(dirs.COS_PERSISTENT, agent.dir, agent.manifest, statePaths, {
        signal: ctx.signal,
        onProgress: copyProgress(ctx, 'agent'),
      });
      ctx.bus.emit({
        type: 'message',
        level: 'info',
        step: 'agent',
        message: `${describeAgent(agent)}: at COS_PERSISTENT/${r.release} (${formatBytes(r.copiedBytes)} written${r.replaced ? `, replaced ${r.replaced}` : ''}), enabled as ${UNIT_NAMES.join(' and ')}`,
      });
      return { agent: agent.dir, origin: agent.origin, ...r };
    });
  },
  async check(ctx, detail) {
    const agent = ctx.agent;
    const before = typeof detail?.digest === 'string' ? releaseId({ digest: detail.digest }) : 'none';
    const now = agent.kind === 'payload' ? releaseId(agent.manifest) : 'none';
    if (before !== now) return `the agent was ${before}, now ${now}`;
    if (agent.kind === 'none') return undefined;
    const problem = await withMounted(ctx.plan, ctx.runDir, ['COS_PERSISTENT'], (dirs) => installedAgentProblem(dirs.COS_PERSISTENT, agent.manifest, ctx.plan.persistentStatePaths), { readOnly: true });
    return problem;
  },
};
