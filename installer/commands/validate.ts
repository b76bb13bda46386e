/**
 * `hvinstall validate`: see config/validate-command.ts. `make build` bundles that command
 * into one file next to this one (validate.bundle.js) because loading ~100 small modules dominated
 * its cold start; without the bundle (tests on the sources, a bare tsc) the modules are loaded.
 */
type Command = { runValidate(argv: string[]): Promise<number> };

export default async function validate(argv: string[]): Promise<number> {
  let mod: Command;
  try {
    mod = (await import(new URL('./validate.bundle.js', import.meta.url).href)) as Command;
  } catch (err) {
    if ((err as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    mod = await import('../../config/validate-command.js');
  }
  return mod.runValidate(argv);
}
