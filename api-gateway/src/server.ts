// Wiring for a running gateway: configuration → pool, migrations, managed
// storage → app → HTTP server, with graceful shutdown. The gateway creates
// no custom resources: an accepted row is the operator's to materialize
// (docs/adr/0017); its Kubernetes uses are the Secret vault of saved
// destinations (STORAGE_VAULT=kubernetes) and the MediaPlatforms and
// ProxyPools it reads, with their Secrets, for its own lookups (ADR 0027).
import { createServer, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { storageEndpoints } from '@mediajobs/lib/config';
import { destinationsNamespace } from '@mediajobs/lib/saved-destinations';
import { BatchSources, batchSourcesOptions } from '@mediajobs/lib/batches/index';
import { createLogger, type Logger } from '@mediajobs/lib/logger';
import { MediaInfoExtractor, mediaInfoOptions, startLookupEgress, type RunningLookupEgress } from '@mediajobs/lib/media-info/index';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { grantJobState } from '@mediajobs/lib/db/jobs';
import { PgGrantLedger } from '@mediajobs/lib/storage/grant-ledger';
import { createManagedStorage, createUploadGrantBroker } from '@mediajobs/lib/storage/index';
import { DOWNLOAD_URL_TTL_SECONDS } from '@mediajobs/lib/storage/types';
import type pg from 'pg';
import { createApp } from './app.js';
import { SECURITY_HEADERS, SECURITY_HEADER_LINES } from './security-headers.js';
import { BillingReader, stripeClient } from '@mediajobs/lib/billing';
import { ApiKeyCache, KeyLookupBudget, cachedKeyLookup } from './auth.js';
import type { GatewayConfig } from './config.js';
import { migrate } from './db/migrate.js';
import { createPool } from './db/pool.js';
import { budgetFromConfig, type RateBudget } from './rate-limit.js';
import { MarketplaceUsers } from './marketplace.js';
import { KubeSecretVault } from './destinations/vault.js';
import { PlatformDirectory } from '@mediajobs/lib/platforms/directory';
import { PlatformLookups, kubeSecretReader } from './platform-lookups.js';
import { GatewayMetrics, serveMetrics } from './metrics.js';
import { newRegistry, type Registry } from '@mediajobs/lib/metrics';

export interface RunningGateway {
  server: Server;
  pool: pg.Pool;
  url: string;
  /** The metrics listener's base URL (GET <metricsUrl>/metrics); unset without METRICS_PORT. */
  metricsUrl?: string;
  /** Stop accepting, let in-flight requests finish (up to the timeout), close the pool. */
  close(): Promise<void>;
}

export interface StartOptions {
  logger?: Logger;
  /**
   * Where the metrics go (with METRICS_PORT); default a registry of the
   * gateway's own. Local mode passes the operator's too, so its one metrics
   * listener serves both.
   */
  metricsRegistry?: Registry;
  /** What else /readyz needs (AppDeps.readiness); local mode: its operator leads. */
  readiness?: () => string | undefined;
}

export async function startGateway(config: GatewayConfig, opts: StartOptions = {}): Promise<RunningGateway> {
  const logger = opts.logger ?? createLogger('api-gateway', config.LOG_LEVEL);
  const secretBox = new SecretBox(config.SECRET_KEYS, { openUnbound: config.SECRET_OPEN_UNBOUND });
  const storage = await createManagedStorage(config);
  const pool = createPool(config.DATABASE_URL, config.PG_POOL_MAX, logger);

  try {
    const applied = await migrate(pool);
    if (applied.length) logger.info({ applied }, 'migrations applied');
  } catch (err) {
    await pool.end();
    throw err;
  }

  // Runners on managed S3 upload through grants answered here (ADR 0012); none for local storage.
  const uploadGrants = await createUploadGrantBroker(config, (jobId) => grantJobState(pool, jobId), new PgGrantLedger(pool));

  let shuttingDown = false;
  const outbound = new OutboundPolicy({ allowed: config.OUTBOUND_ALLOWED_CIDRS });
  // Every yt-dlp run (/metadata, /is-short, playlists) fetches through it, under `outbound` (ADR 0011).
  const egress = await startLookupEgress({ policy: outbound, logger, ...(config.MEDIA_INFO_PROXY !== undefined && { upstream: config.MEDIA_INFO_PROXY }) });
  // A copy of the MediaPlatforms and ProxyPools, listed every few seconds: a request never waits for Kubernetes (ADR 0017).
  const platforms = config.PLATFORMS_REFRESH_SECONDS > 0 ? PlatformDirectory.fromKubeconfig(config.KUBECONFIG, logger, config.PLATFORMS_REFRESH_SECONDS * 1000) : undefined;
  await platforms?.start();
  // A platform's URL is looked up through its pool, cookies and options, as its jobs run (docs/adr/0027).
  const routes = platforms && new PlatformLookups({ platforms, egress, readSecret: kubeSecretReader(config.KUBECONFIG, config.KUBE_TIMEOUT_MS), log: logger });
  const lookups = { ...mediaInfoOptions(config), egress, ...(routes && { routes }) };
  const rateLimit = budgetFromConfig(config, logger);
  const stripe = stripeClient(config);
  const metrics = config.METRICS_ENABLED && config.METRICS_PORT !== undefined ? new GatewayMetrics(opts.metricsRegistry ?? newRegistry()) : undefined;
  metrics?.trackPool(pool);
  const app = createApp({
    ...(metrics && { metrics }),
    pool,
    logger,
    requestLogLevel: config.REQUEST_LOG_LEVEL,
    console: config.CONSOLE === 'on',
    secretBox,
    namespace: config.MEDIAJOBS_NAMESPACE,
    presign: (key) => storage.presign(key, DOWNLOAD_URL_TTL_SECONDS),
    ...(config.MANAGED_STORAGE === 'local' && config.FILE_URL_SECRET
      ? { files: { dir: config.MANAGED_STORAGE_DIR, secret: config.FILE_URL_SECRET } }
      : {}),
    keyCache: new ApiKeyCache(cachedKeyLookup(pool), config.AUTH_CACHE_TTL_MS, config.AUTH_CACHE_MAX_ENTRIES),
    keyLookups: new KeyLookupBudget(config.AUTH_LOOKUPS_PER_ADDRESS_PER_SECOND),
    trustedProxies: config.TRUSTED_PROXY_CIDRS,
    marketplaceUsers: new MarketplaceUsers(pool, config.MARKETPLACE_USER_HEADER, config.AUTH_CACHE_TTL_MS, config.AUTH_CACHE_MAX_ENTRIES),
    isShuttingDown: () => shuttingDown,
    ...(opts.readiness && { readiness: opts.readiness }),
    rateLimit,
    ...(stripe && { billing: new BillingReader(stripe, config) }),
    mediaInfo: new MediaInfoExtractor(lookups),
    outbound,
    ...(platforms && { platforms }),
    batchSources: new BatchSources(batchSourcesOptions(config, lookups, outbound)),
    ...(uploadGrants && { uploadGrants }),
    chatWebhookPrefix: config.CHAT_WEBHOOK_PREFIX,
    storage: {
      probeTimeoutMs: config.STORAGE_PROBE_TIMEOUT_MS,
      probeMaxBytes: config.STORAGE_PROBE_MAX_BYTES,
      providerSettings: storageEndpoints(config),
      ...(config.FILE_URL_SECRET && { driveDownloadSecret: config.FILE_URL_SECRET }),
      ...(config.STORAGE_VAULT === 'kubernetes' && {
        vault: KubeSecretVault.fromKubeconfig(config.KUBECONFIG, destinationsNamespace(config), config.KUBE_TIMEOUT_MS),
      }),
    },
  });

  const server = httpServer(app, {
    headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS,
    requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT_MS,
    keepAliveTimeoutMs: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
  });
  // The metrics listener first: a port taken there (the error's `port` says which) has less to undo.
  const metricsListener = metrics && await serveMetrics(metrics.registry, config.METRICS_HOST, config.METRICS_PORT!).catch(async (err: unknown) => {
    rateLimit.close();
    await egress.close();
    throw err;
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.PORT, config.HOST, () => resolve());
  }).catch(async (err: unknown) => {
    rateLimit.close();
    await egress.close();
    if (metricsListener) await closeListener(metricsListener.server);
    throw err;
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${config.HOST === '0.0.0.0' ? '127.0.0.1' : config.HOST}:${port}`;
  logger.info({
    url, namespace: config.MEDIAJOBS_NAMESPACE, managedStorage: config.MANAGED_STORAGE, ...(metricsListener && { metrics: `${metricsListener.url}/metrics` }),
  }, 'api-gateway listening');

  return {
    server, pool, url, ...(metricsListener && { metricsUrl: metricsListener.url }),
    close: gracefulClose(server, { pool, rateLimit, egress, metricsServer: metricsListener?.server, platforms }, logger, config.SHUTDOWN_TIMEOUT_MS, () => (shuttingDown = true)),
  };
}

/** Close a listener and the connections it still has (a scraper's keep-alive). */
function closeListener(listener: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => listener.close(() => resolve()));
  listener.closeAllConnections();
  return closed;
}

export interface ServerTimeouts {
  /** HTTP_HEADERS_TIMEOUT_MS: a client's request line and headers must have arrived within this; else 408 and the socket closes. */
  headersTimeoutMs: number;
  /** HTTP_REQUEST_TIMEOUT_MS: the whole request, body included; else 408. Not the time to answer. */
  requestTimeoutMs: number;
  /** HTTP_KEEP_ALIVE_TIMEOUT_MS: an idle keep-alive connection is closed after this (above a load balancer's idle timeout). */
  keepAliveTimeoutMs: number;
}

/** A client error Node reports before the app sees a request, as the gateway answers it: status and the error body. */
function clientErrorAnswer(code: string | undefined): [status: number, reason: string, message: string] {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return [408, 'Request Timeout', 'Request timeout'];
  if (code === 'HPE_HEADER_OVERFLOW') return [431, 'Request Header Fields Too Large', 'Request headers too large'];
  return [400, 'Bad Request', 'Bad request'];
}

/**
 * The HTTP server of an app, bounded against slow and malformed clients:
 * a client that trickles its headers (slowloris) or its body is answered
 * 408 and dropped at the timeouts, malformed HTTP 400 (431 for oversized
 * headers), an unsupported Expect 417, every one a JSON error body like the
 * app's, never a throw.
 */
export function httpServer(app: RequestListener, t: ServerTimeouts): Server {
  const server = createServer({
    headersTimeout: t.headersTimeoutMs,
    requestTimeout: t.requestTimeoutMs,
    keepAliveTimeout: t.keepAliveTimeoutMs,
    // Node checks the two request timeouts on this period (30 s by default): without it a 20 s timeout can take 50 s.
    connectionsCheckingInterval: Math.max(50, Math.min(5_000, Math.floor(Math.min(t.headersTimeoutMs, t.requestTimeoutMs) / 4))),
  }, app);
  // An Expect other than 100-continue: Node's own 417 has no body; the gateway's errors are all JSON.
  server.on('checkExpectation', (_req, res: ServerResponse) => {
    res.writeHead(417, { ...SECURITY_HEADERS, 'Content-Type': 'application/json', Connection: 'close' }).end(JSON.stringify({ error: 'Unsupported Expect header' }));
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // Mid-answer (a pipelined request after one being answered): a status line now would corrupt that answer.
    const answering = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
    if (!socket.writable || answering) {
      socket.destroy();
      return;
    }
    const [status, reason, message] = clientErrorAnswer(err.code);
    const body = JSON.stringify({ error: message });
    socket.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${SECURITY_HEADER_LINES}Connection: close\r\n\r\n${body}`);
  });
  return server;
}

