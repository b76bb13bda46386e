/**
 * The live installer's side of TPM 2.0 attestation with hvpxe (the protocol:
 * config/hvpxe-protocol.ts; hvpxe's side: pxe/tpm/). A machine enrolled by its TPM's endorsement key
 * finds `hvinstall.attest_url=` on its kernel command line; before it asks for its config it proves
 * it runs on that TPM, with Debian's tpm2-tools:
 *   tpm2_createek  the endorsement key (RSA 2048, the TCG default template: the same key every time)
 *   tpm2_createak  an attestation key under it (its name binds the challenge to this boot's key)
 *   POST           both public areas; hvpxe answers a secret sealed to the enrolled EK (TPM2_MakeCredential)
 *   tpm2_activatecredential   only this TPM opens it (the EK's policy: a PolicySecret on the endorsement hierarchy)
 *   POST           the secret back; hvpxe then releases the config for this boot's credential.
 * Every tool runs with a deadline through lib/exec; the attest URL carries the boot credential and
 * is redacted in every message (lib/redact.ts).
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { run } from '../../lib/exec.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import { ATTEST_URL_ARG, urlArgFromCmdline, type AttestChallenge, type AttestProof, type AttestRequest } from '../../config/hvpxe-protocol.js';

/** `hvinstall.attest_url=…` from the command line (hvpxe adds it for a machine enrolled by its TPM). */
export function attestUrlFromCmdline(cmdlineText: string): string | undefined {
  return urlArgFromCmdline(cmdlineText, ATTEST_URL_ARG);
}

export interface TpmAttestOptions {
  /** tpm2-tools' TCTI (TPM2TOOLS_TCTI), e.g. `swtpm:host=127.0.0.1,port=2321`; default: the kernel's resource manager. */
  tcti?: string;
  caFile?: string;
  /** Per tool and per request. */
  timeoutMs?: number;
  attempts?: number;
}

/** What tpm2_activatecredential reads (-i): tpm2-tools' magic and version, then the two TPM2Bs as hvpxe sent them. */
export function credentialFile(c: AttestChallenge): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(0xbadcc0de, 0);
  head.writeUInt32BE(1, 4);
  return Buffer.concat([head, Buffer.from(c.idObject, 'base64'), Buffer.from(c.encryptedSecret, 'base64')]);
}

async function post(url: string, body: AttestRequest | AttestProof, opts: TpmAttestOptions): Promise<{ status: number; text: string }> {
  const dispatcher = opts.caFile ? new Agent({ connect: { ca: await readFile(opts.caFile) } }) : undefined;
  let last: Error | undefined;
  for (let attempt = 1; attempt <= (opts.attempts ?? 3); attempt++) {
    try {
      const res = await request(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(opts.timeoutMs ?? 30_000), ...(dispatcher ? { dispatcher } : {}) });
      return { status: res.statusCode, text: await res.body.text() };
    } catch (err) {
      last = err as Error;
      await new Promise((r) => setTimeout(r, 2_000 * attempt));
    }
  }
  throw last!;
}

/** The installer's TPM work, one tool at a time; transient objects are flushed after each (a TPM holds only a few). */
class Tpm {
  constructor(
    private readonly dir: string,
    private readonly opts: TpmAttestOptions,
  ) {}

  async tool(name: string, args: string[]): Promise<void> {
    const env = { ...process.env, TPM2TOOLS_TCTI: this.opts.tcti ?? 'device:/dev/tpmrm0' };
    await run(name, args, { cwd: this.dir, env, timeoutMs: this.opts.timeoutMs ?? 30_000 });
    await run('tpm2_flushcontext', ['-t'], { cwd: this.dir, env, timeoutMs: this.opts.timeoutMs ?? 30_000, allowFailure: true });
  }

  file(name: string): string {
    return path.join(this.dir, name);
  }
}

async function keys(tpm: Tpm): Promise<AttestRequest> {
  await tpm.tool('tpm2_createek', ['-c', 'ek.ctx', '-G', 'rsa', '-u', 'ek.pub']);
  await tpm.tool('tpm2_createak', ['-C', 'ek.ctx', '-c', 'ak.ctx', '-G', 'rsa', '-g', 'sha256', '-s', 'rsassa', '-u', 'ak.pub', '-n', 'ak.name']);
  return { step: 'challenge', ekPublic: (await readFile(tpm.file('ek.pub'))).toString('base64'), akPublic: (await readFile(tpm.file('ak.pub'))).toString('base64') };
}

async function activate(tpm: Tpm, challenge: AttestChallenge): Promise<Buffer> {
  await writeFile(tpm.file('cred.in'), credentialFile(challenge));
  await tpm.tool('tpm2_startauthsession', ['--policy-session', '-S', 'session.ctx']);
  await tpm.tool('tpm2_policysecret', ['-S', 'session.ctx', '-c', 'e']);
  await tpm.tool('tpm2_activatecredential', ['-c', 'ak.ctx', '-C', 'ek.ctx', '-i', 'cred.in', '-o', 'secret.out', '-P', 'session:session.ctx']);
  await tpm.tool('tpm2_flushcontext', ['session.ctx']).catch(() => undefined);
  return readFile(tpm.file('secret.out'));
}

function refused(step: string, r: { status: number; text: string }, log: Logger): HvError {
  return new HvError(`hvpxe refused the TPM attestation (${step}): HTTP ${r.status}: ${log.redactor.redactString(r.text.trim().slice(0, 300))}`, {
    where: ATTEST_URL_ARG,
    hint: "this machine's TPM is not the one enrolled for it in profiles.yaml (tpm_ek_sha256), or its boot credential expired: check `hvpxe machines` on the boot server, then boot the machine again",
    exitCode: ExitCode.installFailed,
  });
}

/** Proves this boot runs on the enrolled TPM; throws (exit 3) when it cannot, and hvpxe then serves no config. */
export async function attestBootCredential(attestUrl: string, log: Logger, opts: TpmAttestOptions = {}): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'hvinstall-tpm-'));
  const tpm = new Tpm(dir, opts);
  try {
    log.info('proving this machine\'s TPM to hvpxe', { url: attestUrl });
    const challenge = await post(attestUrl, await keys(tpm), opts);
    if (challenge.status !== 200) throw refused('challenge', challenge, log);
    const c = JSON.parse(challenge.text) as AttestChallenge;
    const secret = await activate(tpm, c);
    const proof = await post(attestUrl, { step: 'proof', challenge: c.challenge, secret: secret.toString('base64') }, opts);
    if (proof.status !== 204) throw refused('proof', proof, log);
    log.info('TPM attestation accepted: hvpxe releases this machine\'s config');
  } catch (err) {
    if (err instanceof HvError) throw new HvError(log.redactor.redactString(err.message), { where: err.where, hint: err.hint, exitCode: err.exitCode });
    throw new HvError(`TPM attestation failed: ${log.redactor.redactString((err as Error).message)}`, {
      where: ATTEST_URL_ARG,
      hint: 'the live system needs a TPM 2.0 (/dev/tpmrm0) and tpm2-tools; check the firmware enables the TPM',
      exitCode: ExitCode.installFailed,
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
