/**
 * The pages' own steps once every field passed: the network probed where Harvester's console probes
 * it (probes.ts), the VIP leased, the remote config fetched and validated, and the questions the
 * hardware and confirmation pages ask (answered by the install hand-off).
 */
import { randomBytes } from 'node:crypto';
import type { App } from '../../lib/tui/app.js';
import { describeError } from '../../lib/errors.js';
import { formatFinding, readConfigText } from '../../config/index.js';
import type { Finding } from '../../config/types.js';
import { parseVolumeUrl } from '../../config/config-volume.js';
import { PASTED_SOURCE } from './paste-screen.js';
import { listOf } from './answers.js';
import { refusal, validateAnswers } from './checks.js';
import { CONSOLE_VOLUME_WAIT_MS } from './config-first.js';
import type { ConsoleContext, ConsoleOptions } from './context.js';
import type { InstallHandoff } from './install-handoff.js';
import { linkUp } from './machine.js';
import type { PageScreen, Waiting } from './page-screen.js';
import type { ConsoleState, PageDef, SubmitResult } from './pages.js';
import type { ProbeResult } from './probes.js';


export class PageSteps {
  /** The last probe warning that a second Enter accepts, keyed by page and value. */
  confirmable?: string;
  private readonly app: App;
  private readonly state: ConsoleState;
  private readonly opts: ConsoleOptions;

  constructor(
    ctx: ConsoleContext,
    private readonly handoff: InstallHandoff,
  ) {
    this.app = ctx.app;
    this.state = ctx.state;
    this.opts = ctx.opts;
  }

  /** The page's own step once every field passed: probes, and the pages that are questions. */
  async submit(def: PageDef, wait: (text: string, deadlineMs: number) => Waiting): Promise<SubmitResult | 'handled'> {
    const a = this.state.answers;
    switch (def.id) {
      case 'hardware': {
        const f = (this.app.current() as PageScreen).form.field('proceed');
        if (!f) {
          await this.handoff.halt('This machine cannot take a Harvester install: nothing can override the failed checks.');
          return 'handled';
        }
        if (f.kind === 'select' && f.value === 'no') {
          await this.handoff.halt('Installation halted.');
          return 'handled';
        }
        this.opts.log.warn('hardware checks acknowledged by the operator', { checks: this.state.hardware.map((c) => c.message) });
        return { ok: true };
      }
      case 'network':
        return this.probeNetwork(wait);
      case 'vip':
        return a.vipMode === 'dhcp' && !a.vip.trim() ? this.leaseVip(wait) : { ok: true };
      case 'server-url':
        return this.probeOnce('serverUrl', a.serverUrl, wait, async () => {
          const url = /^https:\/\//.test(a.serverUrl.trim()) ? a.serverUrl.trim() : `https://${a.serverUrl.trim()}`;
          const r = await (await probes()).pingServer(url.replace(/(:\d+)?\/?$/, ':443'), 15_000);
          return r.ok ? undefined : `Failed to reach ${r.detail}. Press Enter again to use it anyway, or change the value to check again.`;
        }, 'Checking the management address', 20_000);
      case 'ntp': {
        const servers = listOf(a.ntp);
        if (servers.length === 0) {
          return this.confirmOnce('ntp', a.ntp, 'Empty NTP Server is not recommended. Press Enter again to use current configuration anyway.');
        }
        return this.probeOnce('ntp', a.ntp, wait, async () => {
          const { ntpReachable } = await probes();
          const rs = await Promise.all(servers.map((s) => ntpReachable(s)));
          const bad = rs.filter((r) => !r.ok);
          return bad.length ? `Failed to reach NTP servers: ${bad.map((r) => r.detail).join('; ')}. Press Enter again to use current configuration anyway, or change the value to revalidate.` : undefined;
        }, 'Checking the NTP servers', 6000);
      }
      case 'proxy':
        for (const k of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) {
          if (a.proxy.trim()) process.env[k] = a.proxy.trim();
          else delete process.env[k];
        }
        return { ok: true };
      case 'ssh': {
        if (!a.sshKeyUrl.trim()) {
          a.sshKeys = [];
          return { ok: true };
        }
        if (a.sshKeys.length) return { ok: true };
        const w = wait(`Fetching ${a.sshKeyUrl.trim()}`, 32_000);
        const r = await (await probes()).fetchSshKeys(a.sshKeyUrl.trim());
        if (w.cancelled) return 'handled';
        if (r.error) return { ok: false, field: 'sshKeyUrl', messages: [{ level: 'error', text: `fail to fetch SSH keys: ${r.error}` }] };
        a.sshKeys = r.keys;
        this.opts.log.info('ssh keys imported', { url: a.sshKeyUrl, count: r.keys.length });
        // The page grows a "Password auth" choice (and says how many keys came): stay on it once more.
        return { ok: false, field: 'passwordAuth', messages: [] };
      }
      case 'config-url':
        return this.fetchRemote(wait);
      case 'summary':
        return this.handoff.confirm();
      default:
        return { ok: true };
    }
  }

