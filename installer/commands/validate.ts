/**
 * `hvinstall validate`: see config/validate-command.ts. `make build` bundles that command
 * into one file next to this one (validate.bundle.js) because loading ~100 small modules dominated
 * its cold start; without the bundle (tests on the sources, a bare tsc) the modules are loaded.
 * `--source` adds the installer's own check, loaded only then: the node's files rendered for that OS
 * image, exactly as `render --source` and `install` render them before any disk is touched.
 */
import type { Finding, HarvesterConfig } from '../../config/types.js';

type Command = { runValidate(argv: string[], hooks?: { checkSource: typeof checkSource }): Promise<number> };

/** The render's refusal for this config and image as a finding (none when it renders). */
export async function checkSource(config: HarvesterConfig, source: string, release: string | undefined): Promise<Finding[]> {
  const { ExitCode, HvError } = await import('../../lib/errors.js');
  const { renderNode } = await import('../render/index.js');
  const { imageFactsOf, machineArch } = await import('../steps/image-facts.js');
  const { resolveSource } = await import('../steps/source.js');
  const { availableParallelism } = await import('node:os');
  try {
    const image = await imageFactsOf(await resolveSource(source), release === undefined ? {} : { isoRelease: release, isoReleaseRequired: true });
    renderNode(config, { cpuCount: availableParallelism(), nics: [], arch: machineArch(), image }, { seed: 'hvinstall validate' });
    return [];
  } catch (err) {
    // A --source or --release that cannot be read is a usage error, as for render.
    if (!(err instanceof HvError) || err.exitCode === ExitCode.usage) throw err;
    return [{ severity: 'error', path: err.where ?? '', source, message: err.message, hint: err.hint }];
  }
}

export default async function validate(argv: string[]): Promise<number> {
  let mod: Command;
  try {
    mod = (await import(new URL('./validate.bundle.js', import.meta.url).href)) as Command;
  } catch (err) {
    if ((err as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    mod = await import('../../config/validate-command.js');
  }
  return mod.runValidate(argv, { checkSource });
}
