// Owner-reference garbage collection, and the cleanup of terminating
// namespaces and CRDs. Like kube-controller-manager's garbage collector it
// keeps a graph of owners (by uid) and dependents, reacts to changes
// asynchronously, and acts only through the API: a dependent whose owners are
// all gone is deleted; `orphan` strips owner references before the owner
// goes; `foregroundDeletion` deletes dependents first and waits for those
// with blockOwnerDeletion.
import type { ApiServer } from './apiserver.js';
import { storageKey } from './apiserver.js';
import { CRDS, NAMESPACES } from './builtin-types.js';
import { StatusError } from './errors.js';
import { hasFinalizer } from './object-meta.js';
import { objectKey, type StoredChange } from './store.js';
import type { KubeObject, OwnerReference } from './types.js';

interface Location {
  sk: string;
  key: string;
}

const SEP = '\u0000';
const CRD_CLEANUP = 'customresourcecleanup.apiextensions.k8s.io';

export class GarbageCollector {
  private readonly byUid = new Map<string, Location>();
  /** owner uid → dependents ("sk\0key") */
  private readonly dependents = new Map<string, Set<string>>();
  private readonly dirtyItems = new Set<string>();
  private readonly dirtyNamespaces = new Set<string>();
  private readonly dirtyCrds = new Set<string>();
  private scheduled = false;
  private stopped = false;

  constructor(private readonly api: ApiServer) {
    api.store.subscribe((c) => this.observe(c));
  }

  stop(): void {
    this.stopped = true;
  }

  /** Rebuild the owner graph from the store (after restoring persisted state) and check everything once. */
  rebuild(): void {
    for (const sk of this.api.store.typeKeys()) {
      for (const obj of this.api.store.list(sk)) {
        this.index(sk, obj);
        this.dirtyItems.add(sk + SEP + keyOf(obj));
      }
    }
    this.schedule();
  }

  enqueueNamespace(name: string): void {
    this.dirtyNamespaces.add(name);
    this.schedule();
  }

  private observe(c: StoredChange): void {
    const obj = c.object;
    const key = keyOf(obj);
    const item = c.typeKey + SEP + key;
    if (c.old) this.unindex(c.old, item);
    if (c.type === 'DELETED') {
      this.byUid.delete(obj.metadata.uid!);
      // Its dependents may now be orphans; its owners may be waiting for it.
      for (const dep of this.dependents.get(obj.metadata.uid!) ?? []) this.dirtyItems.add(dep);
      for (const ref of obj.metadata.ownerReferences ?? []) this.markOwnerDirty(ref.uid);
      if (obj.metadata.namespace) {
        const ns = this.api.store.get(storageKey(NAMESPACES), obj.metadata.namespace);
        if (ns?.metadata.deletionTimestamp) this.dirtyNamespaces.add(obj.metadata.namespace);
      }
      for (const crd of this.terminatingCrdsOf(c.typeKey)) this.dirtyCrds.add(crd);
    } else {
      this.index(c.typeKey, obj);
      if (obj.metadata.ownerReferences?.length) this.dirtyItems.add(item);
      if (obj.metadata.deletionTimestamp) {
        this.dirtyItems.add(item);
        if (c.typeKey === storageKey(CRDS) && hasFinalizer(obj, CRD_CLEANUP)) this.dirtyCrds.add(obj.metadata.name!);
      }
    }
    if (this.dirtyItems.size || this.dirtyNamespaces.size || this.dirtyCrds.size) this.schedule();
  }

  private index(sk: string, obj: KubeObject): void {
    const item = sk + SEP + keyOf(obj);
    this.byUid.set(obj.metadata.uid!, { sk, key: keyOf(obj) });
    for (const ref of obj.metadata.ownerReferences ?? []) {
      let set = this.dependents.get(ref.uid);
      if (!set) this.dependents.set(ref.uid, (set = new Set()));
      set.add(item);
    }
  }

  private unindex(old: KubeObject, item: string): void {
    for (const ref of old.metadata.ownerReferences ?? []) {
      const set = this.dependents.get(ref.uid);
      set?.delete(item);
      if (set && !set.size) this.dependents.delete(ref.uid);
    }
  }

  private markOwnerDirty(uid: string): void {
    const loc = this.byUid.get(uid);
    if (loc) this.dirtyItems.add(loc.sk + SEP + loc.key);
  }

