// The one path from an accepted row to its custom resource (docs/adr/0017).
// The gateway answers 201 once the row commits; this creates the row's
// MediaJob (a single job) or MediaBatch (a show or playlist) on the leader:
// woken by the NOTIFY its commit sends, in passes that read a page of rows,
// create their resources a few at a time, then mark the rows that now have
// one. No row lock is held across a create: a create is harmless to repeat
// (names are row ids; AlreadyExists counts as done), and a MediaJob whose row
// was cancelled meanwhile is ended by the controller (ADR 0013).
//
// Bounded against the API server: a token bucket of MATERIALIZE_PER_SECOND;
// a 429 (API Priority and Fairness) stops the pass and holds every creation
// until its Retry-After has passed; any other failure holds only that row,
// doubling from 1 s to a minute, so one refused row neither spins nor blocks
// the others.
import type * as k8s from '@kubernetes/client-node';
import pg from 'pg';
import { MATERIALIZE_CHANNEL, markCreated, mediaBatchesToCreate, mediaJobsToCreate } from '@mediajobs/lib/db/materialize';
import { isAlreadyExists, retryAfterMs } from '@mediajobs/lib/kube-client';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { GROUP, MEDIABATCH_PLURAL, MEDIAJOB_PLURAL, VERSION, type MediaBatch, type MediaJob } from '@mediajobs/lib/mediajob/types';
import { CreationRate } from './batch-rate.js';
import type { OperatorMetrics } from './metrics.js';

/** What the informer caches hold: a resource already there is marked without a create. */
export interface ResourceCaches {
  hasMediaJob(namespace: string, name: string): boolean;
  hasMediaBatch(namespace: string, name: string): boolean;
}

export interface MaterializerOptions {
  perSecond: number;
  page: number;
  concurrency: number;
  safetySeconds: number;
}

export interface MaterializerDeps {
  pool: pg.Pool;
  /** Where the LISTEN connection goes (its own connection: a pool client would be taken for good). */
  databaseUrl: string;
  custom: k8s.CustomObjectsApi;
  caches: ResourceCaches;
  /** A paused batch was started (POST /batch/{id}/start): its controller creates the episodes now. */
  onBatchStarted(namespace: string, name: string): void;
  log: Logger;
  metrics?: OperatorMetrics;
  opts: MaterializerOptions;
}

type Resource = MediaJob | MediaBatch;
type Outcome = 'created' | 'found' | 'throttled' | 'failed' | 'skipped';

const HOLD_FIRST_MS = 1_000;
const HOLD_MAX_MS = 60_000;
const THROTTLE_MAX_MS = 30_000;
const RECONNECT_MS = 1_000;

export class Materializer {
  private readonly rate: CreationRate;
  /** Rows whose create failed: not read again before `until`. */
  private readonly held = new Map<string, { until: number; delayMs: number }>();
  /** No create before this (a 429's Retry-After). */
  private throttledUntil = 0;
  private throttleDelayMs = 0;
  /** The pass in flight, if any: stop() waits for it, so none touches the pool after the operator ends it. */
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = true;
  private timer: NodeJS.Timeout | undefined;
  private safety: NodeJS.Timeout | undefined;
  private listener: pg.Client | undefined;

  constructor(private readonly d: MaterializerDeps) {
    this.rate = new CreationRate(d.opts.perSecond, d.opts.page);
  }

