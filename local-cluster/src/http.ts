// The HTTP face of the local cluster: routing of Kubernetes API paths,
// content negotiation (JSON, Table, aggregated discovery), body limits, query
// parameters and Status error bodies. Semantics live in ApiServer; this file
// only translates.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseYaml } from 'yaml';
import type { ApiServer, WriteOptions } from './apiserver.js';
import { storageKey } from './apiserver.js';
import {
  AGGREGATED_CONTENT_TYPE, aggregatedDiscovery, apiGroup, apiGroupList, apiResourceList, apiVersions,
} from './discovery.js';
import {
  StatusError, badRequest, expired, internal, methodNotAllowed, notFound, notFoundPath, requestEntityTooLarge,
  unsupportedMediaType,
} from './errors.js';
import { openApiDocumentJson, openApiIndex } from './openapi/index.js';
import { patchTypeOf, unsupportedPatchType } from './patch.js';
import { asPartialObjectMetadata, asPartialObjectMetadataList, checkOneObject, partialMetadataRequest } from './partial-metadata.js';
import { PROTOBUF_MEDIA_TYPE, decodeProtobufDeleteOptions, decodeProtobufObject } from './protobuf/index.js';
import { parseFieldSelector, parseLabelSelector } from './selectors.js';
import { objectKey } from './store.js';
import { toTable } from './table.js';
import type { DeleteOptions } from './cluster-api.js';
import type { FieldValidation, KubeObject, ResourceType } from './types.js';
import { apiVersionOf } from './types.js';
import type { WatchHub } from './watch.js';
import { isObject } from './object-meta.js';
import { PODS } from './builtin-types.js';
import type { WriteThrottle } from './throttle.js';
import { requestVerb, resourceLabel, type RequestCounter, type RequestLabels } from './request-counts.js';
import type { GuardResult } from './request-guard.js';
import { ADMIN_USER } from './credentials.js';
import { userInfo, type RbacAuthorizer, type UserInfo } from './rbac.js';
import { SELF_SUBJECT_ACCESS_REVIEWS, readReviewBody, selfSubjectAccessReview } from './access-review.js';
import {
  APISERVER_COMPONENT, METRICS_CONTENT_TYPE, droppedRequestLabels, metricsText, nonResourceLabels, resourceRequestLabels, storedCounts,
  type RequestFacts,
} from './metrics.js';

export const MAX_BODY_BYTES = 3 * 1024 * 1024;

/** Who a handler without a guard (in-process tests of the handler) serves: the administrator. */
const ADMIN = userInfo(ADMIN_USER, true);

async function readReview(req: IncomingMessage): Promise<unknown> {
  return readReviewBody(await readBodyBytes(req), negotiateBody(req.headers['content-type'], BUILTIN_BODY_TYPES));
}

export interface LogSource {
  /** Current log text of a pod's container; undefined when it has not started. */
  logs(namespace: string, pod: string, container?: string): string | undefined;
}

export interface HttpContext {
  api: ApiServer;
  watches: WatchHub;
  logs?: LogSource;
  /** Writes past a rate get APF's 429 (throttle.ts); read at each request, so it can be changed while serving. */
  throttle?: () => WriteThrottle | undefined;
  /**
   * Counts every request served by verb and resource (requestCounts(); not
   * those the throttle refused), and every answer for GET /metrics'
   * apiserver_request_total (the throttle's 429s included).
   */
  counter?: RequestCounter;
  /** How long to hold back the LIST being answered (the watch fault mode's slow lists); read at each LIST. */
  listDelayMs?: () => number;
  /** Host check, authentication and RBAC authorization (request-guard.ts): who sent the request, or its refusal. */
  guard?: (req: IncomingMessage) => GuardResult;
  /** RBAC, for SelfSubjectAccessReviews (`kubectl auth can-i`); without it every review is allowed. */
  authorizer?: RbacAuthorizer;
  onError?: (err: unknown, req: IncomingMessage) => void;
}

const VERSION_INFO = {
  major: '1', minor: '32', gitVersion: 'v1.32.4-local', gitCommit: '0000000000000000000000000000000000000000',
  gitTreeState: 'clean', buildDate: '2026-11-01T00:00:00Z', goVersion: 'go1.23.8', compiler: 'gc', platform: 'linux/amd64',
};

interface ResourceRoute {
  rt: ResourceType;
  namespace?: string;
  name?: string;
  subresource?: string;
}

type Query = URLSearchParams;

