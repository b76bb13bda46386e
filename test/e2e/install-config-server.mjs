#!/usr/bin/env node
// The e2e harness's HTTP server on 127.0.0.1: serves the files of --dir (the per-node config.yaml)
// to the guest (reached through QEMU's guestfwd), logs every request as one line to stdout, and
// writes the port it listens on to --port-file. Ends on SIGTERM.
import http from 'node:http';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { dir: { type: 'string' }, 'port-file': { type: 'string' } } });
if (!values.dir || !values['port-file']) {
  process.stderr.write('usage: install-config-server.mjs --dir DIR --port-file FILE\n');
  process.exit(2);
}
const root = path.resolve(values.dir);

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url ?? '/', 'http://e2e');
  const rel = path.normalize(decodeURIComponent(url.pathname)).replace(/^\/+/, '');
  const file = path.join(root, rel);
  let status = 200;
  try {
    if (req.method !== 'GET' || !file.startsWith(root + path.sep)) throw Object.assign(new Error('refused'), { status: 403 });
    const body = await readFile(file);
    res.writeHead(200, { 'content-type': 'application/yaml', 'content-length': body.length });
    res.end(body);
  } catch (err) {
    status = err.status ?? 404;
    res.writeHead(status, { 'content-type': 'text/plain' });
    res.end(`${status}\n`);
  }
  process.stdout.write(`${new Date().toISOString()} ${req.method} ${req.url} ${status}\n`);
});
server.listen(0, '127.0.0.1', async () => {
  await writeFile(values['port-file'], String(server.address().port));
});
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
