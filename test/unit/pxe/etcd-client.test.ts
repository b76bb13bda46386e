/**
 * The etcd client's failover rule, against small HTTP servers standing in for members: a read goes
 * on to the next member whatever went wrong; a write goes on only when it surely never left (the
 * connection was refused). A write that was sent and got no answer, or that etcd answered with
 * "unavailable" (it may still commit, as after a leader change), is EtcdAmbiguous and is not sent
 * again elsewhere: sent twice, a compare-and-swap could be applied once and then refused, and the
 * caller would take a decision that stands for one that did not.
 */
import { afterEach, describe, expect, it } from 'vitest';
import http from 'node:http';
import net from 'node:net';
import { b64, EtcdAmbiguous, EtcdClient, EtcdError } from '../../../pxe/etcd-client.js';

interface Member {
  url: string;
  hits: string[];
  close: () => Promise<void>;
}

const open: Member[] = [];

type Answer = { status: number; body: unknown } | 'reset';

/**
 * A member that answers every request with `answer` (or destroys the socket: a member killed
 * mid-request); with `after`, it answers `answer` to the first `after.count` requests and
 * `after.then` from then on (an election that ends).
 */
async function member(first: Answer, after?: { count: number; then: Answer }): Promise<Member> {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    const answer = after && hits.length > after.count ? after.then : first;
    req.resume();
    req.on('end', () => {
      if (answer === 'reset') return req.socket.destroy();
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const m = { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, hits, close: () => new Promise<void>((r) => server.close(() => r())) };
  open.push(m);
  return m;
}

/** A URL where nothing listens (a member that is down: the connection is refused). */
async function down(): Promise<string> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return `http://127.0.0.1:${port}`;
}

const OK = { status: 200, body: { header: { revision: '7' }, succeeded: true, kvs: [{ key: b64('k'), value: b64('v'), mod_revision: '7' }] } };
const UNAVAILABLE = { status: 503, body: { error: 'etcdserver: leader changed', code: 14, message: 'etcdserver: leader changed' } };
const put = [{ request_put: { key: b64('k'), value: b64('v') } }];

afterEach(async () => {
  await Promise.all(open.splice(0).map((m) => m.close()));
});

describe('EtcdClient: which failures go on to another member', () => {
  it('a write to a member that is down goes to the next one (it never left)', async () => {
    const b = await member(OK);
    const c = new EtcdClient({ endpoints: [await down(), b.url], requestTimeoutMs: 3_000 });
    expect((await c.txn([], put)).succeeded).toBe(true);
    expect(b.hits).toEqual(['/v3/kv/txn']);
  });

  it('a write sent to a member that died before answering is ambiguous, and is not sent again', async () => {
    const a = await member('reset');
    const b = await member(OK);
    const c = new EtcdClient({ endpoints: [a.url, b.url], requestTimeoutMs: 3_000 });
    const err = await c.txn([], put).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EtcdAmbiguous);
    expect((err as Error).message).toContain(`${a.url}/v3/kv/txn: no answer to a write`);
    expect(a.hits).toEqual(['/v3/kv/txn']);
    expect(b.hits).toEqual([]);
  });

  it('a write etcd answered "unavailable" (leader changed: it may still commit) is ambiguous too', async () => {
    const a = await member(UNAVAILABLE);
    const b = await member(OK);
    const c = new EtcdClient({ endpoints: [a.url, b.url], requestTimeoutMs: 3_000 });
    await expect(c.put('k', 'v')).rejects.toBeInstanceOf(EtcdAmbiguous);
    expect(b.hits).toEqual([]);
  });

  it('a read goes on to the next member after a reset or an "unavailable", and stays with the one that answered', async () => {
    const a = await member('reset');
    const u = await member(UNAVAILABLE);
    const b = await member(OK);
    const c = new EtcdClient({ endpoints: [a.url, u.url, b.url], requestTimeoutMs: 3_000 });
    expect((await c.range('k')).kvs.map((kv) => kv.value)).toEqual(['v']);
    expect((await c.range('k')).revision).toBe(7);
    expect([a.hits.length, u.hits.length, b.hits.length]).toEqual([1, 1, 2]);
  });

  it('an election (every survivor "unavailable" for a while): a read goes round the members again until one answers', async () => {
    const gone = await down();
    const u1 = await member(UNAVAILABLE, { count: 3, then: OK });
    const u2 = await member(UNAVAILABLE);
    const c = new EtcdClient({ endpoints: [gone, u1.url, u2.url], requestTimeoutMs: 5_000 });
    expect((await c.range('k')).kvs.map((kv) => kv.value)).toEqual(['v']);
    expect(u1.hits.length).toBe(4);
    expect(u2.hits.length).toBe(3);
  });

  it('members that stay "unavailable": a read fails at its deadline, not after the first round', async () => {
    const u1 = await member(UNAVAILABLE);
    const u2 = await member(UNAVAILABLE);
    // Rounds start at 0, 100, 300 and 700 ms (the pause doubles from 100 ms): a third hit comes well before 1 s.
    const c = new EtcdClient({ endpoints: [u1.url, u2.url], requestTimeoutMs: 1_000 });
    await expect(c.range('k')).rejects.toThrow(/did not answer \/v3\/kv\/range within 1000 ms: .*leader changed/);
    expect(u1.hits.length).toBeGreaterThan(2);
  });

  it('a transaction that only reads is a read (it may go elsewhere)', async () => {
    const a = await member('reset');
    const b = await member(OK);
    const c = new EtcdClient({ endpoints: [a.url, b.url], requestTimeoutMs: 3_000 });
    expect((await c.txn([], [{ request_range: { key: b64('k') } }])).succeeded).toBe(true);
    expect(b.hits).toEqual(['/v3/kv/txn']);
  });

  it('an error etcd means (a bad request) is thrown as it is, to no other member', async () => {
    const a = await member({ status: 400, body: { error: 'etcdserver: too many operations in txn request', code: 3, message: 'etcdserver: too many operations in txn request' } });
    const b = await member(OK);
    const c = new EtcdClient({ endpoints: [a.url, b.url], requestTimeoutMs: 3_000 });
    const err = await c.range('k').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EtcdError);
    expect((err as EtcdError).code).toBe(3);
    expect(b.hits).toEqual([]);
  });

  it('no member at all: says which endpoints and what went wrong, within the deadline', async () => {
    const c = new EtcdClient({ endpoints: [await down(), await down()], requestTimeoutMs: 500 });
    await expect(c.range('k')).rejects.toThrow(/^etcd \(http:\/\/127\.0\.0\.1:\d+,http:\/\/127\.0\.0\.1:\d+\) did not answer \/v3\/kv\/range within 500 ms: .*ECONNREFUSED|connect/);
  });
});
