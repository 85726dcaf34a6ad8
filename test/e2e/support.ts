// The whole service for end-to-end tests: the local cluster running the real
// runner (yt-dlp + ffmpeg) as pod processes, a fresh Postgres database, the
// gateway and the operator, managed storage on local disk or S3 (s3rver).
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino, type DestinationStream } from 'pino';
import { createLogger } from '@mediajobs/lib/logger';
import type { Registry } from '@mediajobs/lib/metrics';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { managedKeyPrefix } from '@mediajobs/lib/storage/types';
import { loadGatewayConfig } from '../../api-gateway/src/config.js';
import { createApiKey } from '../../api-gateway/src/db/api-keys.js';
import { startGateway, type RunningGateway } from '../../api-gateway/src/server.js';
import { loadOperatorConfig } from '../../operator/src/config.js';
import { managedStorageAccess } from '../../operator/src/managed-storage.js';
import { startOperator, type OperatorHandle } from '../../operator/src/operator.js';
import { startTestCluster, type TestCluster } from '../../local-cluster/test/support.js';
import { createTestDatabase, type TestDatabase } from '../support/postgres.js';
import { tsxCommand } from '../support/tsx.js';
import { freePort } from '../support/ports.js';
import type { LogText } from '../support/secret-scan.js';

export { freePort };

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const RUNNER_IMAGE = 'mediajobs/runner:e2e';

/**
 * The operator run as its own OS process (its real entry point,
 * operator/src/main.ts), so a test can SIGKILL it as a crash or an OOM
 * kill would, and start another. Each start is a new leader candidate
 * (POD_NAME operator-<n>), as a replacement pod is.
 */
export interface OperatorProcess {
  /** The running process' pid; undefined after kill() until the next start(). */
  readonly pid: number | undefined;
  /** Its POD_NAME, the identity it holds the Lease under (operator-<n>); undefined as pid. */
  readonly name: string | undefined;
  /** Processes started so far, the first included. */
  readonly starts: number;
  /** Exits nobody asked for (code or signal, and the output before them): a crash of the operator itself. */
  readonly crashes: string[];
  /** Everything every process started so far wrote (stdout and stderr), for the secret scan; capped at OUTPUT_KEPT. */
  output(): string;
  /** Start a process; a no-op while one runs. */
  start(): void;
  /** Send `signal` (default SIGKILL) and resolve once the process is gone. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  stop(): Promise<void>;
}

export interface Service<Operator = OperatorHandle> {
  cluster: TestCluster;
  db: TestDatabase;
  gateway: RunningGateway;
  /** In-process by default; an OperatorProcess with `operatorProcess: true`. */
  operator: Operator;
  apiKey: string;
  apiKeyId: string;
  /** The segment managed storage puts before every key of the test key's jobs (managedKeyPrefix). */
  managedPrefix: string;
  env: NodeJS.ProcessEnv;
  /** Call the gateway with the test key. */
  api(method: string, path: string, body?: unknown, key?: string): Promise<{ status: number; body: Record<string, unknown> }>;
  restartOperator(): Promise<void>;
  stop(): Promise<void>;
}

export interface ServiceOptions {
  /** Storage settings: managed storage (MANAGED_STORAGE=s3 ...; default local disk), GCS/Drive endpoints (GCS_API_ENDPOINT ...). */
  storageEnv?: Record<string, string>;
  operatorEnv?: Record<string, string>;
  /** Settings the gateway and the operator share (PODCAST_LOOKUP_ENDPOINT, MEDIA_INFO_URL_MAP ...): both expand batches. */
  env?: Record<string, string>;
  logLevel?: string;
  /**
   * Where the gateway's and the operator's log lines go, through lib's
   * createLogger as in production (its redaction included); default: pino
   * at `logLevel`, which is silent unless LOG_LEVEL says otherwise.
   */
  logDestination?: DestinationStream;
  /**
   * One metrics registry for the gateway and the operator, as local mode
   * has: the gateway's metrics listener serves both (with METRICS_PORT in
   * the env; without it the gateway keeps none). Not with restartOperator (a
   * second operator would define its metrics again in it).
   */
  metricsRegistry?: Registry;
  /** Run the operator as a child process (OperatorProcess) instead of in this one; logDestination and metricsRegistry do not reach it. */
  operatorProcess?: boolean;
  /** The service's database on another server (test/support/postgres-server.ts, one a test may stop); default the machine's. */
  databaseAdminUrl?: string;
}

