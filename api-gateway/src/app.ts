// The express application, built from injected parts so tests and the
// benchmark run it against real Postgres with a real or fake submitter.
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Logger } from '@mediajobs/lib/logger';
import { MediaInfoExtractor } from '@mediajobs/lib/media-info/index';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import type pg from 'pg';
import { ApiKeyCache, cachedKeyLookup, requireApiKey } from './auth.js';
import { migrationsApplied } from './db/migrate.js';
import { sendError } from './http-errors.js';
import { requestLogger } from './request-log.js';
import { filesRouter } from './routes/files.js';
import { isShortRouter } from './routes/is-short.js';
import { jobsRouter } from './routes/jobs.js';
import { metadataRouter } from './routes/metadata.js';
import { userStorageRouter } from './routes/user-storage.js';
import { driveFilesRouter } from './routes/user-storage-drive-files.js';
import { ProbeCache, probeDestination, type ProviderSettings } from './destinations/probe.js';
import type { DestinationVault } from './destinations/vault.js';
import type { JobSubmitter } from './submitter.js';

export interface AppDeps {
  pool: pg.Pool;
  logger: Logger;
  submitter: JobSubmitter;
  secretBox: SecretBox;
  /** Namespace of the MediaJobs. */
  namespace: string;
  /** 24 h download URL of a managed-storage key. */
  presign: (key: string) => Promise<string>;
  /** Serve /files/* from this directory (local managed storage); absent with S3. */
  files?: { dir: string; secret: string };
  /** Defaults to a 10 s cache over the api_keys table. */
  keyCache?: ApiKeyCache;
  /** True once SIGTERM arrived: /readyz fails and connections are not kept alive. */
  isShuttingDown?: () => boolean;
  /** Saved and inline storage destinations (routes/user-storage.ts, destinations/). */
  storage?: {
    /** The keyvault source (Kubernetes Secrets); absent: saved destinations are sealed into Postgres (legacy). */
    vault?: DestinationVault;
    /** Budget of one live credential check; default 15 s. */
    probeTimeoutMs?: number;
    /** Inline-storage probe cache; default 5 minutes, 10,000 credential sets. */
    probes?: ProbeCache;
    /** GCS/Drive API and token endpoints (private endpoints, emulators); default Google's. */
    providerSettings?: ProviderSettings;
    /** FILE_URL_SECRET: serve /drive-files/* (download URLs of files on saved Drive destinations). */
    driveDownloadSecret?: string;
  };
  /** yt-dlp lookups of POST /metadata and POST /is-short; defaults to yt-dlp on PATH with the spec's bounds. */
  mediaInfo?: MediaInfoExtractor;
}

/** body-parser's error types, mapped to the gateway's JSON errors. */
const BODY_ERRORS: Record<string, [number, string]> = {
  'entity.parse.failed': [400, 'Invalid JSON body'],
  'entity.too.large': [413, 'Request body too large'],
  'charset.unsupported': [415, 'Unsupported charset; send UTF-8 JSON'],
  'encoding.unsupported': [415, 'Unsupported Content-Encoding'],
  'request.aborted': [400, 'Request aborted'],
  'request.size.invalid': [400, 'Request body size does not match Content-Length'],
  'stream.encoding.set': [500, 'Internal server error'],
};

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // API responses are small and never cached; a per-response ETag hash is wasted work.
  app.set('etag', false);
  const log = deps.logger;
  const keyCache = deps.keyCache ?? new ApiKeyCache(cachedKeyLookup(deps.pool));
  const shuttingDown = deps.isShuttingDown ?? (() => false);

  app.use(requestLogger(log));
  app.use((_req, res, next) => {
    if (shuttingDown()) res.setHeader('Connection', 'close');
    next();
  });

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    if (shuttingDown()) return sendError(res, 503, 'Shutting down');
    try {
      if (!(await migrationsApplied(deps.pool))) return sendError(res, 503, 'Database migrations not applied');
    } catch {
      return sendError(res, 503, 'Database unreachable');
    }
    res.json({ status: 'ready' });
  });

  if (deps.files) app.use(filesRouter({ ...deps.files, logger: log }));

  app.use('/jobs', requireApiKey(keyCache));
  const probeTimeoutMs = deps.storage?.probeTimeoutMs ?? 15_000;
  const providerSettings = deps.storage?.providerSettings ?? {};
  const probes = deps.storage?.probes ?? new ProbeCache((doc) => probeDestination(doc, probeTimeoutMs, providerSettings));
  app.use(jobsRouter({ ...deps, probes, providerSettings }));
  app.use(userStorageRouter({
    pool: deps.pool, logger: log, secretBox: deps.secretBox, probeTimeoutMs, providerSettings, auth: requireApiKey(keyCache),
    ...(deps.storage?.vault && { vault: deps.storage.vault }),
  }));
  if (deps.storage?.driveDownloadSecret) {
    app.use(driveFilesRouter({
      pool: deps.pool, logger: log, secretBox: deps.secretBox, secret: deps.storage.driveDownloadSecret, providerSettings,
      ...(deps.storage.vault && { vault: deps.storage.vault }),
    }));
  }
  const mediaInfo = { logger: log, keyCache, mediaInfo: deps.mediaInfo ?? new MediaInfoExtractor() };
  app.use(metadataRouter(mediaInfo));
  app.use(isShortRouter(mediaInfo));

  app.use((_req: Request, res: Response) => sendError(res, 404, 'Not found'));

  // Express 5 routes rejected promises here too. Client mistakes keep their
  // 4xx; anything else is a 500 whose details go to the log, not the client.
  app.use((err: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) {
      next(err);
      return;
    }
    const e = err as { type?: string; status?: number; statusCode?: number; expose?: boolean; message?: string };
    const mapped = e.type ? BODY_ERRORS[e.type] : undefined;
    if (mapped) return sendError(res, mapped[0], mapped[1]);
    const status = e.status ?? e.statusCode;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      return sendError(res, status, status === 400 ? 'Bad request' : status === 404 ? 'Not found' : 'Request refused');
    }
    log.error({ err: { message: e.message, type: e.type }, method: req.method, path: req.path }, 'unhandled error');
    sendError(res, 500, 'Internal server error');
  });

  return app;
}
