// Who may talk to the local cluster, decided before a request is routed:
// the Host must be a loopback name (a local guard against DNS rebinding, not
// a kube-apiserver check), then kube-apiserver's authentication and
// authorization: a bearer token this cluster issued (credentials.ts) is the
// cluster's administrator (system:masters: everything) or a ServiceAccount;
// a wrong token is 401 Unauthorized; no token is system:anonymous. Every
// caller but the administrator is then authorized by the RBAC objects
// stored in the cluster (rbac.ts), with RBAC's 403 when nothing allows it.
import type { IncomingMessage } from 'node:http';
import { isIPv4 } from 'node:net';
import { StatusError, unauthorized } from './errors.js';
import { ADMIN_USER, type ClusterCredentials } from './credentials.js';
import { ANONYMOUS, forbidden, requestAttributes, userInfo, type RbacAuthorizer, type UserInfo } from './rbac.js';

export interface GuardOptions {
  credentials: ClusterCredentials;
  authorizer: RbacAuthorizer;
  /** The address the cluster listens on; served as a Host besides the loopback names. */
  listenHost: string;
}

/**
 * A request let through, with who sent it; or its refusal, with, when RBAC
 * refused an authenticated caller, what was asked ("verb plural.group/sub"
 * as requestCounts() names it, or "verb /path").
 */
export type GuardResult = { user: UserInfo; refusal?: undefined } | { refusal: StatusError; user?: UserInfo; denied?: string };

/** Who sent a request and whether it may be served. */
export function guardRequest(req: IncomingMessage, opts: GuardOptions): GuardResult {
  const host = req.headers.host;
  if (!host || !isServedHost(hostName(host), opts.listenHost)) return { refusal: foreignHost(host) };
  const token = bearerToken(req.headers.authorization);
  let user = ANONYMOUS;
  if (token !== undefined) {
    const name = opts.credentials.userOf(token);
    if (name === undefined) return { refusal: unauthorized() };
    user = userInfo(name, name === ADMIN_USER);
  }
  const attrs = requestAttributes(req.method ?? 'GET', new URL(req.url ?? '/', 'http://local'));
  const decision = opts.authorizer.authorize(user, attrs);
  if (decision.allowed) return { user };
  const denied = attrs.resourceRequest
    ? `${attrs.verb} ${attrs.resource}${attrs.group ? `.${attrs.group}` : ''}${attrs.subresource ? `/${attrs.subresource}` : ''}`
    : `${attrs.verb} ${attrs.path}`;
  return { refusal: forbidden(user, attrs, decision.reason), user, denied };
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
