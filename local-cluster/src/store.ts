// The object store: every object of every served type, one global
// resourceVersion counter (etcd's revision), and a window of change history so
// that watches can resume from a resourceVersion. Stored objects are never
// mutated in place: a write stores a new object, so readers and history may
// share references safely.
import type { KubeObject } from './types.js';
import type { ChangeType } from './cluster-api.js';

export interface StoredChange {
  rv: number;
  typeKey: string;
  type: ChangeType;
  object: KubeObject;
  old?: KubeObject;
  at: number;
}

export type ChangeListener = (change: StoredChange) => void;

/** "namespace/name", or "name" for cluster-scoped objects. */
export function objectKey(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

export interface StoreOptions {
  /** History kept for watch resumption, in ms (at least 5 minutes, as the requirements say). */
  historyMs?: number;
  /** History entries always kept regardless of age, so a quiet cluster can still resume. */
  historyMinEntries?: number;
}

export class Store {
  private rv = 0;
  private readonly objects = new Map<string, Map<string, KubeObject>>();
  /** Keys of each type in etcd order, kept sorted on insert and delete so lists never sort. */
  private readonly sortedKeys = new Map<string, string[]>();
  private history: StoredChange[] = [];
  private historyStart = 0; // index of the first live entry in `history`
  /** The lowest resourceVersion a watch may resume after; older ones are 410 Expired. */
  private compactedRv = 0;
  private readonly listeners = new Set<ChangeListener>();
  private readonly historyMs: number;
  private readonly historyMinEntries: number;

  constructor(opts: StoreOptions = {}) {
    this.historyMs = opts.historyMs ?? 5 * 60_000;
    this.historyMinEntries = opts.historyMinEntries ?? 1000;
  }

  get resourceVersion(): number {
    return this.rv;
  }

  /** Resume point after a restart; only moves forward. */
  restoreResourceVersion(rv: number): void {
    if (rv > this.rv) {
      this.rv = rv;
      this.compactedRv = rv;
    }
  }

  get oldestResumableRv(): number {
    return this.compactedRv;
  }

  get(typeKey: string, key: string): KubeObject | undefined {
    return this.objects.get(typeKey)?.get(key);
  }

  /** All objects of a type (of one namespace), in key order as etcd returns them. */
  list(typeKey: string, namespace?: string): KubeObject[] {
    const bucket = this.objects.get(typeKey);
    const keys = this.sortedKeys.get(typeKey);
    if (!bucket || !keys) return [];
    let from = 0;
    let to = keys.length;
    if (namespace) {
      const prefix = `${namespace}/`;
      from = lowerBound(keys, prefix);
      to = lowerBound(keys, `${namespace}0`); // '0' follows '/': the end of the prefix range
    }
    const out: KubeObject[] = new Array(Math.max(0, to - from));
    for (let i = from; i < to; i++) out[i - from] = bucket.get(keys[i]!)!;
    return out;
  }

  count(typeKey: string): number {
    return this.objects.get(typeKey)?.size ?? 0;
  }

  typeKeys(): string[] {
    return [...this.objects.keys()];
  }

  /**
   * Store a new version of an object: assigns the next resourceVersion,
   * records history and notifies listeners synchronously.
   */
  put(typeKey: string, key: string, object: KubeObject, type: 'ADDED' | 'MODIFIED'): KubeObject {
    let bucket = this.objects.get(typeKey);
    if (!bucket) {
      bucket = new Map();
      this.objects.set(typeKey, bucket);
    }
    const old = bucket.get(key);
    this.rv += 1;
    object.metadata.resourceVersion = String(this.rv);
    bucket.set(key, object);
    if (!old) this.insertKey(typeKey, key);
    this.record({ rv: this.rv, typeKey, type, object, old, at: Date.now() });
    return object;
  }

  /** Remove an object for real; the DELETED event carries a new resourceVersion. */
  remove(typeKey: string, key: string): KubeObject | undefined {
    const bucket = this.objects.get(typeKey);
    const old = bucket?.get(key);
    if (!bucket || !old) return undefined;
    bucket.delete(key);
    const keys = this.sortedKeys.get(typeKey)!;
    keys.splice(lowerBound(keys, key), 1);
    this.rv += 1;
    const gone: KubeObject = { ...old, metadata: { ...old.metadata, resourceVersion: String(this.rv) } };
    this.record({ rv: this.rv, typeKey, type: 'DELETED', object: gone, old, at: Date.now() });
    return gone;
  }

  /** Load an object as persisted, without history or events (restart). */
  load(typeKey: string, key: string, object: KubeObject): void {
    let bucket = this.objects.get(typeKey);
    if (!bucket) {
      bucket = new Map();
      this.objects.set(typeKey, bucket);
    }
    if (!bucket.has(key)) this.insertKey(typeKey, key);
    bucket.set(key, object);
  }

  private insertKey(typeKey: string, key: string): void {
    let keys = this.sortedKeys.get(typeKey);
    if (!keys) this.sortedKeys.set(typeKey, (keys = []));
    keys.splice(lowerBound(keys, key), 0, key);
  }

  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Changes of a type after `afterRv`, oldest first. Throws 'expired' when
   * `afterRv` is older than the retained history.
   */
  changesSince(afterRv: number, typeKey?: string): StoredChange[] | 'expired' {
    if (afterRv < this.compactedRv) return 'expired';
    const out: StoredChange[] = [];
    // History is ordered by rv: binary search for the first entry after afterRv.
    let lo = this.historyStart;
    let hi = this.history.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.history[mid]!.rv <= afterRv) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < this.history.length; i++) {
      const c = this.history[i]!;
      if (!typeKey || c.typeKey === typeKey) out.push(c);
    }
    return out;
  }

  /** Drop all history, as an etcd compaction would: older resume points become 410. */
  compact(): void {
    this.history = [];
    this.historyStart = 0;
    this.compactedRv = this.rv;
  }

  private record(change: StoredChange): void {
    this.history.push(change);
    this.trimHistory(change.at);
    for (const l of this.listeners) l(change);
  }

  private trimHistory(now: number): void {
    const live = this.history.length - this.historyStart;
    if (live <= this.historyMinEntries) return;
    let start = this.historyStart;
    const limit = this.history.length - this.historyMinEntries;
    while (start < limit && now - this.history[start]!.at > this.historyMs) start++;
    if (start === this.historyStart) return;
    this.compactedRv = this.history[start - 1]!.rv;
    this.historyStart = start;
    // Reclaim the array now and then rather than shifting on every write.
    if (this.historyStart > 4096 && this.historyStart > this.history.length / 2) {
      this.history = this.history.slice(this.historyStart);
      this.historyStart = 0;
    }
  }
}

/** First index whose key is >= k (keys sorted by code unit, as etcd orders them). */
function lowerBound(keys: string[], k: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keys[mid]! < k) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
