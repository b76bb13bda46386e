import { describe, expect, it } from 'vitest';
import { DAY_MS, planCertificates, recordCovers, type CertificateFact, type CertificateFacts, type RotationRecord } from '../../../agent/certs/plan.js';
import { certificateEvent } from '../../../agent/certs/event.js';

const NOW = Date.parse('2027-06-01T12:00:00Z');
const TLS = '/var/lib/rancher/rke2/server/tls';

function cert(name: string, days: number, over: Partial<CertificateFact> = {}): CertificateFact {
  return { path: `${TLS}/${name}`, scope: 'server', ca: false, notAfterMs: NOW + days * DAY_MS, ...over };
}

function facts(certs: CertificateFact[], over: Partial<CertificateFacts> = {}): CertificateFacts {
  return { certs, unreadable: [], nowMs: NOW, warnDays: 30, bootstrapper: 'hvagent', rke2ServerRunning: false, beforeStart: true, ...over };
}

const expiredApi = cert('serving-kube-apiserver.crt', -3);
const expiredSupervisor = cert('serving-kube-supervisor.crt', -2.5);
const ca = cert('server-ca.crt', 3000, { ca: true });

describe('planCertificates: days left and levels', () => {
  it('no certificates yet (a first boot before RKE2 started): nothing to do, says RKE2 makes them', () => {
    const p = planCertificates(facts([]));
    expect(p).toMatchObject({ level: 'none', rows: [], rotate: undefined, failure: undefined, event: undefined });
    expect(p.summary).toBe('no RKE2 certificates yet (RKE2 makes them at its first start)');
  });

  it('all valid: the soonest named with whole days left and its date; no Event', () => {
    const p = planCertificates(facts([ca, cert('client-admin.crt', 200.9), cert('serving-kube-apiserver.crt', 364)]));
    expect(p.level).toBe('ok');
    expect(p.rows.map((r) => [r.path.split('/').pop(), r.daysLeft, r.level])).toEqual([
      ['client-admin.crt', 200, 'ok'],
      ['serving-kube-apiserver.crt', 364, 'ok'],
      ['server-ca.crt', 3000, 'ok'],
    ]);
    expect(p.summary).toBe('3 RKE2 certificates; soonest: client-admin.crt expires in 200 days (2027-12-19)');
    expect(p.event).toBeUndefined();
  });

  it('under warnDays: expiring, with a Warning Event naming the certificate; exactly warnDays left is not yet', () => {
    const p = planCertificates(facts([cert('client-kubelet.crt', 12.2, { path: '/var/lib/rancher/rke2/agent/client-kubelet.crt', scope: 'agent' }), cert('serving-kube-apiserver.crt', 30)]));
    expect(p.rows.map((r) => r.level)).toEqual(['expiring', 'ok']);
    expect(p.level).toBe('expiring');
    expect(p.summary).toBe('expiring: 1 of 2 RKE2 certificates; soonest: client-kubelet.crt expires in 12 days (2027-06-13)');
    expect(p.event).toEqual({ reason: 'RKE2CertificateExpiring', message: p.summary });
    expect(p.rotate).toBeUndefined();
  });

  it('warnDays comes from the facts (the setting): 400 makes a 364-day certificate expiring', () => {
    expect(planCertificates(facts([cert('a.crt', 364)], { warnDays: 400 })).level).toBe('expiring');
    expect(planCertificates(facts([cert('a.crt', 364)], { warnDays: 0 })).level).toBe('ok');
  });

  it('a certificate whose notAfter is now is expired (not 0 days left)', () => {
    expect(planCertificates(facts([cert('a.crt', 0)], { bootstrapper: 'rancherd' })).rows[0]).toMatchObject({ level: 'expired', daysLeft: 0 });
  });

  it('unreadable files are counted in the summary and named in the notes, the others still judged', () => {
    const p = planCertificates(facts([cert('a.crt', 100)], { unreadable: [{ path: `${TLS}/broken.crt`, problem: 'not a PEM certificate' }] }));
    expect(p.summary).toBe('1 RKE2 certificates; soonest: a.crt expires in 100 days (2027-09-09); 1 unreadable (broken.crt)');
    expect(p.notes).toEqual([`${TLS}/broken.crt: not a PEM certificate`]);
  });
});

