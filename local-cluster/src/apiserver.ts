// The API server's semantics, independent of HTTP: the type registry (built-in
// kinds plus those CRDs define), and create/update/patch/delete with the
// admission, defaulting, validation, resourceVersion, generation, finalizer
// and status-subresource rules of kube-apiserver. The HTTP layer and the
// in-process controllers both go through this class.
import { randomUUID } from 'node:crypto';
import { enforceBuiltinDecode } from './builtin-decode.js';
import { BUILTIN_TYPES, CRDS, INITIAL_NAMESPACES, JOBS, KINDS_WITH_GENERATION, NAMESPACES, PODS } from './builtin-types.js';
import type { Change, ClusterApi, DeleteOptions, ListOptions } from './cluster-api.js';
import {
  StatusError, alreadyExists, badRequest, conflict, forbidden, invalid, notFound,
} from './errors.js';
import { deepCopy, deepEqual, isObject, randomSuffix, rfc3339, validateName } from './object-meta.js';
import { applyPatch, strategicSupported, unsupportedPatchType, type PatchType } from './patch.js';
import { applyConfiguration } from './ssa/apply-patch.js';
import { recordUpdate, type Writer } from './ssa/managed-fields.js';
import { rootType } from './ssa/typed.js';
import { applyDefaults, prune, unknownFields } from './schema/structural.js';
import { validate as validateSchema } from './schema/validate.js';
import { celValidate } from './schema/cel-validate.js';
import { crdStatus, defaultCrd, resourceTypesFromCrd, validateCrd } from './schema/crd.js';
import { parseFieldSelector, parseLabelSelector } from './selectors.js';
import { Store, objectKey, type StoredChange } from './store.js';
import { STRATEGIES, type Strategy } from './strategies.js';
import { GarbageCollector } from './garbage-collector.js';
import type { FieldValidation, KubeObject, ResourceType, StatusCause } from './types.js';
import { apiVersionOf } from './types.js';

/** Options of one write request, as the HTTP query carries them. */
export interface WriteOptions {
  fieldValidation?: FieldValidation;
  dryRun?: boolean;
  subresource?: 'status';
  /** The request's fieldManager, else the one derived from its User-Agent; "unknown" when neither. */
  fieldManager?: string;
  /** Server-side apply: take the fields other managers own instead of answering 409. */
  force?: boolean;
  /** In-process writes that bypass the field manager (cluster-api.ts WriteAs). */
  untracked?: boolean;
  /** Warnings for the response's Warning headers; filled by the server. */
  warnings?: string[];
}

export interface ApiServerOptions {
  store?: Store;
}

/** Storage key of a resource: version-independent, as etcd stores one copy per resource. */
export function storageKey(rt: Pick<ResourceType, 'group' | 'plural'>): string {
  return `${rt.group}/${rt.plural}`;
}

const SYSTEM_METADATA = ['uid', 'creationTimestamp', 'resourceVersion', 'generation', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'selfLink', 'managedFields'] as const;

export class ApiServer implements ClusterApi {
  readonly store: Store;
  /** Served types by "group/version/plural". */
  private readonly served = new Map<string, ResourceType>();
  /** Served types by "apiVersion|Kind". */
  private readonly byKind = new Map<string, ResourceType>();
  /** The version objects of a storage key are stored in (CRD storage version, or the one built-in version). */
  private readonly storageType = new Map<string, ResourceType>();
  private readonly crdTypes = new Map<string, ResourceType[]>(); // CRD name → its served types
  private readonly listeners = new Set<(c: Change) => void>();
  readonly gc: GarbageCollector;

  constructor(opts: ApiServerOptions = {}) {
    this.store = opts.store ?? new Store();
    for (const rt of BUILTIN_TYPES) this.register(rt, true);
    this.store.subscribe((c) => this.emit(c));
    this.gc = new GarbageCollector(this);
  }

