// `make run`: the whole service on one machine. The local cluster, an
// embedded PostgreSQL (unless DATABASE_URL is set), the operator and the
// gateway run in this process; runner pods are local processes; managed
// storage is the local disk behind signed, expiring gateway URLs. State
// (cluster objects, database, files, secrets, the dev key) lives in .local/,
// so a restart keeps jobs, keys and files. Ctrl-C stops everything. A start
// that cannot go on says why in one line and stops what it started.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import pg from 'pg';
import { loadKubeConfig } from '@mediajobs/lib/kube-client';
import { createLogger, errFields } from '@mediajobs/lib/logger';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { LocalCluster } from '@mediajobs/local-cluster';
import { loadGatewayConfig } from '../api-gateway/src/config.js';
import { createApiKey } from '../api-gateway/src/db/api-keys.js';
import { migrate } from '../api-gateway/src/db/migrate.js';
import { startGateway } from '../api-gateway/src/server.js';
import { loadOperatorConfig } from '../operator/src/config.js';
import { startOperator, type OperatorHandle } from '../operator/src/operator.js';
import { managedStorageAccess } from '../operator/src/managed-storage.js';
import { tsxCommand } from '../test/support/tsx.js';
import { explainFailure, firstLine, portFree, portTakenMessage, requireFreePort, requireTools, StartupError } from './local-failures.js';
import { startLocalPostgres } from './local-postgres.js';
import { applyCrds } from './apply-crds.js';
import { GATEWAY_ACCOUNT, OPERATOR_ACCOUNT, applyDeployRbac } from './deploy-rbac.js';
import { LOCAL_PG_DEFAULT_PORT } from '@mediajobs/lib/local-database';
import { newRegistry } from '@mediajobs/lib/metrics';
import { localStateDir } from '@mediajobs/lib/local-state';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const LOCAL = localStateDir(ROOT);
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
  if (existsSync(path)) {
    const kept = parseJson(readFileSync(path, 'utf8')) as Partial<LocalSecrets> | undefined;
    if (kept?.secretKeys && kept.fileUrlSecret) return kept as LocalSecrets;
    throw new StartupError(`${path} is not the secrets file this version writes: move it away (jobs sealed with it become unreadable) and run again`);
  }
  const s: LocalSecrets = { secretKeys: SecretBox.generateSpec('local'), fileUrlSecret: randomBytes(32).toString('hex') };
  writeFileSync(path, JSON.stringify(s, null, 2), { mode: 0o600 });
  return s;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * This run's claim on the state folder. A second local mode on the same state
 * would take the first one's Postgres for one a crash left, and stop it.
 */
function claimStateDir(): void {
  refuseIfClaimed();
  const path = join(LOCAL, 'local-mode.pid');
  writeFileSync(path, `${process.pid}\n`);
  // First in, so released last, after Postgres has stopped.
  stops.push(async () => rmSync(path, { force: true }));
}

/** A local mode already running on this state stops this one, before anything is made (not even the folder). */
function refuseIfClaimed(): void {
  const path = join(LOCAL, 'local-mode.pid');
  const other = existsSync(path) ? Number(readFileSync(path, 'utf8')) : 0;
  if (other && other !== process.pid && isLocalMode(other)) {
    throw new StartupError(`local mode is already running on ${LOCAL} (pid ${other}): stop it first, or set MEDIAJOBS_LOCAL_DIR to another folder`);
  }
}

/** Whether `pid` is a running local mode (not a process that got its pid after a crash). */
function isLocalMode(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('local-mode');
  } catch {
    return false;
  }
}

/** A port setting, checked before anything starts. */
function portSetting(name: string, fallback: number): number {
  const value = process.env[name];
  const port = value === undefined || value === '' ? fallback : Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new StartupError(`${name} must be a port number (0-65535)`);
  return port;
}