export function createHandler(ctx: HttpContext): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    // As kube-apiserver's filter chain: authentication and authorization come before APF.
    const guarded = ctx.guard?.(req) ?? { user: ADMIN };
    const { refusal, user } = guarded;
    if (refusal) {
      if (user && guarded.refusal && guarded.denied) ctx.counter?.recordRefused(user.name, guarded.denied);
      req.resume();
      sendJson(res, refusal.code, refusal.toStatus());
      return;
    }
    const throttle = ctx.throttle?.();
    if (throttle && !throttle.admit(req.method ?? 'GET')) {
      // As APF: turned away before the body is read, and counted with its 429 (RecordDroppedRequest).
      req.resume();
      ctx.counter?.recordAnswer(droppedRequestLabels(req), 429);
      throttle.refuse(res);
      return;
    }
    const answer: Answer = {};
    if (ctx.counter) countWhenAnswered(ctx.counter, res, answer);
    handle(ctx, req, res, answer, user).catch((err: unknown) => {
      if (!(err instanceof StatusError)) ctx.onError?.(err, req);
      const status = err instanceof StatusError ? err : internal(err instanceof Error ? err.message : String(err));
      if (res.headersSent) {
        res.destroy();
        return;
      }
      sendJson(res, status.code, status.toStatus());
    });
  };
}

/**
 * What a request is counted as in apiserver_request_total once answered:
 * set when kube-apiserver would have instrumented the handler that serves
 * it (a route of a resource, health checks, aggregated discovery, OpenAPI
 * v3); left unset for what it answers before or outside its instrumentation
 * (no route: 404, 405; /version, unaggregated discovery, /metrics itself).
 */
interface Answer {
  labels?: RequestLabels;
}

/** Count the answer once it is done (a watch when it ends), with the code it went out with. */
function countWhenAnswered(counter: RequestCounter, res: ServerResponse, answer: Answer): void {
  let counted = false;
  const count = () => {
    if (counted || !answer.labels) return;
    counted = true;
    counter.recordAnswer(answer.labels, res.statusCode);
  };
  res.once('finish', count);
  res.once('close', count);
}

