// The in-process view of the API server that the built-in controllers (Job
// controller, kubelet, garbage collector, TTL controller) use. It runs the same
// admission, defaulting, validation and resourceVersion logic as the HTTP
// handlers; controllers never touch the store directly, exactly as
// kube-controller-manager only talks to the API.
import type { KubeObject, ResourceType } from './types.js';

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface Change {
  type: ChangeType;
  rt: ResourceType;
  object: KubeObject;
  /** The object before the write (MODIFIED and DELETED). */
  old?: KubeObject;
}

export interface DeleteOptions {
  propagationPolicy?: 'Background' | 'Foreground' | 'Orphan';
  gracePeriodSeconds?: number;
  preconditions?: { uid?: string; resourceVersion?: string };
}

export interface ListOptions {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

/** How an in-process write is recorded in managedFields. */
export interface WriteAs {
  /** The name the real component's requests carry (kube-controller-manager, kubelet). */
  fieldManager?: string;
  /** Written straight to storage, as the pods/binding subresource does: managedFields stay as they are. */
  untracked?: boolean;
}

export interface ClusterApi {
  /** Look up a served resource type by group, version and plural; undefined when not served. */
  resource(group: string, version: string, plural: string): ResourceType | undefined;
  /** Look up a served resource type by apiVersion ("batch/v1", "v1") and kind. */
  resourceForKind(apiVersion: string, kind: string): ResourceType | undefined;

  get(rt: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined;
  /** The stored object itself, without copying, as an informer's cache hands it out: for controllers that only read it. Never modify it. */
  getReadonly(rt: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined;
  list(rt: ResourceType, opts?: ListOptions): KubeObject[];
  /**
   * The stored objects themselves, without copying: for controllers that
   * scan many objects and change few (through mutate). Never modify them.
   */
  listReadonly(rt: ResourceType, opts?: ListOptions): readonly KubeObject[];
  /** Create; throws StatusError (AlreadyExists, Invalid, NotFound namespace...). Returns the stored copy. */
  create(rt: ResourceType, namespace: string | undefined, obj: KubeObject, opts?: WriteAs): KubeObject;
  /**
   * Replace. When obj.metadata.resourceVersion is set and stale: 409 Conflict.
   * With subresource 'status' only .status is taken from obj.
   */
  update(rt: ResourceType, namespace: string | undefined, obj: KubeObject, opts?: WriteAs & { subresource?: 'status' }): KubeObject;
  /** Read-modify-write without a conflict check; `mutate` gets a deep copy and returns it changed. */
  mutate(rt: ResourceType, namespace: string | undefined, name: string, mutate: (obj: KubeObject) => KubeObject | void, opts?: WriteAs & { subresource?: 'status' }): KubeObject | undefined;
  /** Delete with Kubernetes semantics (finalizers, propagation). Returns the object as left (or undefined when gone). */
  delete(rt: ResourceType, namespace: string | undefined, name: string, opts?: DeleteOptions): KubeObject | undefined;

  /** Called synchronously after every committed write, in commit order. Returns an unsubscribe function. */
  subscribe(listener: (change: Change) => void): () => void;
}
