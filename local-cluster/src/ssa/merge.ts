// What server-side apply does to the object: merge the applied
// configuration into the live object (typed/merge.go), then drop what the
// applier applied last time, no longer applies, and nobody else owns
// (merge/update.go prune). Ownership bookkeeping lives in managed-fields.ts.
import { deepCopy, isObject } from '../object-meta.js';
import { fieldPE, type FieldSet } from './fieldset.js';
import { indexItems, isStructField, elementType, fieldType, isAtomicMap, listKind, type TypeRef } from './typed.js';

/** The live value with the applied one merged in; the applied value wins on leaves. */
export function mergeValues(live: unknown, applied: unknown, t: TypeRef): unknown {
  if (applied === undefined) return live;
  if (live === undefined) return deepCopy(applied);
  if (Array.isArray(live) && Array.isArray(applied)) {
    if (listKind(t) === 'atomic' || (!live.length && !applied.length)) return deepCopy(applied);
    return mergeLists(live, applied, t);
  }
  if (isObject(live) && isObject(applied)) {
    if (isAtomicMap(t) || (!Object.keys(live).length && !Object.keys(applied).length)) return deepCopy(applied);
    const out: Record<string, unknown> = {};
    for (const key of new Set([...Object.keys(live), ...Object.keys(applied)])) {
      out[key] = mergeValues(live[key], applied[key], fieldType(t, key));
    }
    return out;
  }
  return deepCopy(applied);
}

/**
 * Associative lists: items the applier names are merged and come in its
 * order; items only the live list has stay just before the next item they
 * preceded there (SMD interleaves the same way for lists both sides order alike).
 */
function mergeLists(live: unknown[], applied: unknown[], t: TypeRef): unknown[] {
  const liveItems = indexItems(t, live);
  const appliedItems = indexItems(t, applied);
  const livePEs = [...liveItems.keys()];
  const out: unknown[] = [];
  let next = 0;
  for (const [pe, item] of appliedItems) {
    const at = livePEs.indexOf(pe);
    for (; at >= next && next < at; next++) {
      const lpe = livePEs[next]!;
      if (!appliedItems.has(lpe)) out.push(liveItems.get(lpe));
    }
    if (at >= next) next = at + 1;
    out.push(mergeValues(liveItems.get(pe), item, elementType(t)));
  }
  for (; next < livePEs.length; next++) {
    const lpe = livePEs[next]!;
    if (!appliedItems.has(lpe)) out.push(liveItems.get(lpe));
  }
  return out;
}

/**
 * Removes what `last` (the applier's previous set) has and `owned` (every
 * manager's set, the applier's new one included) does not. A struct field is
 * kept while anything below it is owned; named ancestors of a previously
 * applied field count as applied too (EnsureNamedFieldsAreMembers).
 */
export function pruneUnowned(value: unknown, t: TypeRef, last: FieldSet, owned: FieldSet, path: string[] = []): unknown {
  if (Array.isArray(value)) {
    if (listKind(t) === 'atomic') return value;
    const kept: unknown[] = [];
    for (const [pe, item] of indexItems(t, value)) {
      const p = [...path, pe];
      if (last.has(p) && !ownedAt(owned, p)) continue;
      kept.push(pruneUnowned(item, elementType(t), last, owned, p));
    }
    return kept;
  }
  if (!isObject(value) || isAtomicMap(t)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const p = [...path, fieldPE(key)];
    const applied = last.has(p) || (isStructField(t, key) && last.hasBelow(p));
    if (applied && !ownedAt(owned, p)) continue;
    out[key] = pruneUnowned(v, fieldType(t, key), last, owned, p);
  }
  return out;
}

function ownedAt(owned: FieldSet, path: string[]): boolean {
  return owned.has(path) || owned.hasBelow(path);
}