async function handle(ctx: HttpContext, req: IncomingMessage, res: ServerResponse, answer: Answer, user: UserInfo): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://local');
  const segs = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  const q = url.searchParams;
  const accept = req.headers.accept ?? '';
  const method = req.method ?? 'GET';
  const facts: RequestFacts = { method, url, contentType: req.headers['content-type'] };
  const types = ctx.api.types();
  const resourcePath = (segs[0] === 'api' && segs.length > 2) || (segs[0] === 'apis' && segs.length > 3);
  if (!resourcePath) ctx.counter?.record('get', 'nonresource', user.name);

  if (url.pathname === '/metrics') return serveMetrics(ctx, method, res);
  if (segs.length === 1 && segs[0] === 'version') return sendJson(res, 200, VERSION_INFO);
  if (segs.length === 1 && ['healthz', 'livez', 'readyz'].includes(segs[0]!)) {
    // healthz.InstallPathHandler instruments the path it is installed at, with no component.
    if (url.pathname === `/${segs[0]}`) answer.labels = nonResourceLabels(facts, url.pathname, '');
    return sendText(res, 200, 'ok');
  }
  if (segs[0] === 'openapi') {
    // The aggregator's OpenAPI v3 handlers (specProxier.register), with no component.
    if (url.pathname === '/openapi/v3') answer.labels = nonResourceLabels(facts, 'openapi/v3', '');
    else if (url.pathname.startsWith('/openapi/v3/')) answer.labels = nonResourceLabels(facts, 'openapi/v3/', '');
    return serveOpenApi(ctx, segs, res);
  }
  if (segs[0] === 'api' && segs.length === 1) {
    if (wantsAggregated(accept)) {
      // Only the aggregated discovery handler is instrumented (NewResourceManager("api")).
      if (url.pathname === '/api') answer.labels = nonResourceLabels(facts, 'api', APISERVER_COMPONENT);
      return sendJson(res, 200, aggregatedDiscovery(types, 'api'), AGGREGATED_CONTENT_TYPE);
    }
    return sendJson(res, 200, apiVersions(req.headers.host));
  }
  if (segs[0] === 'apis' && segs.length === 1) {
    if (wantsAggregated(accept)) {
      if (url.pathname === '/apis') answer.labels = nonResourceLabels(facts, 'apis', APISERVER_COMPONENT);
      return sendJson(res, 200, aggregatedDiscovery(types, 'apis'), AGGREGATED_CONTENT_TYPE);
    }
    return sendJson(res, 200, apiGroupList(types));
  }
  // A group nothing serves (no built-in kind, no CRD) falls through the whole
  // handler chain to kube-apiserver's final NotFound handler, which in v1.32 is
  // Go's plain-text http.NotFound (kubectl then says "... (get <resource>)").
  // Later releases answer a JSON Status there (kubernetes/kubernetes#138219).
  if (url.pathname === SELF_SUBJECT_ACCESS_REVIEWS) {
    ctx.counter?.record('create', 'selfsubjectaccessreviews.authorization.k8s.io', user.name);
    if (method !== 'POST') throw methodNotAllowed();
    return sendJson(res, 201, selfSubjectAccessReview(await readReview(req), user, ctx.authorizer));
  }
  if (segs[0] === 'apis' && segs.length >= 2 && !types.some((t) => t.group === segs[1])) return sendPageNotFound(res);
  if (segs[0] === 'apis' && segs.length === 2) {
    const g = apiGroup(types, segs[1]!);
    if (!g) throw notFoundPath();
    return sendJson(res, 200, g);
  }
  if ((segs[0] === 'api' && segs.length === 2) || (segs[0] === 'apis' && segs.length === 3)) {
    const [group, version] = segs[0] === 'api' ? ['', segs[1]!] : [segs[1]!, segs[2]!];
    const list = apiResourceList(types, group, version);
    if (!list) throw notFoundPath();
    return sendJson(res, 200, list);
  }

  const route = resolve(ctx.api, segs);
  if (!route) throw notFoundPath();
  const { rt, namespace, name, subresource } = route;
  const verb = requestVerb(method, name !== undefined, isTrue(q.get('watch')));
  if (verb) ctx.counter?.record(verb, resourceLabel(rt, subresource), user.name);
  if (hasRoute(rt, namespace, name, subresource, method)) answer.labels = resourceRequestLabels(facts, route);
  if (rt.namespaced && namespace === undefined && name !== undefined) throw notFoundPath();

  if (subresource === 'log') {
    if (rt !== PODS || method !== 'GET') throw methodNotAllowed();
    return serveLog(ctx, namespace!, name!, q, res);
  }
  if (subresource !== undefined && subresource !== 'status') throw notFoundPath();
  if (subresource === 'status' && !rt.statusSubresource) throw notFoundPath();

  if (name === undefined) {
    switch (method) {
      case 'GET':
        if (isTrue(q.get('watch'))) return serveWatch(ctx, rt, namespace, q, accept, res);
        return serveList(ctx, rt, namespace, q, accept, res);
      case 'POST': {
        const body = await readObject(req, rt);
        const opts = writeOptions(q, req);
        const created = ctx.api.create(rt, namespace, body, opts);
        return sendObject(res, opts.dryRun ? 200 : 201, created, opts.warnings);
      }
      case 'DELETE':
        return serveDeleteCollection(ctx, req, rt, namespace, q, res);
      default:
        throw methodNotAllowed();
    }
  }

  const opts = writeOptions(q, req);
  if (subresource === 'status') opts.subresource = 'status';
  switch (method) {
    case 'GET': {
      const obj = ctx.api.getStored(rt, namespace, name);
      if (!obj) throw notFound(rt, name);
      if (wantsTable(accept)) {
        return sendJson(res, 200, toTable(rt, [obj], { includeObject: includeObject(q), resourceVersion: obj.metadata.resourceVersion }));
      }
      const partial = partialMetadataRequest(accept);
      return sendJson(res, 200, partial ? asPartialObjectMetadata(partial, rt, obj) : obj);
    }
    case 'PUT': {
      const body = await readObject(req, rt);
      if (body.metadata?.name && body.metadata.name !== name) {
        throw badRequest(`the name of the object (${body.metadata.name}) does not match the name on the URL (${name})`);
      }
      body.metadata = { ...(body.metadata ?? {}), name };
      return sendObject(res, 200, ctx.api.update(rt, namespace, body, opts), opts.warnings);
    }
    case 'PATCH': {
      const contentType = req.headers['content-type'] ?? '';
      const type = patchTypeOf(contentType);
      if (!type) throw unsupportedPatchType(rt.kind);
      validatePatchOptions(q, type === 'apply');
      const text = await readBody(req);
      const patch = parseBody(text, type === 'apply', rt);
      // An apply to a missing object creates it.
      const created = type === 'apply' && !opts.dryRun && !ctx.api.getStored(rt, namespace, name);
      return sendObject(res, created ? 201 : 200, ctx.api.patch(rt, namespace, name, patch, type, opts), opts.warnings);
    }
    case 'DELETE':
      return serveDelete(ctx, req, rt, namespace, name, q, res);
    default:
      throw methodNotAllowed();
  }
}

