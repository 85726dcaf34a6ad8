// Strategic merge patch, applied the way the apiserver applies it:
// strategicpatch.StrategicMergeMapPatch with MergeParallelList and
// IgnoreUnmatchedNulls (k8s.io/apimachinery/pkg/util/strategicpatch/patch.go),
// followed by the handler's error translation (interpretStrategicMergePatchError).
// The structure below mirrors the Go functions so behaviour can be checked
// against them line by line, including their ordering rules.
import { badRequest, type StatusError } from '../errors.js';
import {
  getOwn, goString, goType, goTypeName, goValue, isMap, setOwn, type GoType, type JsonMap,
} from './json-value.js';
import { patchInternal, patchNotApplicable } from './patch-errors.js';
import type { FieldMeta, StructSchema } from './schemas.js';

const DIRECTIVE = '$patch';
const RETAIN_KEYS = '$retainKeys';
const DELETE_FROM_PRIMITIVE_LIST = '$deleteFromPrimitiveList';
const SET_ELEMENT_ORDER = '$setElementOrder';

const MAP_TYPE = 'map[string]interface {}';
const SLICE_TYPE = '[]interface {}';

// mergepatch's sentinel errors, which the handler answers with 400 …
const badPrimitiveList = (): StatusError => badRequest('invalid patch format of primitive list');
const badRetainKeys = (): StatusError => badRequest('invalid patch format of retainKeys');
const badSetElementOrder = (): StatusError => badRequest('invalid patch format of setElementOrder list');
// … or with the generic 422 (ErrNoListOfLists).
const noListOfLists = (): StatusError => patchNotApplicable();
// Everything else is a plain error: 500 with the Go message.
const badArgType = (expected: string, actual: unknown): StatusError =>
  patchInternal(`expected a ${expected}, but received a ${goTypeName(actual)}`);
const noMergeKey = (m: unknown, key: string): StatusError =>
  patchInternal(`map: ${goValue(m)} does not contain declared merge key: ${key}`);
const badPatchType = (directive: unknown, m: JsonMap): StatusError =>
  patchInternal(`unknown patch type: ${goString(directive)} in map: ${goValue(m)}`);

const EMPTY_SCHEMA: StructSchema = {};

function fieldMeta(schema: StructSchema, key: string): FieldMeta {
  return Object.hasOwn(schema, key) ? schema[key] ?? {} : {};
}

/** Applies `patch` to `original`; both are consumed (mutated). */
export function strategicMergePatch(original: JsonMap, patch: JsonMap, schema: StructSchema): JsonMap {
  return mergeMap(original, patch, schema);
}

function mergeMap(original: JsonMap, patch: JsonMap, schema: StructSchema): JsonMap {
  if (Object.hasOwn(patch, DIRECTIVE)) return handleDirectiveInMergeMap(patch[DIRECTIVE], patch);
  applyRetainKeysDirective(original, patch);
  // Lists with a $setElementOrder are merged (and removed from the patch) here.
  mergePatchIntoOriginal(original, patch, schema);

  for (const [patchKey, patchV] of Object.entries(patch)) {
    const isDeleteList = patchKey.startsWith(DELETE_FROM_PRIMITIVE_LIST);
    const key = isDeleteList ? extractKey(patchKey, DELETE_FROM_PRIMITIVE_LIST) : patchKey;
    if (patchV === null) {
      delete original[key];
      continue;
    }
    if (!Object.hasOwn(original, key) || goType(original[key]) !== goType(patchV)) {
      if (!isDeleteList) takePatchValue(original, key, patchV);
      continue;
    }
    mergeField(original, key, patchV, fieldMeta(schema, key), isDeleteList);
  }
  return original;
}

/** Both sides hold the same Go type: recurse into objects and lists. */
function mergeField(original: JsonMap, key: string, patchV: unknown, meta: FieldMeta, isDeleteList: boolean): void {
  const current = original[key];
  if (isMap(current) && isMap(patchV)) {
    setOwn(original, key, meta.strategy === 'replace' ? patchV : mergeMap(current, patchV, meta.schema ?? EMPTY_SCHEMA));
  } else if (Array.isArray(current) && Array.isArray(patchV)) {
    setOwn(original, key, mergeSliceHandler(current, patchV, meta, isDeleteList));
  } else {
    setOwn(original, key, patchV);
  }
}

/** A value with nothing to merge into: drop its nulls and any "$patch" members. */
function takePatchValue(original: JsonMap, key: string, patchV: unknown): void {
  discardNullValues(patchV);
  const [value, keep] = removeDirectives(patchV);
  if (keep) setOwn(original, key, value);
  else delete original[key];
}