  async start(): Promise<void> {
    this.stopped = false;
    this.safety = setInterval(() => this.wake(), this.d.opts.safetySeconds * 1000);
    this.safety.unref();
    await this.listen();
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.safety);
    clearTimeout(this.timer);
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
    // Its creates stop at the next row (createAll); what it created is still marked.
    await this.running;
  }

  /** Run a pass now, or right after the one running. */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.timer = undefined;
    // run() awaits its first pass before its finally clears this, so the order holds.
    this.running = this.run();
  }

  /** One pass: returns how many rows it read (tests call it directly). */
  async pass(): Promise<number> {
    const began = Date.now();
    const wait = this.throttledUntil - Date.now();
    const taken = wait > 0 ? 0 : this.rate.take(this.d.opts.page);
    if (taken === 0) {
      this.later(wait > 0 ? wait : this.rate.msUntil(1));
      return 0;
    }
    const skip = this.heldIds();
    const batches = await mediaBatchesToCreate(this.d.pool, taken, skip);
    const jobs = taken > batches.length ? await mediaJobsToCreate(this.d.pool, taken - batches.length, skip) : [];
    const rows: Resource[] = [...batches, ...jobs];
    const outcomes = await this.createAll(rows);
    this.rate.giveBack(taken - outcomes.filter((o) => o === 'created' || o === 'failed').length);
    const done = (kind: Resource['kind']) => rows.filter((r, i) => r.kind === kind && (outcomes[i] === 'created' || outcomes[i] === 'found'))
      .map((r) => r.metadata.name!);
    await markCreated(this.d.pool, 'batches', done('MediaBatch'));
    await markCreated(this.d.pool, 'jobs', done('MediaJob'));
    // A full page: more may be waiting. A throttled pass resumes at its Retry-After (later() above).
    if (rows.length === taken && !outcomes.includes('throttled')) this.again = true;
    else this.retryHeldLater(began);
    return rows.length;
  }

  private async run(): Promise<void> {
    try {
      do {
        this.again = false;
        await this.pass();
      } while (this.again && !this.stopped);
    } catch (err) {
      // Postgres away: the safety pass or the next notification tries again.
      this.d.log.warn({ err: errFields(err) }, 'materializer pass failed');
    } finally {
      // In the same turn as the loop's last look at `again`, so no wake() falls between the two.
      this.running = undefined;
    }
  }

  private later(ms: number): void {
    if (this.stopped || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.wake();
    }, Math.max(10, ms));
    this.timer.unref();
  }

  /**
   * A timer for the first row held by this pass to come due. One whose hold ran
   * out while the pass was still busy (a slow machine) is due at once; one due
   * before the pass began and not read is no longer waiting (cancelled), and the
   * safety pass is enough for it.
   */
  private retryHeldLater(passBegan: number): void {
    const due = [...this.held.values()].map((h) => h.until).filter((t) => t > passBegan);
    if (due.length) this.later(Math.min(...due) - Date.now());
  }

  /** Rows whose retry is not due. One not read again for a long while (cancelled meanwhile) is forgotten. */
  private heldIds(): string[] {
    const now = Date.now();
    for (const [id, h] of this.held) if (now - h.until > HOLD_MAX_MS) this.held.delete(id);
    return [...this.held].filter(([, h]) => h.until > now).map(([id]) => id);
  }

  /** Create the page with at most `concurrency` in flight; after a 429 the rest are skipped. */
  private async createAll(rows: Resource[]): Promise<Outcome[]> {
    const outcomes: Outcome[] = rows.map(() => 'skipped');
    let next = 0;
    const worker = async () => {
      while (next < rows.length && Date.now() >= this.throttledUntil && !this.stopped) {
        const i = next++;
        outcomes[i] = await this.createOne(rows[i]!);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.d.opts.concurrency, rows.length) }, worker));
    return outcomes;
  }

  private async createOne(r: Resource): Promise<Outcome> {
    const { namespace, name } = r.metadata as { namespace: string; name: string };
    const cached = r.kind === 'MediaJob' ? this.d.caches.hasMediaJob(namespace, name) : this.d.caches.hasMediaBatch(namespace, name);
    if (cached) return this.count(r, 'found');
    const plural = r.kind === 'MediaJob' ? MEDIAJOB_PLURAL : MEDIABATCH_PLURAL;
    try {
      await this.d.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural, body: r });
      this.held.delete(name);
      this.throttleDelayMs = 0;
      return this.count(r, 'created');
    } catch (err) {
      if (isAlreadyExists(err)) {
        this.held.delete(name);
        return this.count(r, 'found');
      }
      if ((err as { code?: unknown }).code === 429) {
        this.throttle(retryAfterMs(err));
        return this.count(r, 'throttled');
      }
      this.hold(name);
      // errFields: the status and reason, never the response body (it may echo the spec).
      this.d.log.warn({ kind: r.kind, name, err: errFields(err) }, 'could not create the resource of an accepted row; retried later');
      return this.count(r, 'failed');
    }
  }

  private count(r: Resource, outcome: Exclude<Outcome, 'skipped'>): Outcome {
    this.d.metrics?.materializedOne(r.kind, outcome);
    return outcome;
  }

  /** Retry-After when the API server gives one; else 1 s doubling to 30 s while it keeps answering 429. */
  private throttle(retryAfter: number | undefined): void {
    this.throttleDelayMs = Math.min(THROTTLE_MAX_MS, this.throttleDelayMs ? this.throttleDelayMs * 2 : HOLD_FIRST_MS);
    const until = Date.now() + (retryAfter ?? this.throttleDelayMs);
    if (until > this.throttledUntil) this.throttledUntil = until;
    this.later(this.throttledUntil - Date.now());
  }

  private hold(id: string): void {
    const delayMs = Math.min(HOLD_MAX_MS, (this.held.get(id)?.delayMs ?? HOLD_FIRST_MS / 2) * 2);
    this.held.set(id, { until: Date.now() + delayMs, delayMs });
  }

  // ---- LISTEN --------------------------------------------------------------

  private async listen(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.d.databaseUrl });
    this.listener = client;
    client.on('notification', (msg) => this.notified(msg.payload ?? ''));
    // A lost connection loses notifications: reconnect, then a catch-up pass.
    client.on('error', (err) => {
      this.d.log.warn({ err: errFields(err) }, 'materializer LISTEN connection failed; reconnecting');
      this.relisten(client);
    });
    client.on('end', () => this.relisten(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${MATERIALIZE_CHANNEL}`);
    } catch (err) {
      this.d.log.warn({ err: errFields(err) }, 'materializer could not LISTEN; retrying (the safety pass covers the gap)');
      this.relisten(client);
    }
  }

  private relisten(client: pg.Client): void {
    if (this.listener !== client || this.stopped) return;
    this.listener = undefined;
    void client.end().catch(() => undefined);
    setTimeout(() => {
      void this.listen().then(() => this.wake());
    }, RECONNECT_MS).unref();
  }

  private notified(payload: string): void {
    if (payload.startsWith('start ')) {
      const [namespace, name] = payload.slice('start '.length).split('/');
      if (namespace && name) this.d.onBatchStarted(namespace, name);
      return;
    }
    this.wake();
  }
}
