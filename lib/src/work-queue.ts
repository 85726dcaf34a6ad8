// A work queue of object keys in the manner of client-go's rate-limited
// queue: adding a key that is already waiting is a no-op, a key is never
// processed twice at once (a key added while in flight runs again after),
// delayed adds keep the earliest deadline, and failures retry with per-key
// exponential backoff (capped low while a dependency is unreachable). Up to
// `concurrency` different keys run at once.
//
// A pass says what happens next (./reconcile.ts, as controller-runtime's
// reconcileHandler reads a Result): a requeueAfter is honoured and resets
// the key's backoff, a TemporaryError waits its own delay or backs off, a
// PermanentError is never retried but handed to onPermanent, and any other
// throw backs off.
import type { WorkQueueMetrics } from './metrics.js';
import { PermanentError, TemporaryError, type ReconcileResult } from './reconcile.js';
import { isUnreachable } from './unreachable.js';

/** The longest wait, by default, of a key whose pass failed because a dependency could not be reached. */
export const UNREACHABLE_RETRY_MAX_MS = 4_000;

/** One pass over a key: what to do next, or a throw (see ./reconcile.ts). */
export type ReconcileHandler = (key: string) => Promise<ReconcileResult | void> | ReconcileResult | void;

export interface WorkQueueOptions {
  /** Keys processed at once (different keys only). */
  concurrency?: number;
  /** First retry delay after a failed pass... */
  retryBaseMs?: number;
  /** ...doubling up to this. */
  retryMaxMs?: number;
  /** ...or up to this when the pass failed because a dependency could not be reached (lib/src/unreachable.ts). */
  unreachableRetryMaxMs?: number;
  /** A pass failed and will be retried (any throw but a PermanentError). */
  onError?: (key: string, err: unknown) => void;
  /**
   * A pass failed for good: record it on the object. Runs while the key is
   * still in flight; its result is honoured like a pass's (a finished
   * object's clean-up timer). Should it throw, the pass counts as failed
   * and is retried with backoff, so the failure is recorded in the end.
   * Without it, permanent errors go to onError and are dropped.
   */
  onPermanent?: (key: string, err: PermanentError) => Promise<ReconcileResult | void> | ReconcileResult | void;
  /** Adds, depth, waiting and working times, retries (lib/src/metrics.ts workQueueMetrics). */
  metrics?: WorkQueueMetrics;
}

export class WorkQueue {
  private readonly waiting: string[] = [];
  private readonly queued = new Set<string>();
  /** Keys being processed, with when their pass began. */
  private readonly inFlight = new Map<string, number>();
  /** When each waiting key was added, for the queue-duration metric. */
  private readonly addedAt = new Map<string, number>();
  /** Keys added while in flight: run again when the current pass ends. */
  private readonly dirty = new Set<string>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private readonly idleWaiters: (() => void)[] = [];
  private stopped = false;
  private readonly concurrency: number;
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;

  constructor(private readonly handler: ReconcileHandler, private readonly opts: WorkQueueOptions = {}) {
    this.concurrency = opts.concurrency ?? 1;
    this.retryBaseMs = opts.retryBaseMs ?? 1000;
    this.retryMaxMs = opts.retryMaxMs ?? 60_000;
  }

  add(key: string): void {
    if (this.stopped) return;
    if (this.inFlight.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.waiting.push(key);
    if (this.opts.metrics) {
      this.addedAt.set(key, performance.now());
      this.opts.metrics.added();
      this.opts.metrics.depth(this.waiting.length);
    }
    this.pump();
  }

  /** Add after `delayMs`; an earlier pending deadline for the same key wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.stopped) return;
    if (delayMs <= 0) return this.add(key);
    const at = Date.now() + delayMs;
    const existing = this.timers.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.timers.set(key, { at, timer });
  }

  /** Retry after a failure, with exponential backoff per key, up to `maxMs`. */
  addRateLimited(key: string, maxMs = this.retryMaxMs): void {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    this.opts.metrics?.retried();
    this.addAfter(key, Math.min(maxMs, this.retryBaseMs * 2 ** Math.min(n, 30)));
  }

  /** Reset a key's backoff (after a successful pass). */
  forget(key: string): void {
    this.failures.delete(key);
  }

  get length(): number {
    return this.waiting.length;
  }

  /** When each pass in flight began (Date.now()): client-go's unfinished work. */
  inFlightSince(): Iterable<number> {
    return this.inFlight.values();
  }

  /** Resolves when nothing is waiting or in flight (timers not counted). */
  idle(): Promise<void> {
    if (!this.waiting.length && !this.inFlight.size) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Take no more work; resolves when the passes in flight have ended. */
  stop(): Promise<void> {
    this.stopped = true;
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.waiting.length = 0;
    this.queued.clear();
    this.addedAt.clear();
    this.dirty.clear();
    this.opts.metrics?.depth(0);
    return this.idle();
  }

  private pump(): void {
    while (!this.stopped && this.inFlight.size < this.concurrency && this.waiting.length) {
      const key = this.waiting.shift()!;
      this.queued.delete(key);
      this.inFlight.set(key, Date.now());
      const metrics = this.opts.metrics;
      if (metrics) {
        const at = this.addedAt.get(key);
        this.addedAt.delete(key);
        if (at !== undefined) metrics.waited((performance.now() - at) / 1000);
        metrics.depth(this.waiting.length);
      }
      void this.run(key);
    }
    if (!this.waiting.length && !this.inFlight.size) {
      for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  private async run(key: string): Promise<void> {
    const started = performance.now();
    try {
      this.settle(key, await this.handler(key));
    } catch (err) {
      await this.failed(key, err);
    } finally {
      this.opts.metrics?.worked((performance.now() - started) / 1000);
      this.inFlight.delete(key);
      if (this.dirty.delete(key)) this.add(key);
      // Yield so a burst of synchronous handlers does not starve timers and I/O.
      setImmediate(() => this.pump());
    }
  }

  /** A pass (or the recording of its permanent failure) succeeded: backoff starts over; look again if asked. */
  private settle(key: string, result: ReconcileResult | void): void {
    this.forget(key);
    if (result?.requeueAfter && result.requeueAfter > 0) this.addAfter(key, result.requeueAfter);
  }

  private async failed(key: string, err: unknown): Promise<void> {
    if (err instanceof PermanentError) {
      // Never retried; a key that may never pass again keeps no backoff state.
      this.forget(key);
      if (!this.opts.onPermanent) {
        this.opts.onError?.(key, err);
        return;
      }
      try {
        this.settle(key, await this.opts.onPermanent(key, err));
      } catch (recordErr) {
        this.opts.onError?.(key, recordErr);
        this.addRateLimited(key);
      }
      return;
    }
    this.opts.onError?.(key, err);
    if (err instanceof TemporaryError && err.delayMs !== undefined && err.delayMs > 0) this.addAfter(key, err.delayMs);
    // A dependency down (Postgres, the API server) is nobody's fault in the key: once it is back every such key
    // should run soon, not after a backoff that grew through the outage (a 5 s one reached a minute).
    else this.addRateLimited(key, isUnreachable(err) ? Math.min(this.retryMaxMs, this.opts.unreachableRetryMaxMs ?? UNREACHABLE_RETRY_MAX_MS) : this.retryMaxMs);
  }
}
