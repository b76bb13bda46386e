/**
 * The pieces other parts of hvinstall provide to the pipeline (OS deploy, bootloader, renderer,
 * webhooks, machine facts), loaded when first needed. Each is loaded by URL so the pipeline builds
 * and runs its other steps even in a tree where a piece is missing; a missing piece fails only the
 * step that needs it, with a message saying so.
 */
import type { BootloaderRequest, DeployRequest, DeployResult } from '../disk/contracts.js';
import type { HarvesterConfig } from '../config/types.js';
import type { MachineFacts } from '../preflight/types.js';
import type { Host } from '../../lib/host.js';

export type DeployImages = (req: DeployRequest) => Promise<DeployResult>;
export type InstallBootloader = (req: BootloaderRequest) => Promise<void>;
export type SendWebhooks = (event: 'STARTED' | 'SUCCEEDED' | 'FAILED', config: HarvesterConfig, opts?: Record<string, unknown>) => Promise<void>;
export type GatherMachineFacts = (host: Host) => Promise<MachineFacts>;

/** The renderer's surface as the pipeline uses it (installer/render/index.ts). */
export interface RenderedFileLike {
  path: string;
  mode: number;
  owner?: string;
  content: string | Uint8Array;
  secret?: boolean;
}
export type RenderNodeFiles = (config: HarvesterConfig, facts: Record<string, unknown>, seeds?: Record<string, unknown>) => unknown;

async function importOptional<T>(relative: string): Promise<T | undefined> {
  const url = new URL(relative, import.meta.url);
  try {
    return (await import(url.href)) as T;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' && String((err as Error).message).includes(url.pathname)) return undefined;
    throw err;
  }
}

export async function loadDeployImages(): Promise<DeployImages | undefined> {
  return (await importOptional<{ deployImages?: DeployImages }>('../deploy/index.js'))?.deployImages;
}

export async function loadInstallBootloader(): Promise<InstallBootloader | undefined> {
  return (await importOptional<{ installBootloader?: InstallBootloader }>('../bootloader/index.js'))?.installBootloader;
}

export async function loadRenderer(): Promise<{ renderNodeFiles?: RenderNodeFiles; placeNodePath?: unknown } | undefined> {
  return importOptional('../render/index.js');
}

export async function loadSendWebhooks(): Promise<SendWebhooks | undefined> {
  return (await importOptional<{ sendWebhooks?: SendWebhooks }>('../remote/webhooks.js'))?.sendWebhooks;
}

export async function loadGatherMachineFacts(): Promise<GatherMachineFacts | undefined> {
  return (await importOptional<{ gatherMachineFacts?: GatherMachineFacts }>('../preflight/index.js'))?.gatherMachineFacts;
}
