// Objects seen through their schema, as structured-merge-diff's typed
// package sees them: which maps are structs or granular maps, which are
// atomic, which lists are atomic, sets or maps keyed by fields
// (x-kubernetes-list-type, x-kubernetes-list-map-keys, x-kubernetes-map-type).
// Built-in kinds read the markers from the served OpenAPI component schemas
// (list-types.ts put them there); custom resources from their CRD schema, with
// metadata typed as ObjectMeta like apiextensions-apiserver does. Where there is
// no schema (x-kubernetes-preserve-unknown-fields, additionalProperties: true)
// the type is SMD's "deduced" one: maps granular, lists atomic.
//
// This module owns the walk over a value: its field set (tofieldset.go) and
// the comparison of two values (compare.go). Merging lives in merge.ts.
import { isObject, deepEqual } from '../object-meta.js';
import { builtinSchemas } from '../openapi/index.js';
import type { ResourceType } from '../types.js';
import { FieldCursor, FieldSet, fieldPE, indexPE, keyPE, pathString, valuePE } from './fieldset.js';

type Schema = Record<string, unknown>;
/** undefined: no schema below this point (deduced typing). */
export type TypeRef = Schema | undefined;

const REF_PREFIX = '#/components/schemas/';
const OBJECT_META = 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta';

function component(ref: unknown): Schema | undefined {
  return typeof ref === 'string' ? builtinSchemas()[ref.slice(REF_PREFIX.length)] : undefined;
}

// Schemas are read-only and walked on every write: each is resolved once.
const resolved = new WeakMap<Schema, Schema>();

/** A schema with its $ref (direct or through allOf, as fields with a description have) followed. */
function resolve(s: TypeRef): TypeRef {
  if (!s) return s;
  let r = resolved.get(s);
  if (!r) {
    const target = component(s.$ref) ?? component((s.allOf as Schema[] | undefined)?.[0]?.$ref);
    // Markers on the referring field (x-kubernetes-map-type on nodeSelector) add to the target's.
    const { allOf: _a, $ref: _r, ...own } = s;
    r = target ? { ...target, ...own } : s;
    resolved.set(s, r);
  }
  return r;
}

const roots = new WeakMap<ResourceType, TypeRef>();

/** The type of the whole object of a resource. */
export function rootType(rt: ResourceType): TypeRef {
  if (!roots.has(rt)) roots.set(rt, buildRootType(rt));
  return roots.get(rt);
}

function buildRootType(rt: ResourceType): TypeRef {
  if (!rt.builtin) {
    // As the CRD's published OpenAPI: TypeMeta and ObjectMeta are declared whatever the schema says.
    const schema = (rt.schema ?? {}) as Schema;
    const properties = {
      apiVersion: { type: 'string' }, kind: { type: 'string' },
      ...((schema.properties as Record<string, Schema> | undefined) ?? {}), metadata: builtinSchemas()[OBJECT_META]!,
    };
    return { ...schema, properties };
  }
  return builtinSchemas()[schemaOfKind().get(`${rt.group}/${rt.version}/${rt.kind}`) ?? ''];
}

let byGvk: Map<string, string> | undefined;

/** "group/version/Kind" → the served component schema tagged with it. */
function schemaOfKind(): Map<string, string> {
  if (!byGvk) {
    byGvk = new Map();
    for (const [name, schema] of Object.entries(builtinSchemas())) {
      for (const t of (schema['x-kubernetes-group-version-kind'] as Record<string, string>[] | undefined) ?? []) {
        byGvk.set(`${t.group}/${t.version}/${t.kind}`, name);
      }
    }
  }
  return byGvk;
}

/** The type of a map's key: a struct field, else the map's element type. */
export function fieldType(t: TypeRef, key: string): TypeRef {
  const s = resolve(t);
  if (!s) return undefined;
  const props = s.properties as Record<string, Schema> | undefined;
  if (props && Object.hasOwn(props, key)) return props[key];
  return isObject(s.additionalProperties) ? (s.additionalProperties as Schema) : undefined;
}

/** Whether a key is a declared struct field (fields are only members when empty or null). */
export function isStructField(t: TypeRef, key: string): boolean {
  const props = resolve(t)?.properties as Record<string, Schema> | undefined;
  return !!props && Object.hasOwn(props, key);
}

export function elementType(t: TypeRef): TypeRef {
  return resolve(t)?.items as TypeRef;
}

export function isAtomicMap(t: TypeRef): boolean {
  return resolve(t)?.['x-kubernetes-map-type'] === 'atomic';
}

export type ListKind = 'atomic' | 'set' | 'map';

export function listKind(t: TypeRef): ListKind {
  const lt = resolve(t)?.['x-kubernetes-list-type'];
  return lt === 'set' || lt === 'map' ? lt : 'atomic';
}

/**
 * The path element of a list item (helpers.go listItemToPathElement): key
 * fields for map lists (absent keys left out, as without a default), the
 * value for sets, the index otherwise.
 */
export function itemElement(t: TypeRef, kind: ListKind, item: unknown, index: number): string {
  if (kind === 'set') return valuePE(item);
  if (kind === 'map' && isObject(item)) {
    const keys = (resolve(t)?.['x-kubernetes-list-map-keys'] as string[] | undefined) ?? [];
    const fields = keys.filter((k) => item[k] !== undefined).map((k): [string, unknown] => [k, item[k]]);
    if (fields.length) return keyPE(fields);
  }
  return indexPE(index);
}

