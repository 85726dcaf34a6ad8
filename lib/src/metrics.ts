// What the gateway's and the operator's Prometheus metrics share
// (docs/metrics.md has the table of every metric). Each part registers its
// metrics in a prom-client Registry it is given, never prom-client's global
// default, so that in local mode, where both parts run in one process, they
// are handed the same registry and the gateway's /metrics serves both sets.
// A metric both parts may define (jobs finished, the Postgres pool gauges)
// is taken from the registry when it is there already (`shared`), so one
// registry never holds two metrics of one name.
//
// Label values are always from fixed sets (a route template, a status, a
// reason from a known list): never a job id, an API key or a URL.
import type { ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type pg from 'pg';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type Metric } from 'prom-client';
import { TERMINAL_STATUSES, type JobStatus, type MediaJobStatus } from './mediajob/types.js';

export { Counter, Gauge, Histogram, Registry };

/** Every metric name starts with this. */
export const PREFIX = 'mediajobs_';

/**
 * prom-client's default metric that is left out: the GC duration
 * histogram. It keeps a PerformanceObserver on every garbage collection,
 * and that alone cost the gateway 6–8% of its throughput on GET /jobs/{id}
 * (api-gateway/bench/metrics.ts; the known cost of prometheus/client_js
 * #490). GC pressure still shows in the heap and CPU figures.
 */
const LEFT_OUT = new Set(['gc']);
const require = createRequire(import.meta.url);

/**
 * A registry with Node's process metrics (CPU, memory, event loop lag,
 * prefixed mediajobs_): one per process, whatever parts share it.
 * collectDefaultMetrics has no way to leave one out, so each of its
 * collectors (prom-client/lib/metrics/<name>, the names it lists) is called
 * here but the GC one.
 */
export function newRegistry(): Registry {
  const registry = new Registry();
  for (const name of collectDefaultMetrics.metricsList) {
    if (LEFT_OUT.has(name)) continue;
    const collector = require(`prom-client/lib/metrics/${name}`) as DefaultCollector;
    collector(registry, { prefix: PREFIX, eventLoopMonitoringPrecision: 10 });
  }
  return registry;
}

type DefaultCollector = (registry: Registry, config: { prefix: string; eventLoopMonitoringPrecision: number }) => void;

/** The registry's metric of this name, made by `make` when it has none yet (a metric both parts define). */
export function shared<M extends Metric>(registry: Registry, name: string, make: () => M): M {
  return (registry.getSingleMetric(name) as M | undefined) ?? make();
}

/** The exposition text of `registry` as an HTTP answer. */
export async function sendMetrics(registry: Registry, res: ServerResponse): Promise<void> {
  const text = await registry.metrics();
  res.writeHead(200, { 'Content-Type': registry.contentType, 'Cache-Control': 'no-store' });
  res.end(text);
}

/** Seconds buckets from 5 ms to 10 s: HTTP requests, reconciles, deliveries. */
export const SHORT_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Seconds buckets from 1 s to 6 h: waiting for a slot, a runner's phases. */
export const LONG_SECONDS = [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600];

// ---- Postgres pools ---------------------------------------------------------

const pools = new WeakMap<Registry, Map<string, pg.Pool>>();

/**
 * Count `pool`'s clients at each scrape, labelled `pool` (gateway,
 * operator): in use, idle, and requests waiting for a client. Reading the
 * counts costs nothing; no query is sent.
 */
