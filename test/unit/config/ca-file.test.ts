/**
 * An automatic install behind a private CA: `hvinstall.ca_file=PATH` on the kernel command line is
 * trusted for the https config_url (validate --cmdline-file and fetch config read the command line
 * the same way). A real https server on 127.0.0.1 with a certificate signed by a CA of our own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import https from 'node:https';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../../config/index.js';
import { caFileFromCmdline } from '../../../config/cmdline.js';
import { prepareAutomaticInstall } from '../../../installer/remote/automatic.js';
import { HvError } from '../../../lib/errors.js';
import { CREATE } from './helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'hvcfg-ca-'));
const ca = path.join(dir, 'ca.pem');
let server: https.Server;
let url = '';

beforeAll(async () => {
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  run(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=hvinstall test private CA']);
  run(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'srv.key', '-out', 'srv.csr', '-subj', '/CN=127.0.0.1']);
  writeFileSync(path.join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  run(['x509', '-req', '-in', 'srv.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'srv.pem', '-days', '1', '-extfile', 'san.ext']);
  server = https.createServer({ key: readFileSync(path.join(dir, 'srv.key')), cert: readFileSync(path.join(dir, 'srv.pem')) }, (_q, res) => res.end(CREATE));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/config.yaml`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

const failure = async (p: Promise<unknown>): Promise<HvError> => {
  try {
    await p;
  } catch (err) {
    return err as HvError;
  }
  throw new Error('expected a failure');
};

describe('hvinstall.ca_file', () => {
  it('is read from the command line (the last one wins); without it, nothing', () => {
    expect(caFileFromCmdline('quiet hvinstall.ca_file=/a.pem harvester.install.automatic=true hvinstall.ca_file=/run/ca.pem')).toBe('/run/ca.pem');
    expect(caFileFromCmdline('quiet harvester.install.automatic=true')).toBeUndefined();
  });

  it('makes the https config_url behind a private CA load', async () => {
    const r = await loadConfig(undefined, { cmdline: `harvester.install.config_url=${url} hvinstall.ca_file=${ca}`, attempts: 1 });
    expect(r.errors).toEqual([]);
    expect(r.source).toBe(url);
  });

  it('without it the same URL fails on the certificate and says what to pass', async () => {
    const err = await failure(loadConfig(undefined, { cmdline: `harvester.install.config_url=${url}`, attempts: 1 }));
    expect(err).toBeInstanceOf(HvError);
    expect(err.message).toMatch(/^cannot fetch config: TLS verification failed for 127\.0\.0\.1:\d+: /);
    expect(err.hint).toBe('pass the CA that signed the server certificate (--ca-file), or serve the file over plain http');
  });

  it('naming a file that is not there: the error says the kernel parameter named it', async () => {
    const err = await failure(loadConfig(undefined, { cmdline: `harvester.install.config_url=${url} hvinstall.ca_file=${dir}/absent.pem`, attempts: 1 }));
    expect(err.message).toMatch(/^cannot fetch config: cannot read CA file .*absent\.pem: ENOENT/);
    expect(err.hint).toBe(`the kernel command line's hvinstall.ca_file=${dir}/absent.pem names it: give a PEM file with the CA certificate(s)`);
  });

  it('an automatic install carries it on, for the ISO and the key sources', async () => {
    const auto = await prepareAutomaticInstall(`harvester.install.automatic=true harvester.install.iso_url=local harvester.install.config_url=${url} hvinstall.ca_file=${ca}`, { fetch: { attempts: 1 } });
    expect(auto.caFile).toBe(ca);
    await auto.events.sink.close();
  });
});
