// Benchmark (issue 17 item 7): Kubernetes API requests per job, by verb and
// resource, for a job that completes, one that fails and is not tried again,
// one whose first attempt fails and is tried again (docs/adr/0018), one that
// fails every attempt (RETRY_MAX_ATTEMPTS, default 3) and one cancelled
// while it runs. Each job is followed from POST /jobs until every object it
// made is gone from the cluster (MediaJob, runner Job, pod, Secret), with
// the finished-object TTLs set to 1 s so the deletes are inside the window.
// Gateway, operator and local cluster run in this process as in
// `make run`; the runner is operator/test/support/scripted-runner.ts, a pod
// process that speaks the runner protocol (it patches the MediaJob's status
// 3 times when it completes: Downloading, Uploading, the result; twice when
// it fails; once when it is cancelled). The real runner patches progress
// more often (runner-image/src), so its count is a floor.
// Two views per job:
// - HTTP requests the local cluster served (what the operator, gateway and
//   runner send; cluster.requestCounts()), lease renewals left out (they
//   are per operator replica, not per job: printed apart, per second);
// - every committed write (ADDED / MODIFIED / DELETED) from any writer,
//   including the emulated kube-controller-manager and kubelet, which call
//   the API server in process: a real control plane's controllers write at
//   least as often (pod status phases, Job status, finalizers) -- these
//   rows show the emulator's, not a real cluster's.
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { LocalCluster, type ResourceType } from '@mediajobs/local-cluster';
import { loadGatewayConfig } from '../../api-gateway/src/config.js';
import { createApiKey } from '../../api-gateway/src/db/api-keys.js';
import { startGateway } from '../../api-gateway/src/server.js';
import { createTestDatabase } from '../../test/support/postgres.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { applyCrds } from '../../scripts/apply-crds.js';
import { loadOperatorConfig } from '../src/config.js';
import { managedStorageAccess } from '../src/managed-storage.js';
import { startOperator } from '../src/operator.js';

const JOBS = Number(process.env.BENCH_JOBS ?? 20);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 10);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RUNNER = join(ROOT, 'operator/test/support/scripted-runner.ts');
const IMAGE = 'mediajobs/runner:bench';
const LEASES = 'leases.coordination.k8s.io';

interface Scenario {
  name: string;
  url: string;
  /** Cancel each job once it is Processing. */
  cancel?: boolean;
  /** The status every job must end in. */
  ends: string;
}

