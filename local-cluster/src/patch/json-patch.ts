// RFC 6902 JSON patch with the exact semantics of gopkg.in/evanphx/json-patch.v4,
// which the apiserver uses (vendored, v4.12). Its behaviour differs from the RFC
// (and from fast-json-patch) in ways clients can observe, so it is reproduced
// rather than delegated:
//  - "replace" of a missing object key adds it; only array indices are checked;
//  - negative array indices count from the end;
//  - "copy" from a missing object key copies null;
//  - "test" of a missing (or null) value passes when "value" is null or absent;
//  - a path without a leading "/" addresses the root ("a/b" means "/b").
// Every failing operation becomes the same 422; the handler discards the detail.
import { badRequest } from '../errors.js';
import { deepCopy } from '../object-meta.js';
import { getOwn, isMap, jsonEqual, jsonTypeWord, setOwn, type JsonMap } from './json-value.js';
import { patchNotApplicable, tooManyOperations } from './patch-errors.js';

const MAX_OPERATIONS = 10000;

type Container = JsonMap | unknown[];

/** Thrown by an operation that does not apply; turned into the generic 422. */
class NotApplicable extends Error {}

function fail(): never {
  throw new NotApplicable();
}

/**
 * Applies `patch` to `doc` (which it may mutate) and returns the new document.
 * `strict` mirrors fieldValidation Strict/Warn, under which the handler first
 * decodes the body into []jsonPatchOp and reports type errors differently.
 */
export function applyJsonPatch(doc: JsonMap, patch: unknown, strict: boolean): unknown {
  if (strict) strictDecode(patch);
  const ops = decodePatch(patch);
  if (ops.length > MAX_OPERATIONS) throw tooManyOperations(ops.length);
  const state = { root: doc as unknown };
  try {
    for (const op of ops) applyOperation(state, isMap(op) ? op : {});
  } catch (err) {
    if (err instanceof NotApplicable) throw patchNotApplicable();
    throw err;
  }
  return state.root;
}

// kjson.UnmarshalStrict(body, &[]jsonPatchOp{}): only op/path/from are typed.
function strictDecode(patch: unknown): void {
  const prefix = 'error decoding patch: json: cannot unmarshal';
  if (patch === null) return;
  if (!Array.isArray(patch)) throw badRequest(`${prefix} ${jsonTypeWord(patch)} into Go value of type []handlers.jsonPatchOp`);
  for (const el of patch) {
    if (el === null) continue;
    if (!isMap(el)) throw badRequest(`${prefix} ${jsonTypeWord(el)} into Go value of type handlers.jsonPatchOp`);
    for (const [field, value] of Object.entries(el)) {
      if (['op', 'path', 'from'].includes(field) && value !== null && typeof value !== 'string') {
        throw badRequest(`${prefix} ${jsonTypeWord(value)} into Go struct field jsonPatchOp.${field} of type string`);
      }
    }
  }
}

// jsonpatch.DecodePatch: a JSON array of objects (null means "no operations").
function decodePatch(patch: unknown): unknown[] {
  if (patch === null) return [];
  if (!Array.isArray(patch)) {
    throw badRequest(`json: cannot unmarshal ${jsonTypeWord(patch)} into Go value of type jsonpatch.Patch`);
  }
  for (const el of patch) {
    if (el !== null && !isMap(el)) {
      throw badRequest(`json: cannot unmarshal ${jsonTypeWord(el)} into Go value of type jsonpatch.Operation`);
    }
  }
  return patch;
}

function applyOperation(state: { root: unknown }, op: JsonMap): void {
  const kind = getOwn(op, 'op');
  switch (kind) {
    case 'add': return add(target(state.root, pathOf(op)), valueOf(op) ?? null);
    case 'remove': return remove(target(state.root, pathOf(op)));
    case 'replace': return replace(state, op);
    case 'move': return move(state.root, op);
    case 'copy': return copy(state.root, op);
    case 'test': return test(state.root, op);
    default: fail(); // "Unexpected kind", including a missing or non-string "op"
  }
}

