// Who may talk to the local cluster, decided before a request is routed:
// the Host must be a loopback name (a local guard against DNS rebinding, not
// a kube-apiserver check), then kube-apiserver's default authentication and
// authorization for a caller without the right to more: a bearer token this
// cluster issued (credentials.ts) is the cluster's administrator or a
// ServiceAccount; a wrong token is 401 Unauthorized; no token is
// system:anonymous, who may only GET what the system:public-info-viewer
// ClusterRole grants and is otherwise refused with RBAC's 403. RBAC objects
// are stored but not enforced, so every authenticated user may do anything.
import type { IncomingMessage } from 'node:http';
import { isIPv4 } from 'node:net';
import { StatusError, unauthorized } from './errors.js';
import type { ClusterCredentials } from './credentials.js';
import { isTrue } from './http.js';
import { requestVerb } from './request-counts.js';

/** system:public-info-viewer's nonResourceURLs (plugin/pkg/auth/authorizer/rbac/bootstrappolicy), verb get. */
const PUBLIC_PATHS = new Set(['/healthz', '/livez', '/readyz', '/version', '/version/']);
const ANONYMOUS = 'system:anonymous';

export interface GuardOptions {
  credentials: ClusterCredentials;
  /** The address the cluster listens on; served as a Host besides the loopback names. */
  listenHost: string;
}

/** The refusal for a request, or undefined when it may be served. */
export function guardRequest(req: IncomingMessage, opts: GuardOptions): StatusError | undefined {
  const host = req.headers.host;
  if (!host || !isServedHost(hostName(host), opts.listenHost)) return foreignHost(host);
  const token = bearerToken(req.headers.authorization);
  if (token === undefined) return anonymousAccess(req);
  return opts.credentials.userOf(token) === undefined ? unauthorized() : undefined;
}

/** The name part of a Host header: an IPv6 literal without its brackets, no port, lower case. */
function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    return h.slice(1, end > 0 ? end : undefined);
  }
  const colon = h.indexOf(':');
  return colon >= 0 ? h.slice(0, colon) : h;
}

function isServedHost(name: string, listenHost: string): boolean {
  if (name === 'localhost' || name === '::1' || name === listenHost.toLowerCase()) return true;
  return isIPv4(name) && name.startsWith('127.');
}

function foreignHost(host: string | undefined): StatusError {
  return new StatusError(403, 'Forbidden',
    `the local cluster serves only loopback hosts (localhost, 127.0.0.0/8, [::1]), not Host ${JSON.stringify(host ?? '')}: a guard against DNS rebinding`);
}

/**
 * The token of an `Authorization: Bearer` header as apiserver's bearertoken
 * authenticator reads it; undefined (the caller is anonymous) for no header,
 * another scheme or an empty token.
 */
function bearerToken(header: string | undefined): string | undefined {
  const parts = (header ?? '').trim().split(' ');
  if (parts.length < 2 || parts[0]!.toLowerCase() !== 'bearer' || !parts[1]) return undefined;
  return parts[1];
}

function anonymousAccess(req: IncomingMessage): StatusError | undefined {
  const url = new URL(req.url ?? '/', 'http://local');
  const method = req.method ?? 'GET';
  if (method === 'GET' && PUBLIC_PATHS.has(url.pathname)) return undefined;
  const target = resourceOf(url);
  if (!target) {
    return new StatusError(403, 'Forbidden', `forbidden: User "${ANONYMOUS}" cannot ${method.toLowerCase()} path "${url.pathname}"`, {});
  }
  const verb = requestVerb(method, target.name !== undefined, isTrue(url.searchParams.get('watch'))) ?? method.toLowerCase();
  const resource = target.subresource ? `${target.resource}/${target.subresource}` : target.resource;
  const scope = target.namespace ? `in the namespace "${target.namespace}"` : 'at the cluster scope';
  const qualified = target.group ? `${target.resource}.${target.group}` : target.resource;
  const subject = target.name ? `${qualified} "${target.name}"` : qualified;
  return new StatusError(403, 'Forbidden',
    `${subject} is forbidden: User "${ANONYMOUS}" cannot ${verb} resource "${resource}" in API group "${target.group}" ${scope}`,
    { ...(target.name ? { name: target.name } : {}), ...(target.group ? { group: target.group } : {}), kind: target.resource });
}

interface ResourceTarget {
  group: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

/**
 * The resource a path names, as apiserver's RequestInfoFactory reads it
 * (whether or not such a resource exists): /api/v1/… or /apis/<group>/<version>/…,
 * then namespaces/<ns>/<resource>[/<name>[/<subresource>]] or <resource>[/<name>[/<subresource>]].
 */
function resourceOf(url: URL): ResourceTarget | undefined {
  const segs = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  let group: string;
  let parts: string[];
  if (segs[0] === 'api' && segs.length >= 3) [group, parts] = ['', segs.slice(2)];
  else if (segs[0] === 'apis' && segs.length >= 4) [group, parts] = [segs[1]!, segs.slice(3)];
  else return undefined;
  let namespace: string | undefined;
  if (parts[0] === 'namespaces' && parts.length > 1) {
    namespace = parts[1];
    // "status" and "finalize" are subresources of the namespace itself.
    if (parts.length > 2 && parts[2] !== 'status' && parts[2] !== 'finalize') parts = parts.slice(2);
  }
  return { group, resource: parts[0]!, name: parts[1], subresource: parts[2], namespace };
}