/**
 * Whether kube-apiserver has a route for this method on this path (installer.go
 * registers one per action): a namespaced resource across all namespaces is
 * only listed and watched; a collection is listed, created and deleted; an
 * object is read, replaced, patched and deleted; /status is read, replaced
 * and patched where the kind has it; pods/log is read. Anything else is
 * refused by go-restful before the route's instrumentation (404, 405).
 */
function hasRoute(rt: ResourceType, namespace: string | undefined, name: string | undefined, subresource: string | undefined, method: string): boolean {
  if (rt.namespaced && namespace === undefined) return name === undefined && method === 'GET';
  if (subresource === 'log') return rt === PODS && name !== undefined && method === 'GET';
  if (subresource === 'status') return rt.statusSubresource && name !== undefined && ['GET', 'PUT', 'PATCH'].includes(method);
  if (subresource !== undefined) return false;
  return (name === undefined ? ['GET', 'POST', 'DELETE'] : ['GET', 'PUT', 'PATCH', 'DELETE']).includes(method);
}

/**
 * GET /metrics: kube-apiserver's apiserver_request_total and
 * apiserver_storage_objects in the Prometheus text format (metrics.ts). The
 * guard has already let only authenticated users through, as RBAC lets
 * system:anonymous no further than the public info paths.
 */
