// JSON merge patch (RFC 7386) as gopkg.in/evanphx/json-patch.v4's MergePatch
// applies it for the apiserver: null deletes a member, objects merge
// recursively, anything else (arrays included) replaces. Nulls inside a value
// that is copied in are pruned from objects but kept as array elements.
import { badRequest } from '../errors.js';
import { getOwn, isMap, jsonTypeWord, setOwn, type JsonMap } from './json-value.js';

/**
 * Applies `patch` to `doc` (which it mutates) and returns the result, which is
 * an array when an array patch is sent without strict decoding; the caller
 * rejects such a result like the apiserver's decoder does.
 */
export function applyMergePatch(doc: JsonMap, patch: unknown, strict: boolean): unknown {
  if (patch === null) throw badRequest('Invalid JSON Patch');
  if (!isMap(patch)) {
    // Strict/Warn decoding first unmarshals the body into a map.
    if (strict) {
      throw badRequest(`error decoding patch: json: cannot unmarshal ${jsonTypeWord(patch)} into Go value of type map[string]interface {}`);
    }
    if (Array.isArray(patch)) return pruneNulls(patch);
    throw badRequest('Invalid JSON Patch');
  }
  mergeDocs(doc, patch);
  return doc;
}

function mergeDocs(doc: JsonMap, patch: JsonMap): void {
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      delete doc[key];
      continue;
    }
    const current = getOwn(doc, key);
    setOwn(doc, key, current === undefined || current === null ? pruneNulls(value) : merge(current, value));
  }
}

function merge(current: unknown, patch: unknown): unknown {
  if (!isMap(current)) return pruneNulls(patch);
  if (!isMap(patch)) return patch;
  mergeDocs(current, patch);
  return current;
}

function pruneNulls<T>(value: T): T {
  if (Array.isArray(value)) {
    for (const el of value) if (el !== null) pruneNulls(el);
  } else if (isMap(value)) {
    for (const [k, v] of Object.entries(value)) {
      if (v === null) delete value[k];
      else pruneNulls(v);
    }
  }
  return value;
}
