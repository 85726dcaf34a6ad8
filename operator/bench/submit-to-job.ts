// Benchmark (issue 16 item 1, docs/adr/0017): time from POST /jobs to the
// runner Job existing in the cluster, at 100 jobs/s with the operator
// running; then a burst of BENCH_BURST POSTs (5,000) with the local cluster
// throttled to BENCH_THROTTLE writes/s (200, answered 429 past it as API
// Priority and Fairness does): how fast they are accepted, every MediaJob
// created, none lost, and the time to drain.
// Gateway, operator and local cluster run in this process as in `make run`;
// runner pods are kept Pending (node capacity 1, occupied by a sleeper) so
// that only submission and reconciliation are measured.
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { LocalCluster } from '@mediajobs/local-cluster';
import { loadGatewayConfig } from '../../api-gateway/src/config.js';
import { createApiKey } from '../../api-gateway/src/db/api-keys.js';
import { startGateway } from '../../api-gateway/src/server.js';
import { createTestDatabase } from '../../test/support/postgres.js';
import { loadOperatorConfig } from '../src/config.js';
import { managedStorageAccess } from '../src/managed-storage.js';
import { startOperator } from '../src/operator.js';

const RATE = Number(process.env.BENCH_RATE ?? 100);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const BURST = Number(process.env.BENCH_BURST ?? 5000);
const THROTTLE = Number(process.env.BENCH_THROTTLE ?? 200);
const BURST_CONCURRENCY = 50;
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function main(): Promise<void> {
  const silent = pino({ level: 'silent' });
  const work = mkdtempSync(join(tmpdir(), 'mj-bench-'));
  const cluster = await LocalCluster.start({
    workDir: join(work, 'cluster'), logger: silent, maxRunningPods: 1,
    imageCommands: { 'mediajobs/runner:bench': ['sleep', '3600'] },
  });
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(cluster.kubeconfigPath);
  const ext = kc.makeApiClient(k8s.ApiextensionsV1Api);
  const { parse } = await import('yaml');
  const { readFileSync } = await import('node:fs');
  await ext.createCustomResourceDefinition({ body: parse(readFileSync(join(ROOT, 'crds/mediajob.yaml'), 'utf8')) as k8s.V1CustomResourceDefinition });
  const db = await createTestDatabase('mediajobs_bench');
  const env: NodeJS.ProcessEnv = {
    DATABASE_URL: db.url, KUBECONFIG: cluster.kubeconfigPath, SECRET_KEYS: SecretBox.generateSpec('b'),
    FILE_URL_SECRET: randomBytes(24).toString('hex'), MANAGED_STORAGE_DIR: join(work, 'storage'), PORT: '0', HOST: '127.0.0.1',
    RUNNER_IMAGE: 'mediajobs/runner:bench', MAX_RUNNING_JOBS: String(RATE * SECONDS * 2), RECONCILE_CONCURRENCY: '16', LOG_LEVEL: 'silent',
    // The burst measures the materializer, not the per-key request limit (1,000/s by default), which a fast machine passes.
    RATE_LIMIT_PER_SECOND: '1000000',
  };
  const gateway = await startGateway(loadGatewayConfig(env), { logger: silent });
  const opCfg = loadOperatorConfig(env);
  const operator = await startOperator(opCfg, { storage: await managedStorageAccess(opCfg), log: silent });
  const { key } = await createApiKey(db.pool, { name: 'bench' });

  const sentAt = new Map<string, number>();
  const jobAt = new Map<string, number>();
  const watch = new k8s.Watch(kc);
  const req = await watch.watch('/apis/batch/v1/namespaces/default/jobs', {}, (type, obj: k8s.V1Job) => {
    const id = obj.metadata?.labels?.['mediajobs.io/job-id'];
    if (type === 'ADDED' && id && !jobAt.has(id)) jobAt.set(id, performance.now());
  }, () => undefined);

  const mjAt = new Map<string, number>();
  const mjWatch = await new k8s.Watch(kc).watch('/apis/mediajobs.io/v1alpha1/namespaces/default/mediajobs', {}, (type, obj: { metadata?: { name?: string } }) => {
    const name = obj.metadata?.name;
    if (type === 'ADDED' && name && !mjAt.has(name)) mjAt.set(name, performance.now());
  }, () => undefined);

  const body = JSON.stringify({ url: 'https://media.example/video.mp4' });
  const total = RATE * SECONDS;
  const start = performance.now();
  const posts: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const t = performance.now();
    posts.push(fetch(`${gateway.url}/jobs`, { method: 'POST', headers: { 'x-api-key': key, 'Content-Type': 'application/json' }, body })
      .then(async (r) => {
        const j = (await r.json()) as { job_id: string };
        sentAt.set(j.job_id, t);
      }));
  }
  await Promise.all(posts);
  const deadline = Date.now() + 60_000;
  while (jobAt.size < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const lat = [...sentAt].filter(([id]) => jobAt.has(id)).map(([id, t]) => jobAt.get(id)! - t).sort((a, b) => a - b);
  const toMj = [...sentAt].filter(([id]) => mjAt.has(id)).map(([id, t]) => mjAt.get(id)! - t).sort((a, b) => a - b);
  mjWatch.abort();

  process.stdout.write(`\nPOST /jobs → runner Job exists (rate ${RATE}/s for ${SECONDS} s, operator running)\n`);
  process.stdout.write(`  jobs submitted / Jobs created      ${sentAt.size} / ${jobAt.size}\n`);
  process.stdout.write(`  latency p50 / p99 / max (ms)       ${pct(lat, 50).toFixed(1)} / ${pct(lat, 99).toFixed(1)} / ${lat[lat.length - 1]?.toFixed(1)}\n`);
  process.stdout.write(`  of which POST → MediaJob p50 / p99  ${pct(toMj, 50).toFixed(1)} / ${pct(toMj, 99).toFixed(1)}\n`);

  req.abort();
  if (BURST > 0) await burst(kc, cluster, gateway.url, key, body);

  await operator.stop();
  await gateway.close();
  await db.drop();
  await cluster.stop();
  rmSync(work, { recursive: true, force: true });
}