function pathOf(op: JsonMap, field: 'path' | 'from' = 'path'): string {
  const p = getOwn(op, field);
  return typeof p === 'string' ? p : fail();
}

/** The operation's value; undefined when the member is absent (null is a value). */
function valueOf(op: JsonMap): unknown {
  return Object.hasOwn(op, 'value') ? op.value : undefined;
}

interface Target { con: Container; key: string }

// findObject: walks every token but the last; any missing, null or scalar
// intermediate (or a bad array index) means the path does not exist.
function findObject(root: unknown, path: string): Target | undefined {
  const tokens = path.split('/');
  if (tokens.length < 2 || !(Array.isArray(root) || isMap(root))) return undefined;
  let con: Container = root;
  for (const token of tokens.slice(1, -1)) {
    const next = lookup(con, decodeToken(token));
    if (next === undefined || next === null || !(Array.isArray(next) || isMap(next))) return undefined;
    con = next;
  }
  return { con, key: decodeToken(tokens[tokens.length - 1] ?? '') };
}

function target(root: unknown, path: string): Target {
  return findObject(root, path) ?? fail();
}

function decodeToken(token: string): string {
  return token.replace(/~1|~0/g, (m) => (m === '~1' ? '/' : '~'));
}

/** strconv.Atoi: optional sign, decimal digits only. */
function atoi(key: string): number {
  return /^[+-]?\d+$/.test(key) ? Number(key) : fail();
}

/** partialArray.get's index rule: -len <= i < len, negatives from the end. */
function existingIndex(arr: unknown[], key: string): number {
  let idx = atoi(key);
  if (idx < 0) {
    if (idx < -arr.length) fail();
    idx += arr.length;
  }
  return idx < arr.length ? idx : fail();
}

/** An object member (undefined when absent) or an existing array element. */
function get({ con, key }: Target): unknown {
  return Array.isArray(con) ? con[existingIndex(con, key)] : getOwn(con, key);
}

function lookup(con: Container, key: string): unknown {
  try {
    return get({ con, key });
  } catch (err) {
    if (err instanceof NotApplicable) return undefined;
    throw err;
  }
}

function add({ con, key }: Target, value: unknown): void {
  if (!Array.isArray(con)) return setOwn(con, key, value);
  if (key === '-') {
    con.push(value);
    return;
  }
  const size = con.length + 1;
  let idx = atoi(key);
  if (idx >= size) fail();
  if (idx < 0) {
    if (idx < -size) fail();
    idx += size;
  }
  con.splice(idx, 0, value);
}

function remove({ con, key }: Target): void {
  if (Array.isArray(con)) {
    con.splice(existingIndex(con, key), 1);
    return;
  }
  if (!Object.hasOwn(con, key)) fail();
  delete con[key];
}

function replace(state: { root: unknown }, op: JsonMap): void {
  const path = pathOf(op);
  const value = valueOf(op) ?? null;
  if (path === '') {
    if (!(Array.isArray(value) || isMap(value))) fail();
    state.root = value;
    return;
  }
  const t = target(state.root, path);
  if (Array.isArray(t.con)) t.con[existingIndex(t.con, t.key)] = value;
  else setOwn(t.con, t.key, value); // no existence check for objects, as in v4
}

function move(root: unknown, op: JsonMap): void {
  const from = target(root, pathOf(op, 'from'));
  const value = get(from);
  remove(from);
  add(target(root, pathOf(op)), value ?? null);
}

function copy(root: unknown, op: JsonMap): void {
  const value = get(target(root, pathOf(op, 'from')));
  add(target(root, pathOf(op)), deepCopy(value ?? null));
}

function test(root: unknown, op: JsonMap): void {
  const path = pathOf(op);
  const expected = valueOf(op);
  if (path === '') {
    if (expected === undefined || !jsonEqual(root, expected)) fail();
    return;
  }
  const actual = get(target(root, path));
  if (actual === undefined || actual === null) {
    if (expected !== undefined && expected !== null) fail();
    return;
  }
  if (expected === undefined || !jsonEqual(actual, expected)) fail();
}
