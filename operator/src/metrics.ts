// The operator's Prometheus metrics (docs/metrics.md): jobs started and
// finished, the runners' phase durations (a runner is short-lived and never
// scraped: it reports them, the operator observes them), admission (Kueue's
// pending workloads and admission wait time are the model), the work queues
// (client-go's workqueue names), the tool versions runners report (an *_info
// gauge and yt-dlp's age), informer relists, outbox deliveries and
// the oldest undelivered event, the Postgres pool, and whether this replica
// leads. Served by the operator's own listener (METRICS_PORT, serveMetrics,
// which also answers the probes /healthz and /readyz), or in local mode by
// the gateway's /metrics, whose registry the operator is then given.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { OUTBOX_CHANNELS, oldestUndelivered, type OutboxChannel } from '@mediajobs/lib/db/outbox';
import {
  Counter, Gauge, Histogram, LONG_SECONDS, PREFIX, SHORT_SECONDS, errorCategory, jobsAccepted, jobsFinished, sendMetrics, statusLabel, trackPool,
  workQueueMetrics, type Registry, type WorkQueueMetrics,
} from '@mediajobs/lib/metrics';
import { RUNNER_PHASES, runnerToolsSchema, type MediaJobStatus, type RunnerPhaseSeconds, type RunnerTools } from '@mediajobs/lib/mediajob/types';
import { isToolVersion, ytdlpAgeDays } from '@mediajobs/lib/mediajob/ytdlp-version';

/**
 * The tools a runner reports in status.tools, the `tool` label's values:
 * the status schema's keys (the operator spawns none of them; test/images.test.ts
 * reads quoted program names as spawned ones).
 */
const RUNNER_TOOLS = Object.keys(runnerToolsSchema.shape) as (keyof RunnerTools)[];
/**
 * How long a tool version stays exported after the last job that ran it:
 * long enough for a canary's version to show beside the fleet's through a
 * quiet day, short enough that a replaced version leaves the metric.
 */
export const TOOL_VERSION_TTL_MS = 24 * 3600_000;
/** Versions kept per tool (the least recently seen go first): status is written by runners, so the labels are bounded here. */
export const TOOL_VERSIONS_KEPT = 8;

/** What admission shows at a scrape (admission.ts). */
export interface AdmissionCounts {
  running: number;
  waiting: number;
}

/** What the platforms show at a scrape (platforms.ts): labels are names and ids, never a URL. */
export interface PlatformSnapshot {
  platforms: { platform: string; breaker: 'Closed' | 'Open' | 'HalfOpen'; running: number; waiting: number; cookies: { id: string; healthy: boolean }[] }[];
  pools: { pool: string; proxies: { id: string; ready: boolean }[] }[];
}

/** Why an informer listed again: its watch version expired (410), its watches kept failing, or the periodic relist. */
export type RelistTrigger = 'expired' | 'error' | 'periodic';

/** Why an informer watched again from its version: the watch ended (a timeout, a drop), failed, or showed no sign of life. */
export type WatchRestartReason = 'ended' | 'failed' | 'stalled';

/** How one outbox attempt ended: delivered, failed and retried later, failed for good, or not sent (its receiver busy). */
export type DeliveryResult = 'delivered' | 'retry' | 'failed' | 'deferred';

/** What the materializer did for an accepted row: created its resource, found it, was told to wait (429), or failed and holds the row. */
export type MaterializeResult = 'created' | 'found' | 'throttled' | 'failed';