export function startService(opts: ServiceOptions & { operatorProcess: true }): Promise<Service<OperatorProcess>>;
export function startService(opts?: ServiceOptions & { operatorProcess?: false }): Promise<Service>;
export async function startService(opts: ServiceOptions = {}): Promise<Service<OperatorHandle | OperatorProcess>> {
  const logLevel = opts.logLevel ?? process.env.LOG_LEVEL ?? 'silent';
  const cluster = await startTestCluster({ imageCommands: { [RUNNER_IMAGE]: tsxCommand(join(ROOT, 'runner-image/src/main.ts')) } });
  for (const f of readdirSync(join(ROOT, 'crds')).filter((n) => n.endsWith('.yaml'))) {
    await cluster.kubectl(['apply', '-f', join(ROOT, 'crds', f)]);
  }
  const db = await createTestDatabase('mediajobs_e2e', { adminUrl: opts.databaseAdminUrl });
  const storageDir = mkdtempSync(join(tmpdir(), 'mj-e2e-storage-'));
  const env: NodeJS.ProcessEnv = {
    DATABASE_URL: db.url,
    KUBECONFIG: cluster.cluster.kubeconfigPath,
    SECRET_KEYS: SecretBox.generateSpec('e2e'),
    FILE_URL_SECRET: randomBytes(24).toString('hex'),
    MANAGED_STORAGE: 'local',
    MANAGED_STORAGE_DIR: storageDir,
    HOST: '127.0.0.1',
    RUNNER_IMAGE,
    LOG_LEVEL: logLevel,
    LEASE_DURATION_SECONDS: '2',
    LEASE_RENEW_SECONDS: '1',
    WEBHOOK_BACKOFF_MS: '200',
    // Retried failures end after 1 + 2 s of waiting, not the production minutes (docs/adr/0018).
    RETRY_BACKOFF_SECONDS: '1',
    RETRY_PLATFORM_BACKOFF_SECONDS: '2',
    OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8,::1/128', // media servers and storage emulators listen on loopback
    ...opts.storageEnv,
    ...opts.operatorEnv,
    ...opts.env,
  };
  // As on a real cluster, the saved destinations' own namespace exists before the gateway writes into it.
  if (env.DESTINATIONS_NAMESPACE) await cluster.kubectl(['create', 'namespace', env.DESTINATIONS_NAMESPACE]);
  // Local download URLs carry the gateway's address, so the port is chosen before it starts.
  const port = await freePort();
  env.PORT = String(port);
  env.PUBLIC_BASE_URL = `http://127.0.0.1:${port}`;
  const logger = (name: string) => opts.logDestination
    ? createLogger(name, opts.logLevel ?? 'debug', {}, opts.logDestination)
    : pino({ level: logLevel });
  const metricsRegistry = opts.metricsRegistry && { metricsRegistry: opts.metricsRegistry };
  const gw = await startGateway(loadGatewayConfig(env), { logger: logger('api-gateway'), ...metricsRegistry });
  const startOp = async (): Promise<OperatorHandle | OperatorProcess> => {
    if (opts.operatorProcess) {
      const child = operatorProcess(env);
      child.start();
      return child;
    }
    const cfg = loadOperatorConfig(env);
    return startOperator(cfg, { storage: await managedStorageAccess(cfg), log: logger('operator'), ...metricsRegistry });
  };
  let operator = await startOp();
  const { key: apiKey, id: apiKeyId } = await createApiKey(db.pool, { name: 'e2e' });

  const service: Service<OperatorHandle | OperatorProcess> = {
    cluster, db, gateway: gw, operator, apiKey, apiKeyId, managedPrefix: managedKeyPrefix(apiKeyId), env,
    async api(method, path, body, key = apiKey) {
      const res = await fetch(`${gw.url}${path}`, {
        method,
        headers: { 'x-api-key': key, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
    },
    async restartOperator() {
      if (isProcess(operator)) {
        await operator.kill('SIGTERM');
        operator.start();
        return;
      }
      await operator.stop();
      operator = await startOp();
      service.operator = operator;
    },
    async stop() {
      await operator.stop();
      await gw.close();
      await db.drop();
      await cluster.stop();
      rmSync(storageDir, { recursive: true, force: true });
    },
  };
  return service;
}

function isProcess(op: OperatorHandle | OperatorProcess): op is OperatorProcess {
  return 'crashes' in op;
}

const OPERATOR_MAIN = join(ROOT, 'operator/src/main.ts');
/** Output kept of each operator process, for a crash's report. */
const OUTPUT_TAIL = 4096;
/** Output kept of all operator processes together, for output(). */
const OUTPUT_KEPT = 256 * 1024 * 1024;
const STOP_GRACE_MS = 15_000;

function operatorProcess(env: NodeJS.ProcessEnv): OperatorProcess {
  let running: { proc: ChildProcess; name: string; exited: Promise<void>; killed: boolean } | undefined;
  let starts = 0;
  const crashes: string[] = [];
  const everything: Buffer[] = [];
  let kept = 0;
  // A test process that dies must not leave an operator working on a dropped database.
  const orphanGuard = () => running?.proc.kill('SIGKILL');
  process.on('exit', orphanGuard);
  const handle: OperatorProcess = {
    get pid() { return running?.proc.pid; },
    get name() { return running?.name; },
    get starts() { return starts; },
    crashes,
    output: () => Buffer.concat(everything).toString(),
    start() {
      if (running) return;
      const name = `operator-${++starts}`;
      const [cmd, ...args] = tsxCommand(OPERATOR_MAIN);
      const proc = spawn(cmd!, args, { env: { ...process.env, ...env, POD_NAME: name }, stdio: ['ignore', 'pipe', 'pipe'] });
      let tail = '';
      const keep = (d: Buffer) => {
        tail = (tail + d.toString()).slice(-OUTPUT_TAIL);
        if (kept + d.length <= OUTPUT_KEPT) {
          everything.push(d);
          kept += d.length;
        }
      };
      proc.stdout!.on('data', keep);
      proc.stderr!.on('data', keep);
      const self = {
        proc, name, killed: false,
        exited: new Promise<void>((resolve) => proc.once('exit', (code, signal) => {
          if (!self.killed) crashes.push(`${name} exited ${code ?? signal}: ${tail}`);
          if (running === self) running = undefined;
          resolve();
        })),
      };
      running = self;
    },
    async kill(signal = 'SIGKILL') {
      if (!running) return;
      const { proc, exited } = running;
      running.killed = true;
      proc.kill(signal);
      await exited;
    },
    async stop() {
      // A clean stop hands the Lease back; one that hangs must not hang the suite.
      const hung = setTimeout(() => running?.proc.kill('SIGKILL'), STOP_GRACE_MS);
      await handle.kill('SIGTERM');
      clearTimeout(hung);
      process.off('exit', orphanGuard);
    },
  };
  return handle;
}

/** The log of every runner pod in the cluster, each named for the secret scan (test/support/secret-scan.ts). */
export async function runnerLogs(svc: Pick<Service<unknown>, 'cluster'>): Promise<LogText[]> {
  const pods = (await svc.cluster.kubectl(['get', 'pods', '-l', 'app.kubernetes.io/managed-by=mediajobs-operator', '-o', 'name'])).stdout
    .split('\n').filter(Boolean);
  // One kubectl at a time: dozens at once on a loaded machine time out in their TLS handshakes.
  const logs: LogText[] = [];
  for (const p of pods) logs.push({ source: `runner ${p}`, text: (await svc.cluster.kubectl(['logs', p])).stdout });
  return logs;
}

export interface Receiver {
  url: string;
  /** Every delivery: its body, and its webhook-id (Standard Webhooks; one id per event, the same on every redelivery). */
  hooks: {
    body: Record<string, unknown>; eventId?: string; webhookId?: string;
    /** The body as sent and every header, to check a signature (Standard Webhooks signs the raw body). */
    raw: string; headers: IncomingHttpHeaders;
  }[];
  stop(): Promise<void>;
}

/** A webhook receiver that records every delivery. */
export async function startReceiver(): Promise<Receiver> {
  const hooks: Receiver['hooks'] = [];
  const server: Server = createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      hooks.push({
        body: JSON.parse(text) as Record<string, unknown>,
        eventId: req.headers['x-mediajobs-event-id'] as string | undefined,
        webhookId: req.headers['webhook-id'] as string | undefined,
        raw: text,
        headers: req.headers,
      });
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhook`,
    hooks,
    stop: () => new Promise((r) => server.close(() => r())),
  };
}
