/**
 * What an os.ssh_authorized_keys entry is: a public key line, or a source yip fetches keys from at
 * every boot (rancher/yip pkg/plugins/ssh.go: an entry that parses as a URL is downloaded;
 * `github:<user>` and `gitlab:<user>` become https://github.com/<user>.keys and
 * https://gitlab.com/<user>.keys). Shared by the validator and the install's key fetch
 * (installer/remote/ssh-keys.ts).
 */

/** An authorized_keys line: options may come first, then the key type and its base64 blob. */
export const AUTHORIZED_KEY = /(^|\s)(ssh-(rsa|dss|ed25519)|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com)\s+[A-Za-z0-9+/]{16,}={0,3}(\s|$)/;

/** Key sources yip fetches over the network: github:/gitlab: users (Harvester's own test data writes `github: user`) and http(s) URLs. */
export const REMOTE_SSH_KEY = /^(github|gitlab):\s*\S+$|^https?:\/\/\S+$/i;

/** yip's providers (rancher/yip pkg/plugins/ssh.go keyProviders); %s is the user. */
export const SSH_KEY_PROVIDERS: Readonly<Record<string, string>> = {
  github: 'https://github.com/%s.keys',
  gitlab: 'https://gitlab.com/%s.keys',
};

/** The URL an entry's keys come from, or undefined for a key written out. */
export function sshKeySourceUrl(entry: string, providers: Readonly<Record<string, string>> = SSH_KEY_PROVIDERS): string | undefined {
  const e = entry.trim();
  if (!REMOTE_SSH_KEY.test(e)) return undefined;
  const m = /^(github|gitlab):\s*(\S+)$/i.exec(e);
  if (m) return providers[m[1]!.toLowerCase()]!.replace('%s', encodeURIComponent(m[2]!));
  return e;
}
