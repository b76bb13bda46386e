/**
 * A machine's event history is bounded, and an install posts many progress events (steps, messages,
 * bytes) between the two that matter: its start and its outcome. Trimmed oldest-first, a long
 * install pushed its STARTED webhook out before it finished; progress goes first instead.
 */

/** Harvester's webhooks, hvinstall's `install` events and the installed node's reports: the machine's life, not its progress. */
const LIFECYCLE = new Set(['STARTED', 'SUCCEEDED', 'FAILED', 'install', 'FALLBACK', 'UPGRADED']);

export function isLifecycleEvent(event: string): boolean {
  return LIFECYCLE.has(event);
}

/**
 * The history with at most `max` events, in order: the oldest progress events are dropped first;
 * only when lifecycle events alone exceed `max` are the oldest of those dropped. Pure.
 */
export function trimEvents<T extends { event: string }>(events: readonly T[], max: number): T[] {
  let excess = events.length - max;
  if (excess <= 0) return [...events];
  const kept = events.filter((e) => isLifecycleEvent(e.event) || excess-- <= 0);
  return kept.slice(Math.max(0, kept.length - max));
}
