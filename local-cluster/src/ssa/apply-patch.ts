// The body of an application/apply-patch+yaml PATCH, checked as the apply
// patcher and the structured-merge field manager check it
// (handlers/patch.go applyPatcher, managedfields/internal/structuredmerge.go),
// then merged by field ownership (managed-fields.ts).
import { StatusError, badRequest } from '../errors.js';
import { patchInternal } from '../patch/patch-errors.js';
import { deepCopy, isObject } from '../object-meta.js';
import { sortKeys } from '../openapi/json.js';
import { apiVersionOf, type KubeObject, type ResourceType } from '../types.js';
import { apply, type Writer } from './managed-fields.js';
import { rootType, undeclaredFields } from './typed.js';

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
  const type = rootType(rt);
  const undeclared = undeclaredFields(patch, type);
  if (undeclared.length) throw untypedPatch(rt, patch, undeclared);
  const result = apply(live, patch as KubeObject, w, force, type);
  syncLastApplied(result, patch as KubeObject, w.manager);
  return result;
}

/**
 * A patch the schema cannot type: a plain error in the field manager, so a
 * 500 without a reason (kubernetes/kubernetes#122480), naming the patch's
 * namespace/name and group-version-kind as objectGVKNN prints them.
 */
function untypedPatch(rt: ResourceType, patch: Record<string, unknown>, paths: string[]): StatusError {
  const meta = isObject(patch.metadata) ? patch.metadata : {};
  const text = (v: unknown) => (typeof v === 'string' ? v : '');
  const errors = paths.map((p) => `${p}: field not declared in schema`);
  const detail = errors.length === 1 ? errors[0] : ['errors:', ...errors.map((e) => `  ${e}`)].join('\n');
  return patchInternal(`failed to create typed patch object (${text(meta.namespace)}/${text(meta.name)}; ${rt.group}/${rt.version}, Kind=${rt.kind}): ${detail}`);
}

const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * kubectl's server-side apply keeps an existing client-side apply annotation
 * current (lastappliedupdater.go), so a later client-side apply diffs against
 * what was applied last. Only for the manager "kubectl", only when the
 * annotation is there.
 */
function syncLastApplied(result: KubeObject, config: KubeObject, manager: string): void {
  const annotations = result.metadata.annotations;
  if (manager !== 'kubectl' || !isObject(annotations) || !annotations[LAST_APPLIED]) return;
  const copy = deepCopy(config);
  if (isObject(copy.metadata?.annotations)) delete copy.metadata.annotations[LAST_APPLIED];
  // Go's json.Encoder: sorted map keys, HTML characters escaped, a trailing newline.
  const json = JSON.stringify(sortKeys(copy)).replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
  // A new map: the merged object may share the live object's.
  result.metadata.annotations = { ...annotations, [LAST_APPLIED]: `${json}\n` } as Record<string, string>;
}