describe('planCertificates: the rotate before RKE2 starts', () => {
  it('hvagent mode, before RKE2 starts, rke2-server not running: rotate exactly the expired server leaf certificates', () => {
    const p = planCertificates(facts([ca, expiredApi, expiredSupervisor, cert('client-admin.crt', 20)]));
    expect(p.rotate).toEqual([
      { path: expiredApi.path, notAfter: '2027-05-29T12:00:00.000Z' },
      { path: expiredSupervisor.path, notAfter: '2027-05-30T00:00:00.000Z' },
    ]);
    expect(p.failure).toBeUndefined();
    expect(p.level).toBe('expired');
    expect(p.summary).toBe('EXPIRED: 2 of 4 RKE2 certificates; soonest: serving-kube-apiserver.crt expired on 2027-05-29');
    expect(p.event?.reason).toBe('RKE2CertificateExpired');
  });

  it('under rancherd: reports, never rotates, never holds RKE2', () => {
    const p = planCertificates(facts([expiredApi], { bootstrapper: 'rancherd' }));
    expect(p.rotate).toBeUndefined();
    expect(p.failure).toBeUndefined();
    expect(p.notes).toEqual(['rancherd owns RKE2 here: hvagent reports and does not rotate; on the node: systemctl stop rke2-server; rke2 certificate rotate; systemctl start rke2-server']);
  });

  it('rke2-server already running (the agent restarted): no rotate, no stop, the manual procedure named', () => {
    const p = planCertificates(facts([expiredApi], { rke2ServerRunning: true }));
    expect(p.rotate).toBeUndefined();
    expect(p.failure).toBeUndefined();
    expect(p.notes[0]).toMatch(/^rke2-server is running: hvagent rotates only before it starts RKE2/);
  });

  it('the daily watch only reports, even with RKE2 stopped', () => {
    const p = planCertificates(facts([expiredApi], { beforeStart: false }));
    expect(p.rotate).toBeUndefined();
    expect(p.failure).toBeUndefined();
    expect(p.notes[0]).toMatch(/^the server certificates expired while RKE2 ran/);
  });

  it('expired agent certificates and CAs are reported with what renews them, never rotated', () => {
    const kubelet = cert('client-kubelet.crt', -1, { path: '/var/lib/rancher/rke2/agent/client-kubelet.crt', scope: 'agent' });
    const p = planCertificates(facts([kubelet, cert('server-ca.crt', -1, { ca: true })]));
    expect(p.rotate).toBeUndefined();
    expect(p.failure).toBeUndefined();
    expect(p.notes).toEqual([
      'rke2-agent renews its own certificates from the server at its start: systemctl restart rke2-agent',
      'a CA certificate expires: rke2 certificate rotate does not renew CAs (rke2 certificate rotate-ca, docs.rke2.io/security/certificates)',
    ]);
  });

  const ranFor = (outcome: RotationRecord['outcome'], expired: RotationRecord['expired']): RotationRecord => ({ version: 1, at: '2027-06-01T11:00:00.000Z', outcome, detail: outcome === 'failed' ? 'rke2 exited 1: boom' : 'done', expired });

  it('once: a record for the same expired certificates stops a second rotate, and RKE2 is held with the reason', () => {
    const expired = [{ path: expiredApi.path, notAfter: '2027-05-29T12:00:00.000Z' }];
    const ok = planCertificates(facts([expiredApi], { record: ranFor('rotated', expired) }));
    expect(ok.rotate).toBeUndefined();
    expect(ok.failure).toBe('hvagent ran rke2 certificate rotate for these certificates at 2027-06-01T11:00:00.000Z and they are still expired; it does not run it twice: systemctl stop rke2-server; rke2 certificate rotate; systemctl start rke2-server, then hvagent once --guard certificates');
    const failed = planCertificates(facts([expiredApi], { record: ranFor('failed', expired) }));
    expect(failed.rotate).toBeUndefined();
    expect(failed.failure).toContain('and it failed: rke2 exited 1: boom');
  });

  it('a record for other certificates (a year later, new ones expired) does not stop the rotate', () => {
    const lastYear = [{ path: expiredApi.path, notAfter: '2026-05-29T12:00:00.000Z' }];
    expect(planCertificates(facts([expiredApi], { record: ranFor('rotated', lastYear) })).rotate).toHaveLength(1);
    // One more certificate expired than the record covers: rotate again.
    const one = [{ path: expiredApi.path, notAfter: '2027-05-29T12:00:00.000Z' }];
    expect(planCertificates(facts([expiredApi, expiredSupervisor], { record: ranFor('rotated', one) })).rotate).toHaveLength(2);
  });

  it('recordCovers: every expired certificate, by path and notAfter', () => {
    const r = ranFor('rotated', [{ path: 'a', notAfter: 'x' }, { path: 'b', notAfter: 'y' }]);
    expect(recordCovers(r, [{ path: 'a', notAfter: 'x' }])).toBe(true);
    expect(recordCovers(r, [{ path: 'a', notAfter: 'z' }])).toBe(false);
    expect(recordCovers(undefined, [{ path: 'a', notAfter: 'x' }])).toBe(false);
  });
});

describe('certificateEvent', () => {
  it('a Warning Event on the Node, from hvagent, its message kept to 1 KiB', () => {
    const e = certificateEvent('node-1', { reason: 'RKE2CertificateExpiring', message: 'x'.repeat(2000) }, '2027-06-01T12:00:00.000Z');
    expect(e).toMatchObject({ kind: 'Event', type: 'Warning', reason: 'RKE2CertificateExpiring', involvedObject: { kind: 'Node', name: 'node-1' }, source: { component: 'hvagent', host: 'node-1' }, metadata: { namespace: 'default' } });
    expect((e.message as string).length).toBe(1024);
    expect(e.message as string).toMatch(/…$/);
  });
});
