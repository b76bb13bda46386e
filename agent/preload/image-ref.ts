/**
 * Image references as containerd names them. Harvester's image lists are written normalised
 * (`docker.io/rancher/harvester:v1.5.0`), while `docker save` RepoTags and hand-written lists may
 * use short names (`rancher/harvester:v1.5.0`, `busybox`); both must compare equal to what
 * `ctr images ls -q` prints.
 */

/** Docker's rule: the first path component is a registry when it has a dot or a colon, or is localhost. */
function hasRegistry(first: string): boolean {
  return first.includes('.') || first.includes(':') || first === 'localhost';
}

/**
 * `busybox` → `docker.io/library/busybox:latest`, `rancher/x:v1` → `docker.io/rancher/x:v1`,
 * `quay.io/a/b@sha256:…` unchanged. Returns undefined for something that is not an image reference.
 */
export function normaliseImageRef(input: string): string | undefined {
  const ref = input.trim();
  if (ref === '' || /\s/.test(ref) || ref.startsWith('sha256:')) return undefined;
  const parts = ref.split('/');
  if (parts.some((p) => p === '')) return undefined;
  let name = ref;
  if (parts.length === 1 || !hasRegistry(parts[0]!)) {
    name = parts.length === 1 ? `docker.io/library/${ref}` : `docker.io/${ref}`;
  }
  // A tag is a colon after the last slash; a digest follows an @.
  const lastSlash = name.lastIndexOf('/');
  const at = name.indexOf('@');
  const colon = name.indexOf(':', lastSlash);
  const repoEnd = at !== -1 ? at : colon !== -1 ? colon : name.length;
  const repository = name.slice(0, repoEnd);
  // Repository names are lowercase (the registry host part may carry a port).
  if (/[A-Z]/.test(repository)) return undefined;
  if (at === -1 && colon === -1) name = `${name}:latest`;
  return name;
}
