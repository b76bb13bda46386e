/**
 * The initial UI admin password (install.admin_password), beyond Harvester: its ISO install leaves
 * the admin at the bootstrap password `admin` (50-defaults.yaml rancherValues.bootstrapPassword), so
 * whoever reaches the VIP first sets the password and owns the cluster (harvester/harvester#893).
 *
 * How Rancher takes a password without its clear text (rancher/rancher
 * pkg/auth/providers/local/pbkdf2/pbkdf2.go; rancher-docs api/workflows/users.md, v2.13 and later):
 * a local user's password lives in Secret cattle-local-user-passwords/<user name>, annotated
 * `cattle.io/password-hash: pbkdf2sha3512`, data `password` = PBKDF2-HMAC-SHA3-512 (210000
 * iterations, 32 bytes) over the password with data `salt`. Rancher's webhook leaves a Secret so
 * annotated untouched ("already encrypted", rancher/webhook pkg/resources/core/v1/secret); any other
 * annotation, bcrypt included, is hashed again as if it were clear text.
 *
 * The admin user itself is created by Rancher when it first starts, under a generated name
 * (pkg/data/management/role_data.go BootstrapAdmin), before rancherd applies its bootstrap
 * resources. So the hash is installed by a rancherd post-instruction (rancher/rancherd
 * pkg/plan/bootstrap.go addPrePostInstructions: run after Rancher is up) that finds the admin by its
 * label and patches its password Secret, then clears mustChangePassword and the first-login
 * setting. Until then the admin's password is a random bootstrap password (rancherValues.
 * bootstrapPassword, overriding Harvester's `admin`): nobody who reaches the VIP early can claim
 * the cluster. The clear text is hashed by the installer and never written to the node.
 */
import { createHmac, pbkdf2Sync } from 'node:crypto';
import { Document, Scalar } from 'yaml';
import type { HarvesterConfig } from '../../config/types.js';
import { ExitCode, HvError } from '../../lib/errors.js';
import { adminPasswordProblem, isAdminPasswordHash, ADMIN_PASSWORD_HASH_PREFIX, RANCHER_PBKDF2_ITERATIONS, RANCHER_PBKDF2_KEY_BYTES, RANCHER_PBKDF2_SALT_BYTES } from '../../config/admin-password.js';

export const ADMIN_PASSWORD_PATH = '/etc/rancher/rancherd/config.yaml.d/60-hvinstall-admin-password.yaml';
/** The first Rancher whose documentation places local passwords in cattle-local-user-passwords Secrets. */
const MIN_RANCHER_FOR_ADMIN_PASSWORD = [2, 13, 0] as const;
const KUBECTL = '/var/lib/rancher/rke2/bin/kubectl';

/** A password hash as Rancher stores it. */
export interface RancherPasswordHash {
  salt: Buffer;
  key: Buffer;
}

/** `$pbkdf2-sha3-512$i=210000$<salt base64>$<key base64>`: the form the config takes and the node keeps. */
function formatAdminPasswordHash(h: RancherPasswordHash): string {
  return `${ADMIN_PASSWORD_HASH_PREFIX}i=${RANCHER_PBKDF2_ITERATIONS}$${h.salt.toString('base64')}$${h.key.toString('base64')}`;
}

/** PBKDF2-HMAC-SHA3-512 exactly as Rancher computes it (pbkdf2.go sha3512Key). */
export function hashAdminPassword(clear: string, salt: Buffer): RancherPasswordHash {
  return { salt, key: pbkdf2Sync(clear, salt, RANCHER_PBKDF2_ITERATIONS, RANCHER_PBKDF2_KEY_BYTES, 'sha3-512') };
}

/** The stored hash for install.admin_password: a given hash kept, clear text hashed with a salt derived from the seed. */
function adminPasswordHash(value: string, seed: string): RancherPasswordHash {
  const problem = adminPasswordProblem(value);
  if (problem) throw new HvError(`install.admin_password: ${problem}`, { where: 'install.admin_password', exitCode: ExitCode.checkFailed });
  if (isAdminPasswordHash(value)) {
    const [, , , salt, key] = value.split('$');
    return { salt: Buffer.from(salt!, 'base64'), key: Buffer.from(key!, 'base64') };
  }
  const salt = createHmac('sha256', seed).update('hvinstall/admin-password-salt').digest().subarray(0, RANCHER_PBKDF2_SALT_BYTES);
  return hashAdminPassword(value, salt);
}

