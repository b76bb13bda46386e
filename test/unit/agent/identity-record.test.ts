/** Loading the two identity records from a node root (a temp dir): absent, unreadable, malformed, good. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadNodeIdentity, loadSeenAddress, SEEN_ADDRESS_PATH } from '../../../agent/identity/record.js';
import { NODE_IDENTITY_PATH } from '../../../installer/render/index.js';

let dir: string;
const root = (p: string) => path.join(dir, p);
const put = (p: string, text: string) => {
  mkdirSync(path.dirname(root(p)), { recursive: true });
  writeFileSync(root(p), text);
};

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'hv-record-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('loadNodeIdentity and loadSeenAddress', () => {
  it('an absent record is neither a value nor a problem', async () => {
    expect(await loadNodeIdentity(root)).toEqual({});
    expect(await loadSeenAddress(root)).toEqual({});
  });

  it('an unreadable record (a directory in its place) is a problem naming the file, not a throw', async () => {
    mkdirSync(root(NODE_IDENTITY_PATH), { recursive: true });
    mkdirSync(root(SEEN_ADDRESS_PATH), { recursive: true });
    expect((await loadNodeIdentity(root)).problem).toMatch(new RegExp(`^cannot read ${NODE_IDENTITY_PATH}: EISDIR`));
    expect((await loadSeenAddress(root)).problem).toMatch(new RegExp(`^cannot read ${SEEN_ADDRESS_PATH}: EISDIR`));
  });

  it('a malformed record is its parser\'s problem, with the file named', async () => {
    put(NODE_IDENTITY_PATH, '{"version":2}');
    put(SEEN_ADDRESS_PATH, 'not json');
    expect(await loadNodeIdentity(root)).toEqual({ problem: `${NODE_IDENTITY_PATH}: not a version 1 node identity` });
    expect((await loadSeenAddress(root)).problem).toMatch(new RegExp(`^${SEEN_ADDRESS_PATH} is not JSON: `));
  });

  it('good records are read from the node root (and from another file when named)', async () => {
    put(NODE_IDENTITY_PATH, JSON.stringify({ version: 1, nodeName: 'node-1', interface: 'mgmt-br', method: 'static', address: '192.168.1.21/24' }));
    put('/other/seen.json', JSON.stringify({ version: 1, address: '192.168.1.21/24', interface: 'mgmt-br', recordedAt: '2026-12-01T10:00:00Z', why: 'install' }));
    expect((await loadNodeIdentity(root)).value).toEqual({ version: 1, nodeName: 'node-1', interface: 'mgmt-br', method: 'static', address: '192.168.1.21/24', addressSource: 'install', nics: [] });
    expect((await loadSeenAddress(root, '/other/seen.json')).value).toEqual({ version: 1, address: '192.168.1.21/24', interface: 'mgmt-br', recordedAt: '2026-12-01T10:00:00Z', why: 'install' });
  });
});
