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
 * Associative lists, ordered as merge.go orders them: both lists are walked
 * together; an item only the live list has comes out as soon as it is
 * reached, an item the applier names comes out in the applier's order, and a
 * live item the applier moved waits for its place in the applied order.
 */
function mergeLists(live: unknown[], applied: unknown[], t: TypeRef): unknown[] {
  const liveItems = indexItems(t, live);
  const appliedItems = indexItems(t, applied);
  const lPEs = [...liveItems.keys()];
  const rPEs = [...appliedItems.keys()];
  const shared = rPEs.filter((pe) => liveItems.has(pe));
  const emitted = new Set<string>();
  let sharedAt = 0;
  const nextShared = () => {
    while (sharedAt < shared.length && emitted.has(shared[sharedAt]!)) sharedAt++;
    return shared[sharedAt];
  };
  const out: unknown[] = [];
  const emit = (pe: string) => {
    emitted.add(pe);
    out.push(mergeValues(liveItems.get(pe), appliedItems.get(pe), elementType(t)));
  };
  for (let l = 0, r = 0; l < lPEs.length || r < rPEs.length;) {
    const lpe = lPEs[l];
    if (lpe !== undefined && r < rPEs.length) {
      if (lpe === rPEs[r]) {
        emit(lpe);
        l++;
        r++;
        continue;
      }
      const next = nextShared();
      if (appliedItems.has(lpe) && next !== undefined && next !== lpe) {
        l++;
        continue;
      }
    }
    if (lpe !== undefined) {
      if (!appliedItems.has(lpe)) {
        out.push(liveItems.get(lpe));
        l++;
        continue;
      }
      if (emitted.has(lpe)) l++;
    }
    if (r < rPEs.length) emit(rPEs[r++]!);
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