/** BURST POSTs at concurrency 50 against a throttled API server: acceptance time, then every MediaJob created. */
async function burst(kc: k8s.KubeConfig, cluster: LocalCluster, url: string, key: string, body: string): Promise<void> {
  const seen = new Set<string>();
  const watch = new k8s.Watch(kc);
  const req = await watch.watch('/apis/mediajobs.io/v1alpha1/namespaces/default/mediajobs', {}, (type, obj: { metadata?: { name?: string } }) => {
    if (type === 'ADDED' && obj.metadata?.name) seen.add(obj.metadata.name);
  }, () => undefined);
  await new Promise((r) => setTimeout(r, 500)); // the watch's initial ADDED of the rate phase's MediaJobs
  const before = new Set(seen);
  cluster.throttleWrites(THROTTLE);
  const accepted: string[] = [];
  const refused = new Map<number, number>();
  let next = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: BURST_CONCURRENCY }, async () => {
    while (next++ < BURST) {
      const r = await fetch(`${url}/jobs`, { method: 'POST', headers: { 'x-api-key': key, 'Content-Type': 'application/json' }, body });
      if (r.status === 201) accepted.push(((await r.json()) as { job_id: string }).job_id);
      else refused.set(r.status, (refused.get(r.status) ?? 0) + 1);
    }
  }));
  const acceptedMs = performance.now() - start;
  const deadline = Date.now() + 600_000;
  const missing = () => accepted.filter((id) => !seen.has(id) && !before.has(id)).length;
  while (missing() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const drainMs = performance.now() - start;
  process.stdout.write(`\nBurst of ${BURST} POSTs (concurrency ${BURST_CONCURRENCY}), local cluster throttled to ${THROTTLE} writes/s\n`);
  process.stdout.write(`  accepted (201) / refused            ${accepted.length} / ${[...refused.values()].reduce((a, b) => a + b, 0)}${refused.size ? ` (${[...refused].map(([s, n]) => `${n}× ${s}`).join(', ')})` : ''}\n`);
  process.stdout.write(`  all accepted in                     ${(acceptedMs / 1000).toFixed(2)} s (${(accepted.length / (acceptedMs / 1000)).toFixed(0)} jobs/s)\n`);
  process.stdout.write(`  MediaJobs created / missing         ${accepted.length - missing()} / ${missing()}\n`);
  process.stdout.write(`  time to drain (first POST → last)   ${(drainMs / 1000).toFixed(2)} s\n`);
  process.stdout.write(`  writes answered 429                 ${cluster.throttledWrites}\n`);
  cluster.throttleWrites(undefined);
  req.abort();
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
