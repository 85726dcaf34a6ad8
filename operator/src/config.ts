// Operator settings, read once at start through lib's config loader.
import { z } from 'zod';
import { batchSourcesSchema } from '@mediajobs/lib/batches/config';
import {
  commonSchema, ConfigError, envBoolean, envInt, envJson, loadConfig, managedStorageSchema, outboundSchema, storageEndpointsSchema,
  withOutboundAllowance,
} from '@mediajobs/lib/config';
import { mediaInfoSchema } from '@mediajobs/lib/media-info/config';
import { billingSchema } from '@mediajobs/lib/billing';
import { destinationsNamespaceSchema } from '@mediajobs/lib/saved-destinations';
import { PROXY_OPTION_REFUSED, namesProxyOption } from '@mediajobs/lib/platforms/types';
import type { RetrySettings } from './retry-policy.js';

// A namespace name (RFC 1123 label).
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

// A Kubernetes resource quantity: 500m, 2, 1.5, 512Mi, 2Gi, 1G.
const quantity = z.string().regex(/^\d+(\.\d+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/, 'must be a Kubernetes quantity such as 500m, 2 or 512Mi');
const resourceList = z.strictObject({ 'cpu': quantity.optional(), 'memory': quantity.optional(), 'ephemeral-storage': quantity.optional() });

/**
 * The runner container's requests and limits. The CPU limit is also the
 * runner's thread budget: ffmpeg's decoder and encoder threads follow the
 * cgroup quota (runner-image child.ts cpuBudget), and without one they
 * follow the node's cores (48 libx264 threads, 1.3 GB, on a 32-core node).
 * Memory, measured with 2 CPUs (runner bench and by hand): a copy job about
 * 160 MB whatever its length; a 1080p transcode 340 MB (libx264's frames);
 * 4K transcodes 0.9 GB (libx264), 1.1 GB (VP9), 1.4 GB (x265). The limit
 * leaves room for the last; the request covers copy jobs, the common case.
 */
export const DEFAULT_RUNNER_RESOURCES = {
  requests: { 'cpu': '1', 'memory': '256Mi', 'ephemeral-storage': '1Gi' },
  // ephemeral-storage: the work volume (/tmp) holds the media's working copy; the limit also sizes that volume (job-builder.ts).
  limits: { 'cpu': '2', 'memory': '2Gi', 'ephemeral-storage': '20Gi' },
};

// storageEndpointsSchema: the operator signs GCS URLs (they name the API
// host) and forwards the same settings to runner pods (JobDestinations.runnerEnv).
// batchSourcesSchema, mediaInfoSchema and outboundSchema: a MediaBatch applied
// with kubectl is expanded by the operator (batch-record.ts) with the same
// lookup endpoint, size limit, yt-dlp settings and address policy as the gateway's.
export const operatorSchema = commonSchema.merge(managedStorageSchema).merge(storageEndpointsSchema)
  .merge(batchSourcesSchema).merge(mediaInfoSchema).merge(outboundSchema).merge(billingSchema).merge(destinationsNamespaceSchema).extend({
  DATABASE_URL: z.string().min(1),
  /** kubeconfig file; unset means in-cluster (or ~/.kube/config). */
  KUBECONFIG: z.string().optional(),
  MEDIAJOBS_NAMESPACE: z.string().default('default'),
  /**
   * Namespaces whose MediaJobs and MediaBatches the operator runs
   * (watch-scope.ts, docs/gitops.md): unset, MEDIAJOBS_NAMESPACE only; `*`,
   * every namespace; or a comma-separated list, to which MEDIAJOBS_NAMESPACE
   * (where the gateway creates its jobs) is always added. A namespace other
   * than MEDIAJOBS_NAMESPACE runs manifests only for the API key an admin
   * bound it to (namespace-owners.ts).
   */
  WATCH_NAMESPACES: z.string().trim().optional().refine(
    (v) => v === undefined || v === '' || v === '*' || v.split(',').every((n) => DNS_LABEL.test(n.trim())),
    'must be * or a comma-separated list of namespace names',
  ),
  RUNNER_IMAGE: z.string().default('mediajobs/runner:dev'),
  /** One shared ServiceAccount for every runner pod; unset (the default), each runner gets its own, allowed only its MediaJob's status (docs/adr/0021). */
  RUNNER_SERVICE_ACCOUNT: z.string().optional(),
  /** Jobs running at once across the cluster; the rest wait as Pending. */
  MAX_RUNNING_JOBS: envInt(1).default(10),
  /**
   * Jobs one API key, and all the keys of one organization together, may
   * run at once (a key without organization counts as its own); the rest of
   * theirs wait Pending while other keys' jobs are let in. 0: no cap of its
   * own, only MAX_RUNNING_JOBS. Off by default: no number suits both a
   * single-tenant install (one key should use every slot) and a shared one;
   * slots go round-robin across keys either way (admission.ts).
   */
  MAX_RUNNING_PER_KEY: envInt(0).default(0),
  MAX_RUNNING_PER_ORG: envInt(0).default(0),
  /** A waiting MediaJob looks again for a free slot this often; a safety net, since a finishing job wakes the next at once. */
  ADMISSION_RECHECK_SECONDS: envInt(1).default(3),
  /** MediaJobs reconciled at once. */
  RECONCILE_CONCURRENCY: envInt(1, 256).default(8),
  /** batch/v1 Job settings of the runner Job. */
  JOB_BACKOFF_LIMIT: envInt(0, 10).default(0),
  JOB_ACTIVE_DEADLINE_SECONDS: envInt(60).default(6 * 3600),
  JOB_TTL_SECONDS_AFTER_FINISHED: envInt(0).default(3600),
  /**
   * The retry policy (operator/src/retry-policy.ts, docs/adr/0018): attempts
   * in all, the first included (1: never retry); the first wait before
   * another attempt after a technical failure another attempt can fix, and
   * after bot detection or rate limiting by the platform; each doubles with
   * every attempt, up to RETRY_MAX_BACKOFF_SECONDS.
   */
  RETRY_MAX_ATTEMPTS: envInt(1, 10).default(3),
  RETRY_BACKOFF_SECONDS: envInt(0).default(30),
  RETRY_PLATFORM_BACKOFF_SECONDS: envInt(0).default(900),
  RETRY_MAX_BACKOFF_SECONDS: envInt(0).default(3600),
  /** Finished MediaJobs are deleted from the cluster after this; Postgres keeps their record. */
  FINISHED_MEDIAJOB_TTL_SECONDS: envInt(0).default(24 * 3600),
  /** Full resync of every MediaJob, and the informer watchdog. */
  RESYNC_SECONDS: envInt(1).default(300),
  WATCHDOG_SECONDS: envInt(1).default(600),
  /** A fresh LIST of MediaJobs, runner Jobs and pods this often, correcting any change a watch lost. */
  RELIST_SECONDS: envInt(1).default(1800),
  LEADER_ELECTION: envBoolean.default(true),
  LEASE_NAME: z.string().default('mediajobs-operator'),
  LEASE_DURATION_SECONDS: envInt(1).default(15),
  LEASE_RENEW_SECONDS: envInt(1).default(5),
  /** A leader that could not renew for this long stops leading; below LEASE_DURATION_SECONDS (default: two thirds of it, as client-go's 10 of 15). */
  LEASE_RENEW_DEADLINE_SECONDS: envInt(1).optional(),
  POD_NAME: z.string().optional(),
  /** Webhook delivery: per-attempt timeout, attempts, first retry delay (doubling). */
  WEBHOOK_TIMEOUT_MS: envInt(1).default(10_000),
  WEBHOOK_ATTEMPTS: envInt(1, 10).default(3),
  WEBHOOK_BACKOFF_MS: envInt(1).default(2_000),
  /**
   * Episode MediaJobs the batch controller creates per second, across all
   * batches (a token bucket): at the default a 500-episode show has all its
   * MediaJobs in about ten seconds, without a burst of 500 creations.
   */
  BATCH_CREATE_PER_SECOND: envInt(1, 10_000).default(50),
  /** Most episode MediaJobs created in one pass over a batch (and the bucket's size). */
  BATCH_CREATE_PAGE: envInt(1, 1000).default(100),
  /** How often a paused or processing MediaBatch's status is brought up to its batch row (counts, status). */
  BATCH_STATUS_SECONDS: envInt(1).default(2),
  /**
   * The materializer (docs/adr/0017): MediaJobs and MediaBatches of accepted
   * rows created per second at most (a token bucket of MATERIALIZE_PAGE), so
   * a burst of POSTs never becomes a burst against the API server.
   */
  MATERIALIZE_PER_SECOND: envInt(1, 100_000).default(200),
  /** Rows read per pass, and the bucket's size. */
  MATERIALIZE_PAGE: envInt(1, 1000).default(100),
  /** Creations in flight at once. */
  MATERIALIZE_CONCURRENCY: envInt(1, 256).default(16),
  /** A pass without a notification (one lost with its connection), this often. */
  MATERIALIZE_SAFETY_SECONDS: envInt(1).default(10),
  /**
   * The gateway's address as runner pods reach it, for upload grants
   * (managed storage on S3: runners upload through the gateway's
   * /internal/upload-grants and hold no bucket credentials; docs/adr/0012).
   * Default PUBLIC_BASE_URL; in a cluster, the gateway's Service
   * (http://<release>-gateway.<namespace>.svc), so runner traffic stays inside.
   */
  UPLOAD_GRANT_URL: z.string().refine((v) => {
    if (!URL.canParse(v)) return false;
    const u = new URL(v);
    return (u.protocol === 'https:' || u.protocol === 'http:') && !u.username && !u.password;
  }, 'must be an http(s) URL without credentials').optional(),
  /** Extra env for runner pods, JSON object of strings (e.g. proxy settings). */
  RUNNER_ENV: envJson(z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name'), z.string())).optional(),
  /**
   * The operator's Prometheus listener (GET /metrics, docs/metrics.md) on
   * METRICS_HOST; unset: none (local mode serves the operator's metrics at
   * the gateway's /metrics). The chart sets 9090.
   */
  METRICS_PORT: envInt(0, 65535).optional(),
  METRICS_HOST: z.string().default('0.0.0.0'),
  /** The runner container's resources, JSON `{"requests": {...}, "limits": {...}}` (cpu, memory, ephemeral-storage). */
  RUNNER_RESOURCES: envJson(z.strictObject({ requests: resourceList.optional(), limits: resourceList.optional() })).default(DEFAULT_RUNNER_RESOURCES),
});

export type OperatorConfig = z.infer<typeof operatorSchema>;

export function loadOperatorConfig(env: NodeJS.ProcessEnv = process.env): OperatorConfig {
  const cfg = withOutboundAllowance(loadConfig(operatorSchema, env));
  if (cfg.LEASE_RENEW_DEADLINE_SECONDS !== undefined && cfg.LEASE_RENEW_DEADLINE_SECONDS >= cfg.LEASE_DURATION_SECONDS) {
    throw new ConfigError('invalid configuration:\n  LEASE_RENEW_DEADLINE_SECONDS: must be less than LEASE_DURATION_SECONDS');
  }
  // The runner's egress proxy is yt-dlp's --proxy (ADR 0014): one given to every runner would be refused there, and a
  // proxy for a platform is a ProxyPool's (docs/adr/0027). Said here, at the operator's start, rather than by every job.
  if (namesProxyOption((cfg.RUNNER_ENV?.YTDLP_ARGS ?? '').split(/\s+/))) {
    throw new ConfigError(`invalid configuration:\n  RUNNER_ENV: YTDLP_ARGS: ${PROXY_OPTION_REFUSED}`);
  }
  if (cfg.RETRY_MAX_BACKOFF_SECONDS < Math.max(cfg.RETRY_BACKOFF_SECONDS, cfg.RETRY_PLATFORM_BACKOFF_SECONDS)) {
    throw new ConfigError('invalid configuration:\n  RETRY_MAX_BACKOFF_SECONDS: must be at least RETRY_BACKOFF_SECONDS and RETRY_PLATFORM_BACKOFF_SECONDS');
  }
  return cfg;
}

/** The retry policy's settings (retry-policy.ts) from the configuration. */
export function retrySettings(cfg: Pick<OperatorConfig,
  'RETRY_MAX_ATTEMPTS' | 'RETRY_BACKOFF_SECONDS' | 'RETRY_PLATFORM_BACKOFF_SECONDS' | 'RETRY_MAX_BACKOFF_SECONDS'>): RetrySettings {
  return {
    maxAttempts: cfg.RETRY_MAX_ATTEMPTS,
    backoffSeconds: cfg.RETRY_BACKOFF_SECONDS,
    platformBackoffSeconds: cfg.RETRY_PLATFORM_BACKOFF_SECONDS,
    maxBackoffSeconds: cfg.RETRY_MAX_BACKOFF_SECONDS,
  };
}

/** The renew deadline in force: LEASE_RENEW_DEADLINE_SECONDS, else two thirds of the lease duration. */
export function renewDeadlineSeconds(cfg: Pick<OperatorConfig, 'LEASE_DURATION_SECONDS' | 'LEASE_RENEW_DEADLINE_SECONDS'>): number {
  return cfg.LEASE_RENEW_DEADLINE_SECONDS ?? (cfg.LEASE_DURATION_SECONDS * 2) / 3;
}
