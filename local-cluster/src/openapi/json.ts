// Shapes and helpers shared by the built-in schema generator and the
// document builder.

export type Schema = Record<string, unknown>;

/** builtin-schemas.json: the generated built-in component schemas. */
export interface BuiltinSchemaFile {
  source: string;
  schemas: Record<string, Schema>;
}

/**
 * Recursively sorts object keys, as Go's encoding/json does for maps, so a
 * document's bytes (and so its hash) do not depend on insertion order.
 */
export function sortKeys<T>(value: T): T {
  if (Array.isArray(value)) return value.map(sortKeys) as T;
  if (value && typeof value === 'object') {
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) sorted[key] = sortKeys((value as Record<string, unknown>)[key]);
    return sorted as T;
  }
  return value;
}