/** The items of a list by path element; later duplicates are dropped, as the walkers do. */
export function indexItems(t: TypeRef, list: unknown[]): Map<string, unknown> {
  const kind = listKind(t);
  const out = new Map<string, unknown>();
  list.forEach((item, i) => {
    const pe = itemElement(t, kind, item, i);
    if (!out.has(pe)) out.set(pe, item);
  });
  return out;
}

// ---- fields the schema does not declare (validate.go) ---------------------------

/**
 * The paths of keys a struct does not declare (".spec.foo: field not declared
 * in schema"): what makes an apply patch untypable. Maps with element types
 * and parts without a schema (preserve-unknown-fields) declare every key.
 */
export function undeclaredFields(value: unknown, t: TypeRef, path = ''): string[] {
  if (Array.isArray(value)) {
    const kind = listKind(t);
    return value.flatMap((item, i) => undeclaredFields(item, elementType(t), path + pathString([itemElement(t, kind, item, i)])));
  }
  if (!isObject(value)) return [];
  const s = resolve(t);
  const closed = !!s?.properties && !isObject(s.additionalProperties) && !s['x-kubernetes-preserve-unknown-fields'];
  return Object.entries(value).flatMap(([key, v]) => (closed && !isStructField(t, key)
    ? [`${path}.${key}`]
    : undeclaredFields(v, fieldType(t, key), `${path}.${key}`)));
}

// ---- field set of a value (tofieldset.go) -------------------------------------

/** Every field a value sets: leaves, list items, granular map entries, empty structs. */
export function toFieldSet(value: unknown, t: TypeRef): FieldSet {
  const set = new FieldSet();
  collect(value, t, FieldCursor.root(), set);
  return set;
}

function collect(value: unknown, t: TypeRef, at: FieldCursor, set: FieldSet): void {
  if (Array.isArray(value)) {
    if (listKind(t) === 'atomic') return at.insertInto(set);
    const items = elementType(t);
    for (const [pe, item] of indexItems(t, value)) {
      const p = at.down(pe);
      collect(item, items, p, set);
      p.insertInto(set);
    }
    return;
  }
  if (isObject(value)) {
    if (isAtomicMap(t)) return at.insertInto(set);
    for (const key of Object.keys(value)) {
      const v = value[key];
      const p = at.down(fieldPE(key));
      collect(v, fieldType(t, key), p, set);
      const emptyMap = isObject(v) && Object.keys(v).length === 0;
      if (v === null || emptyMap || !isStructField(t, key)) p.insertInto(set);
    }
    return;
  }
  at.insertInto(set);
}

// ---- comparison (compare.go) ------------------------------------------------------

export interface Comparison {
  added: FieldSet;
  modified: FieldSet;
  removed: FieldSet;
}

/** The fields `rhs` adds, changes and removes relative to `lhs` (undefined: absent). */
export function compare(lhs: unknown, rhs: unknown, t: TypeRef): Comparison {
  const c: Comparison = { added: new FieldSet(), modified: new FieldSet(), removed: new FieldSet() };
  compareNode(lhs, rhs, t, FieldCursor.root(), c);
  return c;
}

function compareLeaf(lhs: unknown, rhs: unknown, at: FieldCursor, c: Comparison): void {
  if (lhs === undefined) at.insertInto(c.added);
  else if (rhs === undefined) at.insertInto(c.removed);
  else if (!deepEqual(lhs, rhs)) at.insertInto(c.modified);
}

const own = (m: Record<string, unknown>, key: string): unknown => (Object.hasOwn(m, key) ? m[key] : undefined);

function compareNode(lhs: unknown, rhs: unknown, t: TypeRef, at: FieldCursor, c: Comparison): void {
  if (lhs === undefined && rhs === undefined) return;
  const bothLists = (lhs === undefined || Array.isArray(lhs)) && (rhs === undefined || Array.isArray(rhs));
  const bothMaps = (lhs === undefined || isObject(lhs)) && (rhs === undefined || isObject(rhs));
  if (bothLists && (Array.isArray(lhs) || Array.isArray(rhs))) {
    const l = (lhs as unknown[] | undefined) ?? [];
    const r = (rhs as unknown[] | undefined) ?? [];
    if (listKind(t) === 'atomic' || (!l.length && !r.length)) return compareLeaf(lhs, rhs, at, c);
    const li = indexItems(t, l);
    const ri = indexItems(t, r);
    const items = elementType(t);
    for (const [pe, item] of li) compareNode(item, ri.get(pe), items, at.down(pe), c);
    for (const [pe, item] of ri) if (!li.has(pe)) compareNode(undefined, item, items, at.down(pe), c);
  } else if (bothMaps && (isObject(lhs) || isObject(rhs))) {
    const l = (lhs as Record<string, unknown> | undefined) ?? {};
    const r = (rhs as Record<string, unknown> | undefined) ?? {};
    const lk = Object.keys(l);
    const rk = Object.keys(r);
    if (isAtomicMap(t) || (!lk.length && !rk.length)) return compareLeaf(lhs, rhs, at, c);
    for (const key of lk) compareNode(l[key], own(r, key), fieldType(t, key), at.down(fieldPE(key)), c);
    for (const key of rk) if (!Object.hasOwn(l, key)) compareNode(undefined, r[key], fieldType(t, key), at.down(fieldPE(key)), c);
  } else {
    return compareLeaf(lhs, rhs, at, c);
  }
  if (at.isRoot) return;
  if (lhs === undefined) at.insertInto(c.added);
  else if (rhs === undefined) at.insertInto(c.removed);
}