function discardNullValues(v: unknown): void {
  if (Array.isArray(v)) {
    v.forEach(discardNullValues);
  } else if (isMap(v)) {
    for (const [k, child] of Object.entries(v)) {
      if (child === null) delete v[k];
      else discardNullValues(child);
    }
  }
}

/** Returns the value without "$patch" maps, and whether to keep it at all. */
function removeDirectives(v: unknown): [unknown, boolean] {
  if (Array.isArray(v)) {
    const kept: unknown[] = [];
    for (const el of v) {
      const [value, keep] = removeDirectives(el);
      if (keep) kept.push(value);
    }
    return [kept, true];
  }
  if (!isMap(v)) return [v, true];
  if (Object.hasOwn(v, DIRECTIVE)) return [null, false];
  for (const [k, child] of Object.entries(v)) {
    const [value, keep] = removeDirectives(child);
    if (keep) setOwn(v, k, value);
    else delete v[k];
  }
  return [v, true];
}

function handleDirectiveInMergeMap(directive: unknown, patch: JsonMap): JsonMap {
  if (directive === 'replace') {
    delete patch[DIRECTIVE];
    return patch;
  }
  if (directive === 'delete') return {};
  throw badPatchType(directive, patch);
}

/** "$deleteFromPrimitiveList/finalizers" → "finalizers". */
function extractKey(key: string, prefix: string): string {
  const slash = key.indexOf('/');
  if (slash < 0 || key.slice(0, slash) !== prefix) {
    throw prefix === DELETE_FROM_PRIMITIVE_LIST ? badPrimitiveList() : badSetElementOrder();
  }
  return key.slice(slash + 1);
}

// $retainKeys: drop every original field not listed; every field the patch
// sets must be listed.
function applyRetainKeysDirective(original: JsonMap, patch: JsonMap): void {
  if (!Object.hasOwn(patch, RETAIN_KEYS)) return;
  const retain = patch[RETAIN_KEYS];
  delete patch[RETAIN_KEYS];
  if (!Array.isArray(retain)) throw badRetainKeys();
  const keep = new Set<unknown>(retain);
  for (const [k, v] of Object.entries(patch)) {
    if (v === null || k.startsWith(DELETE_FROM_PRIMITIVE_LIST) || k.startsWith(SET_ELEMENT_ORDER)) continue;
    if (!keep.has(k)) throw badRetainKeys();
  }
  for (const k of Object.keys(original)) {
    if (!keep.has(k)) delete original[k];
  }
}

// $setElementOrder/<field>: merge the list now, then order it by the directive
// (patch items) while keeping server-only items near their old neighbours.
function mergePatchIntoOriginal(original: JsonMap, patch: JsonMap, schema: StructSchema): void {
  for (const directiveKey of Object.keys(patch)) {
    if (!directiveKey.startsWith(SET_ELEMENT_ORDER)) continue;
    const order = patch[directiveKey];
    delete patch[directiveKey];
    if (!Array.isArray(order)) throw badArgType(SLICE_TYPE, order);
    const field = extractKey(directiveKey, SET_ELEMENT_ORDER);
    const hasOriginal = Object.hasOwn(original, field);
    const hasPatch = Object.hasOwn(patch, field);
    const originalList = hasOriginal ? expectList(original[field]) : [];
    const patchList = hasPatch ? expectList(patch[field]) : [];
    const meta = fieldMeta(schema, field);
    const mergeKey = meta.mergeKey ?? '';
    validatePatchWithSetOrderList(patchList, order, mergeKey);

    let merged: unknown[];
    if (hasOriginal && hasPatch) merged = mergeSliceHandler(originalList, patchList, meta, false);
    else if (hasPatch) merged = removeDirectives(patchList)[0] as unknown[];
    else if (hasOriginal) merged = originalList;
    else continue;

    const [patchItems, serverOnly] = partition(merged, order, mergeKey);
    const kind = sliceElementType(originalList, patchList);
    setOwn(original, field, normalizeElementOrder(patchItems, serverOnly, order, originalList, mergeKey, kind));
    delete patch[field];
  }
}

function expectList(v: unknown): unknown[] {
  if (!Array.isArray(v)) throw badArgType(SLICE_TYPE, v);
  return v;
}

// The patch list must follow the directive's relative order (deletions and
// other directive items are skipped).
function validatePatchWithSetOrderList(patchList: unknown[], order: unknown[], mergeKey: string): void {
  if (order.length === 0 || patchList.length === 0) return;
  const items = mergeKey ? extractToDeleteItems(patchList)[0] : patchList;
  let pi = 0;
  let oi = 0;
  while (pi < items.length && oi < order.length) {
    if (isMap(items[pi]) && Object.hasOwn(items[pi] as JsonMap, DIRECTIVE)) {
      pi++;
      continue;
    }
    if (mergeKeyValueEqual(items[pi], order[oi], mergeKey)) pi++;
    oi++;
  }
  if (pi < items.length && oi >= order.length) {
    throw patchInternal(`the order in patch list:\n${goValue(patchList)}\n doesn't match ${SET_ELEMENT_ORDER} list:\n${goValue(order)}`);
  }
}