  private schedule(): void {
    if (this.scheduled || this.stopped) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.drain();
    });
  }

  private drain(): void {
    if (this.stopped) return;
    const items = [...this.dirtyItems];
    this.dirtyItems.clear();
    for (const item of items) this.guard(() => this.processItem(item));
    const namespaces = [...this.dirtyNamespaces];
    this.dirtyNamespaces.clear();
    for (const ns of namespaces) this.guard(() => this.processNamespace(ns));
    const crds = [...this.dirtyCrds];
    this.dirtyCrds.clear();
    for (const crd of crds) this.guard(() => this.processCrd(crd));
  }

  /** Objects vanish between the change and the pass; NotFound and Conflict just mean "look again later". */
  private guard(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      if (e instanceof StatusError && (e.code === 404 || e.code === 409)) return;
      throw e;
    }
  }

  private processItem(item: string): void {
    const [sk, key] = item.split(SEP) as [string, string];
    const obj = this.api.store.get(sk, key);
    const rt = this.api.typeOfStorageKey(sk);
    if (!obj || !rt) return;
    const ns = rt.namespaced ? obj.metadata.namespace : undefined;
    const name = obj.metadata.name!;

    if (obj.metadata.deletionTimestamp) {
      if (hasFinalizer(obj, 'orphan')) this.orphanDependents(obj);
      if (hasFinalizer(obj, 'foregroundDeletion')) this.deleteDependentsFirst(obj);
    }

    const refs = obj.metadata.ownerReferences ?? [];
    if (!refs.length || obj.metadata.deletionTimestamp) return;
    const solid: OwnerReference[] = [];
    const gone: OwnerReference[] = [];
    const waiting: OwnerReference[] = [];
    for (const ref of refs) {
      const owner = this.ownerOf(ref);
      if (!owner) gone.push(ref);
      else if (owner.metadata.deletionTimestamp && hasFinalizer(owner, 'foregroundDeletion')) waiting.push(ref);
      else solid.push(ref);
    }
    if (solid.length) {
      if (gone.length || waiting.length) {
        const drop = new Set([...gone, ...waiting].map((r) => r.uid));
        this.api.mutate(rt, ns, name, (o) => {
          o.metadata.ownerReferences = (o.metadata.ownerReferences ?? []).filter((r) => !drop.has(r.uid));
        });
      }
      return;
    }
    const hasOwnDependents = (this.dependents.get(obj.metadata.uid!)?.size ?? 0) > 0;
    this.api.delete(rt, ns, name, { propagationPolicy: waiting.length && hasOwnDependents ? 'Foreground' : 'Background' });
  }

  /** An owner exists when an object with that uid exists (owner references match by uid). */
  private ownerOf(ref: OwnerReference): KubeObject | undefined {
    const loc = this.byUid.get(ref.uid);
    return loc && this.api.store.get(loc.sk, loc.key);
  }

  private orphanDependents(owner: KubeObject): void {
    const uid = owner.metadata.uid!;
    for (const dep of [...(this.dependents.get(uid) ?? [])]) {
      const [sk, key] = dep.split(SEP) as [string, string];
      const obj = this.api.store.get(sk, key);
      const rt = this.api.typeOfStorageKey(sk);
      if (!obj || !rt) continue;
      this.api.mutate(rt, obj.metadata.namespace, obj.metadata.name!, (o) => {
        o.metadata.ownerReferences = (o.metadata.ownerReferences ?? []).filter((r) => r.uid !== uid);
        if (!o.metadata.ownerReferences.length) delete o.metadata.ownerReferences;
      });
    }
    this.removeFinalizer(owner, 'orphan');
  }

  private deleteDependentsFirst(owner: KubeObject): void {
    const uid = owner.metadata.uid!;
    let blocking = 0;
    for (const dep of [...(this.dependents.get(uid) ?? [])]) {
      const [sk, key] = dep.split(SEP) as [string, string];
      const obj = this.api.store.get(sk, key);
      if (!obj) continue;
      const ref = obj.metadata.ownerReferences?.find((r) => r.uid === uid);
      if (ref?.blockOwnerDeletion) blocking++;
      if (!obj.metadata.deletionTimestamp) this.dirtyItems.add(dep);
    }
    if (this.dirtyItems.size) this.schedule();
    if (!blocking) this.removeFinalizer(owner, 'foregroundDeletion');
  }

  private removeFinalizer(obj: KubeObject, finalizer: string): void {
    const rt = this.api.typeOfStorageKey(this.byUid.get(obj.metadata.uid!)?.sk ?? '');
    if (!rt) return;
    this.api.mutate(rt, obj.metadata.namespace, obj.metadata.name!, (o) => {
      o.metadata.finalizers = (o.metadata.finalizers ?? []).filter((f) => f !== finalizer);
      if (!o.metadata.finalizers.length) delete o.metadata.finalizers;
    });
  }

  private processNamespace(ns: string): void {
    const nsObj = this.api.store.get(storageKey(NAMESPACES), ns);
    if (!nsObj?.metadata.deletionTimestamp) return;
    let left = 0;
    for (const sk of this.api.store.typeKeys()) {
      const rt = this.api.typeOfStorageKey(sk);
      if (!rt?.namespaced) continue;
      for (const obj of this.api.store.list(sk, ns)) {
        left++;
        if (!obj.metadata.deletionTimestamp) this.guard(() => this.api.delete(rt, ns, obj.metadata.name!, { propagationPolicy: 'Background' }));
      }
    }
    if (!left) this.api.finishNamespaceDeletion(ns);
  }

  private terminatingCrdsOf(sk: string): string[] {
    const crds = this.api.store.list(storageKey(CRDS));
    return crds
      .filter((c) => c.metadata.deletionTimestamp && this.api.typesOfCrd(c.metadata.name!).some((rt) => storageKey(rt) === sk))
      .map((c) => c.metadata.name!);
  }

  private processCrd(name: string): void {
    const crd = this.api.store.get(storageKey(CRDS), name);
    if (!crd?.metadata.deletionTimestamp) return;
    const rt = this.api.typesOfCrd(name)[0];
    if (rt) {
      const objects = this.api.store.list(storageKey(rt));
      for (const obj of objects) {
        if (!obj.metadata.deletionTimestamp) this.guard(() => this.api.delete(rt, obj.metadata.namespace, obj.metadata.name!, { propagationPolicy: 'Background' }));
      }
      if (this.api.store.count(storageKey(rt))) return;
    }
    this.api.finishCrdDeletion(name);
  }
}

function keyOf(obj: KubeObject): string {
  return objectKey(obj.metadata.namespace, obj.metadata.name!);
}
