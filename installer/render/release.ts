/**
 * The versions a Harvester bootstrap needs, taken from the install media rather than constants:
 * Harvester's build writes harvester-release.yaml into the OS image (/etc/harvester-release.yaml)
 * and onto the ISO root (harvester/harvester-installer scripts/package-harvester-os,
 * package/harvester-os/Dockerfile). Harvester's installer bakes the same values into its binary and
 * lets the config's runtime_version, rancher_version and *_chart_version keys override them
 * (pkg/config/cos.go setConfigDefaultValues); hvinstall reads the file and applies the same overrides.
 */
import { createRequire } from 'node:module';
import { parseDocument } from 'yaml';
import type { HarvesterConfig } from '../../config/types.js';
import { ExitCode, HvError } from '../../lib/errors.js';

/** Where the media carry the metadata: in the OS image, and at the root of the ISO. */
export const IMAGE_RELEASE_PATH = '/etc/harvester-release.yaml';
export const ISO_RELEASE_PATH = '/harvester-release.yaml';

/** harvester-release.yaml (schemas/harvester-release.schema.json); every value a string. */
export interface ReleaseMetadata {
  harvester?: string;
  harvesterChart?: string;
  installer?: string;
  os?: string;
  kubernetes?: string;
  rancher?: string;
  monitoringChart?: string;
  loggingChart?: string;
  loggingChartHarvesterEventRouter?: string;
  kubevirt?: string;
  minUpgradableVersion?: string;
  [key: string]: unknown;
}

/** A parsed release file and where it was read. */
export interface MediaRelease {
  metadata: ReleaseMetadata;
  /** e.g. `<source>/etc/harvester-release.yaml` or `<iso>/harvester-release.yaml`. */
  source: string;
}

type SchemaCheck = ((v: unknown) => boolean) & { errors?: Array<{ instancePath: string; message?: string }> | null };
let schemaCheck: SchemaCheck | undefined;

function compileSchema(): SchemaCheck {
  if (schemaCheck) return schemaCheck;
  const require = createRequire(import.meta.url);
  const Ajv = require('ajv') as typeof import('ajv').default;
  // tsconfig copies schemas/*.json into dist/, so the same relative path works from source and build.
  const schema = require('../../schemas/harvester-release.schema.json') as object;
  schemaCheck = new Ajv({ allErrors: true, strict: false }).compile(schema) as SchemaCheck;
  return schemaCheck;
}

function invalid(source: string, problems: string[]): HvError {
  return new HvError(`${source} is not a usable harvester-release.yaml: ${problems.join('; ')}`, {
    where: source,
    hint: 'it is the release metadata of the install media (keys harvester, harvesterChart, kubernetes, rancher, monitoringChart, loggingChart, ...); fix or remove the file, or give the versions in the config (runtime_version, rancher_version, *_chart_version)',
    exitCode: ExitCode.checkFailed,
  });
}

/**
 * Parses harvester-release.yaml. Values are read as strings (YAML's failsafe schema): the build
 * writes them unquoted, and a commit id such as 8064e123 must not turn into a number.
 */
