// Which namespaces the operator runs MediaJobs and MediaBatches in
// (WATCH_NAMESPACES), and one cache over them. Every namespace is one
// cluster-wide watch (a ClusterRole); a list is one watch per namespace, so
// the operator needs rights only there (a Role in each, as the chart makes).
import type * as k8s from '@kubernetes/client-node';
import { GROUP, VERSION } from '@mediajobs/lib/mediajob/types';
import { ResilientInformer, type ResilientInformerOptions } from './informer.js';

/** Every namespace, or these (the service's own always among them). */
export type WatchScope = { readonly all: true } | { readonly all: false; readonly namespaces: readonly string[] };

export function watchScope(cfg: { WATCH_NAMESPACES?: string | undefined; MEDIAJOBS_NAMESPACE: string }): WatchScope {
  const setting = cfg.WATCH_NAMESPACES?.trim() ?? '';
  if (setting === '*') return { all: true };
  const listed = setting.split(',').map((n) => n.trim()).filter(Boolean);
  return { all: false, namespaces: [...new Set([cfg.MEDIAJOBS_NAMESPACE, ...listed])] };
}

export function watches(scope: WatchScope, namespace: string): boolean {
  return scope.all || scope.namespaces.includes(namespace);
}

/** True when the operator looks beyond the service's own namespace (and so needs namespace bindings). */
export function reachesBeyond(scope: WatchScope, serviceNamespace: string): boolean {
  return scope.all || scope.namespaces.some((n) => n !== serviceNamespace);
}

/**
 * A ResilientInformer per watched namespace, or one for all, read as one
 * cache. `options(namespace)` builds each one's options; `undefined` means
 * every namespace (the cluster-wide path and list).
 */
export class ScopedInformer<T extends k8s.KubernetesObject> {
  private readonly informers: ReadonlyMap<string | undefined, ResilientInformer<T>>;

  constructor(scope: WatchScope, options: (namespace: string | undefined) => ResilientInformerOptions<T>) {
    const namespaces = scope.all ? [undefined] : scope.namespaces;
    this.informers = new Map(namespaces.map((ns) => [ns, new ResilientInformer(options(ns))]));
  }

  async start(): Promise<void> {
    await Promise.all([...this.informers.values()].map((i) => i.start()));
  }

  async stop(): Promise<void> {
    await Promise.all([...this.informers.values()].map((i) => i.stop()));
  }

  get(name: string, namespace: string | undefined): T | undefined {
    return this.informerOf(namespace)?.get(name, namespace);
  }

  /** ResilientInformer.followingSince of the informer that holds `namespace`. */
  followingSince(namespace: string | undefined): number | undefined {
    return this.informerOf(namespace)?.followingSince();
  }

  /** Whether every informer of the scope follows the API server now (ResilientInformer.followingSince is set). */
  following(): boolean {
    return [...this.informers.values()].every((i) => i.followingSince() !== undefined);
  }

  private informerOf(namespace: string | undefined): ResilientInformer<T> | undefined {
    return this.informers.get(namespace) ?? this.informers.get(undefined);
  }

  list(): T[] {
    return [...this.informers.values()].flatMap((i) => i.list());
  }
}

/** The API path of a resource in one namespace, or across all of them. */
export function resourcePath(prefix: string, plural: string, namespace: string | undefined): string {
  return namespace === undefined ? `${prefix}/${plural}` : `${prefix}/namespaces/${namespace}/${plural}`;
}

/** An informer's path and list of one of our custom resources (mediajobs, mediabatches), in one namespace or across all. */
export function customResourceWatch<T extends k8s.KubernetesObject>(
  custom: k8s.CustomObjectsApi, plural: string, namespace: string | undefined,
): { path: string; list: () => Promise<k8s.KubernetesListObject<T>> } {
  const group = { group: GROUP, version: VERSION, plural };
  return {
    path: resourcePath(`/apis/${GROUP}/${VERSION}`, plural, namespace),
    list: () => (namespace === undefined
      ? custom.listClusterCustomObject(group)
      : custom.listNamespacedCustomObject({ ...group, namespace })) as Promise<k8s.KubernetesListObject<T>>,
  };
}