export function trackPool(registry: Registry, name: string, pool: pg.Pool): void {
  let tracked = pools.get(registry);
  if (!tracked) {
    const mine = new Map<string, pg.Pool>();
    tracked = mine;
    pools.set(registry, mine);
    new Gauge({
      name: `${PREFIX}pg_pool_clients`, help: 'Postgres pool clients by state: in use (checked out) or idle', labelNames: ['pool', 'state'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [p, { totalCount, idleCount }] of mine) {
          this.set({ pool: p, state: 'in_use' }, totalCount - idleCount);
          this.set({ pool: p, state: 'idle' }, idleCount);
        }
      },
    });
    new Gauge({
      name: `${PREFIX}pg_pool_waiting_requests`, help: 'Queries waiting for a free Postgres pool client', labelNames: ['pool'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [p, { waitingCount }] of mine) this.set({ pool: p }, waitingCount);
      },
    });
    new Gauge({
      name: `${PREFIX}pg_pool_max_clients`, help: 'The Postgres pool size (PG_POOL_MAX, RECONCILE_CONCURRENCY + 4)', labelNames: ['pool'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [p, pl] of mine) this.set({ pool: p }, pl.options.max ?? 10);
      },
    });
  }
  tracked.set(name, pool);
}

// ---- Jobs ---------------------------------------------------------------------

/** How a job came to be: POST /jobs (api), POST /jobs/bulk (bulk), an episode of a batch (batch), a manifest applied with kubectl (kubectl). */
export type JobSource = 'api' | 'bulk' | 'batch' | 'kubectl';

export function jobsAccepted(registry: Registry): Counter<'source'> {
  return shared(registry, `${PREFIX}jobs_accepted_total`, () => new Counter({
    name: `${PREFIX}jobs_accepted_total`, help: 'Jobs recorded (their row written), by how they came', labelNames: ['source'] as const, registers: [registry],
  }));
}

/**
 * Jobs that ended, by status and error category. Counted where the row
 * became terminal, once per job: the operator for what it mirrors and the
 * cancellations it makes, the gateway for cancellations through the API.
 */
export function jobsFinished(registry: Registry): Counter<'status' | 'error_category'> {
  return shared(registry, `${PREFIX}jobs_finished_total`, () => new Counter({
    name: `${PREFIX}jobs_finished_total`, help: 'Jobs that ended, by final status and error category',
    labelNames: ['status', 'error_category'] as const, registers: [registry],
  }));
}

/**
 * The runner's fixed error phrases (runner-image/src/classify.ts MESSAGES)
 * and the operator's, by category. The status carries the phrase, not the
 * category; a phrase is matched at its start, since a key-limit failure
 * adds the numbers after it.
 */
const CATEGORY_BY_PHRASE: readonly (readonly [phrase: string, category: string])[] = [
  ['The platform requires a bot check', 'bot_detection'],
  ['The platform rate-limited', 'rate_limited'],
  ['Connection error while downloading', 'connection_error'],
  ['The media could not be downloaded', 'download_failed'],
  ['Processing the media failed', 'processing_failed'],
  ['The produced file did not match', 'output_unverified'],
  ['Uploading the file to the storage destination failed', 'upload_failed'],
  ['The storage destination is unreachable', 'storage_unreachable'],
  ['Internal error in the download runner', 'internal_error'],
  ['Video is private', 'private'],
  ['Video is available to channel members only', 'members_only'],
  ['Video is age-restricted', 'age_restricted'],
  ['Video is not available in this region', 'geo_blocked'],
  ['The channel or account behind this video has been terminated', 'channel_terminated'],
  ['Video is blocked by a copyright claim', 'copyright'],
  ['Video is not available yet', 'upcoming'],
  ['Video is unavailable or has been removed', 'unavailable'],
  ['Media is DRM-protected', 'drm_protected'],
  ['The media is longer than this API key allows', 'duration_limit_exceeded'],
  ['The file is larger than this API key allows', 'filesize_limit_exceeded'],
  ['The job\'s spec is invalid', 'invalid_spec'],
];

/** Reasons that name their category whatever the phrase (the operator's own failures, spec "Job failure reasons"). */
const CATEGORY_REASONS = new Set([
  'timeout', 'storage_unreachable', 'duration_limit_exceeded', 'filesize_limit_exceeded', 'invalid_spec', 'invalid_owner', 'name_taken', 'drm_audio_only',
]);

/**
 * The error category of a finished job, from a fixed set: `none` for a
 * job that did not fail (Completed, cancelled), the reason or runner
 * category when known, else `other` (a status written by hand may say anything).
 */
