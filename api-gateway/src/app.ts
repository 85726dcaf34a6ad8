// The express application, built from injected parts so tests and the
// benchmark run it against real Postgres.
import express from 'express';
import { DEFAULT_CHAT_WEBHOOK_PREFIX } from '@mediajobs/lib/chat/config';
import { BatchSources, DEFAULT_MAX_PLAYLIST_SIZE, DEFAULT_PODCAST_LOOKUP_ENDPOINT } from '@mediajobs/lib/batches/index';
import { materializePoke } from '@mediajobs/lib/db/materialize';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { MediaInfoExtractor } from '@mediajobs/lib/media-info/index';
import { DEFAULT_OUTBOUND_POLICY, networkMatcher, type OutboundPolicy } from '@mediajobs/lib/outbound';
import type { PlatformLookup } from '@mediajobs/lib/platforms/directory';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import type { UploadGrantBroker } from '@mediajobs/lib/storage/upload-grants';
import type pg from 'pg';
import { ApiKeyCache, KeyLookupBudget, MISSING_KEY, cachedKeyLookup, requireApiKey, sharedKeyLookup, type SharedKeyLookup } from './auth.js';
import { migrationsApplied } from './db/migrate.js';
import { HttpError, errorResponder, notFound } from './http-errors.js';
import { requestLogger, type RequestLogLevel } from './request-log.js';
import { securityHeaders } from './security-headers.js';
import { openApiRouter } from './openapi/serve.js';
import { consoleRouter } from './console/serve.js';
import { inProcessBudget, rateLimit, type RateBudget } from './rate-limit.js';
import { MarketplaceUsers } from './marketplace.js';
import { uploadGrantsRouter } from './routes/upload-grants.js';
import { filesRouter } from './routes/files.js';
import { isShortRouter } from './routes/is-short.js';
import { batchesRouter } from './routes/batches.js';
import { webhooksRouter } from './routes/webhooks.js';
import { bulkRouter } from './routes/bulk.js';
import { cancelRouter } from './routes/cancel.js';
import { chatRouter } from './routes/chat.js';
import { jobsRouter } from './routes/jobs.js';
import { usageRouter } from './routes/usage.js';
import type { BillingReader } from '@mediajobs/lib/billing';
import { IdempotencyKeys } from './idempotency.js';
import { metadataRouter } from './routes/metadata.js';
import { userStorageRouter } from './routes/user-storage.js';
import { driveFilesRouter } from './routes/user-storage-drive-files.js';
import { DEFAULT_PROBE_MAX_BYTES, ProbeCache, probeDestination, type ProviderSettings } from './destinations/probe.js';
import type { DestinationVault } from './destinations/vault.js';
import type { GatewayMetrics } from './metrics.js';

