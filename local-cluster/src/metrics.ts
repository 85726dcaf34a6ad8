// GET /metrics: two of kube-apiserver's own series, in the Prometheus text
// format 0.0.4, with the names, labels and label values kube-apiserver v1.32
// gives them:
//
// - apiserver_request_total, a counter of the requests answered, labelled as
//   k8s.io/apiserver/pkg/endpoints/metrics (metrics.go) labels them:
//   MonitorRequest after the handler returns (a watch when it ends), the verb
//   from the HTTP method (CanonicalVerb: a GET of a collection is LIST; then
//   CleanVerb: WATCH for ?watch=true, APPLY for an apply patch, CONNECT for
//   pods/log), the scope of the route (endpoints/installer.go), dry_run from
//   cleanDryRun, and APF's refusals counted with 429 (RecordDroppedRequest);
// - apiserver_storage_objects, a gauge of the objects stored per resource
//   (k8s.io/apiserver/pkg/storage/etcd3/metrics), read at each scrape.
//
// The request counts themselves live in request-counts.ts (RequestCounter);
// http.ts decides which requests have a route and so are counted.
import type { IncomingMessage } from 'node:http';
import type { ApiServer } from './apiserver.js';
import { storageKey } from './apiserver.js';
import type { RequestLabels, RequestSeries } from './request-counts.js';
import type { ResourceType } from './types.js';
import { qualifiedResource } from './types.js';

/** What promhttp answers a scrape with in the text format (client_golang's expfmt, format 0.0.4). */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** kube-apiserver's component label: "apiserver" for resource requests and aggregated discovery. */
export const APISERVER_COMPONENT = 'apiserver';

/** metrics.go's validRequestMethods: any other reported verb is "other". */
const VALID_VERBS = new Set([
  'APPLY', 'CONNECT', 'CREATE', 'DELETE', 'DELETECOLLECTION', 'GET', 'LIST', 'PATCH', 'POST', 'PROXY', 'PUT', 'UPDATE', 'WATCH', 'WATCHLIST',
]);
/** metrics.go's validConnectRequests: subresources reported with the verb CONNECT. */
const CONNECT_SUBRESOURCES = new Set(['log', 'exec', 'portforward', 'attach', 'proxy']);
/** types.ApplyPatchType, compared with the whole Content-Type header as metrics.go does. */
const APPLY_PATCH_TYPE = 'application/apply-patch+yaml';

/** The parts of a request that its apiserver_request_total labels come from. */
export interface RequestFacts {
  method: string;
  url: URL;
  contentType: string | undefined;
}

/**
 * The verb label (metrics.go cleanVerb(CanonicalVerb(method, scope), …)):
 * the HTTP method upper-cased, GET of a collection as LIST, a GET with a
 * true `watch` parameter as WATCH, a PATCH of type application/apply-patch+yaml
 * as APPLY, a resource request to a connect subresource (log, exec, …) as
 * CONNECT; anything outside the valid verbs "other". A collection DELETE
 * reports DELETE: the verb comes from the method, not from the route's
 * DELETECOLLECTION.
 */
export function reportedVerb(facts: RequestFacts, scope: string, subresource?: string): string {
  const method = facts.method.toUpperCase();
  let verb = method === 'GET' || method === 'HEAD' ? (scope !== 'resource' && scope !== '' ? 'LIST' : 'GET') : method;
  // getVerbIfWatch: the first watch value, as Convert_Slice_string_To_bool reads it.
  const watch = facts.url.searchParams.get('watch');
  if ((method === 'GET' || method === 'LIST') && watch !== null && watch.toLowerCase() !== '0' && watch.toLowerCase() !== 'false') verb = 'WATCH';
  if (verb === 'WATCHLIST') verb = 'WATCH';
  if (verb === 'PATCH' && facts.contentType === APPLY_PATCH_TYPE) verb = 'APPLY';
  if (subresource && CONNECT_SUBRESOURCES.has(subresource)) verb = 'CONNECT';
  return VALID_VERBS.has(verb) ? verb : 'other';
}

