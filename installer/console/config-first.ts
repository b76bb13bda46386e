/**
 * A config up front (hvinstall, beyond Harvester's console): the config media found at start
 * (installer/remote/config-volume.ts, the discovery automatic installs use), a volume named by its
 * label, or a pasted config. Each is checked merged under the kernel command line's keys, as it
 * will be installed; its own findings are shown with their line numbers and nothing is taken until
 * it has none. Once taken, its values are the answers the pages start from (prefill.ts): the
 * operator reviews them, and what it leaves open is asked. The page is laid out in pages.ts.
 */
import { describeError } from '../../lib/errors.js';
import { formatFinding, validateLayers } from '../../config/index.js';
import { parseVolumeUrl } from '../../config/config-volume.js';
import type { Finding, HarvesterConfig } from '../../config/types.js';
import { CONSOLE_SOURCE, refusal, type RemoteConfig } from './checks.js';
import type { ConsoleContext } from './context.js';
import type { Waiting } from './page-screen.js';
import type { SubmitResult } from './pages.js';
import { prefill } from './prefill.js';

/** One blkid probe at start: the medium is attached before boot, and the first page must not wait long. */
export const CONFIG_DISCOVERY_MS = 5_000;
/** How long a volume the operator named is waited for (it is attached by then, or it is not). */
export const CONSOLE_VOLUME_WAIT_MS = 5_000;

export type Taken = { ok: true; base: HarvesterConfig; warnings: Finding[] } | { ok: false; findings: Finding[] };

/**
 * A config under the command line's keys (`cmdline` wins, as Harvester merges them): refused with
 * its own errors (what it lacks, a disk or a NIC, is the pages' business: they ask it), else the
 * merged config.
 */
export async function foldConfig(cmdline: HarvesterConfig, candidate: RemoteConfig): Promise<Taken> {
  const [{ normaliseYamlText }, { mergeConfigs }] = await Promise.all([import('../../config/load.js'), import('../../config/merge.js')]);
  const n = normaliseYamlText(candidate.text, candidate.url);
  if (!n.source) return { ok: false, findings: n.errors };
  const v = await validateLayers([
    { raw: cmdline, source: CONSOLE_SOURCE },
    { text: candidate.text, source: candidate.url },
  ]);
  // Its own errors are about what it wrote (a finding about a key it lacks points at the parent it
  // did write); its normalisation's findings (an unknown key, a wrong type) are its own too.
  const written = new Set([...n.source.origins.values()].filter((o) => o.source === candidate.url).map((o) => o.path));
  const normalising = new Set(n.source.errors.map((f) => `${f.path}\n${f.message}`));
  const own = v.errors.filter((f) => f.source === candidate.url && (written.has(f.path) || normalising.has(`${f.path}\n${f.message}`)));
  if (own.length) return { ok: false, findings: own };
  const merged = mergeConfigs({ config: cmdline, origins: new Map() }, { config: n.source.config, origins: new Map() }).config;
  return { ok: true, base: merged, warnings: v.warnings.filter((f) => f.source === candidate.url) };
}

/** The first page's step: the choice taken (a medium, a label, a paste), or none. */
export class ConfigFirstStep {
  constructor(
    private readonly ctx: ConsoleContext,
    private readonly openPaste: () => void,
  ) {}

  /** The config media attached now (at start, and F5 on the page); a failed look is said on the page. */
  async discover(): Promise<void> {
    const c = this.ctx.state.configFirst;
    const where = this.ctx.opts.configVolumes;
    if (!where) return;
    try {
      const { listConfigVolumes } = await import('../remote/config-volume.js');
      c.volumes = await listConfigVolumes({ among: where.among, timeoutMs: CONFIG_DISCOVERY_MS });
      c.problem = undefined;
    } catch (err) {
      c.volumes = [];
      c.problem = describeError(err).replace(/^error: /, '').replace(/\n\s*/g, ' ');
    }
    this.ctx.opts.log.info('config media', { found: c.volumes.map((v) => `${v.label}:${v.device}`), problem: c.problem });
    if (c.volumes.length) c.shown = true;
    if (!c.taken || c.choice !== 'keep') c.choice = c.volumes.length ? `dev:${c.volumes[0]!.device}` : 'paste';
  }

  async submit(wait: (text: string, deadlineMs: number) => Waiting): Promise<SubmitResult | 'handled'> {
    const c = this.ctx.state.configFirst;
    if (c.choice === 'keep') return { ok: true };
    if (c.choice === 'none') {
      if (c.taken) this.drop();
      return { ok: true };
    }
    if (c.choice === 'paste') {
      this.openPaste();
      return 'handled';
    }
    const volumes = await import('../remote/config-volume.js');
    const among = this.ctx.opts.configVolumes?.among;
    let read: () => Promise<{ name: string; text?: string; error?: Finding }>;
    let what: string;
    if (c.choice === 'label') {
      const v = parseVolumeUrl(`volume:${c.label.trim()}`);
      if (!v.ok) return { ok: false, field: 'configLabel', messages: [{ level: 'error', text: v.message.replace(/^volume:/, 'the label ') }] };
      what = `Looking for the volume labelled ${v.label}`;
      read = () => volumes.readVolumeConfigText(v.label, { timeoutMs: CONSOLE_VOLUME_WAIT_MS, among, log: this.ctx.opts.log });
    } else {
      const volume = c.volumes.find((x) => `dev:${x.device}` === c.choice)!;
      what = `Reading the config on ${volume.device}`;
      read = () => volumes.readConfigTextOn(volume, this.ctx.opts.log);
    }
    const field = c.choice === 'label' ? 'configLabel' : 'configSource';
    const w = wait(what, CONSOLE_VOLUME_WAIT_MS + 30_000);
    try {
      const r = await read();
      if (w.cancelled) return 'handled';
      if (r.error || r.text === undefined) return this.refused({ url: r.name, text: '' }, r.error ? [r.error] : [], field);
      return await this.take({ url: r.name, text: r.text }, field);
    } catch (err) {
      if (w.cancelled) return 'handled';
      this.ctx.opts.log.warn('config volume unreadable', { choice: c.choice, error: describeError(err) });
      return { ok: false, field, messages: [{ level: 'error', text: describeError(err).replace(/^error: /, '').replace(/\n\s*/g, ' ') + ' Nothing was taken.' }] };
    }
  }

  /** Checks the config and, when it has no errors of its own, makes its values the answers. */
  async take(candidate: RemoteConfig, field = 'configSource'): Promise<SubmitResult> {
    const r = await foldConfig(this.ctx.opts.base, candidate);
    if (!r.ok) return this.refused(candidate, r.findings, field);
    prefill(this.ctx.state, r.base, this.ctx.opts);
    const c = this.ctx.state.configFirst;
    c.taken = candidate.url;
    c.choice = 'keep';
    this.ctx.opts.log.info('config taken', { source: candidate.url, warnings: r.warnings.map(formatFinding) });
    this.ctx.app.flash(`the config from ${candidate.url} filled the pages: review each one`);
    return { ok: true };
  }

  /** Back to the command line's keys alone. */
  private drop(): void {
    const c = this.ctx.state.configFirst;
    this.ctx.opts.log.info('config dropped', { source: c.taken });
    prefill(this.ctx.state, this.ctx.opts.base, this.ctx.opts);
    c.taken = undefined;
  }

  private refused(candidate: RemoteConfig, findings: Finding[], field: string): SubmitResult {
    this.ctx.opts.log.warn('config refused', { source: candidate.url, errors: findings.map(formatFinding) });
    return refusal(candidate.url, findings, field, 'nothing was taken');
  }
}