export class OperatorMetrics {
  private readonly accepted: Counter<'source'>;
  private readonly started: Counter;
  private readonly deliveredBytes: Counter;
  private readonly finished: Counter<'status' | 'error_category'>;
  private readonly admissionWait: Histogram;
  private readonly runnerPhase: Histogram<'phase'>;
  private readonly relists: Counter<'informer' | 'trigger'>;
  private readonly relistFailures: Counter<'informer'>;
  private readonly watchRestarts: Counter<'informer' | 'reason'>;
  private readonly deliveries: Counter<'channel' | 'result'>;
  private readonly deliveryTime: Histogram<'channel'>;
  private readonly materialized: Counter<'kind' | 'result'>;
  private readonly claimsRefused: Counter;
  private readonly defences: Counter<'platform' | 'kind'>;
  private readonly breakerTransitions: Counter<'platform' | 'to'>;
  private readonly proxyAttempts: Counter<'pool' | 'proxy' | 'outcome'>;
  /** tool → version → when a job last ran it (ms). */
  private readonly toolVersions = new Map<string, Map<string, number>>(RUNNER_TOOLS.map((t) => [t, new Map()]));
  private platforms: (() => PlatformSnapshot) | undefined;
  private admission: (() => AdmissionCounts) | undefined;
  private leading: (() => boolean) | undefined;
  private maxRunning = 0;
  private outboxPool: pg.Pool | undefined;

