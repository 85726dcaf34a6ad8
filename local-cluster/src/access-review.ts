// SelfSubjectAccessReview (authorization.k8s.io/v1), what `kubectl auth
// can-i` asks: the caller's own question answered by the same authorizer
// that guards its requests (rbac.ts). Served at its path only, as a create
// that stores nothing; not listed in discovery (kubectl's typed client posts
// to it without looking). The review's status carries allowed and, when a
// binding names a missing role, the authorizer's reason; kube-apiserver's
// "RBAC: allowed by …" text for an allowed review is not reproduced.
import { StatusError, badRequest } from './errors.js';
import { isObject } from './object-meta.js';
import { PROTOBUF_MEDIA_TYPE, decodeProtobufKind } from './protobuf/index.js';
import type { RbacAuthorizer, RequestAttributes, UserInfo } from './rbac.js';

export const SELF_SUBJECT_ACCESS_REVIEWS = '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews';
const API_VERSION = 'authorization.k8s.io/v1';
const KIND = 'SelfSubjectAccessReview';

/** A review body in its negotiated media type, as the JSON the client would have sent. */
export function readReviewBody(body: Buffer, mediaType: string): unknown {
  if (mediaType === PROTOBUF_MEDIA_TYPE) return { apiVersion: API_VERSION, kind: KIND, ...decodeProtobufKind(body, KIND) };
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw badRequest(`the object provided is unrecognized (must be of type ${KIND}): couldn't get version/kind; json parse error: ${(e as Error).message}`);
  }
}

/** The review answered: the request's spec, and a status saying whether `user` may do it. */
export function selfSubjectAccessReview(body: unknown, user: UserInfo, authorizer: RbacAuthorizer | undefined): Record<string, unknown> {
  if (!isObject(body)) throw badRequest(`the object provided is unrecognized (must be of type ${KIND}): expected an object`);
  const spec = isObject(body.spec) ? body.spec : {};
  const attrs = reviewAttributes(spec);
  const decision = authorizer?.authorize(user, attrs) ?? { allowed: true, reason: '' };
  return {
    kind: KIND, apiVersion: API_VERSION,
    metadata: { creationTimestamp: null, ...(isObject(body.metadata) ? body.metadata : {}) },
    spec,
    status: { allowed: decision.allowed, ...(decision.reason ? { reason: decision.reason } : {}) },
  };
}

/** The attributes a review asks about; exactly one of resourceAttributes and nonResourceAttributes (ValidateSelfSubjectAccessReviewSpec). */
function reviewAttributes(spec: Record<string, unknown>): RequestAttributes {
  const r = isObject(spec.resourceAttributes) ? spec.resourceAttributes : undefined;
  const n = isObject(spec.nonResourceAttributes) ? spec.nonResourceAttributes : undefined;
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  if (r && !n) {
    return {
      resourceRequest: true, verb: str(r.verb), group: str(r.group), resource: str(r.resource),
      subresource: str(r.subresource), namespace: str(r.namespace), name: str(r.name),
    };
  }
  if (n && !r) return { resourceRequest: false, verb: str(n.verb), path: str(n.path) };
  const field = r ? 'spec.nonResourceAttributes' : 'spec.resourceAttributes';
  const value = r ? 'object' : 'null';
  const message = `Invalid value: "${value}": exactly one of nonResourceAttributes or resourceAttributes must be specified`;
  throw new StatusError(422, 'Invalid', `${KIND}.authorization.k8s.io "" is invalid: ${field}: ${message}`, {
    group: 'authorization.k8s.io', kind: KIND, causes: [{ reason: 'FieldValueInvalid', field, message }],
  });
}