/**
 * The dry_run label (metrics.go cleanDryRun): empty without a dryRun
 * parameter, "invalid" when a value is not "All" (ValidateDryRun), else the
 * values deduplicated, sorted and joined with ",".
 */
export function cleanDryRun(url: URL): string {
  if (!url.search.includes('dryRun')) return '';
  const values = url.searchParams.getAll('dryRun');
  if (values.some((v) => v !== 'All')) return 'invalid';
  return [...new Set(values)].sort().join(',');
}

/**
 * The scope label of a served resource request, as installer.go sets it for
 * the route: "namespace" for a namespaced resource, "cluster" for a
 * cluster-scoped one, "resource" when the path names an object or the
 * request is a create (POST), and "cluster" again for a namespaced resource
 * listed or watched across all namespaces.
 */
export function routeScope(rt: Pick<ResourceType, 'namespaced'>, namespace: string | undefined, name: string | undefined, method: string): string {
  let scope = rt.namespaced ? 'namespace' : 'cluster';
  if (name !== undefined || method === 'POST') scope = 'resource';
  if (rt.namespaced && namespace === undefined) scope = 'cluster';
  return scope;
}

/** The labels of a resource request that a route serves (installer.go's InstrumentRouteFunc). */
export function resourceRequestLabels(
  facts: RequestFacts,
  route: { rt: Pick<ResourceType, 'group' | 'version' | 'plural' | 'namespaced'>; namespace?: string; name?: string; subresource?: string },
): RequestLabels {
  const scope = routeScope(route.rt, route.namespace, route.name, facts.method);
  return {
    verb: reportedVerb(facts, scope, route.subresource),
    dry_run: cleanDryRun(facts.url),
    group: route.rt.group,
    version: route.rt.version,
    resource: route.rt.plural,
    subresource: route.subresource ?? '',
    scope,
    component: APISERVER_COMPONENT,
  };
}

/**
 * The labels of an instrumented non-resource handler (InstrumentHandlerFunc
 * with group, version and resource empty): the path in `subresource` as the
 * handler was registered ("/healthz", "apis", "openapi/v3/"), the empty
 * scope, and the component that handler names ("" for health checks and
 * OpenAPI v3, "apiserver" for aggregated discovery).
 */
export function nonResourceLabels(facts: RequestFacts, path: string, component: string): RequestLabels {
  return {
    verb: reportedVerb(facts, ''), dry_run: cleanDryRun(facts.url), group: '', version: '', resource: '', subresource: path, scope: '', component,
  };
}

/**
 * The labels APF's refusal is counted under (metrics.go RecordDroppedRequest):
 * from the request info of the path, whether or not such a resource exists,
 * with the scope of CleanScope (an object's name or a create: "resource"; a
 * namespace: "namespace"; else "cluster"); a non-resource request has every
 * label empty but verb, dry_run and component.
 */
export function droppedRequestLabels(req: IncomingMessage): RequestLabels {
  const url = new URL(req.url ?? '/', 'http://local');
  const facts = { method: req.method ?? 'GET', url, contentType: req.headers['content-type'] };
  const info = requestInfoOf(url);
  if (!info) {
    return { verb: reportedVerb(facts, ''), dry_run: cleanDryRun(url), group: '', version: '', resource: '', subresource: '', scope: '', component: APISERVER_COMPONENT };
  }
  const scope = info.name || facts.method === 'POST' ? 'resource' : info.namespace ? 'namespace' : 'cluster';
  return {
    verb: reportedVerb(facts, scope, info.subresource),
    dry_run: cleanDryRun(url),
    group: info.group,
    version: info.version,
    resource: info.resource,
    subresource: info.subresource ?? '',
    scope,
    component: APISERVER_COMPONENT,
  };
}

interface RequestInfo {
  group: string;
  version: string;
  resource: string;
  namespace?: string;
  name?: string;
  subresource?: string;
}