export function parseReleaseMetadata(text: string, source: string): MediaRelease {
  const doc = parseDocument(text, { schema: 'failsafe', uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length) throw invalid(source, doc.errors.map((e) => `line ${e.linePos?.[0]?.line ?? '?'}: ${e.message.split('\n')[0]}`));
  const raw = doc.toJS() as unknown;
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw invalid(source, ['it is not a mapping of keys to versions']);
  const check = compileSchema();
  if (!check(raw)) {
    throw invalid(
      source,
      (check.errors ?? []).map((e) => {
        const key = e.instancePath.replace(/^\//, '') || '(top level)';
        return e.message === 'must match pattern "^\\S*$"' ? `${key}: a version has no spaces` : `${key}: ${e.message ?? 'invalid'}`;
      }),
    );
  }
  return { metadata: raw as ReleaseMetadata, source };
}

/**
 * The one release the media describe. The OS image's file is what gets installed; the ISO root's
 * belongs to the ISO whose image bundle is preloaded. When both exist they must agree, or the node
 * would run versions whose images the bundle does not carry.
 */
export function mediaRelease(image: MediaRelease | undefined, iso: MediaRelease | undefined): MediaRelease | undefined {
  if (!image || !iso) return image ?? iso;
  const keys = ['harvester', 'harvesterChart', 'kubernetes', 'rancher', 'monitoringChart', 'loggingChart'] as const;
  const differ = keys.filter((k) => (image.metadata[k] ?? '') !== (iso.metadata[k] ?? ''));
  if (differ.length) {
    throw new HvError(`${image.source} and ${iso.source} describe different releases (${differ.map((k) => `${k}: ${image.metadata[k] ?? '(none)'} vs ${iso.metadata[k] ?? '(none)'}`).join(', ')})`, {
      where: image.source,
      hint: 'install the OS image of the same ISO (leave --source out in automatic mode), or use a matching ISO',
      exitCode: ExitCode.checkFailed,
    });
  }
  return image;
}

/** The versions the rancherd bootstrap is rendered with, and where each came from. */
export interface BootstrapVersions {
  kubernetes: string;
  rancher: string;
  harvesterChart: string;
  monitoringChart: string;
  loggingChart: string;
  /** kubeovn-operator(-crd) chart: Harvester bakes it in at build time; only the config can give it here. */
  kubeovnChart?: string;
  from: Record<'kubernetes' | 'rancher' | 'harvesterChart' | 'monitoringChart' | 'loggingChart', string>;
}

const REQUIRED: Array<{ key: keyof BootstrapVersions['from']; config: keyof HarvesterConfig; configKey: string }> = [
  { key: 'kubernetes', config: 'runtimeVersion', configKey: 'runtime_version' },
  { key: 'rancher', config: 'rancherVersion', configKey: 'rancher_version' },
  { key: 'harvesterChart', config: 'harvesterChartVersion', configKey: 'harvester_chart_version' },
  { key: 'monitoringChart', config: 'monitoringChartVersion', configKey: 'monitoring_chart_version' },
  { key: 'loggingChart', config: 'loggingChartVersion', configKey: 'logging_chart_version' },
];

/**
 * Resolves the bootstrap versions: the config's keys win (as in Harvester), else the media's
 * release metadata. A version neither gives is an error before any disk is touched, naming both
 * places it could be added.
 */
export function resolveBootstrapVersions(config: HarvesterConfig, release: MediaRelease | undefined): BootstrapVersions {
  const values: Partial<Record<keyof BootstrapVersions['from'], string>> = {};
  const from: Partial<BootstrapVersions['from']> = {};
  const missing: string[] = [];
  for (const r of REQUIRED) {
    const own = (config[r.config] as string | undefined)?.trim();
    const media = release?.metadata[r.key];
    if (own) {
      values[r.key] = own;
      from[r.key] = `config ${r.configKey}`;
    } else if (typeof media === 'string' && media !== '') {
      values[r.key] = media;
      from[r.key] = `${release!.source} ${r.key}`;
    } else missing.push(`${r.key} (config: ${r.configKey})`);
  }
  if (missing.length) {
    throw new HvError(`the OS image carries rancherd, but no version is known for ${missing.join(', ')}`, {
      where: release?.source ?? 'install media',
      hint: release
        ? `add the keys to ${release.source} or set them in the config`
        : `the media carry no harvester-release.yaml (looked for ${IMAGE_RELEASE_PATH} in the OS image and ${ISO_RELEASE_PATH} on the ISO): add one with keys kubernetes, rancher, harvesterChart, monitoringChart, loggingChart, or set runtime_version, rancher_version, harvester_chart_version, monitoring_chart_version and logging_chart_version in the config`,
      exitCode: ExitCode.checkFailed,
    });
  }
  // rancherd picks its runtime by the version string (rancher/rancherd pkg/config/runtime.go GetRuntime): without "rke2" it installs k3s.
  if (!values.kubernetes!.includes('rke2')) {
    throw new HvError(`kubernetes version ${values.kubernetes} is not an RKE2 version: rancherd would install k3s instead`, {
      where: from.kubernetes!,
      hint: 'use an RKE2 release such as v1.35.6+rke2r1',
      exitCode: ExitCode.checkFailed,
    });
  }
  const kubeovn = config.kubeovnChartVersion?.trim();
  return { ...(values as Omit<BootstrapVersions, 'from' | 'kubeovnChart'>), ...(kubeovn ? { kubeovnChart: kubeovn } : {}), from: from as BootstrapVersions['from'] };
}