export function errorCategory(s: Pick<MediaJobStatus, 'status' | 'error' | 'reason'>): string {
  if (s.status === 'Completed' || s.status === 'Cancelled' || s.status === 'CancelledByAdmin') return 'none';
  if (s.reason && CATEGORY_REASONS.has(s.reason)) return s.reason;
  const error = s.error ?? '';
  for (const [phrase, category] of CATEGORY_BY_PHRASE) if (error.startsWith(phrase)) return category;
  return 'other';
}

/** A status for the `status` label: one of the job statuses, else `other`. */
export function statusLabel(status: string | undefined): string {
  return status && (TERMINAL_STATUSES as readonly string[]).includes(status) ? status : status === 'Pending' || status === 'Processing' ? status : 'other';
}

export const isTerminalStatus = (s: string | undefined): s is JobStatus => !!s && (TERMINAL_STATUSES as readonly string[]).includes(s);

// ---- Work queues (client-go's workqueue metrics) --------------------------------

/** What a work queue reports (lib/src/work-queue.ts); one per queue, labelled with its name. */
export interface WorkQueueMetrics {
  added(): void;
  depth(n: number): void;
  /** A key waited this long between being added and being taken. */
  waited(seconds: number): void;
  /** A pass over a key took this long. */
  worked(seconds: number): void;
  retried(): void;
}

/**
 * client-go's workqueue metric names (adds, depth, queue and work
 * duration, retries, unfinished work), prefixed, labelled `name`.
 */
const inFlight = new WeakMap<Registry, Map<string, () => Iterable<number>>>();

export function workQueueMetrics(registry: Registry, name: string, inFlightSince: () => Iterable<number>): WorkQueueMetrics {
  const p = `${PREFIX}workqueue_`;
  const adds = shared(registry, `${p}adds_total`, () => new Counter({
    name: `${p}adds_total`, help: 'Keys added to the work queue', labelNames: ['name'] as const, registers: [registry],
  }));
  const depth = shared(registry, `${p}depth`, () => new Gauge({
    name: `${p}depth`, help: 'Keys waiting in the work queue', labelNames: ['name'] as const, registers: [registry],
  }));
  const queued = shared(registry, `${p}queue_duration_seconds`, () => new Histogram({
    name: `${p}queue_duration_seconds`, help: 'How long a key waits in the work queue before it is processed', labelNames: ['name'] as const,
    buckets: [0.001, 0.01, 0.1, 1, 10, 60], registers: [registry],
  }));
  const work = shared(registry, `${p}work_duration_seconds`, () => new Histogram({
    name: `${p}work_duration_seconds`, help: 'How long processing a key (one reconcile pass) takes', labelNames: ['name'] as const,
    buckets: [0.001, 0.01, 0.1, 1, 10, 60], registers: [registry],
  }));
  const retries = shared(registry, `${p}retries_total`, () => new Counter({
    name: `${p}retries_total`, help: 'Keys put back after a failed pass (with backoff)', labelNames: ['name'] as const, registers: [registry],
  }));
  let unfinished = inFlight.get(registry);
  if (!unfinished) {
    const mine = new Map<string, () => Iterable<number>>();
    unfinished = mine;
    inFlight.set(registry, mine);
    new Gauge({
      name: `${p}unfinished_work_seconds`, help: 'Seconds of work in flight not yet done (large values: a stuck pass)', labelNames: ['name'] as const,
      registers: [registry],
      collect() {
        this.reset();
        const now = Date.now();
        for (const [n, since] of mine) {
          let total = 0;
          for (const at of since()) total += now - at;
          this.set({ name: n }, total / 1000);
        }
      },
    });
  }
  unfinished.set(name, inFlightSince);
  const l = { name };
  depth.set(l, 0);
  return {
    added: () => adds.inc(l),
    depth: (n) => depth.set(l, n),
    waited: (s) => queued.observe(l, s),
    worked: (s) => work.observe(l, s),
    retried: () => retries.inc(l),
  };
}