  constructor(readonly registry: Registry) {
    const registers = [registry];
    this.accepted = jobsAccepted(registry);
    this.finished = jobsFinished(registry);
    this.deliveredBytes = new Counter({
      name: `${PREFIX}delivered_bytes_total`, help: 'Bytes completed jobs stored (the media and its sidecars)', registers,
    });
    this.materialized = new Counter({
      name: `${PREFIX}materialized_total`, help: 'Custom resources of accepted rows the materializer created or found, and its throttled or failed creates',
      labelNames: ['kind', 'result'] as const, registers,
    });
    this.claimsRefused = new Counter({
      name: `${PREFIX}runner_claims_refused_total`, help: 'Runner reports naming a file the job may not have written (status.storedFiles, status.result), refused', registers,
    });
    this.defences = new Counter({
      name: `${PREFIX}platform_defences_total`, help: 'Attempts a MediaPlatform answered with a defence (bot_check, sign_in, rate_limited, captcha, forbidden, expired_url)',
      labelNames: ['platform', 'kind'] as const, registers,
    });
    this.breakerTransitions = new Counter({
      name: `${PREFIX}platform_breaker_transitions_total`, help: 'Circuit breaker transitions of a MediaPlatform, by the state entered',
      labelNames: ['platform', 'to'] as const, registers,
    });
    this.proxyAttempts = new Counter({
      name: `${PREFIX}proxy_attempts_total`, help: 'Attempts through a ProxyPool proxy that ended, by outcome (success: the platform served it; defence)',
      labelNames: ['pool', 'proxy', 'outcome'] as const, registers,
    });
    const platforms = () => this.platforms?.();
    const perPlatform = (name: string, help: string, labelNames: string[], fill: (g: Gauge<string>, snap: PlatformSnapshot) => void) => {
      const g: Gauge<string> = new Gauge({
        name: `${PREFIX}${name}`, help, labelNames, registers,
        collect() {
          const snap = platforms();
          if (!snap) return;
          g.reset();
          fill(g, snap);
        },
      });
    };
    perPlatform('platform_breaker_state', 'A MediaPlatform\'s circuit breaker: 1 for its current state (Closed, Open, HalfOpen), 0 for the others', ['platform', 'state'], (g, snap) => {
      for (const p of snap.platforms) for (const state of ['Closed', 'Open', 'HalfOpen']) g.set({ platform: p.platform, state }, p.breaker === state ? 1 : 0);
    });
    perPlatform('platform_running_jobs', 'Runner Jobs against a MediaPlatform now (its maxRunning counts these)', ['platform'], (g, snap) => {
      for (const p of snap.platforms) g.set({ platform: p.platform }, p.running);
    });
    perPlatform('platform_waiting_jobs', 'Jobs of a MediaPlatform waiting for it (platform_limit, platform_paused)', ['platform'], (g, snap) => {
      for (const p of snap.platforms) g.set({ platform: p.platform }, p.waiting);
    });
    perPlatform('platform_cookie_healthy', 'A MediaPlatform\'s cookie file: 1 healthy, 0 marked unhealthy (it drew a sign-in answer)', ['platform', 'cookie'], (g, snap) => {
      for (const p of snap.platforms) for (const c of p.cookies) g.set({ platform: p.platform, cookie: c.id }, c.healthy ? 1 : 0);
    });
    perPlatform('proxy_ready', 'A ProxyPool proxy: 1 Ready, 0 cooling down after a defence', ['pool', 'proxy'], (g, snap) => {
      for (const p of snap.pools) for (const x of p.proxies) g.set({ pool: p.pool, proxy: x.id }, x.ready ? 1 : 0);
    });
    const versions = (now: number) => {
      for (const seen of this.toolVersions.values()) for (const [v, at] of seen) if (now - at > TOOL_VERSION_TTL_MS) seen.delete(v);
      return this.toolVersions;
    };
    const toolInfo: Gauge<'tool' | 'version'> = new Gauge({
      name: `${PREFIX}runner_tool_info`, help: 'A tool version runner attempts reported (status.tools) in the last 24 hours: 1 per tool and version',
      labelNames: ['tool', 'version'] as const, registers,
      collect() {
        toolInfo.reset();
        for (const [tool, seen] of versions(Date.now())) for (const version of seen.keys()) toolInfo.set({ tool, version }, 1);
      },
    });
    const ytdlpAge: Gauge<'version'> = new Gauge({
      name: `${PREFIX}runner_ytdlp_age_days`, help: 'Days since the release of a yt-dlp version runners reported in the last 24 hours (the runner warns past YTDLP_MAX_AGE_DAYS, 90 by default)',
      labelNames: ['version'] as const, registers,
      collect() {
        ytdlpAge.reset();
        const now = Date.now();
        for (const version of versions(now).get('ytdlp')!.keys()) {
          const age = ytdlpAgeDays(version, now);
          if (age !== undefined) ytdlpAge.set({ version }, age);
        }
      },
    });
    this.started = new Counter({
      name: `${PREFIX}jobs_started_total`, help: 'Jobs whose runner started (Pending to Processing or straight to an end after running)', registers,
    });
    const admission = () => this.admission?.();
    const gauge = (name: string, help: string, value: () => number | undefined) => new Gauge({
      name: `${PREFIX}${name}`, help, registers,
      collect() {
        const v = value();
        if (v !== undefined) this.set(v);
      },
    });
    // Every replica says, leading or not, so max() over them is 1 exactly while one leads (the alert MediajobsNoOperatorLeader).
    gauge('operator_leader', 'Whether this operator replica leads (holds the Lease, or runs without leader election): 1, else 0', () => (this.leading?.() ? 1 : 0));
    gauge('admission_pending_jobs', 'MediaJobs waiting for a runner slot (Kueue: pending_workloads)', () => admission()?.waiting);
    gauge('admission_running_jobs', 'MediaJobs holding a runner slot', () => admission()?.running);
    gauge('admission_max_running_jobs', 'The cap on MediaJobs holding a slot (MAX_RUNNING_JOBS)', () => (this.admission ? this.maxRunning : undefined));
    this.admissionWait = new Histogram({
      name: `${PREFIX}admission_wait_time_seconds`,
      help: 'From a MediaJob\'s creation to its admission (a runner slot given), Kueue\'s admission_wait_time_seconds',
      buckets: [0.1, 0.5, ...LONG_SECONDS], registers,
    });
    this.runnerPhase = new Histogram({
      name: `${PREFIX}runner_phase_seconds`,
      help: 'Seconds a runner attempt spent in each phase (download, mux, upload), from its final report; failed attempts included',
      // Sub-second buckets too: a stream-copy mux or a small upload often takes less than a second.
      labelNames: ['phase'] as const, buckets: [0.1, 0.5, ...LONG_SECONDS], registers,
    });
    this.relists = new Counter({
      name: `${PREFIX}informer_relists_total`, help: 'Informers started over with a fresh LIST, by why', labelNames: ['informer', 'trigger'] as const, registers,
    });
    this.relistFailures = new Counter({
      name: `${PREFIX}informer_relist_failures_total`, help: 'Relists whose LIST failed (the cache is kept, and the relist tried again)',
      labelNames: ['informer'] as const, registers,
    });
    this.watchRestarts = new Counter({
      name: `${PREFIX}informer_watch_restarts_total`,
      help: 'Watches an informer started again from its last resourceVersion (no LIST), by why the previous one ended',
      labelNames: ['informer', 'reason'] as const, registers,
    });
    this.deliveries = new Counter({
      name: `${PREFIX}outbox_deliveries_total`, help: 'Outbox delivery attempts (webhooks, chat notifications, usage reports) by result',
      labelNames: ['channel', 'result'] as const, registers,
    });
    this.deliveryTime = new Histogram({
      name: `${PREFIX}outbox_delivery_duration_seconds`, help: 'Time of one delivery attempt (the POST, or the Stripe call)',
      labelNames: ['channel'] as const, buckets: SHORT_SECONDS, registers,
    });
    const oldest = new Gauge({
      name: `${PREFIX}outbox_oldest_undelivered_age_seconds`,
      help: 'Age of the oldest outbox event neither delivered nor given up, by channel (0: none waiting)', labelNames: ['channel'] as const, registers,
      collect: async () => {
        if (!this.outboxPool) return;
        // One cheap query per scrape; a database that cannot answer leaves the gauge out rather than failing the scrape.
        const ages = await oldestUndelivered(this.outboxPool).catch(() => undefined);
        oldest.reset();
        if (!ages) return;
        for (const channel of OUTBOX_CHANNELS) oldest.set({ channel }, ages.get(channel) ?? 0);
      },
    });
  }