function mergeKeyValueEqual(left: unknown, right: unknown, mergeKey: string): boolean {
  if (!mergeKey) return left === right;
  if (!isMap(left)) throw badArgType(MAP_TYPE, left);
  if (!isMap(right)) throw badArgType(MAP_TYPE, right);
  if (!Object.hasOwn(left, mergeKey)) throw noMergeKey(left, mergeKey);
  if (!Object.hasOwn(right, mergeKey)) throw noMergeKey(right, mergeKey);
  return left[mergeKey] === right[mergeKey];
}

/** Splits a list of maps into [kept, "$patch: delete" items]. */
function extractToDeleteItems(list: unknown[]): [unknown[], unknown[]] {
  const keep: unknown[] = [];
  const toDelete: unknown[] = [];
  for (const v of list) {
    if (!isMap(v)) throw badArgType(MAP_TYPE, v);
    (getOwn(v, DIRECTIVE) === 'delete' ? toDelete : keep).push(v);
  }
  return [keep, toDelete];
}

function mergeSliceHandler(original: unknown[], patch: unknown[], meta: FieldMeta, isDeleteList: boolean): unknown[] {
  // A $deleteFromPrimitiveList list deletes whatever the field's strategy.
  if (meta.strategy === 'merge' || isDeleteList) {
    return mergeSlice(original, patch, meta.schema ?? EMPTY_SCHEMA, meta.mergeKey ?? '', isDeleteList);
  }
  return patch;
}

function mergeSlice(original: unknown[], patch: unknown[], schema: StructSchema, mergeKey: string, isDeleteList: boolean): unknown[] {
  if (original.length === 0 && patch.length === 0) return original;
  const kind = sliceElementType(original, patch);
  let merged: unknown[];
  if (kind !== 'map') {
    if (isDeleteList) return original.filter((v) => !patch.includes(v));
    merged = [...new Set([...original, ...patch])];
  } else {
    if (!mergeKey) throw patchInternal('cannot merge lists without merge key for struct');
    [original, patch] = mergeSliceWithSpecialElements(original, patch, mergeKey);
    merged = mergeSliceWithoutSpecialElements(original, patch, mergeKey, schema);
  }
  const [patchItems, serverOnly] = partition(merged, patch, mergeKey);
  return normalizeElementOrder(patchItems, serverOnly, patch, original, mergeKey, kind);
}

/** All elements of all lists must share one Go type, and not be lists. */
function sliceElementType(...lists: unknown[][]): GoType {
  let type: GoType | undefined;
  for (const v of lists.flat()) {
    const t = goType(v);
    if (type === undefined) {
      if (t === 'slice') throw noListOfLists();
      type = t;
    } else if (type !== t) {
      throw patchInternal(`list element types are not identical: ${goValue(lists)}`);
    }
  }
  if (type === undefined) throw patchInternal('no elements in any of the given slices');
  return type;
}

/** Handles "$patch: delete" and "$patch: replace" items; returns [original, patch] without them. */
function mergeSliceWithSpecialElements(original: unknown[], patch: unknown[], mergeKey: string): [unknown[], unknown[]] {
  const plain: unknown[] = [];
  let replace = false;
  for (const v of patch) {
    const item = v as JsonMap; // sliceElementType established that items are maps
    if (!Object.hasOwn(item, DIRECTIVE)) {
      plain.push(item);
      continue;
    }
    const directive = item[DIRECTIVE];
    if (directive === 'delete') {
      if (!Object.hasOwn(item, mergeKey)) throw noMergeKey(item, mergeKey);
      original = original.filter((o) => !(isMap(o) && Object.hasOwn(o, mergeKey) && o[mergeKey] === item[mergeKey]));
    } else if (directive === 'replace') {
      replace = true; // keep scanning so other directive items are dropped too
    } else if (directive === 'merge') {
      throw patchInternal('merging lists cannot yet be specified in the patch');
    } else {
      throw badPatchType(directive, item);
    }
  }
  return replace ? [plain, []] : [original, plain];
}

/** Merges items with the same merge key; appends the others. */
function mergeSliceWithoutSpecialElements(original: unknown[], patch: unknown[], mergeKey: string, schema: StructSchema): unknown[] {
  const out = [...original];
  for (const v of patch) {
    const item = v as JsonMap;
    if (!Object.hasOwn(item, mergeKey)) throw noMergeKey(item, mergeKey);
    const idx = findByMergeKey(out, mergeKey, item[mergeKey]);
    if (idx >= 0) out[idx] = mergeMap(out[idx] as JsonMap, item, schema);
    else out.push(item);
  }
  return out;
}

