// Events expire, as kube-apiserver's do (--event-ttl, default 1 h): each
// create or update of an Event gives it a fresh TTL (the registry's TTLFunc
// attaches an etcd lease on every write), and once that runs out the Event
// is gone without a DELETE from anyone. Without this a long-running local
// cluster kept every Event it ever stored (found by `make soak`: its memory
// grew by half in ten minutes). Deleting through the API server sends
// watchers a DELETED event, which is what etcd's lease expiry does too.
import type { Change, ClusterApi } from '../cluster-api.js';
import type { ResourceType } from '../types.js';

export const DEFAULT_EVENT_TTL_MS = 60 * 60_000;

export class EventTtl {
  private readonly events: ResourceType;
  /** "<namespace>/<name>" → expiry; a write moves the key to the end, so the map stays in expiry order (one TTL for all). */
  private readonly expiries = new Map<string, number>();
  private unsubscribe: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly api: ClusterApi, private readonly ttlMs = DEFAULT_EVENT_TTL_MS) {
    const events = api.resourceForKind('v1', 'Event');
    if (!events) throw new Error('the API server does not serve v1 Events');
    this.events = events;
  }

  start(): void {
    if (this.unsubscribe) return;
    this.unsubscribe = this.api.subscribe((c) => this.observe(c));
    // Restored from saved state: their leases are not saved, so they get a whole TTL from now.
    for (const e of this.api.listReadonly(this.events)) this.touch(`${e.metadata.namespace}/${e.metadata.name}`);
    // A tenth of the TTL (at most 30 s): an Event outlives its TTL by that much at most.
    this.timer = setInterval(() => this.expire(), Math.max(100, Math.min(this.ttlMs / 10, 30_000)));
    this.timer.unref();
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    clearInterval(this.timer);
  }

  private observe(c: Change): void {
    if (c.rt.group !== '' || c.rt.kind !== 'Event') return;
    const key = `${c.object.metadata.namespace}/${c.object.metadata.name}`;
    if (c.type === 'DELETED') this.expiries.delete(key);
    else this.touch(key);
  }

  private touch(key: string): void {
    this.expiries.delete(key);
    this.expiries.set(key, Date.now() + this.ttlMs);
  }

  /** Deletes every Event whose TTL ran out (the oldest first; stops at the first still alive). */
  expire(now = Date.now()): void {
    for (const [key, at] of this.expiries) {
      if (at > now) return;
      this.expiries.delete(key);
      const i = key.indexOf('/');
      try {
        this.api.delete(this.events, key.slice(0, i), key.slice(i + 1));
      } catch {
        // Already gone (its namespace deleted): nothing to expire.
      }
    }
  }
}