/**
 * Stop accepting, let in-flight requests finish (up to `timeoutMs`), then
 * close the metrics listener, the rate counter, the lookups' egress and the
 * pool; calling it again returns the same promise.
 */
function gracefulClose(
  server: Server,
  { pool, rateLimit, egress, metricsServer, platforms }: {
    pool: pg.Pool; rateLimit: RateBudget; egress: RunningLookupEgress; metricsServer?: Server | undefined; platforms?: PlatformDirectory | undefined;
  },
  logger: Logger, timeoutMs: number, markShuttingDown: () => void,
): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => {
    closing ??= (async () => {
      markShuttingDown();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // close() drops only the connections idle at that moment; a keep-alive
      // connection whose request finishes later would hold the server open,
      // so idle ones are swept until the last in-flight request is done.
      server.closeIdleConnections();
      const sweep = setInterval(() => server.closeIdleConnections(), 50);
      const force = setTimeout(() => server.closeAllConnections(), timeoutMs);
      await closed;
      clearInterval(sweep);
      clearTimeout(force);
      // Scraped until the last request is answered: its counts are in the last scrape.
      if (metricsServer) await closeListener(metricsServer);
      rateLimit.close();
      platforms?.stop();
      await egress.close();
      await pool.end();
      logger.info('api-gateway stopped');
    })();
    return closing;
  };
}
