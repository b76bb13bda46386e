/**
 * Boot assessment inside `hvagent run`: the controller (run.ts) with the node's real effects.
 * Under --root (tests) COS_STATE is a plain directory and the reboot is only recorded in
 * <root>/run/hvagent/reboot-requested: nothing reboots the machine the tests run on.
 */
import { appendFile, readFile } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/exec.js';
import type { Logger } from '../../lib/logger.js';
import { sleep } from '../../lib/wait.js';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import { ASSESSMENT_RECORD_PATH, COS_STATE_MOUNT, UPGRADE_RECORD_PATH } from '../../node/boot-assessment.js';
import { readStatus, statusFile } from '../status.js';
import type { AgentSettings } from '../settings.js';
import type { HarvesterConfig } from '../../config/types.js';
import { cosState } from './cos-state.js';
import { cosRecovery, COS_RECOVERY_MOUNT } from './cos-recovery.js';
import { runAssessment, type AssessmentDeps } from './run.js';
import { gateSettings } from './settings.js';
import { tellCluster } from './cluster.js';
import { tellHvpxe } from './tell-hvpxe.js';
import { NODE_REPORT_PATH } from '../../node/paths.js';

export const ASSESSMENT_METRICS_PATH = '/var/lib/node_exporter/textfile_collector/hvagent_assessment.prom';
export const REBOOT_REQUEST_PATH = '/run/hvagent/reboot-requested';

export function assessmentDeps(rootDir: string, settings: AgentSettings, log: Logger, signal: AbortSignal, boot: { cmdline: string; bootId: string }, config?: HarvesterConfig): AssessmentDeps {
  const { cmdline, bootId } = boot;
  const root = (p: string): string => (rootDir === '/' ? p : path.join(rootDir, p));
  const real = rootDir === '/';
  return {
    cos: cosState(root(COS_STATE_MOUNT), real),
    recovery: cosRecovery(root(COS_RECOVERY_MOUNT), real),
    recordFile: root(ASSESSMENT_RECORD_PATH),
    upgradeFile: root(UPGRADE_RECORD_PATH),
    metricsFile: root(ASSESSMENT_METRICS_PATH),
    cmdline,
    bootId,
    settings: gateSettings(settings.common),
    readGuards: async () => (await readStatus(statusFile(rootDir))).guards,
    reboot: async () => {
      if (!real) return writeFileAtomic(root(REBOOT_REQUEST_PATH), `${new Date().toISOString()}\n`);
      await run('systemctl', ['reboot'], { timeoutMs: 60_000 });
    },
    announce: async (level, lines) => {
      for (const l of lines) log[level](l);
      // The node's console (the serial line on a server's BMC): where an operator looks first.
      await appendFile(root('/dev/console'), lines.map((l) => `hvagent: ${l}\n`).join('')).catch(() => undefined);
    },
    tellCluster: (record) => tellCluster(root, record, log, config),
    tellHvpxe: (event) => tellHvpxe(root(NODE_REPORT_PATH), event, { log, now: Date.now, sleep, signal }),
    log,
    now: () => Date.now(),
    sleep,
    signal,
  };
}

/** Starts the controller for this boot; never throws (a failure is logged: the guards go on). */
export async function startAssessment(rootDir: string, settings: AgentSettings, log: Logger, signal: AbortSignal, config?: HarvesterConfig): Promise<void> {
  try {
    const root = (p: string): string => (rootDir === '/' ? p : path.join(rootDir, p));
    const cmdline = await readFile(root('/proc/cmdline'), 'utf8').catch(() => '');
    const bootId = (await readFile(root('/proc/sys/kernel/random/boot_id'), 'utf8').catch(() => '')).trim();
    const outcome = await runAssessment(assessmentDeps(rootDir, settings, log, signal, { cmdline, bootId }, config));
    if (outcome) log.info('boot assessment done', { outcome });
  } catch (err) {
    log.error('boot assessment failed', { error: (err as Error).message });
  }
}