  /** Read the platforms' and pools' state at each scrape. */
  watchPlatforms(snapshot: () => PlatformSnapshot): void {
    this.platforms = snapshot;
  }

  platformDefence(platform: string, kind: string): void {
    this.defences.inc({ platform, kind });
  }

  breakerTransition(platform: string, to: string): void {
    this.breakerTransitions.inc({ platform, to });
  }

  proxyAttempt(pool: string, proxy: string, outcome: 'success' | 'defence'): void {
    this.proxyAttempts.inc({ pool, proxy, outcome });
  }

  /** Count what admission holds at each scrape. */
  watchAdmission(counts: () => AdmissionCounts, maxRunning: number): void {
    this.admission = counts;
    this.maxRunning = maxRunning;
  }

  /** Whether this replica leads, read at each scrape (mediajobs_operator_leader; 0 until this is called). */
  watchLeadership(isLeader: () => boolean): void {
    this.leading = isLeader;
  }

  /** Read the outbox's oldest undelivered event at each scrape, and the pool's usage. */
  trackPool(pool: pg.Pool): void {
    this.outboxPool = pool;
    trackPool(this.registry, 'operator', pool);
  }

  workQueue(name: string, inFlightSince: () => Iterable<number>): WorkQueueMetrics {
    return workQueueMetrics(this.registry, name, inFlightSince);
  }

  jobAccepted(): void {
    this.accepted.inc({ source: 'kubectl' });
  }

  /** The row's status moved from `previous` to `s` (lib/src/db/jobs.ts mirrorStatus, once per transition). */
  jobMoved(previous: string, s: MediaJobStatus): void {
    // Once per job: a retried job goes back to Pending between attempts (docs/adr/0018).
    if (previous === 'Pending' && s.status !== 'Pending' && s.startTime && (s.attempt ?? 1) === 1) this.started.inc();
    const ended = statusLabel(s.status);
    if (['Pending', 'Processing', 'other'].includes(ended)) return;
    this.finished.inc({ status: ended, error_category: errorCategory(s) });
    const bytes = s.status === 'Completed' ? s.result?.uploadedBytes ?? s.result?.fileSize ?? 0 : 0;
    if (bytes > 0) this.deliveredBytes.inc(bytes);
  }