  /** Create the namespaces every cluster starts with (skipped for those restored from state). */
  bootstrap(): void {
    for (const ns of INITIAL_NAMESPACES) {
      if (!this.store.get(storageKey(NAMESPACES), ns)) {
        this.create(NAMESPACES, undefined, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
      }
    }
  }

  /** Re-register the types of every stored CRD (after loading persisted state). */
  registerStoredCrds(): void {
    for (const crd of this.store.list(storageKey(CRDS))) this.registerCrd(crd);
  }

  // ---- type registry ------------------------------------------------------

  types(): ResourceType[] {
    return [...this.served.values()];
  }

  resource(group: string, version: string, plural: string): ResourceType | undefined {
    return this.served.get(`${group}/${version}/${plural}`);
  }

  resourceForKind(apiVersion: string, kind: string): ResourceType | undefined {
    return this.byKind.get(`${apiVersion}|${kind}`);
  }

  /** Any served version of a storage key (for events and GC, which are version-independent). */
  typeOfStorageKey(key: string): ResourceType | undefined {
    return this.storageType.get(key);
  }

  private register(rt: ResourceType, storage: boolean): void {
    this.served.set(`${rt.group}/${rt.version}/${rt.plural}`, rt);
    this.byKind.set(`${apiVersionOf(rt)}|${rt.kind}`, rt);
    if (storage || !this.storageType.has(storageKey(rt))) this.storageType.set(storageKey(rt), rt);
  }

  private unregister(rt: ResourceType): void {
    this.served.delete(`${rt.group}/${rt.version}/${rt.plural}`);
    this.byKind.delete(`${apiVersionOf(rt)}|${rt.kind}`);
  }

  private registerCrd(crd: KubeObject): void {
    const name = crd.metadata.name!;
    for (const rt of this.crdTypes.get(name) ?? []) this.unregister(rt);
    const types = resourceTypesFromCrd(crd);
    const versions = ((crd.spec as Record<string, unknown>).versions as Record<string, unknown>[]) ?? [];
    const storageVersion = versions.find((v) => v.storage)?.name;
    for (const rt of types) this.register(rt, rt.version === storageVersion);
    this.crdTypes.set(name, types);
  }

  private unregisterCrd(name: string): void {
    const types = this.crdTypes.get(name) ?? [];
    for (const rt of types) this.unregister(rt);
    if (types[0]) this.storageType.delete(storageKey(types[0]));
    this.crdTypes.delete(name);
  }

  /** The served types a CRD currently defines (used when its instances must be deleted). */
  typesOfCrd(name: string): ResourceType[] {
    return this.crdTypes.get(name) ?? [];
  }

  // ---- reads ------------------------------------------------------------

  /** The stored object itself (never mutate it), converted to the requested version. */
  getStored(rt: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined {
    const obj = this.store.get(storageKey(rt), objectKey(rt.namespaced ? namespace : undefined, name));
    return obj && this.asVersion(rt, obj);
  }

  get(rt: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined {
    const obj = this.getStored(rt, namespace, name);
    return obj && deepCopy(obj);
  }

  getReadonly(rt: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.getStored(rt, namespace, name);
  }

  /** Stored objects (never mutate them) matching the options, in key order. */
  listStored(rt: ResourceType, opts: ListOptions = {}): KubeObject[] {
    const labels = parseLabelSelector(opts.labelSelector);
    const fields = parseFieldSelector(opts.fieldSelector, rt.kind, rt.builtin);
    const out: KubeObject[] = [];
    for (const obj of this.store.list(storageKey(rt), rt.namespaced ? opts.namespace : undefined)) {
      if (labels(obj) && fields(obj)) out.push(this.asVersion(rt, obj));
    }
    return out;
  }

  list(rt: ResourceType, opts: ListOptions = {}): KubeObject[] {
    return this.listStored(rt, opts).map((o) => deepCopy(o));
  }

  listReadonly(rt: ResourceType, opts: ListOptions = {}): readonly KubeObject[] {
    return this.listStored(rt, opts);
  }

  /** Conversion strategy None: only apiVersion differs between served versions. */
  asVersion(rt: ResourceType, obj: KubeObject): KubeObject {
    const apiVersion = apiVersionOf(rt);
    return obj.apiVersion === apiVersion ? obj : { ...obj, apiVersion };
  }

  // ---- create ------------------------------------------------------------

  create(rt: ResourceType, namespace: string | undefined, body: KubeObject, opts: WriteOptions = {}): KubeObject {
    return this.createDecoded(rt, this.decode(rt, body, namespace, opts), opts, false);
  }

  /** Create from a decoded object; `applied`: its managedFields come from server-side apply already. */
  private createDecoded(rt: ResourceType, obj: KubeObject, opts: WriteOptions, applied: boolean): KubeObject {
    const ns = rt.namespaced ? obj.metadata.namespace : undefined;
    if (rt.namespaced) this.requireNamespace(ns!, true);

    const meta = obj.metadata;
    const sentManagedFields = meta.managedFields;
    for (const f of SYSTEM_METADATA) if (f !== 'managedFields' || !applied) delete meta[f];
    if (!meta.name) {
      if (meta.generateName) meta.name = `${meta.generateName}${randomSuffix()}`;
      else throw invalid(rt, '', [{ reason: 'FieldValueRequired', field: 'metadata.name', message: 'Required value: name or generateName is required' }]);
    }
    // System fields come before the strategy: a Job's generated selector uses the uid.
    meta.uid = randomUUID();
    meta.creationTimestamp = rfc3339();
    if (KINDS_WITH_GENERATION.has(rt.kind) || !rt.builtin) meta.generation = 1;
    if (rt.statusSubresource && !rt.builtin) delete obj.status;
    // As the create handler: fields are recorded before the strategy fills in its own.
    if (!applied) recordUpdate(undefined, obj, sentManagedFields, writer(rt, opts), rootType(rt));
    this.strategy(rt)?.prepareForCreate?.(obj);
    if (rt.kind === 'CustomResourceDefinition') defaultCrd(obj);

    this.validateObject(rt, obj, undefined, opts);

    const key = objectKey(ns, meta.name);
    if (this.store.get(storageKey(rt), key)) throw alreadyExists(rt, meta.name);
    if (rt.kind === 'CustomResourceDefinition') obj.status = crdStatus(obj, meta.creationTimestamp);
    if (opts.dryRun) return obj;

    const stored = this.store.put(storageKey(this.storageType.get(storageKey(rt)) ?? rt), key, this.toStorage(rt, obj), 'ADDED');
    if (rt.kind === 'CustomResourceDefinition') this.registerCrd(stored);
    return this.asVersion(rt, stored);
  }

  // ---- update --------------------------------------------------------------

  update(rt: ResourceType, namespace: string | undefined, body: KubeObject, opts: WriteOptions = {}): KubeObject {
    const name = body?.metadata?.name;
    const ns = rt.namespaced ? namespace ?? body?.metadata?.namespace : undefined;
    if (!name) throw badRequest('name is required');
    const old = this.getStored(rt, ns, name);
    if (!old) throw notFound(rt, name);
    const obj = this.decode(rt, body, ns, opts);
    return this.commitUpdate(rt, old, obj, opts);
  }

  /** Apply a patch to the current object and commit it as an update. */
  patch(rt: ResourceType, namespace: string | undefined, name: string, patch: unknown, type: PatchType, opts: WriteOptions = {}): KubeObject {
    if (type === 'strategic' && (!rt.builtin || !strategicSupported(rt.kind))) {
      throw unsupportedPatchType(rt.kind);
    }
    const old = this.getStored(rt, namespace, name);
    if (type === 'apply') return this.apply(rt, namespace, name, old, patch, opts);
    if (!old) throw notFound(rt, name);
    const patched = applyPatch(old, patch, type, rt.kind, { fieldValidation: opts.fieldValidation });
    // A patch that does not name a resourceVersion is unconditional.
    const patchMeta = isObject(patch) && isObject(patch.metadata) ? patch.metadata : undefined;
    if (!patchMeta?.resourceVersion) patched.metadata.resourceVersion = old.metadata.resourceVersion;
    const obj = this.decode(rt, patched, namespace, opts);
    return this.commitUpdate(rt, old, obj, opts);
  }

  /**
   * Server-side apply: merge the configuration by field ownership; a missing
   * object is created from it (the apply patcher's createNewObject). The result
   * is decoded and validated like any other write.
   */
  private apply(rt: ResourceType, namespace: string | undefined, name: string, old: KubeObject | undefined, patch: unknown, opts: WriteOptions): KubeObject {
    const merged = applyConfiguration(rt, old, patch, writer(rt, opts), opts.force ?? false);
    if (!old) {
      merged.metadata.name = name;
      return this.createDecoded(rt, this.decode(rt, merged, namespace, opts), opts, true);
    }
    const patchMeta = isObject(patch) && isObject(patch.metadata) ? patch.metadata : undefined;
    if (!patchMeta?.resourceVersion) merged.metadata.resourceVersion = old.metadata.resourceVersion;
    return this.commitUpdate(rt, old, this.decode(rt, merged, namespace, opts), opts, true);
  }

  /** Read-modify-write for controllers: retried on conflict, never fails on a stale read. */
  mutate(rt: ResourceType, namespace: string | undefined, name: string, fn: (obj: KubeObject) => KubeObject | void, opts: Pick<WriteOptions, 'subresource' | 'fieldManager' | 'untracked'> = {}): KubeObject | undefined {
    for (;;) {
      const current = this.get(rt, namespace, name);
      if (!current) return undefined;
      const changed = fn(current) ?? current;
      try {
        return this.commitUpdate(rt, this.getStored(rt, namespace, name)!, this.decode(rt, changed, namespace, {}), opts);
      } catch (e) {
        if (e instanceof StatusError && e.reason === 'Conflict') continue;
        throw e;
      }
    }
  }

  /** `applied`: obj's managedFields come from server-side apply already. */
  private commitUpdate(rt: ResourceType, old: KubeObject, obj: KubeObject, opts: WriteOptions, applied = false): KubeObject {
    const name = old.metadata.name!;
    const rv = obj.metadata.resourceVersion;
    if (rv === undefined || rv === '') {
      if (!rt.builtin) {
        throw invalid(rt, name, [{ reason: 'FieldValueInvalid', field: 'metadata.resourceVersion', message: 'Invalid value: 0x0: must be specified for an update' }]);
      }
    } else if (rv !== old.metadata.resourceVersion) {
      throw conflict(rt, name);
    }
    if (obj.metadata.uid && obj.metadata.uid !== old.metadata.uid) {
      throw conflict(rt, name, `Precondition failed: UID in precondition: ${obj.metadata.uid}, UID in object meta: ${old.metadata.uid}`);
    }

    const sentManagedFields = obj.metadata.managedFields;
    let next: KubeObject;
    if (opts.subresource === 'status') {
      // Only .status moves through /status; everything else stays as stored.
      next = deepCopy(old);
      if (obj.status === undefined) delete next.status;
      else next.status = obj.status;
    } else {
      next = obj;
      const meta = next.metadata as Record<string, unknown>;
      for (const f of SYSTEM_METADATA) {
        if (f === 'managedFields' && applied) continue;
        if (old.metadata[f] === undefined) delete meta[f];
        else meta[f] = old.metadata[f];
      }
      next.metadata.name = old.metadata.name;
      if (rt.namespaced) next.metadata.namespace = old.metadata.namespace;
      if (rt.statusSubresource) {
        if (old.status === undefined) delete next.status;
        else next.status = old.status;
      }
      this.strategy(rt)?.prepareForUpdate?.(next, old);
      if (rt.kind === 'CustomResourceDefinition') {
        defaultCrd(next);
        next.status = old.status;
      }
      if (old.metadata.deletionTimestamp) {
        const added = (next.metadata.finalizers ?? []).filter((f) => !(old.metadata.finalizers ?? []).includes(f));
        if (added.length) {
          throw invalid(rt, name, [{
            reason: 'FieldValueForbidden', field: 'metadata.finalizers',
            message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f) => `"${f}"`).join(', ')}}`,
          }]);
        }
      }
      if (next.metadata.generation !== undefined && specChanged(rt, old, next)) {
        next.metadata.generation = (old.metadata.generation ?? 0) + 1;
      }
    }
    if (applied && opts.subresource === 'status') next.metadata.managedFields = obj.metadata.managedFields;
    if (!applied && !opts.untracked) recordUpdate(old, next, sentManagedFields, writer(rt, opts), rootType(rt));

    this.validateObject(rt, next, old, opts);
    next.metadata.resourceVersion = old.metadata.resourceVersion;
    if (deepEqual(next, old)) return old; // no-op writes change nothing and emit nothing
    if (opts.dryRun) return next;

    const key = objectKey(rt.namespaced ? old.metadata.namespace : undefined, name);
    const sk = storageKey(rt);
    if (next.metadata.deletionTimestamp && !(next.metadata.finalizers ?? []).length && !next.metadata.deletionGracePeriodSeconds) {
      // The last finalizer went away (and no grace period is running): the delete completes now.
      this.store.remove(sk, key);
      return next;
    }
    const stored = this.store.put(sk, key, this.toStorage(rt, next), 'MODIFIED');
    if (rt.kind === 'CustomResourceDefinition') this.registerCrd(stored);
    return this.asVersion(rt, stored);
  }

  // ---- delete --------------------------------------------------------------

  delete(rt: ResourceType, namespace: string | undefined, name: string, opts: DeleteOptions & { dryRun?: boolean } = {}): KubeObject | undefined {
    const ns = rt.namespaced ? namespace : undefined;
    const old = this.getStored(rt, ns, name);
    if (!old) throw notFound(rt, name);
    const pre = opts.preconditions;
    if (pre?.uid && pre.uid !== old.metadata.uid) {
      throw conflict(rt, name, `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${old.metadata.uid}`);
    }
    if (pre?.resourceVersion && pre.resourceVersion !== old.metadata.resourceVersion) {
      throw conflict(rt, name, `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${old.metadata.resourceVersion}`);
    }
    if (opts.dryRun) return old;
    const key = objectKey(ns, name);
    const sk = storageKey(rt);

    const policy = opts.propagationPolicy ?? (rt === JOBS || rt.kind === 'Job' ? 'Orphan' : 'Background');
    const finalizers = [...(old.metadata.finalizers ?? [])];
    if (policy === 'Foreground' && !finalizers.includes('foregroundDeletion')) finalizers.push('foregroundDeletion');
    if (policy === 'Orphan' && !finalizers.includes('orphan')) finalizers.push('orphan');
    if (rt.kind === 'CustomResourceDefinition' && !finalizers.includes('customresourcecleanup.apiextensions.k8s.io')) {
      finalizers.push('customresourcecleanup.apiextensions.k8s.io');
    }
    if (rt.kind === 'Namespace' && !old.metadata.deletionTimestamp) {
      return this.beginNamespaceDeletion(old, finalizers);
    }

    const grace = this.gracePeriod(rt, old, opts.gracePeriodSeconds);
    if (!finalizers.length && grace === 0) return this.store.remove(sk, key);
    const shortened = old.metadata.deletionTimestamp !== undefined && grace < (old.metadata.deletionGracePeriodSeconds ?? 0);
    // Already terminating and nothing new asked for: the delete is in progress.
    if (old.metadata.deletionTimestamp && !shortened && deepEqual(finalizers, old.metadata.finalizers ?? [])) return old;
    const next = deepCopy(old);
    if (finalizers.length) next.metadata.finalizers = finalizers;
    next.metadata.deletionTimestamp ??= rfc3339(new Date(Date.now() + grace * 1000));
    // A shorter grace period (the kubelet's final delete with 0) replaces the running one.
    next.metadata.deletionGracePeriodSeconds = shortened ? grace : old.metadata.deletionGracePeriodSeconds ?? grace;
    if (rt.kind === 'CustomResourceDefinition') markCrdTerminating(next);
    return this.asVersion(rt, this.store.put(sk, key, next, 'MODIFIED'));
  }

  /** Pods bound to the node get a graceful deletion the kubelet completes; others go at once. */
  private gracePeriod(rt: ResourceType, obj: KubeObject, requested: number | undefined): number {
    if (rt !== PODS) return 0;
    const spec = obj.spec as Record<string, unknown> | undefined;
    const status = obj.status as Record<string, unknown> | undefined;
    if (!spec?.nodeName) return 0;
    if (status?.phase === 'Succeeded' || status?.phase === 'Failed') return 0;
    if (requested !== undefined) return requested;
    return Number(spec.terminationGracePeriodSeconds ?? 30);
  }

  private beginNamespaceDeletion(old: KubeObject, finalizers: string[]): KubeObject {
    const next = deepCopy(old);
    next.metadata.deletionTimestamp = rfc3339();
    next.metadata.deletionGracePeriodSeconds = 0;
    if (finalizers.length) next.metadata.finalizers = finalizers;
    next.status = { ...(isObject(next.status) ? next.status : {}), phase: 'Terminating' };
    const stored = this.store.put(storageKey(NAMESPACES), old.metadata.name!, next, 'MODIFIED');
    this.gc.enqueueNamespace(old.metadata.name!);
    return stored;
  }

  /** Called by the namespace cleanup when nothing is left in a terminating namespace. */
  finishNamespaceDeletion(name: string): void {
    const ns = this.store.get(storageKey(NAMESPACES), name);
    if (!ns?.metadata.deletionTimestamp || ns.metadata.finalizers?.length) return;
    this.store.remove(storageKey(NAMESPACES), name);
  }

  /** Called when a terminating CRD has no instances left. */
  finishCrdDeletion(name: string): void {
    const crd = this.store.get(storageKey(CRDS), name);
    if (!crd?.metadata.deletionTimestamp) return;
    this.unregisterCrd(name);
    this.mutate(CRDS, undefined, name, (o) => {
      o.metadata.finalizers = (o.metadata.finalizers ?? []).filter((f) => f !== 'customresourcecleanup.apiextensions.k8s.io');
    });
  }

  // ---- subscriptions ---------------------------------------------------------

  subscribe(listener: (change: Change) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(c: StoredChange): void {
    if (!this.listeners.size) return;
    const rt = this.storageType.get(c.typeKey) ?? (c.typeKey === storageKey(CRDS) ? CRDS : undefined);
    if (!rt) return;
    const change: Change = { type: c.type, rt, object: c.object, old: c.old };
    for (const l of this.listeners) {
      try {
        l(change);
      } catch {
        // A listener's failure must not undo or block a committed write.
      }
    }
  }

  // ---- admission helpers -------------------------------------------------------

  private strategy(rt: ResourceType): Strategy | undefined {
    return rt.builtin ? STRATEGIES[rt.kind] : undefined;
  }

  /**
   * Decode a request body into a fresh object: check apiVersion/kind and the
   * namespace, run the kind's decode checks, and for custom resources the
   * unknown-field handling (fieldValidation), pruning and defaulting.
   */
  private decode(rt: ResourceType, body: KubeObject, namespace: string | undefined, opts: WriteOptions): KubeObject {
    if (!isObject(body)) throw badRequest(`${rt.kind} in version "${rt.version}" cannot be handled as a ${rt.kind}: expected an object`);
    const obj = body === undefined ? body : deepCopy(body);
    const apiVersion = apiVersionOf(rt);
    if (obj.apiVersion !== undefined && obj.apiVersion !== apiVersion) {
      throw badRequest(`the API version in the data (${String(obj.apiVersion)}) does not match the expected API version (${apiVersion})`);
    }
    if (obj.kind !== undefined && obj.kind !== rt.kind) {
      throw badRequest(`${rt.kind} in version "${rt.version}" cannot be handled as a ${rt.kind}: the kind in the data (${String(obj.kind)}) does not match the expected kind (${rt.kind})`);
    }
    obj.apiVersion = apiVersion;
    obj.kind = rt.kind;
    if (obj.metadata === undefined || obj.metadata === null) obj.metadata = {};
    if (!isObject(obj.metadata)) throw badRequest(`${rt.kind} in version "${rt.version}" cannot be handled as a ${rt.kind}: metadata must be an object`);
    if (rt.namespaced) {
      if (obj.metadata.namespace && namespace && obj.metadata.namespace !== namespace) {
        throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
      }
      obj.metadata.namespace = namespace ?? obj.metadata.namespace ?? 'default';
    } else {
      delete obj.metadata.namespace;
    }
    this.strategy(rt)?.decode?.(obj);
    if (rt.builtin) enforceBuiltinDecode(rt, obj, opts);

    if (rt.schema) {
      const unknown = unknownFields(obj, rt.schema);
      if (unknown.length) {
        const mode = opts.fieldValidation ?? 'Warn';
        if (mode === 'Strict') {
          throw badRequest(`${rt.kind} in version "${rt.version}" cannot be handled as a ${rt.kind}: strict decoding error: ${unknown.map((f) => `unknown field "${f}"`).join(', ')}`);
        }
        if (mode === 'Warn') opts.warnings?.push(...unknown.map((f) => `unknown field "${f}"`));
      }
      prune(obj, rt.schema);
      applyDefaults(obj, rt.schema);
    }
    return obj;
  }

  private validateObject(rt: ResourceType, obj: KubeObject, old: KubeObject | undefined, opts: WriteOptions): void {
    const causes: StatusCause[] = [];
    const name = obj.metadata.name ?? '';
    if (!old) causes.push(...validateName(name, 'metadata.name', this.strategy(rt)?.nameKind ?? 'subdomain'));
    causes.push(...validateMetadata(obj));
    if (rt.schema) {
      const schemaCauses = validateSchema(obj, rt.schema);
      const rules = celValidate(obj, old, rt.schema, schemaCauses, opts.subresource !== 'status');
      causes.push(...schemaCauses, ...rules.errors);
      opts.warnings?.push(...rules.warnings);
    }
    if (rt.kind === 'CustomResourceDefinition') causes.push(...validateCrd(obj));
    const s = this.strategy(rt);
    if (s?.validate) causes.push(...s.validate(obj, old));
    if (causes.length) throw invalid(rt, name, causes);
  }

  private requireNamespace(ns: string, forCreate: boolean): void {
    const nsObj = this.store.get(storageKey(NAMESPACES), ns);
    if (!nsObj) throw notFound(NAMESPACES, ns);
    if (forCreate && nsObj.metadata.deletionTimestamp) {
      throw forbidden(NAMESPACES, ns, `unable to create new content in namespace ${ns} because it is being terminated`);
    }
  }

  /** Objects are stored in their storage version. */
  private toStorage(rt: ResourceType, obj: KubeObject): KubeObject {
    const st = this.storageType.get(storageKey(rt));
    if (!st || st === rt) return obj;
    return { ...obj, apiVersion: apiVersionOf(st) };
  }
}

function writer(rt: ResourceType, opts: WriteOptions): Writer {
  return {
    manager: opts.fieldManager || 'unknown', apiVersion: apiVersionOf(rt), subresource: opts.subresource,
    statusSubresource: !!rt.statusSubresource,
  };
}

/** generation moves on spec changes: for custom resources anything outside metadata and status. */
function specChanged(rt: ResourceType, old: KubeObject, next: KubeObject): boolean {
  if (rt.builtin) return !deepEqual(old.spec, next.spec);
  const strip = (o: KubeObject) => {
    const { metadata: _m, status: _s, ...rest } = o;
    return rest;
  };
  return !deepEqual(strip(old), strip(next));
}

function validateMetadata(obj: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const m = obj.metadata;
  for (const field of ['labels', 'annotations'] as const) {
    const v = m[field];
    if (v === undefined || v === null) continue;
    if (!isObject(v)) {
      causes.push({ reason: 'FieldValueInvalid', field: `metadata.${field}`, message: 'Invalid value: must be a map of strings' });
      continue;
    }
    for (const [k, val] of Object.entries(v)) {
      if (typeof val !== 'string') causes.push({ reason: 'FieldValueInvalid', field: `metadata.${field}`, message: `Invalid value: ${JSON.stringify(val)}: must be a string (key "${k}")` });
    }
  }
  if (m.labels && isObject(m.labels)) {
    for (const [k, val] of Object.entries(m.labels)) {
      if (typeof val === 'string' && (val.length > 63 || !/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(val))) {
        causes.push({
          reason: 'FieldValueInvalid', field: 'metadata.labels',
          message: `Invalid value: "${val}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
        });
        void k;
      }
    }
  }
  if (m.finalizers !== undefined && !Array.isArray(m.finalizers)) {
    causes.push({ reason: 'FieldValueInvalid', field: 'metadata.finalizers', message: 'Invalid value: must be a list of strings' });
  }
  if (m.ownerReferences !== undefined) {
    if (!Array.isArray(m.ownerReferences)) {
      causes.push({ reason: 'FieldValueInvalid', field: 'metadata.ownerReferences', message: 'Invalid value: must be a list' });
    } else {
      m.ownerReferences.forEach((r, i) => {
        for (const f of ['apiVersion', 'kind', 'name', 'uid'] as const) {
          if (!isObject(r) || !r[f]) causes.push({ reason: 'FieldValueInvalid', field: `metadata.ownerReferences[${i}].${f}`, message: `Invalid value: "": ${f} must not be empty` });
        }
      });
      if (m.ownerReferences.filter((r) => isObject(r) && r.controller).length > 1) {
        causes.push({ reason: 'FieldValueInvalid', field: 'metadata.ownerReferences', message: 'Invalid value: []v1.OwnerReference{...}: Only one reference can have Controller set to true' });
      }
    }
  }
  return causes;
}

function markCrdTerminating(crd: KubeObject): void {
  const status = isObject(crd.status) ? crd.status : {};
  const conditions = (Array.isArray(status.conditions) ? status.conditions : []).filter((c: Record<string, unknown>) => c.type !== 'Terminating');
  conditions.push({
    type: 'Terminating', status: 'True', lastTransitionTime: rfc3339(),
    reason: 'InstanceDeletionInProgress', message: 'CustomResource deletion is in progress',
  });
  crd.status = { ...status, conditions };
}
