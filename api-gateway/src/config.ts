// Gateway settings, read once at start through lib's config loader.
import { z } from 'zod';
import {
  commonSchema, envBoolean, envInt, loadConfig, managedStorageSchema, outboundSchema, storageEndpointsSchema, withOutboundAllowance,
} from '@mediajobs/lib/config';
import { batchSourcesSchema } from '@mediajobs/lib/batches/config';
import { chatSchema } from '@mediajobs/lib/chat/config';
import { mediaInfoSchema } from '@mediajobs/lib/media-info/config';
import { destinationsNamespaceSchema } from '@mediajobs/lib/saved-destinations';
import { DEFAULT_MARKETPLACE_USER_HEADER } from './marketplace.js';
import { billingSchema } from '@mediajobs/lib/billing';
import { parseNetworks } from '@mediajobs/lib/outbound';
import { DEFAULT_RATE_LIMIT_PER_SECOND } from './rate-limit.js';
import { DEFAULT_KEY_LOOKUPS_PER_ADDRESS } from './auth.js';
import { DEFAULT_PROBE_MAX_BYTES } from './destinations/probe.js';
import { REQUEST_LOG_LEVELS } from './request-log.js';

/** The HTTP server's bounds on slow clients and idle connections (server.ts httpServer). */
export const DEFAULT_SERVER_TIMEOUTS = { headersTimeoutMs: 20_000, requestTimeoutMs: 30_000, keepAliveTimeoutMs: 65_000 } as const;

/** redis:// or rediss:// (TLS), with credentials and a database number if needed; the message never echoes it. */
const redisUrl = z.string().refine((v) => URL.canParse(v) && ['redis:', 'rediss:'].includes(new URL(v).protocol), 'must be a redis:// or rediss:// URL');