function serveMetrics(ctx: HttpContext, method: string, res: ServerResponse): void {
  if (method !== 'GET') throw methodNotAllowed();
  const text = metricsText(ctx.counter?.series() ?? [], storedCounts(ctx.api));
  res.writeHead(200, { 'Content-Type': METRICS_CONTENT_TYPE, 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** Map path segments after /api/v1 or /apis/g/v to a resource, namespace, name and subresource. */
function resolve(api: ApiServer, segs: string[]): ResourceRoute | undefined {
  let group: string;
  let version: string;
  let rest: string[];
  if (segs[0] === 'api' && segs[1]) [group, version, rest] = ['', segs[1], segs.slice(2)];
  else if (segs[0] === 'apis' && segs[1] && segs[2]) [group, version, rest] = [segs[1], segs[2], segs.slice(3)];
  else return undefined;
  if (!rest.length) return undefined;

  if (rest[0] === 'namespaces' && rest.length >= 3) {
    const rt = api.resource(group, version, rest[2]!);
    if (rt?.namespaced) {
      if (rest.length > 5) return undefined;
      return { rt, namespace: rest[1], name: rest[3], subresource: rest[4] };
    }
  }
  const rt = api.resource(group, version, rest[0]!);
  if (!rt || rest.length > 3) return undefined;
  return { rt, name: rest[1], subresource: rest[2] };
}

function serveOpenApi(ctx: HttpContext, segs: string[], res: ServerResponse): void {
  if (segs[1] !== 'v3') throw notFoundPath(); // v2 is protobuf-only in kubectl's eyes; a real cluster may 404 it too
  const types = ctx.api.types();
  if (segs.length === 2) return sendJson(res, 200, openApiIndex(types));
  // Served as the exact bytes the index hash was computed from.
  const doc = openApiDocumentJson(types, segs.slice(2).join('/'));
  if (!doc) throw notFoundPath();
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(doc), 'Cache-Control': 'public, immutable' });
  res.end(doc);
}

/** A LIST, read now and answered after the fault mode's delay, if any (a slow apiserver: writes meanwhile are newer than the list). */
async function serveList(ctx: HttpContext, rt: ResourceType, namespace: string | undefined, q: Query, accept: string, res: ServerResponse): Promise<void> {
  const body = listBody(ctx, rt, namespace, q, accept);
  const delay = ctx.listDelayMs?.() ?? 0;
  if (delay > 0) {
    await new Promise((r) => setTimeout(r, delay));
    if (res.destroyed) return;
  }
  sendJson(res, 200, body);
}

function listBody(ctx: HttpContext, rt: ResourceType, namespace: string | undefined, q: Query, accept: string): unknown {
  const labels = parseLabelSelector(q.get('labelSelector') ?? undefined);
  const fields = parseFieldSelector(q.get('fieldSelector') ?? undefined, rt.kind, rt.builtin);
  const store = ctx.api.store;
  const currentRv = store.resourceVersion;
  let listRv = currentRv;
  let items: KubeObject[];
  const rvParam = q.get('resourceVersion');
  if (q.get('resourceVersionMatch') === 'Exact' && rvParam) {
    const rv = Number(rvParam);
    if (!Number.isInteger(rv)) throw badRequest(`invalid resource version: ${rvParam}`);
    items = listAt(ctx.api, rt, namespace, rv);
    listRv = rv;
  } else {
    items = store.list(storageKey(rt), rt.namespaced ? namespace : undefined);
  }
  items = items.filter((o) => labels(o) && fields(o));

  const continueToken = q.get('continue');
  if (continueToken) {
    const after = decodeContinue(continueToken);
    items = items.filter((o) => objectKey(o.metadata.namespace, o.metadata.name!) > after.key);
  }
  const limit = Number(q.get('limit') ?? 0);
  let next: string | undefined;
  let remaining: number | undefined;
  if (limit > 0 && items.length > limit) {
    remaining = items.length - limit;
    items = items.slice(0, limit);
    const last = items[items.length - 1]!;
    next = encodeContinue(listRv, objectKey(last.metadata.namespace, last.metadata.name!));
  }
  const metadata: Record<string, unknown> = { resourceVersion: String(listRv) };
  if (next) {
    metadata.continue = next;
    metadata.remainingItemCount = remaining;
  }
  items = items.map((o) => ctx.api.asVersion(rt, o));
  if (wantsTable(accept)) {
    return toTable(rt, items, { includeObject: includeObject(q), resourceVersion: String(listRv), continueToken: next });
  }
  const partial = partialMetadataRequest(accept);
  if (partial) return asPartialObjectMetadataList(partial, rt, items, metadata);
  // Typed (built-in) lists carry no kind/apiVersion on their items; custom resource lists do.
  const listItems = rt.builtin ? items.map(({ kind: _k, apiVersion: _a, ...rest }) => rest) : items;
  return { apiVersion: apiVersionOf(rt), items: listItems, kind: rt.listKind, metadata };
}

/** The list as it was at resourceVersion `rv`, rebuilt by undoing newer history. */
function listAt(api: ApiServer, rt: ResourceType, namespace: string | undefined, rv: number): KubeObject[] {
  const store = api.store;
  if (rv > store.resourceVersion) {
    throw new StatusError(504, 'Timeout', `Too large resource version: ${rv}, current: ${store.resourceVersion}`, { retryAfterSeconds: 1 });
  }
  const sk = storageKey(rt);
  const changes = store.changesSince(rv, sk);
  if (changes === 'expired') throw expired(`too old resource version: ${rv} (${store.oldestResumableRv})`);
  const byKey = new Map<string, KubeObject>();
  for (const o of store.list(sk, rt.namespaced ? namespace : undefined)) byKey.set(objectKey(o.metadata.namespace, o.metadata.name!), o);
  for (let i = changes.length - 1; i >= 0; i--) {
    const c = changes[i]!;
    if (namespace && rt.namespaced && c.object.metadata.namespace !== namespace) continue;
    const key = objectKey(c.object.metadata.namespace, c.object.metadata.name!);
    if (c.type === 'ADDED') byKey.delete(key);
    else if (c.old) byKey.set(key, c.old);
  }
  return [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, o]) => o);
}

function encodeContinue(rv: number, key: string): string {
  return Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv, start: key })).toString('base64url');
}

function decodeContinue(token: string): { rv: number; key: string } {
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { rv: number; start: string };
    if (typeof parsed.start !== 'string') throw new Error('no start');
    return { rv: parsed.rv, key: parsed.start };
  } catch {
    throw badRequest(`invalid continue token: ${token}`);
  }
}

function serveWatch(ctx: HttpContext, rt: ResourceType, namespace: string | undefined, q: Query, accept: string, res: ServerResponse): void {
  const timeout = q.get('timeoutSeconds');
  const table = wantsTable(accept);
  const partial = table ? undefined : partialMetadataRequest(accept);
  if (partial) checkOneObject(partial, rt);
  ctx.watches.serve({
    rt,
    namespace: rt.namespaced ? namespace : undefined,
    labels: parseLabelSelector(q.get('labelSelector') ?? undefined),
    fields: parseFieldSelector(q.get('fieldSelector') ?? undefined, rt.kind, rt.builtin),
    resourceVersion: q.get('resourceVersion') ?? undefined,
    allowBookmarks: isTrue(q.get('allowWatchBookmarks')),
    timeoutSeconds: timeout !== null && timeout !== '' ? Number(timeout) : undefined,
    table: table ? { includeObject: includeObject(q) } : false,
    ...(partial && { partial }),
  }, res);
}