  /**
   * The tool versions a job's runner reported (status.tools), seen when its
   * job finished or, unfinished, now: a finished job still in the cache
   * keeps a version only as long as a recent one would.
   */
  runnerTools(s: MediaJobStatus | undefined, now = Date.now()): void {
    if (!s?.tools) return;
    const at = Math.min(now, s.finishTime ? Date.parse(s.finishTime) || now : now);
    for (const tool of RUNNER_TOOLS) {
      const version = s.tools[tool];
      if (!isToolVersion(version)) continue;
      const seen = this.toolVersions.get(tool)!;
      seen.set(version, Math.max(at, seen.get(version) ?? 0));
      if (seen.size > TOOL_VERSIONS_KEPT) seen.delete([...seen].reduce((a, b) => (b[1] < a[1] ? b : a))[0]);
    }
  }

  /** A runner's report named a file its job may not have written: refused (stored-files.ts refusedClaims). */
  runnerClaimRefused(): void {
    this.claimsRefused.inc();
  }

  /** Rows this operator cancelled (spec.cancel, a delete), once each. */
  jobCancelled(status: 'Cancelled' | 'CancelledByAdmin'): void {
    this.finished.inc({ status, error_category: 'none' });
  }

  admitted(createdAt: number): void {
    this.admissionWait.observe(Math.max(0, Date.now() - createdAt) / 1000);
  }

  /**
   * A runner attempt ended and reported the seconds of its phases (the
   * controller calls this once per attempt, when it records the attempt in
   * status.attempts): each phase it went through is one observation.
   */
  runnerPhases(seconds: RunnerPhaseSeconds): void {
    for (const phase of RUNNER_PHASES) {
      const s = seconds[phase];
      if (s !== undefined) this.runnerPhase.observe({ phase }, s);
    }
  }

  relisted(informer: string, trigger: RelistTrigger): void {
    this.relists.inc({ informer, trigger });
  }

  relistFailed(informer: string): void {
    this.relistFailures.inc({ informer });
  }

  watchRestarted(informer: string, reason: WatchRestartReason): void {
    this.watchRestarts.inc({ informer, reason });
  }

  materializedOne(kind: 'MediaJob' | 'MediaBatch', result: MaterializeResult): void {
    this.materialized.inc({ kind, result });
  }

  delivered(channel: OutboxChannel, result: DeliveryResult, seconds?: number): void {
    this.deliveries.inc({ channel, result });
    if (seconds !== undefined) this.deliveryTime.observe({ channel }, seconds);
  }
}

/** The probes the listener answers: undefined when the check passes, else what fails (probes.ts). */
export interface Probes {
  live(): string | undefined;
  ready(): string | undefined;
}

/**
 * The operator's own listener (METRICS_PORT): GET /metrics, and the probes
 * GET /healthz (liveness) and GET /readyz (readiness), 200 or 503 with
 * `{error}` saying what fails, as the gateway answers its own. Resolves once
 * it listens.
 */
export async function serveMetrics(registry: Registry, host: string, port: number, probes?: Probes): Promise<{ server: Server; url: string }> {
  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' }).end(JSON.stringify(body));
  };
  const probe = (res: ServerResponse, failing: string | undefined, ok: string) => {
    if (failing === undefined) json(res, 200, { status: ok });
    else json(res, 503, { error: failing });
  };
  const server = createServer((req, res) => {
    const path = req.url?.split('?')[0];
    if (req.method === 'GET' && path === '/metrics') {
      sendMetrics(registry, res).catch(() => {
        if (!res.headersSent) res.writeHead(500);
        res.end();
      });
      return;
    }
    if (req.method === 'GET' && probes && path === '/healthz') return probe(res, probes.live(), 'ok');
    if (req.method === 'GET' && probes && path === '/readyz') return probe(res, probes.ready(), 'ready');
    json(res, 404, { error: 'Not found' });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return { server, url: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${bound}` };
}
