// Counts of the API requests the local cluster has served, by Kubernetes
// verb and resource as kube-apiserver's apiserver_request_total names them
// (verb: create, get, list, watch, update, patch, delete, deletecollection;
// resource: plural.group plus "/subresource"). Non-resource requests
// (discovery, /version, /openapi, health) are counted under the verb "get"
// and the resource "nonresource". Requests the write throttle turned away
// are not counted here (throttledWrites counts them). Only HTTP requests are
// counted: the built-in controllers (Job controller, kubelet, garbage
// collector) call the ApiServer in process; their writes show as changes
// (ClusterApi.subscribe).
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

export class RequestCounter {
  private readonly counts = new Map<string, number>();

  record(verb: RequestVerb, resource: string): void {
    const key = `${verb} ${resource}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  /** "verb resource" → requests served since the last reset, keys sorted. */
  snapshot(): Record<string, number> {
    return Object.fromEntries([...this.counts].sort(([a], [b]) => a.localeCompare(b)));
  }

  reset(): void {
    this.counts.clear();
  }
}
