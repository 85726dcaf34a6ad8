// What the operator's load benches share: the service as deployed, each part
// in a process of its own (the local cluster standing in for kube-apiserver,
// the controller manager and the kubelet; the gateway; the operator), on a
// scratch database; jobs POSTed at a steady rate; and metadata-only watches
// that say when each MediaJob and runner Job first appeared. Runner pods are
// kept Pending (node capacity 1, occupied by a sleeper) so that only
// submission and reconciliation are measured. What a bench measures and
// prints stays in the bench.
import type { ChildProcess } from 'node:child_process';
import type { IncomingMessage } from 'node:http';
import https from 'node:https';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import * as k8s from '@kubernetes/client-node';
import type pg from 'pg';
import { createApiKey } from '../../api-gateway/src/db/api-keys.js';
import {
  BENCH_ADMIN_URL, freePort, root, serviceEnv, sleep, start, startGateway, startQuietCluster, stop, withScratch,
} from '../../api-gateway/bench/support.js';

export const RUNNER_IMAGE = 'mediajobs/runner:bench';
export const MEDIAJOBS = '/apis/mediajobs.io/v1alpha1/namespaces/default/mediajobs';
export const RUNNER_JOBS = '/apis/batch/v1/namespaces/default/jobs';
const BODY = JSON.stringify({ url: 'https://media.example/video.mp4' });
// The operator waits for an informer of each of its kinds to list: with the MediaJob CRD alone it never started.
const CRDS = ['mediajob.yaml', 'mediabatch.yaml', 'mediaplatform.yaml', 'proxypool.yaml'];

export interface Service {
  url: string;
  key: string;
  /** The cluster's administrator (system:masters). */
  kc: k8s.KubeConfig;
  /** The operator's own /metrics. */
  metricsUrl: string;
  procs: Record<'local cluster' | 'gateway' | 'operator', ChildProcess>;
  /** A small pool on the scratch database, for the bench's own queries. */
  pool: pg.Pool;
}

export interface ServiceOptions {
  /** The local cluster's --max-writes-per-second (429 past it). */
  throttle?: number;
  /** MAX_RUNNING_JOBS: above every job the bench sends, so that none waits for a slot. */
  maxRunning: number;
  /** Objects created in the cluster before the operator starts (MediaPlatforms, say). */
  setup?: (kc: k8s.KubeConfig) => Promise<void>;
  /** Prefix of the scratch work directory. */
  workPrefix: string;
}

/**
 * Cluster, gateway and operator, each in its own process, on a scratch
 * database; `then` runs against them. BENCH_CPU_PROFILE_DIR writes each
 * process's CPU profile under <dir>/<process>; BENCH_KEEP keeps the logs.
 */
export async function withService(opts: ServiceOptions, then: (svc: Service) => Promise<void>): Promise<void> {
  await withScratch({ adminUrl: BENCH_ADMIN_URL, poolMax: 2, workPrefix: opts.workPrefix, keepWork: Boolean(process.env.BENCH_KEEP) }, async ({ dbUrl, pool, work }) => {
    // A connection ended by the server (a restart, a terminate on a shared one) is not the bench's failure: the pool reconnects.
    pool.on('error', () => undefined);
    const nodeArgs = (name: string) => (process.env.BENCH_CPU_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${join(process.env.BENCH_CPU_PROFILE_DIR, name)}`] : []);
    const cluster = await startQuietCluster(work, CRDS, RUNNER_IMAGE, {
      args: opts.throttle ? ['--max-writes-per-second', String(opts.throttle)] : [], nodeArgs: nodeArgs('cluster'),
    });
    await opts.setup?.(cluster.kc);
    const env: NodeJS.ProcessEnv = {
      ...serviceEnv(dbUrl, cluster.kubeconfig, work), RUNNER_IMAGE, LEADER_ELECTION: 'false',
      MAX_RUNNING_JOBS: String(opts.maxRunning), RECONCILE_CONCURRENCY: '16',
    };
    const gateway = await startGateway(env, work, nodeArgs('gateway'));
    const metricsPort = await freePort();
    const operator = await start(join(root, 'operator/src/main.ts'), /operator started/, join(work, 'operator.log'), {
      env: { ...env, LOG_LEVEL: 'info', METRICS_HOST: '127.0.0.1', METRICS_PORT: String(metricsPort) }, nodeArgs: nodeArgs('operator'),
    });
    const { key } = await createApiKey(pool, { name: 'bench' });
    await then({
      url: gateway.url, key, kc: cluster.kc, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`, pool,
      procs: { 'local cluster': cluster.proc, gateway: gateway.proc, operator },
    });
    // Stopped here, before withScratch drops their database, so that each writes its CPU profile.
    await stop(operator);
    await stop(gateway.proc);
    await stop(cluster.proc);
  });
}

/**
 * First ADDED of each object under `path`, by `idOf`, with when it was seen.
 * A metadata-only watch (as=PartialObjectMetadata, as client-go's metadata
 * informers ask): names and labels are all this needs, and decoding every
 * Job's and MediaJob's spec and status on each event would be the load
 * generator's CPU taken from the service on a machine they share.
 */
export async function firstSeen(kc: k8s.KubeConfig, path: string, idOf: (obj: k8s.KubernetesObject) => string | undefined): Promise<{ at: Map<string, number>; stop(): void }> {
  const at = new Map<string, number>();
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const url = new URL(`${kc.getCurrentCluster()!.server}${path}?watch=true`);
  const ctrl = new AbortController();
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    https.request(url, { ...opts, signal: ctrl.signal, headers: { ...opts.headers, Accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1' } }, resolve)
      .on('error', reject).end();
  });
  if (res.statusCode !== 200) throw new Error(`watch ${path} answered ${res.statusCode}`);
  const lines = createInterface({ input: res });
  lines.on('line', (line) => {
    const { type, object } = JSON.parse(line) as { type: string; object: k8s.KubernetesObject };
    const id = idOf(object);
    if (type === 'ADDED' && id && !at.has(id)) at.set(id, performance.now());
  });
  // stop() aborts the request: the stream ends with an error, which readline passes on.
  res.on('error', () => undefined);
  lines.on('error', () => undefined);
  return { at, stop: () => ctrl.abort() };
}

/** The runner Job's id label: which job a runner Job is for. */
export const jobIdLabel = (o: k8s.KubernetesObject) => o.metadata?.labels?.['mediajobs.io/job-id'];

/** POST `total` jobs at `rate` per second; the job ids with when each was sent. */
export async function postAtRate(svc: Pick<Service, 'url' | 'key'>, total: number, rate: number): Promise<Map<string, number>> {
  const sentAt = new Map<string, number>();
  const begin = performance.now();
  const posts: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const wait = begin + (i * 1000) / rate - performance.now();
    if (wait > 0) await sleep(wait);
    const t = performance.now();
    posts.push(fetch(`${svc.url}/jobs`, { method: 'POST', headers: { 'x-api-key': svc.key, 'Content-Type': 'application/json' }, body: BODY })
      .then(async (r) => {
        const j = (await r.json()) as { job_id: string };
        sentAt.set(j.job_id, t);
      }));
  }
  await Promise.all(posts);
  return sentAt;
}

/** Resolves once `done()` is true, or after `ms`. */
export async function until(done: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done() && Date.now() < deadline) await sleep(50);
}

/** The p-th percentile of sorted values (nearest rank). */
export function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}
