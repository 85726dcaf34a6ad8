// API discovery documents, built from the served resource types exactly as
// kube-apiserver (and the apiextensions-apiserver for CRDs) builds them:
// aggregated discovery (apidiscovery.k8s.io/v2) for /api and /apis, and the
// legacy APIVersions / APIGroupList / APIGroup / APIResourceList forms.
//
// Sources: k8s.io/api/apidiscovery/v2/types.go; apiserver
// endpoints/installer.go (ConvertGroupVersionIntoToDiscovery, sorted verbs),
// endpoints/discovery/{legacy,root,group,version,util}.go (which responses
// carry apiVersion), discovery/aggregated/handler.go (group order);
// apiextensions-apiserver customresource_discovery_controller.go (CRD entries).
import { createHash } from 'node:crypto';
import type { ResourceType } from './types.js';

/** kubectl only reads the body as aggregated discovery when it carries exactly this type. */
export const AGGREGATED_CONTENT_TYPE = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';

// Built-in storages report their verbs sorted (installer.go).
const STANDARD_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];
// The CRD discovery controller lists its verbs in this fixed, unsorted order.
const CRD_VERBS = ['delete', 'deletecollection', 'get', 'list', 'patch', 'create', 'update', 'watch'];
const STATUS_VERBS = ['get', 'patch', 'update'];

// Verbs and response kind of the extra subresources built-in kinds may serve.
const EXTRA_SUBRESOURCES: Record<string, { verbs: string[]; kind?: string }> = {
  log: { verbs: ['get'], kind: 'Pod' },
  finalize: { verbs: ['update'] },
};

// kube-aggregator APIService group priorities (higher first); every CRD group gets 1000.
const GROUP_PRIORITY: Record<string, number> = {
  '': 18000,
  apps: 17800,
  'events.k8s.io': 17750,
  autoscaling: 17500,
  batch: 17400,
  'networking.k8s.io': 17200,
  policy: 17100,
  'rbac.authorization.k8s.io': 17000,
  'storage.k8s.io': 16800,
  'apiextensions.k8s.io': 16700,
  'coordination.k8s.io': 16500,
};
const CRD_GROUP_PRIORITY = 1000;

export interface Subresource {
  name: string;
  kind: string;
  verbs: string[];
}

/** The verbs a resource supports; namespaces have no deletecollection in kube-apiserver. */
export function resourceVerbs(rt: ResourceType): string[] {
  if (!rt.builtin) return [...CRD_VERBS];
  if (rt.group === '' && rt.plural === 'namespaces') return STANDARD_VERBS.filter((v) => v !== 'deletecollection');
  return [...STANDARD_VERBS];
}

/** Subresources in the order discovery lists them (by path, as the installer registers them). */
export function subresourcesOf(rt: ResourceType): Subresource[] {
  const result: Subresource[] = [];
  if (rt.statusSubresource) result.push({ name: 'status', kind: rt.kind, verbs: [...STATUS_VERBS] });
  for (const name of rt.extraSubresources ?? []) {
    const known = EXTRA_SUBRESOURCES[name];
    result.push({ name, kind: known?.kind ?? rt.kind, verbs: [...(known?.verbs ?? ['get'])] });
  }
  return result.sort((a, b) => compareStrings(a.name, b.name));
}

