/**
 * Compile-time proof that schemas/harvester-config.v1.schema.json and types.ts describe the same
 * shape: the schema's generated types, with enums widened to string, are identical to types.ts at
 * every level (same keys, same optionality, same value types). A drift fails `tsc`.
 */
import type { SchemaHarvesterConfig } from './generated/harvester-config.schema-types.js';
import type { HarvesterConfig } from './types.js';

type Widen<T> = T extends string
  ? string
  : T extends number
    ? number
    : T extends boolean
      ? boolean
      : T extends ReadonlyArray<infer U>
        ? Array<Widen<U>>
        : T extends object
          ? { [K in keyof T]: Widen<T[K]> }
          : T;

type Identical<A, B> = (<G>() => G extends A ? 1 : 2) extends <G>() => G extends B ? 1 : 2 ? true : false;
type Normalised<T> = Widen<T>;

const schemaMatchesTypes: Identical<Normalised<SchemaHarvesterConfig>, Normalised<HarvesterConfig>> = true;
export const SCHEMA_TYPES_CHECKED = schemaMatchesTypes;
