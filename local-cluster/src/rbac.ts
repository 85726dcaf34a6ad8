// Authorization as kube-apiserver's RBAC authorizer does it
// (plugin/pkg/auth/authorizer/rbac): the request attributes the apiserver's
// RequestInfoFactory reads from a path, the rules a user holds through the
// RoleBindings of the request's namespace and every ClusterRoleBinding, the
// rule matching (verbs, apiGroups, resources with "*" and "*/subresource",
// resourceNames, nonResourceURLs with a trailing "*"), and the 403 Status
// its authorization filter answers with. The default roles every cluster
// bootstraps for all callers (system:discovery, system:basic-user,
// system:public-info-viewer) are built in here rather than stored, so
// `kubectl get clusterroles` lists only what was applied. The cluster's
// administrator is in system:masters and is allowed everything before any
// rule is read. Authentication is credentials.ts's; this module only decides.
import type { ApiServer } from './apiserver.js';
import { storageKey } from './apiserver.js';
import { CLUSTERROLEBINDINGS, CLUSTERROLES, ROLEBINDINGS, ROLES } from './builtin-types.js';
import { StatusError } from './errors.js';
import { objectKey } from './store.js';
import type { KubeObject } from './types.js';

export interface UserInfo {
  name: string;
  groups: readonly string[];
}

export const ANONYMOUS: UserInfo = { name: 'system:anonymous', groups: ['system:unauthenticated'] };
const MASTERS = 'system:masters';
const SA_PREFIX = 'system:serviceaccount:';

/** The groups kube-apiserver's authenticators give a user name (serviceaccount.UserInfo; authenticated users). */
export function userInfo(name: string, admin: boolean): UserInfo {
  if (admin) return { name, groups: [MASTERS, 'system:authenticated'] };
  if (name.startsWith(SA_PREFIX)) {
    const ns = name.slice(SA_PREFIX.length).split(':')[0]!;
    return { name, groups: ['system:serviceaccounts', `system:serviceaccounts:${ns}`, 'system:authenticated'] };
  }
  return { name, groups: ['system:authenticated'] };
}

/** authorizer.Attributes: what a request asks to do. */
export type RequestAttributes =
  | { resourceRequest: true; verb: string; group: string; resource: string; subresource: string; namespace: string; name: string }
  | { resourceRequest: false; verb: string; path: string };

/** The Kubernetes verb of a resource request (RequestInfoFactory): get/list/watch, create, update, patch, delete/deletecollection; else the method. */
function resourceVerb(method: string, named: boolean, watch: boolean): string {
  switch (method) {
    case 'GET': case 'HEAD': return named ? 'get' : watch ? 'watch' : 'list';
    case 'POST': return 'create';
    case 'PUT': return 'update';
    case 'PATCH': return 'patch';
    case 'DELETE': return named ? 'delete' : 'deletecollection';
    default: return method.toLowerCase();
  }
}

/** A boolean query parameter as apimachinery decodes it (http.ts isTrue, repeated to keep this module free of the HTTP layer). */
function queryTrue(v: string | null): boolean {
  return v !== null && v !== '0' && v.toLowerCase() !== 'false';
}

/**
 * The attributes of a request as RequestInfoFactory reads them, whether or
 * not such a resource exists: /api/v1/… and /apis/<group>/<version>/… are
 * resource requests (namespaces/<ns>/<resource>[/<name>[/<subresource>]] or
 * <resource>[/<name>[/<subresource>]]); everything else is a path with the
 * method as its verb. A list or watch whose fieldSelector pins metadata.name
 * is authorized for that name, as resourceNames rules expect.
 */
