// The operator process: informers always warm, and the controllers (MediaJob
// and MediaBatch), outbox delivery and the materializer (accepted rows →
// their custom resources) running only while this replica holds the Lease.
// Every replica answers the probes (/healthz, /readyz: probes.ts) and says
// whether it leads (mediajobs_operator_leader) on its metrics listener.
import { hostname } from 'node:os';
import pg from 'pg';
import { BatchSources, batchSourcesOptions } from '@mediajobs/lib/batches/index';
import { stripeClient } from '@mediajobs/lib/billing';
import { KUBE_REQUEST_TIMEOUT_MS } from '@mediajobs/lib/kube-client';
import { createLogger, errFields, type Logger } from '@mediajobs/lib/logger';
import { mediaInfoOptions } from '@mediajobs/lib/media-info/config';
import { startLookupEgress } from '@mediajobs/lib/media-info/egress';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { MediaBatchController } from './batch-controller.js';
import { renewDeadlineSeconds, type OperatorConfig } from './config.js';
import { MediaJobController } from './controller.js';
import type { ManagedStorageAccess } from './job-record.js';
import { EventRecorder, REPORTING_CONTROLLER } from './events.js';
import { makeKube } from './kube.js';
import { LeaderElector } from './leader.js';
import { NamespaceOwners } from './namespace-owners.js';
import { OutboxDispatcher } from './outbox.js';
import { Materializer } from './materializer.js';
import { newRegistry, type Registry } from '@mediajobs/lib/metrics';
import { OperatorMetrics, serveMetrics } from './metrics.js';
import { liveness, readiness, stalledAfterMs, type ProbeState } from './probes.js';
import { reachesBeyond, watchScope } from './watch-scope.js';

export interface OperatorHandle {
  controller: MediaJobController;
  batches: MediaBatchController;
  isLeader(): boolean;
  /** Undefined when this replica is ready (GET /readyz: probes.ts), else what is missing. Local mode's gateway asks it too. */
  readiness(): string | undefined;
  /** Undefined when this replica is live (GET /healthz), else why not. */
  liveness(): string | undefined;
  metrics: OperatorMetrics;
  /** The METRICS_PORT listener's address; unset without one. */
  metricsUrl?: string;
  stop(): Promise<void>;
}

export interface OperatorDeps {
  storage: ManagedStorageAccess;
  log?: Logger;
  pool?: pg.Pool;
  /** Where the metrics go; default a registry of the operator's own. Local mode passes the gateway's. */
  metricsRegistry?: Registry;
}