export interface AppDeps {
  pool: pg.Pool;
  logger: Logger;
  /** The level of each request's line (REQUEST_LOG_LEVEL); info when absent. */
  requestLogLevel?: RequestLogLevel;
  /** Serve the web console at `/` (config CONSOLE; on unless told otherwise). */
  console?: boolean;
  secretBox: SecretBox;
  /** Namespace of the MediaJobs. */
  namespace: string;
  /** 24 h download URL of a managed-storage key. */
  presign: (key: string) => Promise<string>;
  /** Serve /files/* from this directory (local managed storage); absent with S3. */
  files?: { dir: string; secret: string };
  /** Upload grants for runners on managed S3 (ADR 0012); absent with local managed storage. */
  uploadGrants?: Pick<UploadGrantBroker, 'handle'>;
  /** Defaults to a 10 s cache over the api_keys table. */
  keyCache?: ApiKeyCache;
  /** Key lookups (cache misses) per client address and second; default 50 (AUTH_LOOKUPS_PER_ADDRESS_PER_SECOND). */
  keyLookups?: KeyLookupBudget;
  /** Past a client's budget: the lookup every client shares, one statement at a time; default over `pool`. */
  sharedKeyLookup?: SharedKeyLookup;
  /**
   * TRUSTED_PROXY_CIDRS (parseNetworks' form): a request whose peer is in
   * them is the client its X-Forwarded-For names (req.ip), read from the
   * right while the hop is trusted; default none: the peer is the client.
   */
  trustedProxies?: readonly string[];
  /** Marketplace keys' end users (marketplace.ts); default: header x-marketplace-user, a 10 s cache. */
  marketplaceUsers?: MarketplaceUsers;
  /** True once SIGTERM arrived: /readyz fails and connections are not kept alive. */
  isShuttingDown?: () => boolean;
  /**
   * What else /readyz needs besides Postgres and the migrations: undefined
   * when it holds, else what is missing (the 503's error). Local mode: its
   * operator leads.
   */
  readiness?: () => string | undefined;
  /** Stripe billing (STRIPE_SECRET_KEY): GET /usage's billing fields; absent: none. */
  billing?: BillingReader;
  /** The request rate limit of every authenticated request (rate-limit.ts); default: in process, 1,000 per second. */
  rateLimit?: RateBudget;
  /** Saved and inline storage destinations (routes/user-storage.ts, destinations/). */
  storage?: {
    /** The keyvault source (Kubernetes Secrets); absent: saved destinations are sealed into Postgres (legacy). */
    vault?: DestinationVault;
    /** Budget of one live credential check; default 15 s. */
    probeTimeoutMs?: number;
    /** Bytes one live credential check may read; default 64 KiB (probe.ts DEFAULT_PROBE_MAX_BYTES). */
    probeMaxBytes?: number;
    /** Inline-storage probe cache; default 5 minutes, 10,000 credential sets. */
    probes?: ProbeCache;
    /** GCS/Drive API and token endpoints (private endpoints, emulators); default Google's. */
    providerSettings?: ProviderSettings;
    /** FILE_URL_SECRET: serve /drive-files/* (download URLs of files on saved Drive destinations). */
    driveDownloadSecret?: string;
  };
  /** yt-dlp lookups of POST /metadata and POST /is-short; defaults to yt-dlp on PATH with the spec's bounds. */
  mediaInfo?: MediaInfoExtractor;
  /** Which addresses may be contacted for users (source and /metadata URLs, storage endpoints); default: no allowance. */
  outbound?: OutboundPolicy;
  /** The MediaPlatforms (lib/src/platforms/directory.ts): a disabled platform's new jobs and lookups get 422; absent: none refused. */
  platforms?: PlatformLookup;
  /** Show and playlist expansion of POST /jobs (issue 13); default: the public lookup API, MAX_PLAYLIST_SIZE 500, `mediaInfo`'s settings. */
  batchSources?: BatchSources;
  /** POST /user/chat's CHAT_WEBHOOK_PREFIX; default the chat service's. */
  chatWebhookPrefix?: string;
  /** Prometheus metrics (metrics.ts), counted here and served by their own listener (serveMetrics, METRICS_PORT), never by this app; absent: none kept. */
  metrics?: GatewayMetrics;
}

/**
 * Every path that needs an API key, by prefix (the path and everything under
 * it), with the spec's message for a request without one: authentication
 * runs before routing and body parsing, so an unknown path or method under a
 * prefix is a 401 without a key too. /files, /drive-files (the URL is the
 * credential), /internal/upload-grants (a runner's job-scoped token is the
 * credential, ADR 0012), /healthz and /readyz stay open.
 */
