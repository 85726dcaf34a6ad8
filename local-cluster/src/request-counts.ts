// Counts of the API requests the local cluster has served, two ways.
//
// requestCounts(): by Kubernetes verb and resource as the apiserver's request
// info names them (verb: create, get, list, watch, update, patch, delete,
// deletecollection; resource: plural.group plus "/subresource"), counted when
// a request is routed; requestCountsByUser() the same per authenticated user
// (system:serviceaccount:<ns>:<name>, the administrator, system:anonymous),
// which is what a least-privilege check compares with each component's Role. Non-resource requests (discovery, /version, /openapi,
// health, /metrics) are counted under the verb "get" and the resource
// "nonresource". Requests the write throttle turned away are not counted here
// (throttledWrites counts them).
//
// The series of /metrics' apiserver_request_total (metrics.ts): kube-apiserver's
// labels with the HTTP code of the answer, counted when the answer is done, as
// kube-apiserver's instrumentation counts after its handler returns (a watch
// when it ends). The throttle's 429s are counted there, as APF's are.
//
// Only HTTP requests are counted: the built-in controllers (Job controller,
// kubelet, garbage collector) call the ApiServer in process; their writes
// show as changes (ClusterApi.subscribe).
import type { ResourceType } from './types.js';

export type RequestVerb = 'create' | 'get' | 'list' | 'watch' | 'update' | 'patch' | 'delete' | 'deletecollection';

/** "pods", "jobs.batch", "mediajobs.mediajobs.io/status". */
export function resourceLabel(rt: Pick<ResourceType, 'group' | 'plural'>, subresource?: string): string {
  return `${rt.plural}${rt.group ? `.${rt.group}` : ''}${subresource ? `/${subresource}` : ''}`;
}

/** The verb of a resource request, as the apiserver's request info resolver names it. */
export function requestVerb(method: string, named: boolean, watch: boolean): RequestVerb | undefined {
  switch (method) {
    case 'GET': return named ? 'get' : watch ? 'watch' : 'list';
    case 'POST': return 'create';
    case 'PUT': return 'update';
    case 'PATCH': return 'patch';
    case 'DELETE': return named ? 'delete' : 'deletecollection';
    default: return undefined;
  }
}

/**
 * The labels of one apiserver_request_total series but its code, named as
 * kube-apiserver names them (k8s.io/apiserver/pkg/endpoints/metrics).
 */
export interface RequestLabels {
  verb: string;
  dry_run: string;
  group: string;
  version: string;
  resource: string;
  subresource: string;
  scope: string;
  component: string;
}

/** One apiserver_request_total series: its labels, the HTTP code and the count. */
export interface RequestSeries {
  labels: RequestLabels & { code: string };
  count: number;
}

export class RequestCounter {
  private readonly counts = new Map<string, number>();
  private readonly byUser = new Map<string, Map<string, number>>();
  private readonly refused = new Map<string, Map<string, number>>();
  private readonly answered = new Map<string, RequestSeries>();

  record(verb: RequestVerb, resource: string, user?: string): void {
    const key = `${verb} ${resource}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    if (user !== undefined) bump(this.byUser, user, key);
  }

  /** Count an answered request (its code included) for apiserver_request_total. */
  recordAnswer(labels: RequestLabels, code: number): void {
    const full = { ...labels, code: String(code) };
    const key = JSON.stringify(full);
    const series = this.answered.get(key);
    if (series) series.count++;
    else this.answered.set(key, { labels: full, count: 1 });
  }

  /** "verb resource" → requests served since the last reset, keys sorted. */
  snapshot(): Record<string, number> {
    return Object.fromEntries([...this.counts].sort(([a], [b]) => a.localeCompare(b)));
  }

  /** A request RBAC refused: `request` is "verb resource" (or "verb /path"), as asked. */
  recordRefused(user: string, request: string): void {
    bump(this.refused, user, request);
  }

  /** user → "verb resource" → requests served since the last reset, both levels sorted. */
  snapshotByUser(): Record<string, Record<string, number>> {
    return sortedByUser(this.byUser);
  }

  /** user → "verb resource" → requests RBAC refused since the last reset. */
  refusedByUser(): Record<string, Record<string, number>> {
    return sortedByUser(this.refused);
  }

  /** Every apiserver_request_total series counted since start, the last reset or the last apiserver restart. */
  series(): RequestSeries[] {
    return [...this.answered.values()].map((s) => ({ labels: { ...s.labels }, count: s.count }));
  }

  /** Start both counts over. */
  reset(): void {
    this.counts.clear();
    this.byUser.clear();
    this.refused.clear();
    this.answered.clear();
  }

  /** Start the metric's series over, as a kube-apiserver restart does (a new process); requestCounts() keeps counting. */
  resetSeries(): void {
    this.answered.clear();
  }
}

function bump(counts: Map<string, Map<string, number>>, user: string, key: string): void {
  let mine = counts.get(user);
  if (!mine) counts.set(user, (mine = new Map()));
  mine.set(key, (mine.get(key) ?? 0) + 1);
}

function sortedByUser(counts: Map<string, Map<string, number>>): Record<string, Record<string, number>> {
  return Object.fromEntries([...counts].sort(([a], [b]) => a.localeCompare(b))
    .map(([user, mine]) => [user, Object.fromEntries([...mine].sort(([a], [b]) => a.localeCompare(b)))]));
}