export async function startOperator(cfg: OperatorConfig, deps: OperatorDeps): Promise<OperatorHandle> {
  const log = deps.log ?? createLogger('operator', cfg.LOG_LEVEL);
  if (!cfg.SECRET_KEYS) throw new Error('SECRET_KEYS is required (webhook addresses are sealed with it)');
  const box = new SecretBox(cfg.SECRET_KEYS, { openUnbound: cfg.SECRET_OPEN_UNBOUND });
  const pool = deps.pool ?? new pg.Pool({ connectionString: cfg.DATABASE_URL, max: cfg.RECONCILE_CONCURRENCY + 4 });
  const ownPool = !deps.pool;
  // An idle client failing (Postgres restarting or stopping first) must not crash the process; the pool replaces it.
  pool.on('error', (err) => log.warn({ err: errFields(err) }, 'idle Postgres connection failed'));
  const metrics = new OperatorMetrics(deps.metricsRegistry ?? newRegistry());
  metrics.trackPool(pool);
  // What the probes read; filled in as the parts below start.
  let leading = false;
  let synced = false;
  let stopping = false;
  let elector: LeaderElector | undefined;
  let notFollowing = (): string[] => [];
  const stalledAfter = stalledAfterMs({ durationSeconds: cfg.LEASE_DURATION_SECONDS, renewSeconds: cfg.LEASE_RENEW_SECONDS }, KUBE_REQUEST_TIMEOUT_MS);
  const probeState = (): ProbeState => ({
    now: Date.now(), stopping, synced, notFollowing: synced ? notFollowing() : [],
    ...(cfg.LEADER_ELECTION && { election: { lastTurn: elector?.lastTurn ?? 0, stalledAfterMs: stalledAfter } }),
  });
  const probes = { live: () => liveness(probeState()), ready: () => readiness(probeState()) };
  metrics.watchLeadership(() => leading);
  // First, so a taken port stops the start before anything runs. Every
  // replica serves its metrics and probes, leading or not, from before its
  // caches sync: a standby's informers and pool are worth watching too.
  const listener = cfg.METRICS_PORT === undefined ? undefined : await serveMetrics(metrics.registry, cfg.METRICS_HOST, cfg.METRICS_PORT, probes).catch(async (err: unknown) => {
    if (ownPool) await pool.end();
    throw err;
  });
  // The playlist expansions of kubectl-applied MediaBatches run yt-dlp as the gateway's do: through an
  // egress proxy that applies the outbound policy as each connection opens (ADR 0011), closed on stop.
  const egress = await startLookupEgress({
    policy: new OutboundPolicy({ allowed: cfg.OUTBOUND_ALLOWED_CIDRS }), logger: log,
    ...(cfg.MEDIA_INFO_PROXY !== undefined && { upstream: cfg.MEDIA_INFO_PROXY }),
  }).catch(async (err: unknown) => {
    if (listener) await new Promise((resolve) => listener.server.close(resolve));
    if (ownPool) await pool.end();
    throw err;
  });
  const sources = new BatchSources(batchSourcesOptions(cfg, { ...mediaInfoOptions(cfg), egress }, new OutboundPolicy({ allowed: cfg.OUTBOUND_ALLOWED_CIDRS })));
  const kube = makeKube(cfg.KUBECONFIG);
  const identity = cfg.POD_NAME ?? `${hostname()}-${process.pid}`;
  const events = new EventRecorder(kube.core, log, { component: REPORTING_CONTROLLER, instance: identity, clusterScopedNamespace: cfg.MEDIAJOBS_NAMESPACE });
  const scope = watchScope(cfg);
  const owners = new NamespaceOwners(cfg.MEDIAJOBS_NAMESPACE, reachesBeyond(scope, cfg.MEDIAJOBS_NAMESPACE) ? {
    core: kube.core,
    settings: { kc: kube.kc, resyncMs: cfg.RESYNC_SECONDS * 1000, watchdogMs: cfg.WATCHDOG_SECONDS * 1000, relistMs: cfg.RELIST_SECONDS * 1000, log, metrics },
  } : undefined);
  const controller = new MediaJobController({ kube, pool, box, storage: deps.storage, log, cfg, events, owners, metrics });
  const batches = new MediaBatchController({ kube, pool, box, log, cfg, events, owners, metrics, sources });
  const stripe = stripeClient(cfg);
  const outbox = new OutboxDispatcher(pool, box, log, {
    timeoutMs: cfg.WEBHOOK_TIMEOUT_MS, attempts: cfg.WEBHOOK_ATTEMPTS, backoffMs: cfg.WEBHOOK_BACKOFF_MS,
    outbound: { allowed: cfg.OUTBOUND_ALLOWED_CIDRS },
    ...(stripe && { billing: { stripe, meterEvent: cfg.STRIPE_METER_EVENT } }),
    metrics,
  });
  const materializer = new Materializer({
    pool, databaseUrl: cfg.DATABASE_URL, custom: kube.custom, log, metrics,
    caches: { hasMediaJob: (ns, name) => controller.hasMediaJob(ns, name), hasMediaBatch: (ns, name) => batches.hasMediaBatch(ns, name) },
    onBatchStarted: (ns, name) => batches.started(ns, name),
    opts: {
      perSecond: cfg.MATERIALIZE_PER_SECOND, page: cfg.MATERIALIZE_PAGE,
      concurrency: cfg.MATERIALIZE_CONCURRENCY, safetySeconds: cfg.MATERIALIZE_SAFETY_SECONDS,
    },
  });

  await Promise.all([owners.start(), controller.startInformers(), batches.startInformers()]);
  notFollowing = () => [...controller.informersNotFollowing(), ...batches.informersNotFollowing(), ...owners.informersNotFollowing()];
  synced = true;
  const lead = async () => {
    leading = true;
    controller.activate();
    batches.activate();
    await outbox.start();
    await materializer.start();
  };
  const unlead = async () => {
    leading = false;
    controller.deactivate();
    batches.deactivate();
    await materializer.stop();
    await outbox.stop();
  };

  if (cfg.LEADER_ELECTION) {
    elector = new LeaderElector(kube.coordination, log, {
      namespace: cfg.MEDIAJOBS_NAMESPACE,
      name: cfg.LEASE_NAME,
      identity,
      leaseDurationSeconds: cfg.LEASE_DURATION_SECONDS,
      renewSeconds: cfg.LEASE_RENEW_SECONDS,
      renewDeadlineSeconds: renewDeadlineSeconds(cfg),
      onStartedLeading: lead,
      onStoppedLeading: unlead,
    });
    elector.start();
  } else {
    await lead();
  }
  log.info({ namespace: cfg.MEDIAJOBS_NAMESPACE, watching: scope.all ? '*' : scope.namespaces, maxRunningJobs: cfg.MAX_RUNNING_JOBS, ...(listener && { metrics: `${listener.url}/metrics` }) }, 'operator started');

  return {
    controller,
    batches,
    isLeader: () => leading,
    readiness: probes.ready,
    liveness: probes.live,
    metrics,
    ...(listener && { metricsUrl: listener.url }),
    async stop() {
      stopping = true;
      if (listener) await new Promise((resolve) => listener.server.close(resolve));
      // Before the lease is released: a successor writes statuses only when something changes again.
      if (leading) await controller.flushStatuses();
      if (elector) await elector.stop();
      else await unlead();
      await Promise.all([controller.stop(), batches.stop()]);
      await Promise.all([owners.stop(), controller.stopInformers(), batches.stopInformers()]);
      await events.flush();
      await egress.close();
      if (ownPool) await pool.end();
    },
  };
}