/** The config as stored on the node: install.admin_password replaced by its hash. */
export function withHashedAdminPassword(config: HarvesterConfig, seed: string): HarvesterConfig {
  const value = config.install?.adminPassword;
  if (!value || isAdminPasswordHash(value)) return config;
  return { ...config, install: { ...config.install, adminPassword: formatAdminPasswordHash(adminPasswordHash(value, seed)) } };
}

/**
 * Rancher's first admin password until the post-instruction runs: unguessable without the hash
 * (HMAC keyed with it), stable for a given config and seed so re-rendering gives the same file.
 */
function bootstrapPassword(hash: RancherPasswordHash, seed: string): string {
  return createHmac('sha256', hash.key).update('hvinstall/rancher-bootstrap-password\0').update(seed).digest('base64url');
}

/**
 * The post-instruction's script. It waits (bounded: 40 tries, 15 s apart) for Rancher's admin user
 * and its password Secret, then installs the hash. `{{` never appears: yip renders file contents as
 * Go templates.
 */
export const ADMIN_PASSWORD_SCRIPT = `set -eu
k=${KUBECTL}
ns=cattle-local-user-passwords
tries=0
while :; do
  user=$("$k" get users.management.cattle.io -l authz.management.cattle.io/bootstrapping=admin-user -o jsonpath='{.items[0].metadata.name}' 2>/dev/null || true)
  if [ -n "$user" ] && "$k" -n "$ns" get secret "$user" >/dev/null 2>&1; then break; fi
  tries=$((tries + 1))
  if [ "$tries" -ge 40 ]; then
    echo "hvinstall: after 10 minutes Rancher has no admin user with a password Secret in $ns (admin user: \${user:-none}); install.admin_password was NOT applied; set the password with: rancherd reset-admin" >&2
    exit 1
  fi
  sleep 15
done
"$k" -n "$ns" patch secret "$user" --type=json -p "[{\\"op\\":\\"replace\\",\\"path\\":\\"/data\\",\\"value\\":{\\"password\\":\\"$HVINSTALL_ADMIN_PASSWORD_KEY\\",\\"salt\\":\\"$HVINSTALL_ADMIN_PASSWORD_SALT\\"}},{\\"op\\":\\"add\\",\\"path\\":\\"/metadata/annotations/cattle.io~1password-hash\\",\\"value\\":\\"pbkdf2sha3512\\"}]"
"$k" patch users.management.cattle.io "$user" --type=merge -p '{"mustChangePassword":false}'
"$k" patch settings.management.cattle.io first-login --type=merge -p '{"value":"false"}'
echo "hvinstall: the admin password of the install config is set for $user"
`;

function versionAtLeast(version: string, min: readonly number[]): boolean | undefined {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version);
  if (!m) return undefined;
  const got = [Number(m[1]), Number(m[2]), Number(m[3])];
  for (let i = 0; i < 3; i++) if (got[i] !== min[i]) return got[i]! > min[i]!;
  return true;
}

/**
 * rancherd's config.yaml.d drop-in carrying the random bootstrap password and the post-instruction
 * with the hash (never the clear text). Create nodes only: rancherd runs post-instructions in its
 * cluster-init plan alone.
 */
export function renderAdminPasswordDropIn(value: string, seed: string, rancherVersion: string): string {
  const ok = versionAtLeast(rancherVersion, MIN_RANCHER_FOR_ADMIN_PASSWORD);
  if (ok !== true) {
    throw new HvError(`install.admin_password needs Rancher v${MIN_RANCHER_FOR_ADMIN_PASSWORD.join('.')} or later, which keeps local passwords in cattle-local-user-passwords Secrets; the bootstrap uses Rancher ${rancherVersion}`, {
      where: 'install.admin_password',
      hint: 'remove install.admin_password and set the password in the UI right after the install, or install a newer Harvester',
      exitCode: ExitCode.checkFailed,
    });
  }
  const hash = adminPasswordHash(value, seed);
  const doc = new Document(
    {
    rancherValues: { bootstrapPassword: bootstrapPassword(hash, seed) },
    postInstructions: [
      {
        name: 'hvinstall-admin-password',
        command: '/bin/sh',
        args: ['-c', ADMIN_PASSWORD_SCRIPT],
        env: [`HVINSTALL_ADMIN_PASSWORD_SALT=${hash.salt.toString('base64')}`, `HVINSTALL_ADMIN_PASSWORD_KEY=${hash.key.toString('base64')}`],
      },
    ],
    },
    { aliasDuplicateObjects: false },
  );
  const script = doc.getIn(['postInstructions', 0, 'args', 1], true) as Scalar;
  script.type = Scalar.BLOCK_LITERAL;
  return doc.toString({ lineWidth: 0 });
}