async function serveDelete(ctx: HttpContext, req: IncomingMessage, rt: ResourceType, namespace: string | undefined, name: string, q: Query, res: ServerResponse): Promise<void> {
  const opts = await deleteOptions(req, q);
  const warnings: string[] = [];
  if (rt.kind === 'Job' && rt.builtin && !opts.propagationPolicy) {
    warnings.push('child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning');
  }
  const before = ctx.api.getStored(rt, namespace, name);
  const result = ctx.api.delete(rt, namespace, name, opts);
  const stillThere = !!ctx.api.getStored(rt, namespace, name);
  if (stillThere && result) return sendObject(res, 202, result, warnings);
  if (rt === PODS && result) return sendObject(res, 200, result, warnings);
  sendJson(res, 200, {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success',
    details: { name, group: rt.group, kind: rt.plural, uid: before?.metadata.uid },
  }, 'application/json', warningHeaders(warnings));
}

async function serveDeleteCollection(ctx: HttpContext, req: IncomingMessage, rt: ResourceType, namespace: string | undefined, q: Query, res: ServerResponse): Promise<void> {
  const items = ctx.api.listStored(rt, {
    namespace, labelSelector: q.get('labelSelector') ?? undefined, fieldSelector: q.get('fieldSelector') ?? undefined,
  });
  const opts = await deleteOptions(req, q);
  const deleted: KubeObject[] = [];
  for (const o of items) {
    try {
      const r = ctx.api.delete(rt, o.metadata.namespace, o.metadata.name!, opts);
      if (r) deleted.push(r);
    } catch (e) {
      if (!(e instanceof StatusError && e.code === 404)) throw e;
    }
  }
  sendJson(res, 200, { apiVersion: apiVersionOf(rt), kind: rt.listKind, metadata: { resourceVersion: String(ctx.api.store.resourceVersion) }, items: deleted });
}

async function deleteOptions(req: IncomingMessage, q: Query): Promise<DeleteOptions & { dryRun?: boolean }> {
  const bytes = await readBodyBytes(req);
  const body = bytes.length ? decodeDeleteOptions(bytes, negotiateBody(req.headers['content-type'], BUILTIN_BODY_TYPES)) : {};
  const opts: DeleteOptions & { dryRun?: boolean } = {};
  const policy = (body.propagationPolicy as string | undefined) ?? q.get('propagationPolicy') ?? undefined;
  const orphan = body.orphanDependents ?? (q.get('orphanDependents') !== null ? isTrue(q.get('orphanDependents')) : undefined);
  if (policy) {
    if (!['Background', 'Foreground', 'Orphan'].includes(policy)) {
      throw new StatusError(422, 'Invalid', `DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "${policy}": supported values: "Foreground", "Background", "Orphan", "nil"`);
    }
    opts.propagationPolicy = policy as DeleteOptions['propagationPolicy'];
  } else if (orphan !== undefined) {
    opts.propagationPolicy = orphan ? 'Orphan' : 'Background';
  }
  const grace = body.gracePeriodSeconds ?? q.get('gracePeriodSeconds') ?? undefined;
  if (grace !== undefined && grace !== null) opts.gracePeriodSeconds = Number(grace);
  if (isObject(body.preconditions)) opts.preconditions = body.preconditions as DeleteOptions['preconditions'];
  const dryRun = body.dryRun ?? q.getAll('dryRun');
  if (Array.isArray(dryRun) && dryRun.includes('All')) opts.dryRun = true;
  return opts;
}

/** A DeleteOptions body; typed clients' Delete sends it as protobuf. */
function decodeDeleteOptions(bytes: Buffer, mediaType: string): Record<string, unknown> {
  if (mediaType === PROTOBUF_MEDIA_TYPE) return decodeProtobufDeleteOptions(bytes);
  const text = bytes.toString('utf8');
  if (!text.trim()) return {};
  try {
    const parsed: unknown = mediaType === 'application/yaml' ? parseYaml(text) : JSON.parse(text);
    return isObject(parsed) ? parsed : {};
  } catch (e) {
    throw badRequest(`the body of the request was in an unknown format: ${(e as Error).message}`);
  }
}

