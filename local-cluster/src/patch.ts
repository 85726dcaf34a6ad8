// PATCH bodies: the three patch formats the apiserver accepts for JSON, with
// its exact semantics and error statuses (handlers/patch.go). The
// implementations live in ./patch/; this module is the entry point the HTTP
// layer uses. Server-side apply (the fourth type) merges by field ownership
// instead and lives in ./ssa/.
import { StatusError, badRequest } from './errors.js';
import { deepCopy } from './object-meta.js';
import type { FieldValidation, KubeObject } from './types.js';
import { applyJsonPatch } from './patch/json-patch.js';
import { isMap, jsonTypeWord, type JsonMap } from './patch/json-value.js';
import { applyMergePatch } from './patch/merge-patch.js';
import { patchedNotAnObject } from './patch/patch-errors.js';
import { KIND_SCHEMAS } from './patch/schemas.js';
import { strategicMergePatch } from './patch/strategic.js';

export type PatchType = 'json' | 'merge' | 'strategic' | 'apply';

const MEDIA_TYPES: Readonly<Record<PatchType, string>> = {
  json: 'application/json-patch+json',
  merge: 'application/merge-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  apply: 'application/apply-patch+yaml',
};

/**
 * Map a request Content-Type to a patch type, or undefined. Like the apiserver,
 * everything from the first ";" on is ignored and the rest must match exactly
 * (no trimming, case-sensitive).
 */
export function patchTypeOf(contentType: string | undefined): PatchType | undefined {
  if (contentType === undefined) return undefined;
  const semicolon = contentType.indexOf(';');
  const base = semicolon > 0 ? contentType.slice(0, semicolon) : contentType;
  return (Object.keys(MEDIA_TYPES) as PatchType[]).find((t) => MEDIA_TYPES[t] === base);
}

/** Whether strategic merge patch is available for a kind (built-in kinds with a schema). */
export function strategicSupported(kind: string): boolean {
  return Object.hasOwn(KIND_SCHEMAS, kind);
}

/**
 * The patch Content-Types a real apiserver lists for a kind, in its order: the
 * list in its 415 "accepted media types include: …" message (built-in kinds
 * add strategic merge).
 */
export function patchMediaTypes(kind: string): string[] {
  const types: PatchType[] = strategicSupported(kind) ? ['json', 'merge', 'strategic', 'apply'] : ['json', 'merge', 'apply'];
  return types.map((t) => MEDIA_TYPES[t]);
}

/** The apiserver's 415 for a Content-Type it does not accept on this kind. */
export function unsupportedPatchType(kind: string): StatusError {
  return mediaTypeError(patchMediaTypes(kind));
}

function mediaTypeError(accepted: string[]): StatusError {
  return new StatusError(415, 'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: ${accepted.join(', ')}`);
}

export interface PatchOptions {
  /**
   * The request's fieldValidation (default Warn, like the apiserver). Strict and
   * Warn decode the body strictly first, which changes some 400 messages.
   */
  fieldValidation?: FieldValidation;
}

/**
 * Apply a patch to a deep copy of `original` and return the result. kind is the
 * object's kind ("Job", "Pod", …) used to find strategic-merge keys. Throws
 * StatusError with the real apiserver reasons/codes on bad patches.
 */
export function applyPatch(original: KubeObject, patch: unknown, type: Exclude<PatchType, 'apply'>, kind: string, options: PatchOptions = {}): KubeObject {
  const strict = (options.fieldValidation ?? 'Warn') !== 'Ignore';
  const doc = deepCopy(original) as JsonMap;
  let result: unknown;
  switch (type) {
    case 'json':
      result = applyJsonPatch(doc, deepCopy(patch), strict);
      break;
    case 'merge':
      result = applyMergePatch(doc, deepCopy(patch), strict);
      break;
    case 'strategic':
      result = applyStrategic(doc, deepCopy(patch), kind);
      break;
  }
  if (!isMap(result)) throw patchedNotAnObject(result);
  return result as KubeObject;
}

function applyStrategic(doc: JsonMap, patch: unknown, kind: string): JsonMap {
  const schema = strategicSupported(kind) ? KIND_SCHEMAS[kind] : undefined;
  if (!schema) throw unsupportedPatchType(kind);
  if (patch === null) return doc; // decodes to a nil map: nothing to merge
  if (!isMap(patch)) {
    throw badRequest(`json: cannot unmarshal ${jsonTypeWord(patch)} into Go value of type map[string]interface {}`);
  }
  return strategicMergePatch(doc, patch, schema);
}
