// An informer that runs for weeks: client-go's reflector semantics over
// client-node's Watch (docs/adr/0026-informers-resume-their-watch.md).
//
// It LISTs once, then watches from the list's resourceVersion with
// bookmarks. A watch that ends (the server's timeout, a dropped connection,
// a reset mid-event) is resumed from the last resourceVersion it saw: no
// LIST, nothing missed, since the server replays what came after. It lists
// again only when the server says that version is gone (410 Expired), every
// relistMs (a safety net for a watch that lost a change), and after
// several failed watches in a row. Failures back off (250 ms doubling to
// 30 s, with jitter). A watchdog abandons a watch that shows no sign of life
// (no event and no bookmark) for watchdogMs and watches again from the
// same version. Aborts it makes itself are never errors. onResync is called
// periodically so every object is reconciled again.
import * as k8s from '@kubernetes/client-node';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import type { OperatorMetrics, RelistTrigger } from './metrics.js';

export interface ResilientInformerOptions<T extends k8s.KubernetesObject> {
  name: string;
  kc: k8s.KubeConfig;
  path: string;
  list: () => Promise<k8s.KubernetesListObject<T>>;
  labelSelector?: string;
  onChange: (obj: T, type: 'add' | 'update' | 'delete') => void;
  onResync?: () => void;
  resyncMs: number;
  /** A watch with neither an event nor a bookmark for this long is abandoned and watched again from its version. */
  watchdogMs: number;
  /** A LIST this often, whatever the watch says (a change a watch lost is found here). */
  relistMs: number;
  /** The server ends each watch after a random 1-2 times this (client-go: 5 min); default 300 s. */
  minWatchTimeoutSeconds?: number;
  log: Logger;
  /** Counts relists by trigger, failed ones, and watches started again. */
  metrics?: Pick<OperatorMetrics, 'relisted' | 'relistFailed' | 'watchRestarted'>;
}

/** Failed watches in a row after which the next attempt lists first. */
export const FAILED_WATCHES_BEFORE_RELIST = 5;
const BACKOFF_BASE_MS = 250;
const BACKOFF_CAP_MS = 30_000;
/** A watch that ends sooner than this having delivered nothing counts as a failure (client-go's "very short watch"). */
const SHORT_WATCH_MS = 1_000;

/** How one watch ended. */
type WatchEnd =
  | { kind: 'ended'; events: number; ms: number } // the server closed it, or the connection dropped
  | { kind: 'failed'; err: unknown }
  | { kind: 'expired' } // 410: the version is gone
  | { kind: 'aborted'; why: 'stalled' | 'relist' | 'stop' };

/** One watch request: its callbacks act only while it is the current one. */
interface WatchAttempt {
  abort?: AbortController;
  /** Set when we end it ourselves; an abort we asked for is never an error. */
  abortedFor?: 'stalled' | 'relist' | 'stop';
  events: number;
  expired: boolean;
  serverError?: unknown;
  startedAt: number;
  finish: (end: WatchEnd) => void;
}

export class ResilientInformer<T extends k8s.KubernetesObject> {
  private readonly watcher: k8s.Watch;
  private objects = new Map<string, T>();
  private resourceVersion = '';
  private current: WatchAttempt | undefined;
  private lastActivity = Date.now();
  private stopped = true;
  private relistDue: RelistTrigger | undefined;
  private failures = 0;
  private timers: NodeJS.Timeout[] = [];
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  /** Since when the cache has followed the API server without a break; undefined while it may be behind. */
  private following: number | undefined;

  constructor(private readonly o: ResilientInformerOptions<T>) {
    this.watcher = new k8s.Watch(o.kc);
  }

  /** Lists (retrying with backoff until it succeeds or stop() is called), then watches in the background. */
  async start(): Promise<void> {
    this.stopped = false;
    while (!this.stopped && !(await this.listOnce(undefined))) await this.backoff();
    if (this.stopped) return;
    this.loop = this.run();
    const resync = setInterval(() => this.o.onResync?.(), this.o.resyncMs);
    const watchdog = setInterval(() => this.checkStall(), Math.max(250, Math.floor(this.o.watchdogMs / 4)));
    const relist = setInterval(() => this.requestRelist('periodic'), this.o.relistMs);
    for (const t of [resync, watchdog, relist]) t.unref();
    this.timers.push(resync, watchdog, relist);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.following = undefined;
    this.endWatch('stop');
    this.wake?.();
    await this.loop;
  }

