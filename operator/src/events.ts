// Kubernetes Events (core/v1) about MediaJobs and MediaBatches, recorded the
// way client-go's tools/record does, so `kubectl describe mj` and `kubectl
// get events` read them as they read any controller's:
// - an Event is named `<object name>.<hex unix nanos>` and carries source,
//   reportingController and reportingInstance (event.go makeEvent);
// - the EventCorrelator (events_cache.go) runs before each write: a spam
//   filter (a token bucket per source and object: 25 at once, then one per
//   5 minutes), an aggregator (the 10th distinct message with the same
//   object, type and reason within 10 minutes becomes one "(combined from
//   similar events): …" Event), and the counter: the same event again is a
//   PATCH of the existing Event with count + 1 and a new lastTimestamp
//   (recordEvent: a PATCH that finds it gone creates it afresh);
// - every cache is an LRU of 4096 entries, so memory stays bounded however
//   many objects pass through;
// - writes are queued and made one at a time in the background, the queue
//   dropping what does not fit (watch.DropIfChannelFull, 1000): recording
//   never delays or fails a reconcile, and its failures are logged at debug.
// Only the subset the operator needs: no annotations, no fieldPath, no
// retries of a failed write (client-go retries 12 times; an event lost to an
// unreachable apiserver is not worth a slower shutdown).
import type * as k8s from '@kubernetes/client-node';
import { isNotFound, MERGE_PATCH } from '@mediajobs/lib/kube-client';
import { errFields, type Logger } from '@mediajobs/lib/logger';

export type EventType = 'Normal' | 'Warning';

/** The object an Event is about: what client-go's reference.GetReference takes from it. */
export interface Involved {
  apiVersion: string;
  kind: string;
  metadata: { name?: string; namespace?: string; uid?: string; resourceVersion?: string };
}

export interface EventRecorderOptions {
  /** source.component and reportingController. */
  component: string;
  /** source.host and reportingInstance: the pod's or host's name. */
  instance: string;
  /**
   * Where Events about cluster-scoped objects (MediaPlatform, ProxyPool) are
   * written. client-go writes them to `default`; the operator writes them to
   * its own namespace, where its Role already creates Events, so it needs no
   * rights in `default` (kubectl describe finds them in any namespace).
   */
  clusterScopedNamespace?: string;
  /** Entries of each correlation cache (client-go's maxLruCacheEntries). */
  cacheSize?: number;
  /** Events waiting to be written before new ones are dropped (client-go's maxQueuedEvents). */
  maxQueued?: number;
  now?: () => Date;
}

/** What the operator's events say they come from (reportingController). */
export const REPORTING_CONTROLLER = 'mediajobs.io/operator';

// client-go tools/record/events_cache.go defaults.
const MAX_LRU_CACHE_ENTRIES = 4096;
const AGGREGATE_MAX_EVENTS = 10;
const AGGREGATE_INTERVAL_MS = 600_000;
const SPAM_BURST = 25;
const SPAM_QPS = 1 / 300;
// client-go tools/record/event.go maxQueuedEvents.
const MAX_QUEUED_EVENTS = 1000;

/** A Map kept to its newest `size` entries by use (groupcache/lru's behaviour). */
export class Lru<V> {
  private readonly map = new Map<string, V>();

  constructor(private readonly size: number) {}

  get(key: string): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  set(key: string, v: V): void {
    this.map.delete(key);
    this.map.set(key, v);
    if (this.map.size > this.size) this.map.delete(this.map.keys().next().value!);
  }

  get length(): number {
    return this.map.size;
  }
}

/** A token bucket (flowcontrol.NewTokenBucketRateLimiter's TryAccept). */
class TokenBucket {
  private tokens: number;
  private at: number;

  constructor(private readonly qps: number, private readonly burst: number, now: number) {
    this.tokens = burst;
    this.at = now;
  }

  tryAccept(now: number): boolean {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) / 1000) * this.qps);
    this.at = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

interface Observation {
  count: number;
  firstTimestamp: Date;
  name: string;
}

interface Aggregate {
  messages: Set<string>;
  last: number;
}

/** One write: a new Event, or a PATCH of the one its key already has. */
export interface Correlated {
  event: k8s.CoreV1Event;
  key: string;
  /** Set when the same event was written before: the PATCH to make. */
  patch?: { count: number; lastTimestamp: Date; message: string };
}

const join = (...parts: (string | undefined)[]) => parts.map((p) => p ?? '').join('');

function spamKey(e: k8s.CoreV1Event): string {
  const o = e.involvedObject;
  return join(e.source?.component, e.source?.host, o.kind, o.namespace, o.name, o.uid, o.apiVersion);
}

function eventKey(e: k8s.CoreV1Event): string {
  const o = e.involvedObject;
  return join(e.source?.component, e.source?.host, o.kind, o.namespace, o.name, o.fieldPath, o.uid, o.apiVersion, e.type, e.reason, e.message);
}

/** EventAggregatorByReasonFunc: the group key (all but the message), and the message. */
function aggregateKey(e: k8s.CoreV1Event): string {
  const o = e.involvedObject;
  return join(e.source?.component, e.source?.host, o.kind, o.namespace, o.name, o.uid, o.apiVersion, e.type, e.reason,
    e.reportingComponent, e.reportingInstance);
}

/** client-go's EventCorrelator: filter, aggregate, count. Pure bookkeeping; the writes are the recorder's. */
export class EventCorrelator {
  private readonly spam: Lru<TokenBucket>;
  private readonly aggregates: Lru<Aggregate>;
  private readonly seen: Lru<Observation>;