async function serveLog(ctx: HttpContext, namespace: string, name: string, q: Query, res: ServerResponse): Promise<void> {
  const pod = ctx.api.getStored(PODS, namespace, name);
  if (!pod) throw notFound(PODS, name);
  const containers = (((pod.spec as Record<string, unknown>)?.containers as { name: string }[]) ?? []).map((c) => c.name);
  let container = q.get('container') ?? undefined;
  if (!container) {
    if (containers.length !== 1) {
      throw badRequest(`a container name must be specified for pod ${name}, choose one of: [${containers.join(' ')}]`);
    }
    container = containers[0];
  } else if (!containers.includes(container)) {
    throw badRequest(`container ${container} is not valid for pod ${name}`);
  }
  const read = () => ctx.logs?.logs(namespace, name, container);
  const text = read();
  if (text === undefined) {
    throw badRequest(`container "${container}" in pod "${name}" is waiting to start: ContainerCreating`);
  }
  const tail = q.get('tailLines');
  const initial = tail !== null ? lastLines(text, Number(tail)) : text;
  if (!isTrue(q.get('follow'))) return sendText(res, 200, initial);

  res.writeHead(200, { 'Content-Type': 'text/plain', 'Transfer-Encoding': 'chunked' });
  res.write(initial);
  let sent = text.length;
  // Follow until the pod ends; the kubelet keeps the whole log, so polling its length is enough.
  await new Promise<void>((resolveDone) => {
    const timer = setInterval(() => {
      const now = read() ?? '';
      if (now.length > sent) {
        res.write(now.slice(sent));
        sent = now.length;
      }
      const p = ctx.api.getStored(PODS, namespace, name);
      const phase = (p?.status as Record<string, unknown> | undefined)?.phase;
      if (!p || phase === 'Succeeded' || phase === 'Failed') finish();
    }, 100);
    const finish = () => {
      clearInterval(timer);
      res.end();
      resolveDone();
    };
    res.on('close', finish);
  });
}

function lastLines(text: string, n: number): string {
  if (!Number.isFinite(n) || n < 0) return text;
  const lines = text.split('\n');
  const trailing = lines[lines.length - 1] === '' ? lines.pop() : undefined;
  const kept = lines.slice(Math.max(0, lines.length - n));
  return kept.join('\n') + (trailing !== undefined && kept.length ? '\n' : '');
}

// ---- request helpers ---------------------------------------------------------

/** PatchOptions validation (apimachinery ValidatePatchOptions), before the object is looked up. */
function validatePatchOptions(q: Query, apply: boolean): void {
  const invalidOption = (cause: { reason: string; field: string; message: string }) =>
    new StatusError(422, 'Invalid', `PatchOptions.meta.k8s.io "" is invalid: ${cause.field}: ${cause.message}`, {
      group: 'meta.k8s.io', kind: 'PatchOptions', causes: [cause],
    });
  if (apply && !q.get('fieldManager')) {
    // kubectl always names one; controllers must.
    throw invalidOption({ reason: 'FieldValueRequired', field: 'fieldManager', message: 'Required value: is required for apply patch' });
  }
  if (!apply && q.has('force')) {
    throw invalidOption({ reason: 'FieldValueForbidden', field: 'force', message: 'Forbidden: may not be specified for non-apply patch' });
  }
}

/**
 * The manager a write without fieldManager is recorded under (handlers'
 * prefixFromUserAgent): the User-Agent up to its first "/", printable
 * characters only, at most 128 bytes.
 */
export function managerFromUserAgent(userAgent: string | undefined): string {
  let out = '';
  for (const ch of (userAgent ?? '').split('/')[0]!) {
    if (!/^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u.test(ch)) continue;
    if (Buffer.byteLength(out + ch) > 128) break;
    out += ch;
  }
  return out;
}

