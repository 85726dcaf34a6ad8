// The body of an application/apply-patch+yaml PATCH, checked as the apply
// patcher and the structured-merge field manager check it
// (handlers/patch.go applyPatcher, managedfields/internal/structuredmerge.go),
// then merged by field ownership (managed-fields.ts).
import { badRequest } from '../errors.js';
import { isObject } from '../object-meta.js';
import { apiVersionOf, type KubeObject, type ResourceType } from '../types.js';
import { apply, type Writer } from './managed-fields.js';
import { rootType } from './typed.js';

/** The object an apply produces from the live one (undefined: create), managedFields included. */
export function applyConfiguration(rt: ResourceType, live: KubeObject | undefined, patch: unknown, w: Writer, force: boolean): KubeObject {
  if (!isObject(patch)) {
    throw badRequest(`error decoding patch: json: cannot unmarshal ${patch === null ? 'null' : Array.isArray(patch) ? 'array' : typeof patch} into Go value of type map[string]interface {}`);
  }
  const expected = apiVersionOf(rt);
  if (patch.apiVersion !== expected) {
    throw badRequest(`Incorrect version specified in apply patch. Specified patch version: ${typeof patch.apiVersion === 'string' ? patch.apiVersion : ''}, expected: ${expected}`);
  }
  if (isObject(patch.metadata) && patch.metadata.managedFields != null) {
    throw badRequest('metadata.managedFields must be nil');
  }
  return apply(live, patch as KubeObject, w, force, rootType(rt));
}