  constructor(size = MAX_LRU_CACHE_ENTRIES) {
    this.spam = new Lru(size);
    this.aggregates = new Lru(size);
    this.seen = new Lru(size);
  }

  /** The write to make for `event` at `now`, or undefined when the spam filter drops it. */
  correlate(event: k8s.CoreV1Event, now: Date): Correlated | undefined {
    const t = now.getTime();
    const sk = spamKey(event);
    const bucket = this.spam.get(sk) ?? new TokenBucket(SPAM_QPS, SPAM_BURST, t);
    this.spam.set(sk, bucket);
    if (!bucket.tryAccept(t)) return undefined;

    let e = event;
    let key = eventKey(event);
    const ak = aggregateKey(event);
    let agg = this.aggregates.get(ak);
    if (!agg || t - agg.last > AGGREGATE_INTERVAL_MS) agg = { messages: new Set(), last: t };
    agg.messages.add(event.message ?? '');
    agg.last = t;
    this.aggregates.set(ak, agg);
    if (agg.messages.size >= AGGREGATE_MAX_EVENTS) {
      // Like sets.String.PopAny: the set stays at its maximum.
      agg.messages.delete(agg.messages.values().next().value!);
      e = { ...event, message: `(combined from similar events): ${event.message ?? ''}` };
      key = ak;
    }

    const last = this.seen.get(key);
    if (!last) {
      this.seen.set(key, { count: 1, firstTimestamp: now, name: e.metadata.name! });
      return { event: e, key };
    }
    const count = last.count + 1;
    this.seen.set(key, { ...last, count });
    return {
      event: { ...e, metadata: { ...e.metadata, name: last.name }, count, firstTimestamp: last.firstTimestamp },
      key,
      patch: { count, lastTimestamp: now, message: e.message ?? '' },
    };
  }

  /** What the apiserver answered (eventCorrelator.UpdateState): its name, count and first time count from now on. */
  update(key: string, written: k8s.CoreV1Event): void {
    this.seen.set(key, {
      count: written.count ?? 1,
      firstTimestamp: new Date(written.firstTimestamp ?? Date.now()),
      name: written.metadata.name!,
    });
  }
}

export class EventRecorder {
  private readonly correlator: EventCorrelator;
  private readonly now: () => Date;
  private readonly maxQueued: number;
  private queued = 0;
  private tail: Promise<void> = Promise.resolve();
  private lastNanos = 0n;

  constructor(private readonly core: k8s.CoreV1Api, private readonly log: Logger, private readonly opts: EventRecorderOptions) {
    this.correlator = new EventCorrelator(opts.cacheSize);
    this.now = opts.now ?? (() => new Date());
    this.maxQueued = opts.maxQueued ?? MAX_QUEUED_EVENTS;
  }

  /** Record an event about `obj`: queued, written in the background, never throws. */
  event(obj: Involved, type: EventType, reason: string, message: string): void {
    const m = obj.metadata;
    if (!m.name) return;
    if (this.queued >= this.maxQueued) {
      this.log.debug({ reason, object: `${obj.kind}/${m.name}` }, 'event dropped: too many queued');
      return;
    }
    const now = this.now();
    const event: k8s.CoreV1Event = {
      metadata: { name: `${m.name}.${this.nanos(now).toString(16)}`, namespace: m.namespace || this.opts.clusterScopedNamespace || 'default' },
      involvedObject: {
        apiVersion: obj.apiVersion, kind: obj.kind, name: m.name, namespace: m.namespace, uid: m.uid, resourceVersion: m.resourceVersion,
      },
      type, reason, message,
      firstTimestamp: now, lastTimestamp: now, count: 1,
      source: { component: this.opts.component, host: this.opts.instance },
      reportingComponent: this.opts.component,
      reportingInstance: this.opts.instance,
    };
    this.queued++;
    this.tail = this.tail.then(() => this.write(event, now)).finally(() => this.queued--);
  }

  /** Resolves when every event queued so far has been written (or given up on). */
  flush(): Promise<void> {
    return this.tail;
  }

  /** Unix nanoseconds, strictly increasing, so two events of one object in one millisecond get two names. */
  private nanos(now: Date): bigint {
    const n = BigInt(now.getTime()) * 1_000_000n;
    this.lastNanos = n > this.lastNanos ? n : this.lastNanos + 1n;
    return this.lastNanos;
  }

  private async write(event: k8s.CoreV1Event, now: Date): Promise<void> {
    const c = this.correlator.correlate(event, now);
    if (!c) {
      this.log.debug({ reason: event.reason, object: event.involvedObject.name }, 'event dropped by the spam filter');
      return;
    }
    const namespace = c.event.metadata.namespace!;
    try {
      let written: k8s.CoreV1Event | undefined;
      if (c.patch) {
        try {
          written = await this.core.patchNamespacedEvent({ namespace, name: c.event.metadata.name!, body: c.patch }, MERGE_PATCH);
        } catch (err) {
          // Deleted meanwhile (events expire after an hour on a real cluster): record it afresh.
          if (!isNotFound(err)) throw err;
        }
      }
      written ??= await this.core.createNamespacedEvent({ namespace, body: { ...c.event, metadata: { ...c.event.metadata, resourceVersion: undefined } } });
      this.correlator.update(c.key, written);
    } catch (err) {
      this.log.debug({ reason: event.reason, object: event.involvedObject.name, err: errFields(err) }, 'recording an event failed');
    }
  }
}