  /**
   * Since when (ms) the cache has followed the API server without a break:
   * its last list after a break, or the watch that resumed after one.
   * Undefined while the watch is down or its version expired, when what
   * the cache says may be behind by any amount. A watch that ends and
   * resumes from its version is no break: the server replays the gap.
   */
  followingSince(): number | undefined {
    return this.following;
  }

  get(name: string, namespace?: string): T | undefined {
    return this.objects.get(keyOf(namespace, name));
  }

  list(namespace?: string): readonly T[] {
    const all = [...this.objects.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata?.namespace === namespace);
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const trigger = this.relistDue;
      if (trigger) {
        if (!(await this.listOnce(trigger))) {
          await this.backoff();
          continue;
        }
        this.o.onResync?.();
      }
      const end = await this.watch();
      if (this.stopped) return;
      await this.after(end);
    }
  }

  /** What a watch's end leads to: resume at once, resume after a pause, or list first. */
  private async after(end: WatchEnd): Promise<void> {
    switch (end.kind) {
      case 'expired':
        this.following = undefined;
        this.o.log.info({ informer: this.o.name, resourceVersion: this.resourceVersion }, 'watch version expired; listing again');
        this.relistDue = 'expired';
        return;
      case 'aborted':
        if (end.why === 'stalled') this.o.metrics?.watchRestarted(this.o.name, 'stalled');
        return; // a relist is due, or a stalled watch resumes at once
      case 'ended':
        if (end.events > 0 || end.ms >= SHORT_WATCH_MS) {
          this.failures = 0;
          this.o.metrics?.watchRestarted(this.o.name, 'ended');
          return;
        }
        return this.failed(new Error(`watch ended after ${end.ms} ms with no event`));
      case 'failed':
        return this.failed(end.err);
    }
  }

  private async failed(err: unknown): Promise<void> {
    this.following = undefined;
    this.failures += 1;
    this.o.metrics?.watchRestarted(this.o.name, 'failed');
    const relist = this.failures >= FAILED_WATCHES_BEFORE_RELIST;
    // One drop that resumes is routine (a load balancer, a server restart); failures in a row are worth a warning.
    this.o.log[this.failures > 1 ? 'warn' : 'info'](
      { informer: this.o.name, failures: this.failures, err: errFields(err) },
      relist ? 'informer watch keeps failing; listing again' : 'informer watch failed; resuming from its version',
    );
    if (relist) this.relistDue = 'error';
    await this.backoff();
  }

  /**
   * One LIST: the cache becomes what it returned, and what changed is
   * announced (objects gone since are announced as deleted). A failed list
   * keeps the old cache, whole but stale, rather than an empty one.
   */
  private async listOnce(trigger: RelistTrigger | undefined): Promise<boolean> {
    if (trigger) this.o.metrics?.relisted(this.o.name, trigger);
    let listed: k8s.KubernetesListObject<T>;
    try {
      listed = await this.o.list();
    } catch (err) {
      this.following = undefined;
      this.failures += 1;
      this.o.log.warn({ informer: this.o.name, err: errFields(err) }, 'informer list failed; keeping the cache and trying again');
      if (trigger) this.o.metrics?.relistFailed(this.o.name);
      return false;
    }
    if (this.stopped) return false;
    this.replace(listed.items ?? []);
    this.resourceVersion = listed.metadata?.resourceVersion ?? '';
    this.relistDue = undefined;
    this.failures = 0;
    this.following ??= Date.now();
    return true;
  }

  private replace(items: T[]): void {
    const old = this.objects;
    this.objects = new Map();
    for (const obj of items) {
      const key = keyOf(obj.metadata?.namespace, obj.metadata?.name);
      this.objects.set(key, obj);
      const before = old.get(key);
      if (!before) this.o.onChange(obj, 'add');
      else if (before.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.o.onChange(obj, 'update');
    }
    for (const [key, obj] of old) if (!this.objects.has(key)) this.o.onChange(obj, 'delete');
  }

  /** Watches from the current version until the watch ends; resolves with how. */
  private watch(): Promise<WatchEnd> {
    return new Promise<WatchEnd>((resolve) => {
      const attempt: WatchAttempt = { events: 0, expired: false, startedAt: Date.now(), finish: () => undefined };
      attempt.finish = (end) => {
        if (this.current === attempt) this.current = undefined;
        attempt.finish = () => undefined;
        resolve(end);
      };
      this.current = attempt;
      this.lastActivity = Date.now();
      const timeout = Math.round((this.o.minWatchTimeoutSeconds ?? 300) * (1 + Math.random()));
      const params: Record<string, string | number | boolean> = {
        resourceVersion: this.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: timeout,
      };
      if (this.o.labelSelector !== undefined) params.labelSelector = this.o.labelSelector;
      this.watcher
        .watch(this.o.path, params, (phase, obj) => this.onEvent(attempt, phase, obj), (err) => this.onDone(attempt, err))
        .then((abort) => {
          attempt.abort = abort;
          if (attempt.abortedFor) abort.abort();
          else if (this.current === attempt) this.connected();
        })
        .catch((err: unknown) => this.onDone(attempt, err)); // the kubeconfig's credentials could not be applied
    });
  }

  private connected(): void {
    this.lastActivity = Date.now();
    this.following ??= Date.now();
  }

  private onEvent(attempt: WatchAttempt, phase: string, obj: T & { code?: number }): void {
    if (attempt !== this.current) return;
    this.lastActivity = Date.now();
    if (phase === 'ERROR') {
      // A Status: 410 means the version is gone (the server closes the stream next).
      if (obj.code === 410) attempt.expired = true;
      else attempt.serverError = new Error(`watch error event: ${JSON.stringify(obj)}`);
      return;
    }
    attempt.events += 1;
    const rv = obj.metadata?.resourceVersion;
    if (phase !== 'BOOKMARK') this.apply(phase, obj);
    if (rv) this.resourceVersion = rv;
  }

  private apply(phase: string, obj: T): void {
    const key = keyOf(obj.metadata?.namespace, obj.metadata?.name);
    const before = this.objects.get(key);
    if (phase === 'DELETED') {
      if (!before) return;
      this.objects.delete(key);
      this.o.onChange(obj, 'delete');
      return;
    }
    if (before && before.metadata?.resourceVersion === obj.metadata?.resourceVersion) return;
    this.objects.set(key, obj);
    this.o.onChange(obj, before ? 'update' : 'add');
  }

  private onDone(attempt: WatchAttempt, err: unknown): void {
    if (attempt.abortedFor) return attempt.finish({ kind: 'aborted', why: attempt.abortedFor });
    if (attempt.expired || statusOf(err) === 410) return attempt.finish({ kind: 'expired' });
    if (attempt.serverError) return attempt.finish({ kind: 'failed', err: attempt.serverError });
    if (err) return attempt.finish({ kind: 'failed', err });
    attempt.finish({ kind: 'ended', events: attempt.events, ms: Date.now() - attempt.startedAt });
  }

  /** Ends the current watch ourselves; its end is then no error. */
  private endWatch(why: 'stalled' | 'relist' | 'stop'): void {
    const attempt = this.current;
    if (!attempt) return;
    attempt.abortedFor = why;
    attempt.abort?.abort();
    // A watch still waiting for its response headers cannot be aborted yet (it is, when they come): go on without it.
    attempt.finish({ kind: 'aborted', why });
  }

  private checkStall(): void {
    if (!this.current || Date.now() - this.lastActivity <= this.o.watchdogMs) return;
    this.o.log.info({ informer: this.o.name, quietMs: Date.now() - this.lastActivity }, 'watch shows no sign of life; watching again from its version');
    this.endWatch('stalled');
  }

  private requestRelist(trigger: RelistTrigger): void {
    this.relistDue ??= trigger;
    this.endWatch('relist');
  }

  /** Waits BACKOFF_BASE_MS doubling per failure in a row, at most BACKOFF_CAP_MS, with jitter; stop() ends the wait. */
  private backoff(): Promise<void> {
    const ms = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.min(Math.max(this.failures - 1, 0), 10));
    return new Promise<void>((resolve) => {
      const t = setTimeout(done, ms * (0.8 + Math.random() * 0.4));
      function done(): void {
        clearTimeout(t);
        resolve();
      }
      this.wake = done;
    }).finally(() => {
      this.wake = undefined;
    });
  }
}

function keyOf(namespace: string | undefined, name: string | undefined): string {
  return `${namespace ?? ''}/${name ?? ''}`;
}

function statusOf(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { statusCode?: unknown; code?: unknown };
  return typeof e.statusCode === 'number' ? e.statusCode : typeof e.code === 'number' ? e.code : undefined;
}
