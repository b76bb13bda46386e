import { describe, expect, it } from 'vitest';
import { ExitCode, HvError } from '../../../lib/errors.js';
import { Redactor } from '../../../lib/redact.js';
import { installInputs, type Prepared } from '../../../installer/steps/prepare.js';

describe('installInputs: what an install runs with, taken from its preparation', () => {
  const base = {
    config: { schemeVersion: 1 },
    warnings: ['w'],
    facts: { disks: [] },
    plan: { device: '/dev/vda' },
    redactor: new Redactor().add('secret-value'),
  } as unknown as Prepared;
  const source = { kind: 'squashfs', path: '/srv/rootfs.squashfs' } as unknown as NonNullable<Prepared['source']>;
  const agent = { kind: 'none', why: 'not asked for' } as unknown as NonNullable<Prepared['agent']>;

  it('hands on the plan, config, source, agent, redactor and the node facts themselves (not copies), nothing else', () => {
    const nodeFacts = { ...base.facts, nics: [] } as unknown as NonNullable<Prepared['nodeFacts']>;
    const got = installInputs({ ...base, source, agent, nodeFacts });
    expect(Object.keys(got).sort()).toEqual(['agent', 'config', 'nodeFacts', 'plan', 'redactor', 'source']);
    expect(got.nodeFacts).toBe(nodeFacts);
    expect(got.plan).toBe(base.plan);
    expect(got.config).toBe(base.config);
    expect(got.source).toBe(source);
    expect(got.agent).toBe(agent);
    expect(got.redactor).toBe(base.redactor);
  });

  it('a preparation without a source or without an agent decision is refused, naming which and the disk', () => {
    const refusal = (p: Prepared): HvError => {
      try {
        installInputs(p);
      } catch (err) {
        return err as HvError;
      }
      throw new Error('installInputs accepted it');
    };
    const noSource = refusal({ ...base, agent });
    expect(noSource).toBeInstanceOf(HvError);
    expect(noSource.message).toBe('the install of /dev/vda was prepared without an OS source');
    expect(noSource.exitCode).toBe(ExitCode.installFailed);
    expect(refusal({ ...base, source }).message).toBe('the install of /dev/vda was prepared without an agent decision');
  });
});
