/**
 * The answers the pages start from: the base config's keys (the kernel command line's, and a config
 * taken on the first page), the disks its rules choose, and disk and NIC names as the pages list
 * them, so a select shows what the config chose instead of falling back to its first entry.
 */
import type { Logger } from '../../lib/logger.js';
import type { HarvesterConfig } from '../../config/types.js';
import { selectDisks } from '../preflight/index.js';
import type { MachineFacts } from '../preflight/types.js';
import { answersFrom, type Answers } from './answers.js';
import { defaultDisk, diskName, findListedDisk } from './machine.js';
import type { ConsoleState } from './pages.js';

/** A disk as the disk page lists it (its by-id name), when this machine has it. */
function listedName(facts: MachineFacts, name: string | undefined): string | undefined {
  const d = findListedDisk(facts, name);
  return d ? diskName(d) : name;
}

/** The answers a config makes, with names as this machine's pages list them. Pure. */
export function prefilledAnswers(base: HarvesterConfig, facts: MachineFacts): Answers {
  const a = answersFrom(base);
  a.device = listedName(facts, a.device);
  a.dataDisk = listedName(facts, a.dataDisk);
  a.wipeDisks = a.wipeDisks.map((d) => listedName(facts, d)!);
  // A NIC the config names by its hardware address is ticked by its name.
  a.nics = a.nics.map((n) => facts.nics.find((x) => x.mac !== undefined && x.mac.toLowerCase() === n.toLowerCase())?.name ?? n);
  return a;
}

/**
 * Sets the state's base and answers from a config (the command line's keys, with a config taken up
 * front under them): the installed system's console defaults to this one's when the config names
 * none, then the answers, the disk rules' choices (the operator may pick other disks), and the first
 * usable disk when nothing chose one.
 */
export function prefill(state: ConsoleState, base: HarvesterConfig, opts: { defaultTty?: string; log: Logger }): void {
  state.base = base.install?.tty || !opts.defaultTty ? base : { ...base, install: { ...base.install, tty: opts.defaultTty } };
  state.answers = prefilledAnswers(state.base, state.facts);
  state.skipchecks = state.base.install?.skipchecks === true;
  state.diskChoices = undefined;
  const { choices } = selectDisks(state.base, state.facts, (n) => findListedDisk(state.facts, n));
  if (choices.length) {
    state.diskChoices = choices;
    for (const c of choices) if (c.recorded) state.answers[c.role] = c.recorded;
    opts.log.info('disk rules', { choices: choices.map((c) => ({ rule: c.key, chose: c.path ?? null, problem: c.problem })) });
  }
  state.answers.device ??= defaultDisk(state.facts);
}
