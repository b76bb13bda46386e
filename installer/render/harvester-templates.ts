/**
 * Harvester's addons and Grafana dashboards as its own installer renders them. Harvester's build
 * generates rancherd-22-addons.yaml from harvester/addons (pkg/templates/rancherd-22-addons.yaml
 * with the chart versions and images of its version_info) and embeds it, with
 * rancherd-12-monitoring-dashboard.yaml, in the harvester-installer binary it puts in the OS image
 * (harvester/harvester-installer scripts/build, pkg/config/templates.go). hvinstall reads both from
 * that binary on the install media (go-embed.ts), so every addon, enabled or not, comes with the
 * versions and tuned values of the release being installed, and renders them as
 * pkg/config/cos.go genBootstrapResources does: the addons through Go's text/template over the
 * config, the dashboards as they are. Pure.
 */
import { parseDocument } from 'yaml';
import { GoTemplateError, renderGoTemplateData } from '../../config/go-template.js';
import type { HarvesterConfig } from '../../config/types.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import { readGoEmbedded } from './go-embed.js';

/** Where Harvester's OS image carries its installer (harvester/harvester-installer scripts/build). */
export const HARVESTER_INSTALLER_PATH = '/usr/bin/harvester-installer';
export const ADDONS_TEMPLATE = 'templates/rancherd-22-addons.yaml';
export const DASHBOARDS_TEMPLATE = 'templates/rancherd-12-monitoring-dashboard.yaml';

/** The build-time templates of the release being installed, and where they were read. */
export interface HarvesterTemplates {
  addons: string;
  dashboards: string;
  /** e.g. `<source>:/usr/bin/harvester-installer`. */
  source: string;
}

/** The two templates embedded in a harvester-installer binary, or undefined when it carries none. */
export function templatesInBinary(binary: Buffer, source: string): HarvesterTemplates | undefined {
  const addons = readGoEmbedded(binary, ADDONS_TEMPLATE);
  const dashboards = readGoEmbedded(binary, DASHBOARDS_TEMPLATE);
  if (!addons || !dashboards) return undefined;
  return { addons: addons.toString('utf8'), dashboards: dashboards.toString('utf8'), source };
}

/** Go's name of a config field (camelCase JSON tag → the struct field): vipHwAddr → VipHwAddr. */
function goName(key: string): string {
  return key.charAt(0).toUpperCase() + key.slice(1);
}

/**
 * The template's dot: Harvester renders with the *HarvesterConfig, whose embedded OS and Install
 * promote their fields (`.Vip`, `.Addons`), Addon values being `{Enabled, ValuesContent}`.
 */
export function templateData(config: HarvesterConfig): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  for (const part of [config as Record<string, unknown>, (config.os ?? {}) as Record<string, unknown>, (config.install ?? {}) as Record<string, unknown>]) {
    for (const [k, v] of Object.entries(part)) if (k !== 'os' && k !== 'install') data[goName(k)] = v;
  }
  const addons = config.install?.addons;
  if (addons) data.Addons = Object.fromEntries(Object.entries(addons).map(([k, a]) => [k, { Enabled: a.enabled === true, ValuesContent: a.valuesContent ?? '' }]));
  return data;
}

/** 22-addons.yaml for this config, and the chart version of each addon it carries (by Addon name). */
export function renderAddons(config: HarvesterConfig, t: HarvesterTemplates): { text: string; versions: Map<string, string> } {
  let text: string;
  try {
    text = renderGoTemplateData(ADDONS_TEMPLATE, t.addons, templateData(config));
  } catch (err) {
    if (!(err instanceof GoTemplateError)) throw err;
    throw new HvError(`${t.source}: ${err.message}`, { where: t.source, hint: 'hvinstall renders the subset of Go templates Harvester\'s addon template uses; report this template', exitCode: ExitCode.checkFailed });
  }
  const doc = parseDocument(text);
  if (doc.errors.length) throw new HvError(`${t.source}: the rendered ${ADDONS_TEMPLATE} is not YAML: ${doc.errors[0]!.message.split('\n')[0]}`, { where: t.source, exitCode: ExitCode.checkFailed });
  const resources = ((doc.toJS() as { resources?: unknown[] } | null)?.resources ?? []) as Array<{ kind?: string; metadata?: { name?: string }; spec?: { version?: unknown } }>;
  const versions = new Map<string, string>();
  for (const r of resources) if (r.kind === 'Addon' && r.metadata?.name && r.spec?.version !== undefined) versions.set(r.metadata.name, String(r.spec.version));
  return { text, versions };
}

/** The image carries rancherd but not Harvester's templates: nothing to render the addons and dashboards from. */
export function missingTemplates(where: string): HvError {
  return new HvError(`the OS image carries rancherd, but not Harvester's installer with its addon and dashboard templates (${where})`, {
    where,
    hint: `Harvester's OS image carries them in ${HARVESTER_INSTALLER_PATH} (${ADDONS_TEMPLATE}, ${DASHBOARDS_TEMPLATE}); without them the addons and the monitoring dashboards cannot be rendered as Harvester's installer renders them`,
    exitCode: ExitCode.checkFailed,
  });
}