const SCENARIOS: Scenario[] = [
  { name: 'completed', url: 'http://scripted.invalid/complete', ends: 'Completed' },
  { name: 'failed, not retried (processing_failed)', url: 'http://scripted.invalid/fail?category=processing_failed', ends: 'Failed' },
  { name: 'retried once, then completed (connection_error)', url: 'http://scripted.invalid/fail?category=connection_error&times=1', ends: 'Completed' },
  { name: 'failed every attempt (3 attempts, connection_error)', url: 'http://scripted.invalid/fail?category=connection_error', ends: 'Failed' },
  { name: 'cancelled while running', url: 'http://scripted.invalid/hang', cancel: true, ends: 'Cancelled' },
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function label(rt: Pick<ResourceType, 'group' | 'plural'>): string {
  return `${rt.plural}${rt.group ? `.${rt.group}` : ''}`;
}

async function main(): Promise<void> {
  const silent = pino({ level: 'silent' });
  const work = mkdtempSync(join(tmpdir(), 'mj-bench-'));
  const cluster = await LocalCluster.start({
    workDir: join(work, 'cluster'), logger: silent, backoffBaseMs: 100, imageCommands: { [IMAGE]: tsxCommand(RUNNER) },
  });
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(cluster.kubeconfigPath);
  await applyCrds(kc, { files: ['mediajob.yaml'] });
  const db = await createTestDatabase('mediajobs_bench');
  const env: NodeJS.ProcessEnv = {
    DATABASE_URL: db.url, KUBECONFIG: cluster.kubeconfigPath, SECRET_KEYS: SecretBox.generateSpec('b'),
    FILE_URL_SECRET: randomBytes(24).toString('hex'), MANAGED_STORAGE_DIR: join(work, 'storage'), PORT: '0', HOST: '127.0.0.1',
    RUNNER_IMAGE: IMAGE, LOG_LEVEL: 'silent', MAX_RUNNING_JOBS: String(JOBS), MATERIALIZE_SAFETY_SECONDS: '1',
    JOB_TTL_SECONDS_AFTER_FINISHED: '1', FINISHED_MEDIAJOB_TTL_SECONDS: '1',
    RETRY_BACKOFF_SECONDS: '1', RETRY_PLATFORM_BACKOFF_SECONDS: '1', RETRY_MAX_BACKOFF_SECONDS: '2',
  };
  const gateway = await startGateway(loadGatewayConfig(env), { logger: silent });
  const opCfg = loadOperatorConfig(env);
  const operator = await startOperator(opCfg, { storage: await managedStorageAccess(opCfg), log: silent });
  const { key } = await createApiKey(db.pool, { name: 'bench' });
  const api = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${gateway.url}${path}`, {
      method, headers: { 'x-api-key': key, 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };

  // Committed writes from every writer, by change type and resource.
  const writes = new Map<string, number>();
  cluster.api.subscribe((c) => {
    const k = `${c.type === 'ADDED' ? 'create' : c.type === 'MODIFIED' ? 'modify' : 'delete'} ${label(c.rt)}`;
    writes.set(k, (writes.get(k) ?? 0) + 1);
  });
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const batch = kc.makeApiClient(k8s.BatchV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const secretsBefore = (await core.listNamespacedSecret({ namespace: 'default' })).items.length;
  /** Objects a job leaves in the cluster until its TTLs run out (Events excepted: the API server expires them). */
  const left = async () => (await custom.listNamespacedCustomObject({ group: 'mediajobs.io', version: 'v1alpha1', namespace: 'default', plural: 'mediajobs' }) as { items: unknown[] }).items.length
    + (await batch.listNamespacedJob({ namespace: 'default' })).items.length
    + (await core.listNamespacedPod({ namespace: 'default' })).items.length
    + (await core.listNamespacedSecret({ namespace: 'default' })).items.length - secretsBefore;

  await sleep(2000); // the operator's start-up lists and watches
  // Background: what the operator does with no job at all.
  cluster.resetRequestCounts();
  writes.clear();
  await sleep(IDLE_SECONDS * 1000);
  const idle = cluster.requestCounts();
  process.stdout.write(`\nKubernetes API requests per job (n=${JOBS} per scenario; scripted runner; local cluster)\n`);
  process.stdout.write(`\nBackground, no jobs, ${IDLE_SECONDS} s: ${JSON.stringify(idle)} (${((idle[`update ${LEASES}`] ?? 0) / IDLE_SECONDS).toFixed(2)} lease updates/s per operator replica)\n`);

  for (const sc of SCENARIOS) {
    // The bench's own lists (left()) are taken out below: reset after each.
    cluster.resetRequestCounts();
    writes.clear();
    const benchReads = new Map<string, number>();
    const ownLeft = async () => {
      const n = await left();
      for (const k of ['list mediajobs.mediajobs.io', 'list jobs.batch', 'list pods', 'list secrets']) benchReads.set(k, (benchReads.get(k) ?? 0) + 1);
      return n;
    };
    const t0 = performance.now();
    const ids = await Promise.all(Array.from({ length: JOBS }, async () => {
      const r = await api('POST', '/jobs', { url: sc.url });
      if (r.status !== 201) throw new Error(`POST /jobs answered ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.job_id as string;
    }));
    if (sc.cancel) {
      await Promise.all(ids.map(async (id) => {
        while ((await api('GET', `/jobs/${id}`)).body.status !== 'Processing') await sleep(50);
        await sleep(300); // the runner has reported its first step
        const r = await api('POST', `/jobs/${id}/cancel`);
        if (r.body.status !== 'Cancelled') throw new Error(`cancel of ${id} answered ${r.status} ${JSON.stringify(r.body)}`);
      }));
    }
    const deadline = Date.now() + 600_000;
    for (;;) {
      const statuses = await Promise.all(ids.map(async (id) => (await api('GET', `/jobs/${id}`)).body.status as string));
      if (statuses.every((s) => s === sc.ends) && (await ownLeft()) === 0) break;
      if (Date.now() > deadline) throw new Error(`${sc.name}: not done in 600 s: ${JSON.stringify(statuses)}, ${await left()} objects left`);
      await sleep(250);
    }
    await sleep(1000); // late writes (Events, status) after the last object went
    const seconds = (performance.now() - t0) / 1000;
    const requests = cluster.requestCounts();
    for (const [k, n] of benchReads) requests[k] = (requests[k] ?? 0) - n;
    print(sc.name, seconds, requests, Object.fromEntries(writes));
  }

  await operator.stop();
  await gateway.close();
  await db.drop();
  await cluster.stop();
  rmSync(work, { recursive: true, force: true });
}

function print(name: string, seconds: number, requests: Record<string, number>, committed: Record<string, number>): void {
  const per = (n: number) => (n / JOBS).toFixed(2).replace(/\.00$/, '');
  const isWrite = (k: string) => /^(create|update|patch|delete|deletecollection) /.test(k);
  const rows = Object.entries(requests).filter(([k, n]) => n > 0 && !k.endsWith(LEASES) && k !== 'get nonresource');
  const writeTotal = rows.filter(([k]) => isWrite(k)).reduce((s, [, n]) => s + n, 0);
  const readTotal = rows.filter(([k]) => !isWrite(k)).reduce((s, [, n]) => s + n, 0);
  const committedTotal = Object.values(committed).reduce((s, n) => s + n, 0) - Object.entries(committed).filter(([k]) => k.endsWith(LEASES)).reduce((s, [, n]) => s + n, 0);
  process.stdout.write(`\n${name} (${seconds.toFixed(1)} s for ${JOBS} jobs)\n`);
  process.stdout.write(`  HTTP requests per job: ${per(writeTotal)} writes, ${per(readTotal)} reads (get/list/watch)\n`);
  for (const [k, n] of rows.sort(([a], [b]) => (isWrite(b) ? 1 : 0) - (isWrite(a) ? 1 : 0) || a.localeCompare(b))) {
    process.stdout.write(`    ${k.padEnd(44)} ${per(n)}\n`);
  }
  process.stdout.write(`  committed writes per job, every writer (emulated controllers included): ${per(committedTotal)}\n`);
  for (const [k, n] of Object.entries(committed).filter(([k]) => !k.endsWith(LEASES)).sort(([a], [b]) => a.localeCompare(b))) {
    process.stdout.write(`    ${k.padEnd(44)} ${per(n)}\n`);
  }
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
