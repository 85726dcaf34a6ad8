// Who a manifest may act for. Anyone allowed to create a MediaJob in a
// namespace could otherwise name any API key as its owner: spend its
// quota, deliver with its saved destinations, appear in its listings. So a
// namespace other than the service's own runs manifests for one key only,
// the one an admin bound it to with an annotation on the Namespace (docs/
// gitops.md). The service's namespace is the admins' own (the gateway
// creates its jobs there), and manifests there name their owner as before.
import type * as k8s from '@kubernetes/client-node';
import type { Owned } from '@mediajobs/lib/mediajob/types';
import { PermanentError } from '@mediajobs/lib/reconcile';
import { ResilientInformer, type ResilientInformerOptions } from './informer.js';

/** The Namespace annotation binding it to an API key's id. */
export const NAMESPACE_OWNER_ANNOTATION = 'mediajobs.io/owner-api-key-id';

export const NAMESPACE_NOT_BOUND = 'namespace_not_bound';
export const OWNER_NOT_ALLOWED = 'owner_not_allowed';
export const OWNER_REQUIRED = 'owner_required';

/** What names an owner: a MediaJob or MediaBatch. */
interface Owner {
  metadata: { namespace?: string };
  spec: { owner?: { apiKeyId: string } };
}

type InformerSettings = Omit<ResilientInformerOptions<k8s.V1Namespace>, 'name' | 'path' | 'list' | 'onChange'>;

export class NamespaceOwners {
  /** Namespaces, read only when the operator looks beyond its own (ClusterRole: get, list, watch namespaces). */
  private readonly namespaces: ResilientInformer<k8s.V1Namespace> | undefined;

  constructor(
    private readonly serviceNamespace: string,
    watch: { core: k8s.CoreV1Api; settings: InformerSettings } | undefined,
  ) {
    this.namespaces = watch && new ResilientInformer({
      ...watch.settings,
      name: 'namespaces',
      path: '/api/v1/namespaces',
      list: () => watch.core.listNamespace(),
      onChange: () => undefined,
    });
  }

  async start(): Promise<void> {
    await this.namespaces?.start();
  }

  async stop(): Promise<void> {
    await this.namespaces?.stop();
  }

  /** The informers whose cache does not follow the API server now (the operator's readiness, probes.ts). */
  informersNotFollowing(): string[] {
    return this.namespaces && this.namespaces.followingSince() === undefined ? ['namespaces'] : [];
  }

  /**
   * The resource with the owner it acts for: the one its spec names in the
   * service's namespace; elsewhere its namespace's bound key, which a spec
   * may repeat but not contradict. Throws PermanentError otherwise.
   */
  resolve<T extends Owner>(o: T): Owned<T> {
    const r = this.settle(o);
    if (r instanceof PermanentError) throw r;
    return r;
  }

  /** As resolve, undefined where it would throw. */
  settled<T extends Owner>(o: T): Owned<T> | undefined {
    const r = this.settle(o);
    return r instanceof PermanentError ? undefined : r;
  }

  private settle<T extends Owner>(o: T): Owned<T> | PermanentError {
    const named = o.spec.owner?.apiKeyId;
    const ns = o.metadata.namespace ?? '';
    if (ns === this.serviceNamespace) {
      return named ? (o as Owned<T>) : new PermanentError(OWNER_REQUIRED, `spec.owner.apiKeyId is required in namespace ${ns}, which is bound to no single API key`);
    }
    const bound = this.boundKey(ns);
    if (!bound) return new PermanentError(NAMESPACE_NOT_BOUND, `namespace ${ns} is not bound to an API key: an admin sets its ${NAMESPACE_OWNER_ANNOTATION} annotation`);
    if (named && named !== bound) return new PermanentError(OWNER_NOT_ALLOWED, `spec.owner.apiKeyId is not the API key namespace ${ns} is bound to`);
    return named ? (o as Owned<T>) : { ...o, spec: { ...o.spec, owner: { apiKeyId: bound } } };
  }

  private boundKey(namespace: string): string | undefined {
    return this.namespaces?.get(namespace)?.metadata?.annotations?.[NAMESPACE_OWNER_ANNOTATION]?.trim() || undefined;
  }
}
