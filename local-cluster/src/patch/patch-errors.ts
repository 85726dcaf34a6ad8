// The Status errors the apiserver's PATCH handler produces
// (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go).
import { StatusError } from '../errors.js';
import type { StatusCause } from '../types.js';
import { jsonTypeWord } from './json-value.js';

/**
 * A JSON patch operation that does not apply, or a strategic merge patch with a
 * list of lists: the handler answers NewGenericServerResponse(422, …), which
 * drops the underlying message, so clients only ever see this generic text.
 */
export function patchNotApplicable(): StatusError {
  return new StatusError(422, 'Invalid', 'the server rejected our request due to an error in our request', {});
}

/**
 * A strategic-merge failure the handler does not translate: it reaches
 * ErrorToAPIStatus as a plain Go error, i.e. 500 with an empty reason.
 * kubectl prints it as "Error from server: <message>".
 */
export function patchInternal(message: string): StatusError {
  return new StatusError(500, '', message);
}

/**
 * The patched document does not decode as an object: errors.NewInvalid with an
 * empty GroupKind and a single "patch" cause, as applyPatchToCurrentObject does.
 */
export function patchedNotAnObject(result: unknown): StatusError {
  const json = JSON.stringify(result) ?? 'null';
  const decodeError = `couldn't get version/kind; json parse error: json: cannot unmarshal ${jsonTypeWord(result)} into Go value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }`;
  const body = `Invalid value: ${JSON.stringify(json)}: ${decodeError}`;
  const cause: StatusCause = { reason: 'FieldValueInvalid', message: body, field: 'patch' };
  return new StatusError(422, 'Invalid', ` "" is invalid: patch: ${body}`, { causes: [cause] });
}

export function tooManyOperations(count: number): StatusError {
  return new StatusError(413, 'RequestEntityTooLarge',
    `Request entity too large: The allowed maximum operations in a JSON patch is 10000, got ${count}`);
}