export function requestAttributes(method: string, url: URL): RequestAttributes {
  const segs = url.pathname.split('/').filter(Boolean).map(safeDecode);
  let group: string;
  let parts: string[];
  if (segs[0] === 'api' && segs.length >= 3) [group, parts] = ['', segs.slice(2)];
  else if (segs[0] === 'apis' && segs.length >= 4) [group, parts] = [segs[1]!, segs.slice(3)];
  else return { resourceRequest: false, verb: method.toLowerCase(), path: url.pathname };
  let namespace = '';
  if (parts[0] === 'namespaces' && parts.length > 1) {
    namespace = parts[1]!;
    // "status" and "finalize" are subresources of the namespace itself.
    if (parts.length > 2 && parts[2] !== 'status' && parts[2] !== 'finalize') parts = parts.slice(2);
  }
  let name = parts[1] ?? '';
  const verb = resourceVerb(method, name !== '', queryTrue(url.searchParams.get('watch')));
  if (!name && (verb === 'list' || verb === 'watch')) name = exactName(url.searchParams.get('fieldSelector'));
  return { resourceRequest: true, verb, group, resource: parts[0]!, subresource: parts[2] ?? '', namespace, name };
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** The name a field selector requires exactly (metadata.name=x or ==x, alone or among others); '' when none. */
function exactName(selector: string | null): string {
  for (const term of (selector ?? '').split(',')) {
    const m = /^\s*metadata\.name\s*==?\s*([^\s,]*)\s*$/.exec(term);
    if (m?.[1] && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(m[1])) return m[1];
  }
  return '';
}

/** One PolicyRule of a Role or ClusterRole. */
export interface PolicyRule {
  verbs?: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

/** The bootstrap roles every authenticated caller holds (bootstrappolicy: ClusterRoleBindings of the same names). */
const DISCOVERY_RULES: PolicyRule[] = [{
  verbs: ['get'],
  nonResourceURLs: ['/api', '/api/*', '/apis', '/apis/*', '/healthz', '/livez', '/openapi', '/openapi/*', '/readyz', '/version', '/version/'],
}];
const BASIC_USER_RULES: PolicyRule[] = [
  { verbs: ['create'], apiGroups: ['authorization.k8s.io'], resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'] },
  { verbs: ['create'], apiGroups: ['authentication.k8s.io'], resources: ['selfsubjectreviews'] },
];
const PUBLIC_INFO_RULES: PolicyRule[] = [{ verbs: ['get'], nonResourceURLs: ['/healthz', '/livez', '/readyz', '/version', '/version/'] }];

function bootstrapRules(user: UserInfo): PolicyRule[] {
  const authenticated = user.groups.includes('system:authenticated');
  const unauthenticated = user.groups.includes('system:unauthenticated');
  return [
    ...(authenticated ? [...DISCOVERY_RULES, ...BASIC_USER_RULES] : []),
    ...(authenticated || unauthenticated ? PUBLIC_INFO_RULES : []),
  ];
}

interface Subject { kind?: string; name?: string; namespace?: string; apiGroup?: string }
interface RoleRef { kind?: string; name?: string; apiGroup?: string }

/** rbac's appliesToUser: a User or Group by name; a ServiceAccount by namespace (the binding's when unset) and name. */
function appliesTo(subject: Subject, user: UserInfo, bindingNamespace: string): boolean {
  switch (subject.kind) {
    case 'User': return subject.name === user.name;
    case 'Group': return subject.name !== undefined && user.groups.includes(subject.name);
    case 'ServiceAccount': {
      const ns = subject.namespace || bindingNamespace;
      return !!ns && user.name === `${SA_PREFIX}${ns}:${subject.name}`;
    }
    default: return false;
  }
}

export interface Decision {
  allowed: boolean;
  /** The authorizer's reason: where a binding named a role that does not exist ("RBAC: …"). */
  reason: string;
}

export class RbacAuthorizer {
  /** Rules by user and namespace; dropped whenever a role or binding changes. */
  private readonly cache = new Map<string, { rules: PolicyRule[]; errors: string[] }>();
  private static readonly CACHED = 4096;

  constructor(private readonly api: ApiServer) {
    const rbacKeys = new Set([ROLES, ROLEBINDINGS, CLUSTERROLES, CLUSTERROLEBINDINGS].map((rt) => storageKey(rt)));
    api.store.subscribe((c) => {
      if (rbacKeys.has(c.typeKey)) this.cache.clear();
    });
  }

  authorize(user: UserInfo, attrs: RequestAttributes): Decision {
    if (user.groups.includes(MASTERS)) return { allowed: true, reason: '' };
    const { rules, errors } = this.rulesFor(user, attrs.resourceRequest ? attrs.namespace : '');
    if (rules.some((r) => ruleAllows(r, attrs))) return { allowed: true, reason: '' };
    return { allowed: false, reason: errors.length ? `RBAC: ${aggregate(errors)}` : '' };
  }

  /**
   * Every rule `user` holds in `namespace` ('' for cluster scope): the
   * bootstrap roles, every ClusterRoleBinding's and the namespace's
   * RoleBindings'. A binding whose role is missing adds an error instead, as
   * the rule resolver's visitor reports it.
   */
  rulesFor(user: UserInfo, namespace: string): { rules: PolicyRule[]; errors: string[] } {
    const key = `${user.name}\n${user.groups.join(',')}\n${namespace}`;
    const cached = this.cache.get(key);
    if (cached) return cached;
    const rules: PolicyRule[] = [...bootstrapRules(user)];
    const errors: string[] = [];
    const take = (ref: RoleRef, bindingNamespace: string) => {
      const role = this.role(ref, bindingNamespace);
      if (typeof role === 'string') errors.push(role);
      else rules.push(...role);
    };
    for (const b of this.api.store.list(storageKey(CLUSTERROLEBINDINGS))) {
      if (subjectsOf(b).some((s) => appliesTo(s, user, ''))) take(roleRefOf(b), '');
    }
    if (namespace) {
      for (const b of this.api.store.list(storageKey(ROLEBINDINGS), namespace)) {
        if (subjectsOf(b).some((s) => appliesTo(s, user, namespace))) take(roleRefOf(b), namespace);
      }
    }
    const result = { rules, errors };
    if (this.cache.size >= RbacAuthorizer.CACHED) this.cache.clear();
    this.cache.set(key, result);
    return result;
  }

  /** The rules a roleRef names, or the error text of its lookup. */
  private role(ref: RoleRef, bindingNamespace: string): PolicyRule[] | string {
    if (ref.kind === 'ClusterRole') {
      const role = this.api.store.get(storageKey(CLUSTERROLES), objectKey(undefined, ref.name ?? ''));
      return role ? rulesOf(role) : `clusterrole.rbac.authorization.k8s.io "${ref.name ?? ''}" not found`;
    }
    if (ref.kind === 'Role' && bindingNamespace) {
      const role = this.api.store.get(storageKey(ROLES), objectKey(bindingNamespace, ref.name ?? ''));
      return role ? rulesOf(role) : `role.rbac.authorization.k8s.io "${ref.name ?? ''}" not found`;
    }
    return `unsupported role reference kind: "${ref.kind ?? ''}"`;
  }
}

function subjectsOf(binding: KubeObject): Subject[] {
  const subjects = (binding as { subjects?: unknown }).subjects;
  return Array.isArray(subjects) ? subjects as Subject[] : [];
}

function roleRefOf(binding: KubeObject): RoleRef {
  return ((binding as { roleRef?: RoleRef }).roleRef) ?? {};
}

function rulesOf(role: KubeObject): PolicyRule[] {
  const rules = (role as { rules?: unknown }).rules;
  return Array.isArray(rules) ? rules as PolicyRule[] : [];
}

/** utilerrors.NewAggregate's text: one error as is, several in brackets. */
function aggregate(errors: string[]): string {
  const unique = [...new Set(errors)];
  return unique.length === 1 ? unique[0]! : `[${unique.join(', ')}]`;
}

/** rbac's RuleAllows: verb, then (resource request) group, resource and name, or (non-resource) the path. */
export function ruleAllows(rule: PolicyRule, attrs: RequestAttributes): boolean {
  if (!has(rule.verbs, attrs.verb)) return false;
  if (!attrs.resourceRequest) return (rule.nonResourceURLs ?? []).some((u) => u === '*' || u === attrs.path || (u.endsWith('*') && attrs.path.startsWith(u.slice(0, -1))));
  if (!has(rule.apiGroups, attrs.group)) return false;
  const combined = attrs.subresource ? `${attrs.resource}/${attrs.subresource}` : attrs.resource;
  const resourceMatch = (rule.resources ?? []).some((r) => r === '*' || r === combined || (attrs.subresource !== '' && r === `*/${attrs.subresource}`));
  if (!resourceMatch) return false;
  return !rule.resourceNames?.length || rule.resourceNames.includes(attrs.name);
}

function has(list: string[] | undefined, value: string): boolean {
  return (list ?? []).some((v) => v === '*' || v === value);
}

/**
 * The 403 of the authorization filter (responsewriters.Forbidden: the
 * forbidden message, ": <reason>" when there is one, characters that look
 * like HTML escaped, wrapped by apierrors.NewForbidden with the group,
 * resource and name).
 */
export function forbidden(user: UserInfo, attrs: RequestAttributes, reason: string): StatusError {
  let msg: string;
  if (!attrs.resourceRequest) {
    msg = `User ${goQuote(user.name)} cannot ${attrs.verb} path ${goQuote(attrs.path)}`;
  } else {
    const resource = attrs.subresource ? `${attrs.resource}/${attrs.subresource}` : attrs.resource;
    const scope = attrs.namespace ? `in the namespace ${goQuote(attrs.namespace)}` : 'at the cluster scope';
    msg = `User ${goQuote(user.name)} cannot ${attrs.verb} resource ${goQuote(resource)} in API group ${goQuote(attrs.group)} ${scope}`;
  }
  msg = msg.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  if (reason) msg = `${msg}: ${reason}`;
  if (!attrs.resourceRequest || !attrs.resource) return new StatusError(403, 'Forbidden', `forbidden: ${msg}`, {});
  const qualified = attrs.group ? `${attrs.resource}.${attrs.group}` : attrs.resource;
  const subject = attrs.name ? `${qualified} ${goQuote(attrs.name)}` : qualified;
  return new StatusError(403, 'Forbidden', `${subject} is forbidden: ${msg}`, {
    ...(attrs.name ? { name: attrs.name } : {}), ...(attrs.group ? { group: attrs.group } : {}), kind: attrs.resource,
  });
}

/** Go's %q for the plain strings these messages carry. */
function goQuote(s: string): string {
  return JSON.stringify(s);
}