function writeOptions(q: Query, req: IncomingMessage): WriteOptions {
  const fv = q.get('fieldValidation');
  let fieldValidation: FieldValidation | undefined;
  if (fv) {
    if (fv !== 'Strict' && fv !== 'Warn' && fv !== 'Ignore') {
      throw badRequest(`fieldValidation must be one of "Ignore", "Warn", or "Strict", got "${fv}"`);
    }
    fieldValidation = fv;
  }
  return {
    fieldValidation, dryRun: q.getAll('dryRun').includes('All'), warnings: [],
    fieldManager: q.get('fieldManager') || managerFromUserAgent(req.headers['user-agent']),
    force: isTrue(q.get('force')),
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  return (await readBodyBytes(req)).toString('utf8');
}

async function readBodyBytes(req: IncomingMessage): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_BODY_BYTES) {
    req.resume();
    throw requestEntityTooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) {
      req.resume();
      throw requestEntityTooLarge();
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** What a create or update body may be in: JSON, YAML, and for built-in kinds protobuf (custom resources have no protobuf codec). */
const BUILTIN_BODY_TYPES = ['application/json', 'application/yaml', PROTOBUF_MEDIA_TYPE] as const;
const CUSTOM_BODY_TYPES = ['application/json', 'application/yaml'] as const;

/**
 * The media type a body is decoded as, as apiserver's NegotiateInputSerializer
 * picks it: no Content-Type is the first accepted type (JSON); parameters are
 * dropped and the rest must be one of `accepted` exactly, else 415. So a
 * browser's cross-origin bodies without a preflight (text/plain, forms) are refused.
 */
function negotiateBody(contentType: string | undefined, accepted: readonly string[]): string {
  const mediaType = contentType ? mediaTypeOf(contentType) : accepted[0]!;
  if (!accepted.includes(mediaType)) throw unsupportedMediaType(accepted);
  return mediaType;
}

async function readObject(req: IncomingMessage, rt: ResourceType): Promise<KubeObject> {
  const body = await readBodyBytes(req);
  const mediaType = negotiateBody(req.headers['content-type'], rt.builtin ? BUILTIN_BODY_TYPES : CUSTOM_BODY_TYPES);
  // kubectl's typed clients (create secret, configmap, namespace …) send protobuf.
  if (mediaType === PROTOBUF_MEDIA_TYPE) return decodeProtobufObject(body, rt);
  const parsed = parseBody(body.toString('utf8'), mediaType === 'application/yaml', rt);
  if (!isObject(parsed)) {
    throw badRequest(`the object provided is unrecognized (must be of type ${rt.kind}): couldn't get version/kind; json parse error: expected an object`);
  }
  return parsed as KubeObject;
}

function mediaTypeOf(contentType: string): string {
  return contentType.split(';')[0]!.trim().toLowerCase();
}

/** A JSON (or YAML) body already negotiated. */
function parseBody(text: string, yaml: boolean, rt: ResourceType): unknown {
  if (yaml) {
    try {
      return parseYaml(text);
    } catch (e) {
      throw badRequest(`error converting YAML to JSON: ${(e as Error).message.split('\n')[0]}`);
    }
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw badRequest(`the object provided is unrecognized (must be of type ${rt.kind}): couldn't get version/kind; json parse error: ${(e as Error).message}`);
  }
}

function includeObject(q: Query): 'None' | 'Metadata' | 'Object' | undefined {
  const v = q.get('includeObject');
  if (v === null) return undefined;
  if (v === 'None' || v === 'Metadata' || v === 'Object') return v;
  throw badRequest(`includeObject: Unsupported value: "${v}": supported values: "Metadata", "None", "Object"`);
}

/**
 * A boolean query parameter as kube-apiserver decodes it (apimachinery's
 * Convert_Slice_string_To_bool): absent, "0" and "false" in any case are
 * false; anything else, the empty string included, is true. The Python
 * client sends `watch=True`.
 */
export function isTrue(v: string | null): boolean {
  return v !== null && v !== '0' && v.toLowerCase() !== 'false';
}

function wantsAggregated(accept: string): boolean {
  return accept.includes('as=APIGroupDiscoveryList') && accept.includes('v=v2');
}

function wantsTable(accept: string): boolean {
  return accept.includes('as=Table');
}

// ---- response helpers ----------------------------------------------------------

/** Go's warning header format: 299 with the text quoted and escaped. */
function warningHeaders(warnings: string[] | undefined): Record<string, string[]> {
  if (!warnings?.length) return {};
  return { Warning: warnings.map((w) => `299 - "${w.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`) };
}

function sendObject(res: ServerResponse, code: number, obj: unknown, warnings?: string[]): void {
  sendJson(res, code, obj, 'application/json', warningHeaders(warnings));
}

function sendJson(res: ServerResponse, code: number, body: unknown, contentType = 'application/json', headers: Record<string, string | string[]> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** Go's http.NotFound, as net/http writes it. */
function sendPageNotFound(res: ServerResponse): void {
  const text = '404 page not found\n';
  res.writeHead(404, {
    'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff', 'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

function sendText(res: ServerResponse, code: number, text: string): void {
  res.writeHead(code, { 'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}
