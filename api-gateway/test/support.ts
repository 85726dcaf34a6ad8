// Test support: a scratch Postgres database per suite, the gateway app on
// an ephemeral port, API keys, a log capture, and a local cluster with the
// MediaJob CRD.
import { DEFAULT_PROBE_MAX_BYTES, DestinationCheckError, type ProbeBounds } from '../src/destinations/probe.js';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import { LocalCluster } from '@mediajobs/local-cluster';
import { createLogger, type Logger } from '@mediajobs/lib/logger';
import type { MediaBatch, MediaJob } from '@mediajobs/lib/mediajob/types';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { SecretBox } from '@mediajobs/lib/secret-box';
import type { Express } from 'express';
import pg from 'pg';
import { createApp, type AppDeps } from '../src/app.js';
import { ApiKeyCache, cachedKeyLookup } from '../src/auth.js';
import { createApiKey } from '../src/db/api-keys.js';
import { DEFAULT_SERVER_TIMEOUTS } from '../src/config.js';
import { createPool } from '../src/db/pool.js';
import { httpServer, type ServerTimeouts } from '../src/server.js';
import { serveMetrics } from '../src/metrics.js';
import { markCreated, mediaBatchesToCreate, mediaJobsToCreate } from '@mediajobs/lib/db/materialize';

// One scratch-database helper for the whole repository; createTestDatabase gives the gateway's migration tests an empty one.
import { createTestDatabase as createDatabase, type TestDatabase } from '../../test/support/postgres.js';
import { applyCrds } from '../../scripts/apply-crds.js';
export type { TestDatabase };
export const createTestDatabase = (prefix = 'mediajobs_test') => createDatabase(prefix, { migrate: false });

/** Log lines written through lib's logger (so its redaction is what is tested), kept instead of printed. */
export function captureLogger(level = 'debug'): { logger: Logger; lines: string[]; text(): string } {
  const lines: string[] = [];
  const logger = createLogger('api-gateway', level, {
    hooks: {
      streamWrite: (s: string) => {
        lines.push(s);
        return '';
      },
    },
  });
  return { logger, lines, text: () => lines.join('') };
}

/**
 * Every [method, path] the app routes (express syntax: `/jobs/:id`), from
 * express 5's router stack and the Routers mounted in it. All are mounted at
 * the root; one under a prefix would hide that prefix, so it throws.
 */
