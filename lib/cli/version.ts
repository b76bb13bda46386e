/** `--version` / `version [--json]`: the package version and the commit stamped at build time. */
import { BUILD_INFO } from '../build-info.generated.js';

export interface VersionInfo {
  program: string;
  version: string;
  commit: string;
  node: string;
}

export function versionInfo(program: string): VersionInfo {
  return { program, version: BUILD_INFO.version, commit: BUILD_INFO.commit, node: process.version };
}

export function formatVersion(v: VersionInfo, json: boolean): string {
  return json ? JSON.stringify(v) : `${v.program} ${v.version} (commit ${v.commit}, node ${v.node})`;
}