/**
 * A resource request as apiserver's RequestInfoFactory reads the path (the
 * legacy /watch/ and /proxy/ prefixes aside): /api/<version>/… or
 * /apis/<group>/<version>/…, then namespaces/<ns>/<resource>[/<name>[/<subresource>]]
 * or <resource>[/<name>[/<subresource>]]; undefined for a non-resource path.
 */
function requestInfoOf(url: URL): RequestInfo | undefined {
  const segs = url.pathname.split('/').filter(Boolean).map(safeDecode);
  let group: string;
  let version: string;
  let parts: string[];
  if (segs[0] === 'api' && segs.length >= 3) [group, version, parts] = ['', segs[1]!, segs.slice(2)];
  else if (segs[0] === 'apis' && segs.length >= 4) [group, version, parts] = [segs[1]!, segs[2]!, segs.slice(3)];
  else return undefined;
  let namespace: string | undefined;
  if (parts[0] === 'namespaces' && parts.length > 1) {
    namespace = parts[1];
    if (parts.length > 2 && parts[2] !== 'status' && parts[2] !== 'finalize') parts = parts.slice(2);
  }
  return { group, version, resource: parts[0]!, name: parts[1], subresource: parts[2], namespace };
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** One apiserver_storage_objects sample: "pods", "jobs.batch", "mediajobs.mediajobs.io". */
export interface StoredCount {
  resource: string;
  count: number;
}

/** The objects stored now per resource (one count per storage key, whatever versions are served). */
export function storedCounts(api: Pick<ApiServer, 'types' | 'store'>): StoredCount[] {
  const byKey = new Map<string, StoredCount>();
  for (const rt of api.types()) {
    const key = storageKey(rt);
    if (!byKey.has(key)) byKey.set(key, { resource: qualifiedResource(rt), count: api.store.count(key) });
  }
  return [...byKey.values()];
}

const REQUEST_TOTAL_HELP = '[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.';
const STORAGE_OBJECTS_HELP = '[STABLE] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.';
/** client_golang writes label pairs sorted by name. */
const REQUEST_LABEL_ORDER = ['code', 'component', 'dry_run', 'group', 'resource', 'scope', 'subresource', 'verb', 'version'] as const;

/**
 * The exposition text: metric families sorted by name, each with its HELP
 * and TYPE lines, samples sorted by their label values, label pairs by
 * name, as client_golang's registry gathers them; a family with no sample
 * (no request answered yet) is left out, as there.
 */
export function metricsText(requests: readonly RequestSeries[], stored: readonly StoredCount[]): string {
  let out = '';
  if (requests.length) {
    out += family('apiserver_request_total', 'counter', REQUEST_TOTAL_HELP, requests.map((s) => ({
      labels: REQUEST_LABEL_ORDER.map((name) => [name, s.labels[name]] as const), value: s.count,
    })));
  }
  if (stored.length) {
    out += family('apiserver_storage_objects', 'gauge', STORAGE_OBJECTS_HELP, stored.map((s) => ({
      labels: [['resource', s.resource] as const], value: s.count,
    })));
  }
  return out;
}

interface Sample {
  labels: readonly (readonly [string, string])[];
  value: number;
}

function family(name: string, type: 'counter' | 'gauge', help: string, samples: Sample[]): string {
  const lines = [`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`];
  const rows = samples.map((s) => ({ key: s.labels.map(([, v]) => v), text: `${name}{${s.labels.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(',')}} ${formatValue(s.value)}` }));
  rows.sort((a, b) => compareValues(a.key, b.key));
  for (const r of rows) lines.push(r.text);
  return `${lines.join('\n')}\n`;
}

function compareValues(a: string[], b: string[]): number {
  for (let i = 0; i < a.length; i++) {
    if (a[i]! !== b[i]!) return a[i]! < b[i]! ? -1 : 1;
  }
  return 0;
}

/** The text format's escapes: in HELP, backslash and line feed. */
function escapeHelp(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

/** In a label value: backslash, double quote and line feed. */
function escapeLabelValue(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}