export function appRoutes(app: Express): [string, string][] {
  type Layer = { route?: { path: string; methods: Record<string, boolean> }; handle?: { stack?: Layer[] }; slash?: boolean };
  const out: [string, string][] = [];
  const walk = (stack: Layer[]) => {
    for (const layer of stack) {
      if (layer.route) for (const m of Object.keys(layer.route.methods)) out.push([m.toUpperCase(), layer.route.path]);
      else if (layer.handle?.stack) {
        if (!layer.slash) throw new Error('a Router mounted under a path prefix: appRoutes cannot see its full paths');
        walk(layer.handle.stack);
      }
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack);
  return out;
}

/**
 * What the operator's materializer creates for the rows accepted since the
 * last call: the MediaJobs and MediaBatches lib/src/db/materialize.ts builds
 * (the operator's own builders), then marked created as the materializer
 * marks them, so the next call sees only what came after.
 */
export async function materialize(pool: pg.Pool): Promise<{ jobs: MediaJob[]; batches: MediaBatch[] }> {
  const batches = await mediaBatchesToCreate(pool, 10_000);
  const jobs = await mediaJobsToCreate(pool, 10_000);
  await markCreated(pool, 'batches', batches.map((b) => b.metadata.name!));
  await markCreated(pool, 'jobs', jobs.map((j) => j.metadata.name!));
  return { jobs, batches };
}

export interface TestGateway {
  db: TestDatabase;
  pool: pg.Pool;
  url: string;
  /** With `metrics`: the metrics listener's base URL (GET <metricsUrl>/metrics), as startGateway's METRICS_PORT serves it. */
  metricsUrl?: string;
  server: Server;
  keyCache: ApiKeyCache;
  logs: ReturnType<typeof captureLogger>;
  newKey(name?: string): Promise<{ id: string; key: string }>;
  request(method: string, path: string, opts?: { key?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> }): Promise<{ status: number; body: unknown; headers: Headers; text: string }>;
  stop(): Promise<void>;
}

/**
 * The app on real Postgres behind the production HTTP server (server.ts
 * httpServer: its timeouts and malformed-request answers); `serverTimeouts`
 * overrides the configuration defaults.
 */
export async function startTestGateway(
  { serverTimeouts, databaseAdminUrl, ...deps }: Partial<AppDeps> & { serverTimeouts?: Partial<ServerTimeouts>; databaseAdminUrl?: string } = {},
): Promise<TestGateway> {
  // Migrated: a copy of test/support/postgres.ts's template, as the gateway's migrations would leave it.
  const db = await createDatabase('mediajobs_test', { ...(databaseAdminUrl && { adminUrl: databaseAdminUrl }) });
  const logs = captureLogger();
  const pool = createPool(db.url, 10, logs.logger);
  const keyCache = deps.keyCache ?? new ApiKeyCache(cachedKeyLookup(pool), 10_000);
  const app = createApp({
    pool,
    logger: logs.logger,
    secretBox: new SecretBox(SecretBox.generateSpec('test')),
    namespace: 'default',
    presign: async (key) => `https://storage.example/${key}?signed=1`,
    keyCache,
    outbound: LOOPBACK_OUTBOUND,
    ...deps,
  });
  deps.metrics?.trackPool(pool);
  const server = httpServer(app, { ...DEFAULT_SERVER_TIMEOUTS, ...serverTimeouts });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const metricsListener = deps.metrics && await serveMetrics(deps.metrics.registry, '127.0.0.1', 0);
  let defaultKey: string | undefined;
  const gw: TestGateway = {
    db, pool, url, server, keyCache, logs, ...(metricsListener && { metricsUrl: metricsListener.url }),
    async newKey(name = 'test') {
      const k = await createApiKey(pool, { name });
      return { id: k.id, key: k.key };
    },
    async request(method, path, opts = {}) {
      if (opts.key === undefined && defaultKey === undefined) defaultKey = (await gw.newKey('default')).key;
      const key = opts.key === undefined ? defaultKey : opts.key;
      const headers: Record<string, string> = { ...(key !== null && key !== undefined ? { 'x-api-key': key } : {}), ...opts.headers };
      let body: string | undefined = opts.raw;
      if (opts.body !== undefined) {
        body = JSON.stringify(opts.body);
        headers['content-type'] ??= 'application/json';
      }
      const res = await fetch(`${url}${path}`, { method, headers, ...(body !== undefined && { body }) });
      const text = await res.text();
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      return { status: res.status, body: parsed, headers: res.headers, text };
    },
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      if (metricsListener) {
        metricsListener.server.closeAllConnections();
        await new Promise<void>((resolve) => metricsListener.server.close(() => resolve()));
      }
      // pool.end() resolves once its clients are told to close, not once their
      // backends are gone; the DROP ... WITH (FORCE) below can then kill one
      // mid-goodbye, and the pool re-emits that as an 'error' nobody listens to.
      pool.on('error', () => undefined);
      await pool.end();
      await db.drop();
    },
  };
  return gw;
}

export interface TestCluster {
  cluster: LocalCluster;
  kc: k8s.KubeConfig;
  custom: k8s.CustomObjectsApi;
  stop(): Promise<void>;
}

/**
 * A local cluster with crds/mediajob.yaml established, as written (local
 * mode's install, scripts/apply-crds.ts: its CEL rules and enums included);
 * with `mediaBatch`, crds/mediabatch.yaml too (the apiserver then validates
 * MediaBatches as a real one would).
 */
export async function startClusterWithCrd(opts: { mediaBatch?: boolean } = {}): Promise<TestCluster> {
  const cluster = await LocalCluster.start({ logger: createLogger('local-cluster', 'silent') });
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(cluster.kubeconfigPath);
  await applyCrds(kc, { files: ['mediajob.yaml', ...(opts.mediaBatch ? ['mediabatch.yaml'] : [])] });
  return { cluster, kc, custom: kc.makeApiClient(k8s.CustomObjectsApi), stop: () => cluster.stop() };
}

/** What a storage check that must fail (destinations/probe.ts) failed with; any other error is thrown on. */
/** The tests' outbound policy: storage emulators and media servers are on loopback. */
export const LOOPBACK_OUTBOUND = new OutboundPolicy({ allowed: ['127.0.0.0/8', '::1/128'] });

/** A live check's bounds in tests: `timeoutMs`, the default byte cap, loopback allowed. */
export const probeBounds = (timeoutMs: number, outbound = LOOPBACK_OUTBOUND): ProbeBounds => ({ timeoutMs, maxBytes: DEFAULT_PROBE_MAX_BYTES, outbound });

export async function probeFailure(work: Promise<void>): Promise<DestinationCheckError> {
  try {
    await work;
  } catch (err) {
    if (err instanceof DestinationCheckError) return err;
    throw err;
  }
  throw new Error('the probe passed');
}