/** A listen that found its port taken becomes the line that says which setting to change. */
function portTaken(what: string, port: number, variable: string): (err: unknown) => never {
  return (err) => {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') throw new StartupError(portTakenMessage(what, port, variable));
    throw err;
  };
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

/**
 * The local cluster on `port` (0: a free one). Its state from another
 * version may not load: that is said with where the state is, so it can be
 * moved away.
 */
async function startCluster(port: number): Promise<LocalCluster> {
  const stateDir = join(LOCAL, 'cluster-state');
  try {
    return await LocalCluster.start({
      port,
      kubeconfigPath: join(LOCAL, 'kubeconfig'),
      stateDir,
      workDir: join(LOCAL, 'cluster-work'),
      imageCommands: { [RUNNER_IMAGE]: tsxCommand(join(ROOT, 'runner-image/src/main.ts')) },
      maxRunningPods: Number(process.env.LOCAL_MAX_RUNNING_PODS ?? 4),
      // Unset or 0: no throttle. Set: writes past it get API Priority and Fairness's 429 with Retry-After.
      maxWritesPerSecond: Number(process.env.LOCAL_CLUSTER_WRITE_RATE ?? 0) || undefined,
      logger: createLogger('local-cluster', process.env.LOG_LEVEL ?? 'warn'),
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE') throw new StartupError(portTakenMessage('the local cluster', port, 'LOCAL_CLUSTER_PORT'));
    if (e.code) throw err; // a full disk, a permission: said the same way for every step
    throw new StartupError(`the local cluster did not start: ${firstLine(e.message ?? String(err))} (its state is in ${stateDir}; move that away to start with an empty cluster)`);
  }
}

/**
 * The local cluster's port when LOCAL_CLUSTER_PORT is unset: the one the last
 * run's cluster listened on (its kubeconfig's server) while nothing else has
 * it, else 0 (a free one). Runner pods a killed run left running keep that
 * address in their kubeconfig; on the same port they reach the restarted
 * cluster and report what they stored, as pods reach a restarted
 * kube-apiserver at its one Service address.
 */
async function lastClusterPort(): Promise<number> {
  let server: URL;
  try {
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(join(LOCAL, 'kubeconfig'));
    server = new URL(kc.getCurrentCluster()?.server ?? '');
  } catch {
    return 0; // no earlier run, or not a kubeconfig this wrote
  }
  const port = Number(server.port);
  const ours = server.protocol === 'https:' && server.hostname === '127.0.0.1' && port > 0;
  return ours && (await portFree('127.0.0.1', port)) ? port : 0;
}

/**
 * The dev API key (MEDIAJOBS_DEV_API_KEY, else the one kept in secrets.json,
 * else a new one, kept there), recorded in the database: the migrations
 * first, as the gateway would apply them, so the key can be stored before
 * the gateway starts.
 */
async function ensureDevKey(databaseUrl: string, secrets: LocalSecrets): Promise<string> {
  const devKey = process.env.MEDIAJOBS_DEV_API_KEY ?? secrets.devApiKey ?? `mj_dev_${randomBytes(24).toString('base64url')}`;
  if (!process.env.MEDIAJOBS_DEV_API_KEY && !secrets.devApiKey) {
    writeFileSync(join(LOCAL, 'secrets.json'), JSON.stringify({ ...secrets, devApiKey: devKey }, null, 2), { mode: 0o600 });
  }
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  try {
    await migrate(pool);
    await createApiKey(pool, { name: 'local-dev', key: devKey });
  } finally {
    await pool.end();
  }
  return devKey;
}

/** What the gateway's /readyz waits for in local mode: the operator started, leading, and itself ready (its caches following). */
function operatorReadiness(operator: OperatorHandle | undefined): string | undefined {
  if (!operator) return 'Operator not started';
  if (!operator.isLeader()) return 'Operator not leading';
  const missing = operator.readiness();
  return missing === undefined ? undefined : `Operator not ready: ${missing}`;
}

type Stop = () => Promise<void>;

/** What has started so far, in order; stopped in reverse. */
const stops: Stop[] = [];
let exiting: Promise<never> | undefined;

/** Stop what has started, newest first, and exit; the first caller's code wins. */
function stopAndExit(code: number): Promise<never> {
  exiting ??= (async () => {
    for (const stop of stops.splice(0).reverse()) {
      await stop().catch((err: unknown) => log.warn({ err: errFields(err) }, 'stop failed'));
    }
    process.exit(code);
  })();
  return exiting;
}

async function start(): Promise<void> {
  // What a newcomer's machine may lack is checked before anything starts, so such a failure stops nothing.
  requireTools(['yt-dlp', 'ffmpeg', 'ffprobe']);
  const host = process.env.HOST ?? '127.0.0.1';
  const port = portSetting('PORT', 8080);
  // The one metrics listener of local mode (the gateway's, serving the operator's metrics too); never the API's port.
  const metricsPort = portSetting('METRICS_PORT', 9464);
  const clusterPort = portSetting('LOCAL_CLUSTER_PORT', 0);
  // Another local mode on this state is the likelier cause of a taken port: said first.
  refuseIfClaimed();
  await requireFreePort(host, port, 'the gateway', 'PORT');
  if (metricsPort) await requireFreePort(host, metricsPort, 'the metrics listener', 'METRICS_PORT');
  if (clusterPort) await requireFreePort('127.0.0.1', clusterPort, 'the local cluster', 'LOCAL_CLUSTER_PORT');
  mkdirSync(LOCAL, { recursive: true });
  claimStateDir();
  const secrets = localSecrets();
  const storageDir = join(LOCAL, 'storage');
  mkdirSync(storageDir, { recursive: true });

  const databaseUrl = process.env.DATABASE_URL ?? await startLocalPostgres({
    localDir: LOCAL, port: portSetting('EMBEDDED_PG_PORT', LOCAL_PG_DEFAULT_PORT), log, checkpoint, stops,
  });
  checkpoint();

  const cluster = await startCluster(clusterPort || (await lastClusterPort()));
  stops.push(() => cluster.stop());
  checkpoint();
  // As written: a typed client would drop their CEL rules, enums and defaults (apply-crds.ts).
  await applyCrds(loadKubeConfig(cluster.kubeconfigPath));
  checkpoint();

  // The gateway and the operator run as their own ServiceAccounts with deploy/'s Roles, as in production:
  // the local cluster enforces RBAC, so a right missing from deploy/ fails here too. The printed kubeconfig stays the admin's.
  const namespace = process.env.MEDIAJOBS_NAMESPACE || 'default';
  applyDeployRbac(cluster, {
    namespace, destinationsNamespace: process.env.DESTINATIONS_NAMESPACE || namespace, everyNamespace: !!process.env.WATCH_NAMESPACES,
  });
  const gatewayKubeconfig = cluster.writeServiceAccountKubeconfig(join(LOCAL, 'kubeconfig-gateway'), namespace, GATEWAY_ACCOUNT);
  const operatorKubeconfig = cluster.writeServiceAccountKubeconfig(join(LOCAL, 'kubeconfig-operator'), namespace, OPERATOR_ACCOUNT);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    KUBECONFIG: gatewayKubeconfig,
    SECRET_KEYS: process.env.SECRET_KEYS ?? secrets.secretKeys,
    FILE_URL_SECRET: process.env.FILE_URL_SECRET ?? secrets.fileUrlSecret,
    MANAGED_STORAGE: 'local',
    MANAGED_STORAGE_DIR: storageDir,
    PUBLIC_BASE_URL: process.env.PUBLIC_BASE_URL ?? `http://127.0.0.1:${port}`,
    PORT: String(port),
    HOST: host,
    METRICS_PORT: String(metricsPort),
    METRICS_HOST: host,
    RUNNER_IMAGE,
    // One operator, in this process, alone on this state (claimStateDir): a
    // lease left by a killed run would only hold jobs back until it expired.
    LEADER_ELECTION: process.env.LEADER_ELECTION ?? 'false',
    // Storage emulators and media servers of a local run listen on loopback or the LAN
    // (OUTBOUND_ALLOWED_CIDRS, if set, adds to this; link-local and metadata stay refused).
    OUTBOUND_ALLOW_PRIVATE: process.env.OUTBOUND_ALLOW_PRIVATE ?? 'true',
    // A client polling its job would fill the terminal; a job's progress is the operator's transition lines.
    REQUEST_LOG_LEVEL: process.env.REQUEST_LOG_LEVEL ?? 'debug',
  };
  // The dev key exists before the gateway listens: a script that starts
  // posting as soon as the port answers never meets a key still to come.
  const devKey = await ensureDevKey(databaseUrl, secrets);
  checkpoint();

  // One process, one registry, one listener: the gateway's metrics listener (METRICS_PORT) serves the operator's metrics too.
  const metricsRegistry = newRegistry();
  // The gateway is ready (GET /readyz) once the operator leads with its caches
  // following too: before that, an accepted job would wait for no one.
  const local: { operator?: OperatorHandle } = {};
  const gateway = await startGateway(loadGatewayConfig(env), {
    logger: createLogger('api-gateway', env.LOG_LEVEL ?? 'info'), metricsRegistry, readiness: () => operatorReadiness(local.operator),
  }).catch((err: unknown) => {
    // startGateway listens on METRICS_PORT first; the error's port says which of the two was taken.
    if ((err as { port?: number }).port === metricsPort && metricsPort !== port) return portTaken('the metrics listener', metricsPort, 'METRICS_PORT')(err);
    return portTaken('the gateway', port, 'PORT')(err);
  });
  stops.push(() => gateway.close());
  checkpoint();
  // No listener of the operator's own: its metrics are in the gateway's registry, served on METRICS_PORT already.
  const operatorConfig = loadOperatorConfig({ ...env, KUBECONFIG: operatorKubeconfig, METRICS_PORT: undefined });
  const storage = await managedStorageAccess(operatorConfig);
  checkpoint();
  const operator = await startOperator(operatorConfig, { storage, log: createLogger('operator', env.LOG_LEVEL ?? 'info'), metricsRegistry });
  stops.push(() => operator.stop());
  local.operator = operator;
  checkpoint();

  process.stdout.write([
    '',
    'mediajobs is running locally',
    `  base URL:    ${gateway.url}`,
    `  dev API key: ${devKey}`,
    ...(gateway.metricsUrl ? [`  metrics:     ${gateway.metricsUrl}/metrics   (the gateway's and the operator's; not on the base URL)`] : []),
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
let failed = false;
/**
 * Ends local mode on a failure: one line saying what failed, why and what to
 * do (the stack only at debug level: an expected failure is not a bug
 * report), everything started so far stopped, exit 1.
 */
function fail(err: unknown): void {
  if (err instanceof StartupAborted || signalled) return;
  log.debug({ stack: (err as Error)?.stack }, 'failure details');
  // One cause often fails twice (a full disk: startup's chain and a stray write): the first says it.
  if (failed) return;
  failed = true;
  log.fatal(explainFailure(err, LOCAL));
  void stopAndExit(1);
}

// A failure outside startup's chain (an 'error' event nobody listened to, a
// stray rejection) ends local mode the same way, instead of Node's stack trace.
process.on('uncaughtException', fail);
process.on('unhandledRejection', fail);
const startup = start();
startup.catch(fail);