export const gatewaySchema = commonSchema.merge(managedStorageSchema).merge(storageEndpointsSchema).merge(mediaInfoSchema).merge(outboundSchema)
  .merge(batchSourcesSchema).merge(chatSchema).merge(billingSchema).merge(destinationsNamespaceSchema).extend({
  DATABASE_URL: z.string().min(1),
  PORT: envInt(0, 65535).default(8080),
  HOST: z.string().default('0.0.0.0'),
  /** Namespace MediaJobs are created in. */
  MEDIAJOBS_NAMESPACE: z.string().min(1).default('default'),
  /** kubeconfig file; unset means in-cluster (or ~/.kube/config). */
  KUBECONFIG: z.string().optional(),
  /**
   * Required here (optional in commonSchema): webhook URLs are stored sealed,
   * and accepting jobs whose webhooks could never be opened again is worse
   * than refusing to start.
   */
  SECRET_KEYS: z.string().min(1),
  /** The level of each request's log line (request-log.ts): info, or debug (local mode's default); 5xx answers are errors whatever it is. */
  REQUEST_LOG_LEVEL: z.enum(REQUEST_LOG_LEVELS).default('info'),
  /**
   * The web console at `/` (docs/console.md, ADR 0031): `off` for a deployment that keeps keys out of
   * browsers altogether, as the contract's Authentication rule 6 reads; `/` then answers 404 as before.
   */
  CONSOLE: z.enum(['on', 'off']).default('on'),
  /** Postgres connections. POST /jobs holds one only for its single INSERT statement. */
  PG_POOL_MAX: envInt(1, 500).default(20),
  /** How long a looked-up API key is trusted in memory: a revoked key keeps working this long at most. */
  AUTH_CACHE_TTL_MS: envInt(0, 300_000).default(10_000),
  AUTH_CACHE_MAX_ENTRIES: envInt(1).default(10_000),
  /**
   * Keys not in the cache looked up on their own per client address and
   * second; more wait for the lookup all clients share, and get 429 if they
   * turn out unknown (auth.ts KeyLookupBudget, SharedKeyLookup).
   */
  AUTH_LOOKUPS_PER_ADDRESS_PER_SECOND: envInt(1).default(DEFAULT_KEY_LOOKUPS_PER_ADDRESS),
  /**
   * The proxies in front of the gateway (an ingress controller's pods, a
   * load balancer's addresses), comma-separated CIDRs: a request from one is
   * the client its X-Forwarded-For names, read from the right while each hop
   * is in here (express's `trust proxy`). Empty: every request is its
   * connection's peer, and X-Forwarded-For is ignored. A network of every
   * address is refused: any client could then say who it is.
   */
  TRUSTED_PROXY_CIDRS: z.string().default('').transform((text, ctx) => {
    const parsed = parseNetworks(text);
    if (!parsed.ok) {
      ctx.addIssue({ code: 'custom', message: parsed.error });
      return z.NEVER;
    }
    const everyone = parsed.networks.findIndex((n) => n.endsWith('/0'));
    if (everyone !== -1) {
      ctx.addIssue({ code: 'custom', message: `entry ${everyone + 1} trusts every address, so any client could name itself; list the proxies' own networks` });
      return z.NEVER;
    }
    return parsed.networks;
  }),
  /**
   * Slow clients (slowloris): a request's line and headers must arrive within
   * HTTP_HEADERS_TIMEOUT_MS and the whole request, body included, within
   * HTTP_REQUEST_TIMEOUT_MS, else 408 and the connection is closed. Neither
   * bounds the time an answer takes (a probe, a playlist expansion).
   */
  HTTP_HEADERS_TIMEOUT_MS: envInt(100, 600_000).default(DEFAULT_SERVER_TIMEOUTS.headersTimeoutMs),
  HTTP_REQUEST_TIMEOUT_MS: envInt(100, 600_000).default(DEFAULT_SERVER_TIMEOUTS.requestTimeoutMs),
  /** Idle keep-alive connections close after this; above a load balancer's idle timeout (60 s on common ones). */
  HTTP_KEEP_ALIVE_TIMEOUT_MS: envInt(1_000, 600_000).default(DEFAULT_SERVER_TIMEOUTS.keepAliveTimeoutMs),
  /** On SIGTERM, how long in-flight requests get before connections are cut. */
  SHUTDOWN_TIMEOUT_MS: envInt(0).default(25_000),
  /** Timeout of the Secret vault's Kubernetes calls (STORAGE_VAULT=kubernetes). */
  KUBE_TIMEOUT_MS: envInt(100).default(10_000),
  /**
   * How often the gateway lists the MediaPlatforms (docs/adr/0027), whose
   * `disabled` switch refuses new jobs with 422; 0: never (no platform is
   * refused here; the operator still fails a disabled platform's jobs).
   */
  PLATFORMS_REFRESH_SECONDS: envInt(0).default(5),
  /**
   * Where saved storage credentials go: `kubernetes` Secrets in
   * DESTINATIONS_NAMESPACE (the spec's keyvault source), or `disabled`: sealed
   * into Postgres with SECRET_KEYS (the legacy source).
   */
  STORAGE_VAULT: z.enum(['kubernetes', 'disabled']).default('kubernetes'),
  /** Budget of one live storage credential check (configuration endpoints, inline storage). */
  STORAGE_PROBE_TIMEOUT_MS: envInt(100, 120_000).default(15_000),
  /**
   * Bytes one live credential check may read from the backend, every
   * request and retry together, headers included; past it, or past
   * STORAGE_PROBE_TIMEOUT_MS, its connections are cut and the answer is
   * `unreachable` (destinations/probe.ts, lib/src/read-budget.ts).
   */
  STORAGE_PROBE_MAX_BYTES: envInt(4 * 1024, 16 * 1024 * 1024).default(DEFAULT_PROBE_MAX_BYTES),
  /**
   * The header naming a marketplace key's end user (ADR 0015); an HTTP
   * header name, matched case-insensitively.
   */
  MARKETPLACE_USER_HEADER: z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/, 'must be an HTTP header name')
    .refine((v) => v.toLowerCase() !== 'x-api-key', 'must not be x-api-key')
    .transform((v) => v.toLowerCase()).default(DEFAULT_MARKETPLACE_USER_HEADER),
  /** Requests per second per organization (or per legacy key without one), every endpoint; more get 429. */
  RATE_LIMIT_PER_SECOND: envInt(1).default(DEFAULT_RATE_LIMIT_PER_SECOND),
  /**
   * The rate counter every replica shares. Unset: counted in this process,
   * right for one gateway (local mode) only.
   */
  REDIS_URL: redisUrl.optional(),
  /**
   * The gateway's Prometheus listener: GET /metrics (docs/metrics.md) on
   * METRICS_HOST:METRICS_PORT, never on the API's port. Unset: no listener
   * and no metrics kept. The chart sets 9090; 0 picks a free port (tests).
   */
  METRICS_PORT: envInt(0, 65535).optional(),
  METRICS_HOST: z.string().min(1).default('0.0.0.0'),
  /** false: no metrics kept and no listener, whatever METRICS_PORT says (the metrics benchmark's "off"). */
  METRICS_ENABLED: envBoolean.default(true),
});

export type GatewayConfig = z.infer<typeof gatewaySchema>;

export function loadGatewayConfig(env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  return withOutboundAllowance(loadConfig(gatewaySchema, env));
}
