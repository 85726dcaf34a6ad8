// Pruning, unknown-field detection and defaulting of custom resources, after
// apiextensions-apiserver's structural schema algorithms:
//   - pruning/algorithm.go (unknown fields, reported paths, sorted);
//   - defaulting/prunenulls.go and defaulting/algorithm.go;
//   - objectmeta/coerce.go: metadata (at the root and inside
//     x-kubernetes-embedded-resource objects) round-trips through
//     metav1.ObjectMeta, which drops unknown fields and empty values.
// Paths use the pruning algorithm's notation: ".key" for properties and map
// values, "[i]" for array items.

import { deepCopy } from '../object-meta.js';
import type { JSONSchemaProps } from '../types.js';

type JsonObject = Record<string, unknown>;

export function isJsonObject(x: unknown): x is JsonObject {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

const PRESERVE = 'x-kubernetes-preserve-unknown-fields';
const EMBEDDED = 'x-kubernetes-embedded-resource';
const META_FIELDS = new Set(['apiVersion', 'kind', 'metadata']);

const OBJECT_META_FIELDS = new Set([
  'name', 'generateName', 'namespace', 'selfLink', 'uid', 'resourceVersion', 'generation',
  'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'labels', 'annotations',
  'ownerReferences', 'finalizers', 'managedFields',
]);
// Fields of the typed list items inside ObjectMeta; unknown ones are dropped too.
const OBJECT_META_ITEM_FIELDS: Record<string, Set<string>> = {
  ownerReferences: new Set(['apiVersion', 'kind', 'name', 'uid', 'controller', 'blockOwnerDeletion']),
  managedFields: new Set(['manager', 'operation', 'apiVersion', 'time', 'fieldsType', 'fieldsV1', 'subresource']),
};

/**
 * The schema governing a key of an object: its property schema, else the
 * additionalProperties schema. additionalProperties `true` (or `false`) is a
 * nil structural schema in Kubernetes, represented here as null: the key is
 * kept but everything below it is pruned. undefined: the key is unknown.
 */
function keySchema(s: JSONSchemaProps, key: string): JSONSchemaProps | null | undefined {
  if (s.properties && Object.hasOwn(s.properties, key)) return s.properties[key] ?? null;
  if (s.additionalProperties === undefined) return undefined;
  return isJsonObject(s.additionalProperties) ? s.additionalProperties : null;
}

const keyPath = (path: string, key: string): string => (path ? `${path}.${key}` : key);
const itemPath = (path: string, i: number): string => `${path}[${i}]`;

function pruneNode(x: unknown, s: JSONSchemaProps | null, path: string, out: string[]): void {
  if (s?.[PRESERVE]) {
    skipPrune(x, s, path, out);
    return;
  }
  if (Array.isArray(x)) {
    x.forEach((v, i) => pruneNode(v, s ? s.items ?? null : null, itemPath(path, i), out));
    return;
  }
  if (!isJsonObject(x)) return;
  for (const k of Object.keys(x)) {
    if (s?.[EMBEDDED] && META_FIELDS.has(k)) continue; // coerced as ObjectMeta/TypeMeta instead
    const sub = s ? keySchema(s, k) : undefined;
    if (sub !== undefined) {
      pruneNode(x[k], sub, keyPath(path, k), out);
      continue;
    }
    if (!s || !META_FIELDS.has(k) || path !== '') out.push(keyPath(path, k));
    delete x[k];
  }
}

/** Below x-kubernetes-preserve-unknown-fields: unknown keys stay, known ones are still pruned. */
function skipPrune(x: unknown, s: JSONSchemaProps | null, path: string, out: string[]): void {
  if (!s) return;
  if (Array.isArray(x)) {
    x.forEach((v, i) => skipPrune(v, s.items ?? null, itemPath(path, i), out));
    return;
  }
  if (!isJsonObject(x)) return;
  for (const k of Object.keys(x)) {
    if (s[EMBEDDED] && META_FIELDS.has(k)) continue;
    const sub = keySchema(s, k);
    if (sub !== undefined) pruneNode(x[k], sub, keyPath(path, k), out);
  }
}

/**
 * Removes fields the schema does not declare, in place, and returns their
 * paths sorted (pruning.PruneWithOptions). At a resource root (and in
 * embedded resources) apiVersion, kind and metadata are left alone.
 */
export function pruneFields(obj: unknown, schema: JSONSchemaProps, isResourceRoot: boolean): string[] {
  const root = isResourceRoot && !schema[EMBEDDED] ? { ...schema, [EMBEDDED]: true } : schema;
  const out: string[] = [];
  pruneNode(obj, root, '', out);
  return out.sort();
}

/** PruneNonNullableNullsWithoutDefaults: a null in a non-nullable field without default is dropped. */
function pruneNulls(x: unknown, s: JSONSchemaProps | null): void {
  if (Array.isArray(x)) {
    for (const v of x) pruneNulls(v, s ? s.items ?? null : null);
    return;
  }
  if (!isJsonObject(x)) return;
  for (const k of Object.keys(x)) {
    const sub = s ? keySchema(s, k) ?? null : null;
    if (x[k] === null && sub && !sub.nullable && (sub.default === undefined || sub.default === null)) delete x[k];
    else pruneNulls(x[k], sub);
  }
}

/**
 * Drops what decoding into metav1.ObjectMeta drops, recording each dropped
 * field as `${prefix}.<field>`. Keys are visited sorted because the apiserver
 * re-marshals the map (sorting keys) before strict decoding.
 */
function dropUnknownMetadata(meta: JsonObject, prefix: string, out: string[]): void {
  for (const k of Object.keys(meta).sort()) {
    if (!OBJECT_META_FIELDS.has(k)) {
      out.push(`${prefix}.${k}`);
      delete meta[k];
      continue;
    }
    const itemFields = OBJECT_META_ITEM_FIELDS[k];
    const list = meta[k];
    if (!itemFields || !Array.isArray(list)) continue;
    list.forEach((item, i) => {
      if (!isJsonObject(item)) return;
      for (const f of Object.keys(item).sort()) {
        if (itemFields.has(f)) continue;
        out.push(`${prefix}.${k}[${i}].${f}`);
        delete item[f];
      }
    });
  }
}

function isEmptyValue(v: unknown): boolean {
  return v === null || v === '' || (Array.isArray(v) && !v.length) || (isJsonObject(v) && !Object.keys(v).length);
}

/**
 * SetObjectMeta writes ObjectMeta back with omitempty, so empty strings,
 * maps, lists and a zero generation disappear. Inside embedded resources a
 * zero creationTimestamp is removed as well; at the root the server sets it.
 */
function normalizeObjectMeta(meta: JsonObject, embedded: boolean): void {
  for (const k of Object.keys(meta)) {
    if (k === 'creationTimestamp' && !embedded) continue;
    const v = meta[k];
    if (isEmptyValue(v) || (k === 'generation' && v === 0)) delete meta[k];
  }
}

/** objectmeta.CoerceWithOptions on embedded resources, with field.Path rendering of the prefix. */
function coerceEmbedded(x: unknown, s: JSONSchemaProps | null, path: string | null, out: string[]): void {
  if (!s) return;
  if (Array.isArray(x)) {
    x.forEach((v, i) => coerceEmbedded(v, s.items ?? null, `${path ?? ''}[${i}]`, out));
    return;
  }
  if (!isJsonObject(x)) return;
  if (s[EMBEDDED] && isJsonObject(x.metadata)) {
    dropUnknownMetadata(x.metadata, path === null ? 'metadata' : `${path}.metadata`, out);
    normalizeObjectMeta(x.metadata, true);
  }
  for (const k of Object.keys(x)) {
    const viaProperty = s.properties !== undefined && Object.hasOwn(s.properties, k);
    const sub = keySchema(s, k);
    if (sub === undefined) continue;
    const childPath = viaProperty ? (path === null ? k : `${path}.${k}`) : `${path ?? ''}[${k}]`;
    coerceEmbedded(x[k], sub, childPath, out);
  }
}

/** The decode-time pipeline: prune, drop nulls, coerce metadata. Returns unknown field paths. */
function pruneObject(obj: unknown, schema: JSONSchemaProps): string[] {
  const pruned = pruneFields(obj, schema, true);
  pruneNulls(obj, schema);
  const embedded: string[] = [];
  coerceEmbedded(obj, schema, null, embedded);
  embedded.sort();
  const meta: string[] = [];
  if (isJsonObject(obj) && isJsonObject(obj.metadata)) {
    dropUnknownMetadata(obj.metadata, 'metadata', meta);
    normalizeObjectMeta(obj.metadata, false);
  }
  return [...pruned, ...embedded, ...meta];
}

/**
 * Paths of fields not declared in the schema, e.g. ["spec.foo", "spec.items[0].bar"],
 * in the order kube-apiserver reports them in a strict decoding error: pruned
 * paths sorted, then unknown metadata fields of embedded resources (sorted),
 * then unknown fields of the root metadata ("metadata.foo"). apiVersion, kind
 * and metadata at the root are always known. Honors x-kubernetes-preserve-unknown-fields,
 * additionalProperties, x-kubernetes-embedded-resource and x-kubernetes-int-or-string.
 */
export function unknownFields(obj: unknown, schema: JSONSchemaProps): string[] {
  return pruneObject(deepCopy(obj), schema);
}

/**
 * Removes those unknown fields in place, as the apiserver does when decoding:
 * undeclared fields, nulls in non-nullable fields without a default, and
 * anything in metadata (root or embedded) that metav1.ObjectMeta does not
 * know; empty metadata values disappear as in an ObjectMeta round trip.
 */
export function prune(obj: unknown, schema: JSONSchemaProps): void {
  pruneObject(obj, schema);
}

function hasDefault(s: JSONSchemaProps | null): s is JSONSchemaProps {
  return s !== null && s.default !== undefined && s.default !== null;
}

function defaultNode(x: unknown, s: JSONSchemaProps | null): void {
  if (!s) return;
  if (Array.isArray(x)) {
    const items = s.items ?? null;
    x.forEach((v, i) => {
      if (v === null && hasDefault(items) && !items.nullable) x[i] = deepCopy(items.default);
      defaultNode(x[i], items);
    });
    return;
  }
  if (!isJsonObject(x)) return;
  for (const [k, prop] of Object.entries(s.properties ?? {})) {
    if (!hasDefault(prop)) continue;
    if (!Object.hasOwn(x, k) || (x[k] === null && !prop.nullable)) x[k] = deepCopy(prop.default);
  }
  // Defaulted values are walked too, so defaults nested in them apply.
  for (const k of Object.keys(x)) {
    const sub = keySchema(s, k);
    if (sub === undefined) continue;
    if (x[k] === null && hasDefault(sub) && !sub.nullable) x[k] = deepCopy(sub.default);
    defaultNode(x[k], sub);
  }
}

/**
 * Apply `default`s in place, Kubernetes-style (defaulting.Default): a
 * property's default applies when the property is absent (or null if not
 * nullable) and its parent object exists; defaults inside array items apply
 * to each item; additionalProperties defaults apply to null map values.
 * Defaults are deep-copied. Runs on the pruned object.
 */
export function applyDefaults(obj: unknown, schema: JSONSchemaProps): void {
  defaultNode(obj, schema);
}