  private confirmOnce(field: string, value: string, text: string): SubmitResult {
    const key = `${field}=${value}`;
    if (this.confirmable === key) return { ok: true };
    this.confirmable = key;
    return { ok: false, field, messages: [{ level: 'warning', text }], confirmable: true };
  }

  private async probeOnce(field: string, value: string, wait: (t: string, d: number) => Waiting, probe: () => Promise<string | undefined>, what: string, deadlineMs: number): Promise<SubmitResult | 'handled'> {
    const key = `${field}=${value}`;
    if (this.confirmable === key) return { ok: true };
    const w = wait(what, deadlineMs);
    const problem = await probe();
    if (w.cancelled) return 'handled';
    if (!problem) return { ok: true };
    this.confirmable = key;
    this.opts.log.warn('probe failed', { field, problem });
    return { ok: false, field, messages: [{ level: 'warning', text: problem }], confirmable: true };
  }

  private async probeNetwork(wait: (t: string, d: number) => Waiting): Promise<SubmitResult | 'handled'> {
    const a = this.state.answers;
    if (a.method !== 'dhcp' || !this.opts.probeLinks) return { ok: true };
    const nic = a.nics.find((n) => this.state.facts.nics.some((x) => x.name === n && linkUp(x))) ?? a.nics[0]!;
    const secs = Math.round(this.opts.dhcp.timeoutMs / 1000);
    const w = wait(`Requesting an address by DHCP on ${nic}`, this.opts.dhcp.timeoutMs + 2000);
    const { dhcpLease, hasDefaultRoute } = await probes();
    const r = await dhcpLease(nic, { ...this.opts.dhcp, runDir: this.opts.runDir });
    if (w.cancelled) return 'handled';
    this.opts.log.info('dhcp test', { nic, ok: r.ok, detail: r.detail });
    if (r.ok) {
      if (!(await hasDefaultRoute())) return { ok: false, field: 'method', messages: [{ level: 'error', text: 'No default route found. Please check the router setting on the DHCP server.' }] };
      return { ok: true };
    }
    const text = `Requesting IP through DHCP failed: ${r.detail}`;
    w.end();
    const choice = await this.app.ask('No DHCP answer', `${text}. Waited ${secs} s (--dhcp-timeout). Try again, give a static address, or stay on this page.`, ['Try again', 'Use static', 'Stay here'], 0);
    if (choice === 0) return this.probeNetwork(wait);
    if (choice === 1) {
      a.method = 'static';
      return { ok: false, field: 'address', messages: [{ level: 'info', text: 'DHCP did not answer: give the address by hand.' }] };
    }
    return { ok: false, field: 'method', messages: [{ level: 'error', text }] };
  }

