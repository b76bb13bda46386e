/** What the HTTP benches share: the servers they start (stopped at the end) and the clients they run. */
import { spawn } from 'node:child_process';
import net from 'node:net';

/** Every process a bench started and that has not exited: stopped in its `finally`. */
export const children = new Set();

export function track(p) {
  children.add(p);
  p.on('exit', () => children.delete(p));
  return p;
}

/** Stops a process with `sig` and waits for it; SIGKILL after 10 s. */
export async function stop(p, sig = 'SIGTERM') {
  if (!p || p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise((r) => p.once('exit', r));
  p.kill(sig);
  const t = setTimeout(() => p.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(t);
}

export async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

/** One download with curl, discarded; resolves to its size, rejects on anything but a 200. */
export function curlOnce(url) {
  return new Promise((resolve, reject) => {
    const p = track(spawn('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code} %{size_download}', url], { stdio: ['ignore', 'pipe', 'ignore'] }));
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.on('close', (code) => {
      const [status, size] = out.trim().split(' ');
      if (code !== 0 || status !== '200') reject(new Error(`curl ${url}: exit ${code}, status ${status}`));
      else resolve(Number(size));
    });
  });
}