/** discovery.StorageVersionHash: base64 of the first 8 bytes of sha256("group/version/kind"). */
export function storageVersionHash(rt: Pick<ResourceType, 'group' | 'version' | 'kind'>): string {
  return createHash('sha256').update(`${rt.group}/${rt.version}/${rt.kind}`).digest().subarray(0, 8).toString('base64');
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function parseKubeVersion(v: string): { major: number; stability: number; minor: number } | undefined {
  const m = /^v([1-9][0-9]*)(?:(alpha|beta)([1-9][0-9]*))?$/.exec(v);
  if (!m) return undefined;
  const stability = m[2] === 'alpha' ? 0 : m[2] === 'beta' ? 1 : 2;
  return { major: Number(m[1]), stability, minor: m[3] ? Number(m[3]) : 0 };
}

/**
 * apimachinery version.CompareKubeAwareVersionStrings: GA > beta > alpha, then
 * the higher major, then the higher minor; non-Kubernetes names sort last.
 * Positive when a is preferred over b.
 */
export function compareKubeAwareVersions(a: string, b: string): number {
  if (a === b) return 0;
  const va = parseKubeVersion(a);
  const vb = parseKubeVersion(b);
  if (!va && !vb) return compareStrings(b, a);
  if (!va) return -1;
  if (!vb) return 1;
  if (va.stability !== vb.stability) return va.stability - vb.stability;
  if (va.major !== vb.major) return va.major - vb.major;
  return va.minor - vb.minor;
}

function groupPriority(group: string, types: ResourceType[]): number {
  const builtin = types.some((t) => t.group === group && t.builtin);
  return builtin ? (GROUP_PRIORITY[group] ?? 0) : CRD_GROUP_PRIORITY;
}

/** Group names in discovery order: higher priority first, then by name. */
function orderedGroups(types: ResourceType[], which: 'api' | 'apis'): string[] {
  const names = [...new Set(types.map((t) => t.group))].filter((g) => (which === 'api' ? g === '' : g !== ''));
  return names.sort((a, b) => groupPriority(b, types) - groupPriority(a, types) || compareStrings(a, b));
}

/** Versions of a group, preferred first. */
function orderedVersions(types: ResourceType[], group: string): string[] {
  const versions = [...new Set(types.filter((t) => t.group === group).map((t) => t.version))];
  return versions.sort((a, b) => compareKubeAwareVersions(b, a));
}

function typesOf(types: ResourceType[], group: string, version: string): ResourceType[] {
  return types
    .filter((t) => t.group === group && t.version === version)
    .sort((a, b) => compareStrings(a.plural, b.plural));
}

/**
 * Built-in APIResources leave group/version empty ("same as the list"), and
 * ConvertGroupVersionIntoToDiscovery copies that; the CRD controller fills them.
 */
function responseKind(rt: ResourceType, kind: string): { group: string; version: string; kind: string } {
  return rt.builtin ? { group: '', version: '', kind } : { group: rt.group, version: rt.version, kind };
}

function resourceDiscovery(rt: ResourceType): Record<string, unknown> {
  const entry: Record<string, unknown> = {
    resource: rt.plural,
    responseKind: responseKind(rt, rt.kind),
    scope: rt.namespaced ? 'Namespaced' : 'Cluster',
    singularResource: rt.singular,
    verbs: resourceVerbs(rt),
  };
  if (rt.shortNames.length) entry.shortNames = [...rt.shortNames];
  if (rt.categories.length) entry.categories = [...rt.categories];
  const subresources = subresourcesOf(rt).map((s) => ({
    subresource: s.name,
    responseKind: responseKind(rt, s.kind),
    verbs: s.verbs,
  }));
  if (subresources.length) entry.subresources = subresources;
  return entry;
}

/**
 * APIGroupDiscoveryList for /api (which='api', the core group only) or /apis
 * (every named group). Serve it with Content-Type AGGREGATED_CONTENT_TYPE.
 */
export function aggregatedDiscovery(types: ResourceType[], which: 'api' | 'apis'): object {
  const items = orderedGroups(types, which).map((group) => ({
    // ObjectMeta in Kubernetes 1.32 always serializes creationTimestamp (as null) and omits an empty name.
    metadata: group ? { name: group, creationTimestamp: null } : { creationTimestamp: null },
    versions: orderedVersions(types, group).map((version) => ({
      version,
      resources: typesOf(types, group, version).map(resourceDiscovery),
      freshness: 'Current',
    })),
  }));
  return { kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2', metadata: {}, items };
}

/** Legacy GET /api. Its handler strips apiVersion, so the body has only kind. */
export function apiVersions(serverAddress = '127.0.0.1:6443'): object {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
  };
}

function groupVersionFor(group: string, version: string): { groupVersion: string; version: string } {
  return { groupVersion: `${group}/${version}`, version };
}

function apiGroupBody(types: ResourceType[], group: string): Record<string, unknown> | undefined {
  const versions = orderedVersions(types, group).map((v) => groupVersionFor(group, v));
  if (!group || !versions.length) return undefined;
  return { name: group, versions, preferredVersion: versions[0] };
}

/** Legacy GET /apis, as kube-aggregator serves it (with apiVersion v1, no server addresses). */
export function apiGroupList(types: ResourceType[]): object {
  const groups = orderedGroups(types, 'apis').map((g) => apiGroupBody(types, g)!);
  return { kind: 'APIGroupList', apiVersion: 'v1', groups };
}

/** Legacy GET /apis/<group>; undefined when the group is not served. */
export function apiGroup(types: ResourceType[], group: string): object | undefined {
  const body = apiGroupBody(types, group);
  return body && { kind: 'APIGroup', apiVersion: 'v1', ...body };
}

function apiResources(rt: ResourceType): Record<string, unknown>[] {
  const main: Record<string, unknown> = {
    name: rt.plural,
    singularName: rt.singular,
    namespaced: rt.namespaced,
    kind: rt.kind,
    verbs: resourceVerbs(rt),
  };
  if (rt.shortNames.length) main.shortNames = [...rt.shortNames];
  if (rt.categories.length) main.categories = [...rt.categories];
  main.storageVersionHash = storageVersionHash(rt);
  const subresources = subresourcesOf(rt).map((s) => ({
    name: `${rt.plural}/${s.name}`,
    singularName: '',
    namespaced: rt.namespaced,
    kind: s.kind,
    verbs: s.verbs,
  }));
  return [main, ...subresources];
}

/**
 * Legacy GET /api/v1 or /apis/<group>/<version>; undefined when not served.
 * The core group's list has no apiVersion (discovery/util.go keepUnversioned).
 */
export function apiResourceList(types: ResourceType[], group: string, version: string): object | undefined {
  const served = typesOf(types, group, version);
  if (!served.length) return undefined;
  const resources = served.flatMap(apiResources);
  if (!group) return { kind: 'APIResourceList', groupVersion: version, resources };
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: `${group}/${version}`, resources };
}
