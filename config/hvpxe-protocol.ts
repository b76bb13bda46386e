/**
 * What hvpxe and the live installer agree on, below both programs (docs/pxe.md, "Threat model"):
 * the boot credential hvpxe puts in the URLs of a machine's kernel command line, the kernel
 * arguments that carry those URLs, and the messages of the TPM 2.0 attestation that an enrolled
 * machine passes before hvpxe releases its config. Pure.
 */

/** The query parameter that carries a boot credential (lib/redact.ts redacts it in any URL it prints). */
export const BOOT_CREDENTIAL_PARAM = 'credential';
/** 32 random bytes, base64url. */
export const BOOT_CREDENTIAL_RE = /^[A-Za-z0-9_-]{43}$/;

/** Where hvinstall posts its progress events (hvpxe's /events/<machine>; Harvester ignores it). */
export const EVENTS_URL_ARG = 'hvinstall.events_url';
/** Where an enrolled machine proves its TPM before it asks for its config (hvpxe's /attest/<machine>). */
export const ATTEST_URL_ARG = 'hvinstall.attest_url';

/** `url` with the boot credential added to its query. */
export function withBootCredential(url: string, credential: string): string {
  return `${url}${url.includes('?') ? '&' : '?'}${BOOT_CREDENTIAL_PARAM}=${credential}`;
}

/** A kernel argument's value from the command line, if it is an http(s) URL. */
export function urlArgFromCmdline(cmdlineText: string, arg: string): string | undefined {
  const re = new RegExp(`(?:^|\\s)${arg.replace(/\./g, '\\.')}=("?)(\\S+?)\\1(?=\\s|$)`);
  const m = re.exec(cmdlineText);
  return m && /^https?:\/\//i.test(m[2]) ? m[2] : undefined;
}

/**
 * TPM 2.0 credential activation (TPM 2.0 Part 1, "Credential Protection"; the flow of
 * tpm2_makecredential / tpm2_activatecredential). Every binary field is base64.
 *   1. the machine POSTs an AttestRequest to its attest URL: the public areas (TPM2B_PUBLIC) of its
 *      endorsement key (EK, RSA 2048 from the TCG default template, as `tpm2_createek -G rsa`
 *      makes it) and of an attestation key (AK) it made under that EK;
 *   2. hvpxe checks the EK against the one enrolled for the machine (sha256 of its
 *      SubjectPublicKeyInfo DER, profiles.yaml `tpm_ek_sha256`) and answers an AttestChallenge:
 *      a random secret sealed to that EK and bound to the AK's name (TPM2_MakeCredential);
 *   3. only that TPM can open it (TPM2_ActivateCredential); the machine POSTs the secret back
 *      (AttestProof), and hvpxe then releases the config for this boot credential.
 */
export interface AttestRequest {
  step: 'challenge';
  ekPublic: string;
  akPublic: string;
}
export interface AttestChallenge {
  challenge: string;
  /** TPM2B_ID_OBJECT. */
  idObject: string;
  /** TPM2B_ENCRYPTED_SECRET. */
  encryptedSecret: string;
}
export interface AttestProof {
  step: 'proof';
  challenge: string;
  secret: string;
}
/** The largest attestation message hvpxe reads. */
export const ATTEST_BODY_MAX = 16 * 1024;

/**
 * Post-install reports (docs/pxe.md, "After the install: node reports"). At install time the
 * installer trades its boot credential for a node-report token (POST REPORT_TOKEN_PATH/<machine>,
 * once per boot credential); hvpxe keeps only its sha256, one per machine (the newest install's).
 * The installed node keeps the token and the URL in NODE_REPORT_PATH (root-only, on COS_OEM) and
 * posts a few post-install events with it (POST NODE_EVENTS_PATH/<machine>, `Authorization: Bearer`).
 * The token can do nothing else: no config, no script, no install event, no re-arm.
 */
export const REPORT_TOKEN_PATH = '/report-token/';
export const NODE_EVENTS_PATH = '/node-events/';
/** A node-report token: 32 random bytes, base64url, with a prefix that says what it is. */
export const REPORT_TOKEN_RE = /^hvnr_[A-Za-z0-9_-]{43}$/;
/** The events a node may report after its install. */
export const NODE_EVENTS = ['FALLBACK', 'UPGRADED'] as const;
export type NodeEventName = (typeof NODE_EVENTS)[number];
/** The largest node event body hvpxe reads. */
export const NODE_EVENT_BODY_MAX = 4 * 1024;

/** What hvpxe answers to a token request, and what the installer keeps at NODE_REPORT_PATH. */
export interface NodeReportGrant {
  /** The machine's node-events URL. */
  url: string;
  token: string;
  machine: string;
  events: readonly NodeEventName[];
}

/** A node event as posted: the event, when, and a few words (each field bounded by hvpxe). */
export interface NodeEventBody {
  event: NodeEventName;
  at: string;
  message?: string;
  /** The image the node runs after the event, and the one that failed (FALLBACK). */
  running?: string;
  failed?: string;
}