  private async leaseVip(wait: (t: string, d: number) => Waiting): Promise<SubmitResult | 'handled'> {
    const a = this.state.answers;
    if (!this.opts.probeLinks) return { ok: true };
    const nic = a.nics[0];
    if (!nic) return { ok: false, field: 'vipMode', messages: [{ level: 'error', text: 'choose a management NIC first (Esc back to the network page)' }] };
    const mac = a.vipHwAddr.trim() || randomMac();
    a.vipHwAddr = mac;
    const w = wait(`Requesting the VIP by DHCP for ${mac} on ${nic}`, this.opts.dhcp.timeoutMs + 2000);
    const r: ProbeResult = await (await probes()).dhcpLease(nic, { ...this.opts.dhcp, runDir: this.opts.runDir, hwAddr: mac });
    if (w.cancelled) return 'handled';
    this.opts.log.info('vip dhcp', { nic, mac, ok: r.ok, detail: r.detail });
    if (r.ok && r.value) {
      a.vip = r.value;
      return { ok: false, field: 'vip', messages: [{ level: 'info', text: `VIP ${r.value} leased for ${mac}; Enter again to go on.` }] };
    }
    return { ok: false, field: 'vipMode', messages: [{ level: 'error', text: `fail to get vip: ${r.detail}. Choose Static to give the VIP by hand.` }] };
  }

  /**
   * The remote config: fetched once (or read off the volume that `volume:LABEL` names), then
   * validated merged under the answers (as it will be installed); the findings about the remote's
   * own content are shown, with their line numbers, and nothing is merged until there are none.
   */
  private async fetchRemote(wait: (t: string, d: number) => Waiting): Promise<SubmitResult | 'handled'> {
    const url = this.state.answers.configUrl.trim();
    if (!url) {
      // A pasted config stays merged while no URL replaces it.
      if (this.state.remote?.url !== PASTED_SOURCE) this.state.remote = undefined;
      return { ok: true };
    }
    if (this.state.remote?.url === url) return { ok: true };
    const volume = parseVolumeUrl(url);
    const w = volume.ok ? wait(`Looking for the volume labelled ${volume.label} (${CONSOLE_VOLUME_WAIT_MS / 1000} s)`, CONSOLE_VOLUME_WAIT_MS + 5000) : wait(`Fetching ${url} (3 attempts, 10 s each)`, 40_000);
    let read;
    try {
      read = volume.ok
        ? await (await import('../remote/config-volume.js')).readVolumeConfigText(volume.label, { timeoutMs: CONSOLE_VOLUME_WAIT_MS, among: this.opts.configVolumes?.among, log: this.opts.log })
        : await readConfigText(url, { attempts: 3, timeoutMs: 10_000, retryDelayMs: 1000 });
    } catch (err) {
      if (w.cancelled) return 'handled';
      this.opts.log.warn('remote config unreachable', { url, error: describeError(err) });
      return { ok: false, field: 'configUrl', messages: [{ level: 'error', text: describeError(err).replace(/^error: /, '').replace(/\n\s*/g, ' ') + ' Nothing was merged.' }] };
    }
    if (w.cancelled) return 'handled';
    if (read.error || read.text === undefined) return this.refused(url, read.error ? [read.error] : []);
    return this.merge({ url, text: read.text });
  }

  /**
   * A config's text (fetched, read off a volume, pasted) validated merged under the answers; merged
   * when it has no errors of its own, else its findings, with their line numbers.
   */
  async merge(candidate: { url: string; text: string }): Promise<SubmitResult> {
    const merged = await validateAnswers({ ...this.state, remote: candidate });
    const own = merged.errors.filter((f) => f.source === candidate.url);
    if (own.length) return this.refused(candidate.url, own);
    this.state.remote = candidate;
    this.opts.log.info('remote config merged', { source: candidate.url, warnings: merged.warnings.filter((f) => f.source === candidate.url).map(formatFinding) });
    return { ok: true };
  }

  private refused(url: string, findings: Finding[]): SubmitResult {
    this.opts.log.warn('remote config invalid', { source: url, errors: findings.map(formatFinding) });
    return refusal(url, findings, 'configUrl', 'nothing was merged');
  }
}

function randomMac(): string {
  const b = randomBytes(6);
  b[0] = (b[0]! & 0xfe) | 0x02; // locally administered, unicast
  return [...b].map((x) => x.toString(16).padStart(2, '0')).join(':');
}

/** What the first screen does not need is loaded when it is: the cold start counts (bench/console.bench.mjs). */
const probes = (): Promise<typeof import('./probes.js')> => import('./probes.js');