const AUTHENTICATED: readonly (readonly [prefix: string, missingKey: string])[] = [
  ['/jobs', MISSING_KEY],
  ['/batch', MISSING_KEY],
  ['/user', MISSING_KEY],
  ['/metadata', MISSING_KEY],
  ['/is-short', 'Missing API key'],
  ['/usage', MISSING_KEY],
];

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // Who the client is (req.ip, the key lookup budget's address): the peer, unless the peer is a trusted proxy.
  const trusted = networkMatcher(deps.trustedProxies ?? []);
  app.set('trust proxy', (address: string) => trusted(address));
  // API responses are small and never cached; a per-response ETag hash is wasted work.
  app.set('etag', false);
  const log = deps.logger;
  const keyCache = deps.keyCache ?? new ApiKeyCache(cachedKeyLookup(deps.pool));
  const shuttingDown = deps.isShuttingDown ?? (() => false);
  const metrics = deps.metrics;

  app.use(securityHeaders());
  if (metrics) app.use(metrics.middleware(AUTHENTICATED.map(([prefix]) => prefix)));
  app.use(requestLogger(log, deps.requestLogLevel));
  app.use((_req, res, next) => {
    if (shuttingDown()) res.setHeader('Connection', 'close');
    next();
  });

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // Liveness: the process answers. Readiness: it can serve an authenticated
  // request now (the key lookup and every route need Postgres with this
  // build's schema), and whatever else the deployment adds (deps.readiness).
  app.get('/readyz', async (_req, res) => {
    if (shuttingDown()) throw new HttpError(503, 'Shutting down');
    const applied = await migrationsApplied(deps.pool).catch(() => {
      throw new HttpError(503, 'Database unreachable');
    });
    if (!applied) throw new HttpError(503, 'Database migrations not applied');
    const missing = deps.readiness?.();
    if (missing !== undefined) throw new HttpError(503, missing);
    res.json({ status: 'ready' });
  });
  // The API description: open, before the key and rate-limit prefixes (none of which covers it).
  app.use(openApiRouter());
  // The web console (docs/console.md): open as /docs is; its API calls carry the key the person signs in with.
  if (deps.console !== false) app.use(consoleRouter());

  if (deps.files) app.use(filesRouter(deps.files));
  if (deps.uploadGrants) app.use(uploadGrantsRouter({ broker: deps.uploadGrants, logger: log }));

  const limit = rateLimit(deps.rateLimit ?? inProcessBudget(), metrics && ((counter, seconds, verdict) => metrics.rateCheck(counter, seconds, verdict)));
  // Counted against the account before a marketplace request becomes its end user's.
  const endUser = (deps.marketplaceUsers ?? new MarketplaceUsers(deps.pool)).middleware();
  const keyLookups = { budget: deps.keyLookups ?? new KeyLookupBudget(), shared: deps.sharedKeyLookup ?? sharedKeyLookup(deps.pool) };
  for (const [prefix, missingKey] of AUTHENTICATED) {
    app.use(prefix, requireApiKey(keyCache, missingKey, keyLookups), limit, endUser);
  }
  const probeTimeoutMs = deps.storage?.probeTimeoutMs ?? 15_000;
  const probeMaxBytes = deps.storage?.probeMaxBytes ?? DEFAULT_PROBE_MAX_BYTES;
  const providerSettings = deps.storage?.providerSettings ?? {};
  const outbound = deps.outbound ?? DEFAULT_OUTBOUND_POLICY;
  const probes = deps.storage?.probes ?? new ProbeCache((doc) => probeDestination(doc, { timeoutMs: probeTimeoutMs, maxBytes: probeMaxBytes, outbound }, providerSettings));
  const mediaInfoExtractor = deps.mediaInfo ?? new MediaInfoExtractor();
  const batchSources = deps.batchSources ?? new BatchSources({
    lookupEndpoint: DEFAULT_PODCAST_LOOKUP_ENDPOINT, maxEntries: DEFAULT_MAX_PLAYLIST_SIZE, policy: outbound, mediaInfo: mediaInfoExtractor.options,
  });
  const idempotency = new IdempotencyKeys(deps.pool, log);
  const pokeMaterializer = materializePoke(deps.pool, (err) => log.debug({ err: errFields(err) }, 'could not poke the materializer; its safety pass catches up'));
  app.use(bulkRouter({ ...deps, outbound, idempotency, pokeMaterializer }));
  app.use(jobsRouter({
    ...deps, probes, providerSettings, outbound, batchSources, idempotency, pokeMaterializer, ...(deps.storage?.vault && { vault: deps.storage.vault }),
  }));
  app.use(batchesRouter({ pool: deps.pool, logger: log }));
  app.use(webhooksRouter(deps));
  app.use(cancelRouter(deps));
  app.use(usageRouter({ pool: deps.pool, logger: log, ...(deps.billing && { billing: deps.billing }) }));
  app.use(chatRouter({
    pool: deps.pool, logger: log, secretBox: deps.secretBox, outbound, webhookPrefix: deps.chatWebhookPrefix ?? DEFAULT_CHAT_WEBHOOK_PREFIX,
  }));
  app.use(userStorageRouter({
    pool: deps.pool, logger: log, secretBox: deps.secretBox, probeTimeoutMs, probeMaxBytes, providerSettings, outbound,
    ...(deps.storage?.vault && { vault: deps.storage.vault }),
  }));
  if (deps.storage?.driveDownloadSecret) {
    app.use(driveFilesRouter({
      pool: deps.pool, logger: log, secretBox: deps.secretBox, secret: deps.storage.driveDownloadSecret, providerSettings,
      ...(deps.storage.vault && { vault: deps.storage.vault }),
    }));
  }
  const mediaInfo = { logger: log, mediaInfo: mediaInfoExtractor, ...(deps.platforms && { platforms: deps.platforms }) };
  app.use(metadataRouter({ ...mediaInfo, outbound }));
  app.use(isShortRouter(mediaInfo));

  app.use(notFound);
  app.use(errorResponder(log));

  return app;
}
