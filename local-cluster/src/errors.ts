// The one error type of the local cluster: a Kubernetes Status. Every failure
// that reaches a client is one of these, with the reason, code and message a
// real kube-apiserver would send (k8s.io/apimachinery/pkg/api/errors).
import type { ResourceType, StatusCause } from './types.js';
import { qualifiedResource } from './types.js';

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

export class StatusError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: StatusDetails,
  ) {
    super(message);
    this.name = 'StatusError';
  }

  toStatus(): Record<string, unknown> {
    const body: Record<string, unknown> = {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
    };
    // A 500 from a failed strategic merge has no reason; the real server then omits the field.
    if (this.reason) body.reason = this.reason;
    if (this.details) body.details = this.details;
    body.code = this.code;
    return body;
  }
}

type RT = Pick<ResourceType, 'group' | 'plural' | 'kind'>;

export function notFound(rt: RT, name: string): StatusError {
  return new StatusError(404, 'NotFound', `${qualifiedResource(rt)} "${name}" not found`, {
    name, group: rt.group, kind: rt.plural,
  });
}

export function alreadyExists(rt: RT, name: string): StatusError {
  return new StatusError(409, 'AlreadyExists', `${qualifiedResource(rt)} "${name}" already exists`, {
    name, group: rt.group, kind: rt.plural,
  });
}

export function conflict(rt: RT, name: string, why = 'the object has been modified; please apply your changes to the latest version and try again'): StatusError {
  return new StatusError(409, 'Conflict', `Operation cannot be fulfilled on ${qualifiedResource(rt)} "${name}": ${why}`, {
    name, group: rt.group, kind: rt.plural,
  });
}

/** 422 Invalid, message built from the causes the way apimachinery's NewInvalid does. */
export function invalid(rt: RT, name: string, causes: StatusCause[]): StatusError {
  const qualifiedKind = rt.group ? `${rt.kind}.${rt.group}` : rt.kind;
  let summary: string;
  if (causes.length === 1) {
    summary = causes[0]!.field ? `${causes[0]!.field}: ${causes[0]!.message}` : causes[0]!.message;
  } else {
    // apimachinery's ToAggregate drops identical messages.
    const parts = [...new Set(causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message)))];
    summary = parts.length === 1 ? parts[0]! : '[' + parts.join(', ') + ']';
  }
  return new StatusError(422, 'Invalid', `${qualifiedKind} "${name}" is invalid: ${summary}`, {
    name, group: rt.group, kind: rt.kind, causes,
  });
}

export function badRequest(message: string): StatusError {
  return new StatusError(400, 'BadRequest', message);
}

/** A bearer token the cluster did not issue (apiserver's WithAuthentication failure handler). */
export function unauthorized(): StatusError {
  return new StatusError(401, 'Unauthorized', 'Unauthorized');
}

export function notFoundPath(): StatusError {
  return new StatusError(404, 'NotFound', 'the server could not find the requested resource', {});
}

export function methodNotAllowed(): StatusError {
  return new StatusError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource', {});
}

export function expired(message: string): StatusError {
  return new StatusError(410, 'Expired', message);
}

export function gone(message: string): StatusError {
  return new StatusError(410, 'Gone', message);
}

/** A request body in a media type the resource cannot decode (apimachinery's NewUnsupportedMediaTypeError). */
export function unsupportedMediaType(accepted: readonly string[]): StatusError {
  return new StatusError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: ${accepted.join(', ')}`);
}

export function requestEntityTooLarge(): StatusError {
  return new StatusError(413, 'RequestEntityTooLarge', 'Request entity too large: limit is 3145728');
}

export function notAcceptable(): StatusError {
  return new StatusError(406, 'NotAcceptable', 'only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf');
}

export function internal(message: string): StatusError {
  return new StatusError(500, 'InternalError', `Internal error occurred: ${message}`);
}

export function forbidden(rt: RT, name: string, why: string): StatusError {
  return new StatusError(403, 'Forbidden', `${qualifiedResource(rt)} "${name}" is forbidden: ${why}`, {
    name, group: rt.group, kind: rt.plural,
  });
}