function findByMergeKey(list: unknown[], mergeKey: string, value: unknown): number {
  for (const [i, v] of list.entries()) {
    if (!isMap(v)) throw patchInternal(`value for key ${i} is not a map.`);
    if (Object.hasOwn(v, mergeKey) && v[mergeKey] === value) return i;
  }
  return -1;
}

/** Splits `merged` into [items present in `by`, server-only items]. */
function partition(merged: unknown[], by: unknown[], mergeKey: string): [unknown[], unknown[]] {
  const inPatch: unknown[] = [];
  const serverOnly: unknown[] = [];
  if (!mergeKey) {
    const present = new Set(by);
    for (const v of merged) (present.has(v) ? inPatch : serverOnly).push(v);
    return [inPatch, serverOnly];
  }
  for (const v of merged) {
    if (!isMap(v)) throw badArgType(MAP_TYPE, v);
    if (!Object.hasOwn(v, mergeKey)) throw noMergeKey(v, mergeKey);
    (findByMergeKey(by, mergeKey, v[mergeKey]) >= 0 ? inPatch : serverOnly).push(v);
  }
  return [inPatch, serverOnly];
}

// Patch items follow the patch (or $setElementOrder) order, server-only items
// the live order; then server-only items are slotted in before the first patch
// item that comes after them in the live list. An item the live list does not
// know (a new one) is emitted first, so new items end up ahead of the rest.
function normalizeElementOrder(patchItems: unknown[], serverOnly: unknown[], patchOrder: unknown[], serverOrder: unknown[], mergeKey: string, kind: GoType): unknown[] {
  const sortedPatch = normalizeSliceOrder(patchItems, patchOrder, mergeKey, kind);
  const sortedServer = normalizeSliceOrder(serverOnly, serverOrder, mergeKey, kind);
  return mergeSortedSlice(sortedServer, sortedPatch, serverOrder, mergeKey, kind);
}

function normalizeSliceOrder(toSort: unknown[], order: unknown[], mergeKey: string, kind: GoType): unknown[] {
  let items = toSort;
  let toDelete: unknown[] = [];
  if (kind === 'map') {
    validateMergeKeyInLists(mergeKey, toSort, order);
    [items, toDelete] = extractToDeleteItems(toSort);
  }
  const sorted = goStableSort(items, (a, b) => {
    const ia = indexIn(order, a, mergeKey, kind);
    if (ia >= 0) {
      const ib = indexIn(order, b, mergeKey, kind);
      if (ib >= 0) return ia < ib;
    }
    return true; // Go's comparator: unknown items count as "less"
  });
  return [...sorted, ...toDelete];
}

function validateMergeKeyInLists(mergeKey: string, ...lists: unknown[][]): void {
  for (const v of lists.flat()) {
    if (!isMap(v)) throw badArgType(MAP_TYPE, v);
    if (!Object.hasOwn(v, mergeKey)) throw noMergeKey(v, mergeKey);
  }
}

function mergeSortedSlice(left: unknown[], right: unknown[], serverOrder: unknown[], mergeKey: string, kind: GoType): unknown[] {
  const out: unknown[] = [];
  let i = 0;
  let j = 0;
  while (i < left.length && j < right.length) {
    const li = indexIn(serverOrder, left[i], mergeKey, kind);
    const ri = indexIn(serverOrder, right[j], mergeKey, kind);
    if (li >= 0 && ri >= 0 && li < ri) out.push(left[i++]);
    else out.push(right[j++]);
  }
  return [...out, ...left.slice(i), ...right.slice(j)];
}

/** Position of `value` in `list`: by merge-key value for maps, by value otherwise. */
function indexIn(list: unknown[], value: unknown, mergeKey: string, kind: GoType): number {
  const keyOf = (item: unknown): unknown => (kind === 'map'
    ? (isMap(item) ? getOwn(item, mergeKey) ?? null : null)
    : item);
  const wanted = keyOf(value);
  return list.findIndex((item) => keyOf(item) === wanted);
}

/**
 * sort.SliceStable's result. Go sorts small runs by insertion, and Go's less
 * function here is not a strict order, so an insertion sort is used to get
 * the same answer rather than Array.prototype.sort.
 */
function goStableSort<T>(items: T[], less: (a: T, b: T) => boolean): T[] {
  const out = [...items];
  for (let i = 1; i < out.length; i++) {
    for (let j = i; j > 0 && less(out[j] as T, out[j - 1] as T); j--) {
      [out[j], out[j - 1]] = [out[j - 1] as T, out[j] as T];
    }
  }
  return out;
}
