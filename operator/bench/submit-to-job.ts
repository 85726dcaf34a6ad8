// Benchmark (issue 16 item 1, docs/adr/0017): time from POST /jobs to the
// runner Job existing in the cluster, at 100 jobs/s with the operator
// running; then a burst of BENCH_BURST POSTs (5,000) with the local cluster
// throttled to BENCH_THROTTLE writes/s (200, answered 429 past it as API
// Priority and Fairness does): how fast they are accepted, every MediaJob
// created, none lost, and the time to drain.
//
// Each part runs in a process of its own, as deployed: the local cluster
// (standing in for kube-apiserver, the controller manager and the kubelet),
// the gateway and the operator; this process only sends the requests and
// watches for the objects. Runner pods are kept Pending (node capacity 1,
// occupied by a sleeper) so that only submission and reconciliation are
// measured. Each phase has its own cluster, database and service. The rate
// phase first runs BENCH_WARMUP_SECONDS (2) at the same rate and waits for
// those jobs, so that what is measured is the steady state, not the first
// seconds' loading and compiling of code. The CPU each process spent per
// job is printed: on a small machine they share the CPUs, and the figures
// say which one ran out.
//
// With platforms (issue 37): the rate phase runs BENCH_PLATFORM_ROUNDS times
// (3; 0 for the single run above) for each of three settings, alternating
// so that the load of a shared machine weighs on each alike: no
// MediaPlatform; five configured, none matching the bench's URLs (the
// gateway's disabled check and the operator's platform lookup on every
// job); five with every job matching one of them, whose maxRunning is high
// enough never to hold one (its admission queue, start counting and
// running count on every job). Printed: each run, then the medians of p50
// and p99 side by side (goal: within 10% of none).
import type { IncomingMessage } from 'node:http';
import https from 'node:https';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { ChildProcess } from 'node:child_process';
import * as k8s from '@kubernetes/client-node';
import { createApiKey } from '../../api-gateway/src/db/api-keys.js';
import {
  BENCH_ADMIN_URL, cpuSeconds, freePort, loadAverage, machine, median, postgresPids, root, runBench, serviceEnv, sleep, start,
  startGateway, startQuietCluster, stop, withScratch,
} from '../../api-gateway/bench/support.js';
import { parseExposition } from '../../test/support/metrics.js';

const RATE = Number(process.env.BENCH_RATE ?? 100);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const BURST = Number(process.env.BENCH_BURST ?? 5000);
const THROTTLE = Number(process.env.BENCH_THROTTLE ?? 200);
const BURST_CONCURRENCY = 50;
const RUNNER_IMAGE = 'mediajobs/runner:bench';
const MEDIAJOBS = '/apis/mediajobs.io/v1alpha1/namespaces/default/mediajobs';
const BODY = JSON.stringify({ url: 'https://media.example/video.mp4' });
const PLATFORM_ROUNDS = Number(process.env.BENCH_PLATFORM_ROUNDS ?? 3);
// The operator waits for an informer of each of its kinds to list: with the MediaJob CRD alone it never started.
const CRDS = ['mediajob.yaml', 'mediabatch.yaml', 'mediaplatform.yaml', 'proxypool.yaml'];

/** Which MediaPlatforms the cluster has: none, five matching no job, or five with every job matching one. */
type Platforms = 'none' | 'five, none matching' | 'five, all matching one';
const PLATFORM_SETTINGS: Platforms[] = ['none', 'five, none matching', 'five, all matching one'];

/** Five platforms as a deployment might have them; with `matching`, the first also takes the bench's host, uncapped in practice. */
function mediaPlatforms(matching: boolean): object[] {
  return Array.from({ length: 5 }, (_, i) => ({
    apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaPlatform', metadata: { name: `platform-${i}` },
    spec: matching && i === 0
      ? { match: { hosts: ['media.example', `platform-${i}.example`] }, maxRunning: 1_000_000 }
      : { match: { hosts: [`platform-${i}.example`, `*.platform-${i}.example`] }, maxRunning: 20, startsPerMinute: 60, ytdlpArgs: ['--sleep-requests', '1'] },
  }));
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

interface Service {
  url: string;
  key: string;
  kc: k8s.KubeConfig;
  metricsUrl: string;
  procs: Record<'local cluster' | 'gateway' | 'operator', ChildProcess>;
}

/** Cluster, gateway and operator, each in its own process, on the scratch database; `then` runs against them. */
async function withService(throttle: number | undefined, then: (svc: Service) => Promise<void>, platforms?: Platforms): Promise<void> {
  await withScratch({ adminUrl: BENCH_ADMIN_URL, poolMax: 2, workPrefix: 'mj-bench-submit-', keepWork: Boolean(process.env.BENCH_KEEP) }, async ({ dbUrl, pool, work }) => {
    const nodeArgs = (name: string) => (process.env.BENCH_CPU_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${join(process.env.BENCH_CPU_PROFILE_DIR, name)}`] : []);
    const cluster = await startQuietCluster(work, CRDS, RUNNER_IMAGE, {
      args: throttle ? ['--max-writes-per-second', String(throttle)] : [], nodeArgs: nodeArgs('cluster'),
    });
    if (platforms && platforms !== 'none') {
      const custom = cluster.kc.makeApiClient(k8s.CustomObjectsApi);
      for (const body of mediaPlatforms(platforms === 'five, all matching one')) {
        await custom.createClusterCustomObject({ group: 'mediajobs.io', version: 'v1alpha1', plural: 'mediaplatforms', body });
      }
    }
    const env: NodeJS.ProcessEnv = {
      ...serviceEnv(dbUrl, cluster.kubeconfig, work), RUNNER_IMAGE, LEADER_ELECTION: 'false',
      MAX_RUNNING_JOBS: String(Math.max(BURST, RATE * (SECONDS + WARMUP_SECONDS)) * 2), RECONCILE_CONCURRENCY: '16',
    };
    const gateway = await startGateway(env, work, nodeArgs('gateway'));
    const metricsPort = await freePort();
    const operator = await start(join(root, 'operator/src/main.ts'), /operator started/, join(work, 'operator.log'), {
      env: { ...env, LOG_LEVEL: 'info', METRICS_HOST: '127.0.0.1', METRICS_PORT: String(metricsPort) }, nodeArgs: nodeArgs('operator'),
    });
    const { key } = await createApiKey(pool, { name: 'bench' });
    await then({
      url: gateway.url, key, kc: cluster.kc, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
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
async function firstSeen(kc: k8s.KubeConfig, path: string, idOf: (obj: k8s.KubernetesObject) => string | undefined): Promise<{ at: Map<string, number>; stop(): void }> {
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

/** POST `total` jobs at RATE per second; the job ids with when each was sent. */
async function postAtRate(svc: Service, total: number): Promise<Map<string, number>> {
  const sentAt = new Map<string, number>();
  const start = performance.now();
  const posts: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const wait = start + (i * 1000) / RATE - performance.now();
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

async function until(done: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done() && Date.now() < deadline) await sleep(50);
}

/** Latency of one rate phase, POST → runner Job (ms). */
interface RateFigures {
  p50: number;
  p99: number;
  created: number;
  submitted: number;
}

async function ratePhase(svc: Service, label = ''): Promise<RateFigures> {
  const jobs = await firstSeen(svc.kc, '/apis/batch/v1/namespaces/default/jobs', (o) => o.metadata?.labels?.['mediajobs.io/job-id']);
  const mjs = await firstSeen(svc.kc, MEDIAJOBS, (o) => o.metadata?.name);
  const warm = await postAtRate(svc, RATE * WARMUP_SECONDS);
  await until(() => [...warm.keys()].every((id) => jobs.at.has(id)), 60_000);

  const total = RATE * SECONDS;
  const procs = { ...Object.fromEntries(Object.entries(svc.procs).map(([k, p]) => [k, [p.pid!]])), Postgres: postgresPids() };
  const cpu0 = Object.fromEntries(Object.entries(procs).map(([k, pids]) => [k, cpuSeconds(pids)]));
  const self0 = process.cpuUsage();
  const sentAt = await postAtRate(svc, total);
  await until(() => [...sentAt.keys()].every((id) => jobs.at.has(id)), 60_000);
  const self = process.cpuUsage(self0);
  const perJob = (seconds: number) => ((seconds * 1000) / total).toFixed(2);
  const cpu = [...Object.entries(procs).map(([k, pids]) => `${k} ${perJob(cpuSeconds(pids) - cpu0[k]!)}`), `bench ${perJob((self.user + self.system) / 1e6)}`];
  const latency = (seen: Map<string, number>) => [...sentAt].filter(([id]) => seen.has(id)).map(([id, t]) => seen.get(id)! - t).sort((a, b) => a - b);
  const lat = latency(jobs.at);
  const toMj = latency(mjs.at);
  jobs.stop();
  mjs.stop();

  process.stdout.write(`\nPOST /jobs → runner Job exists (rate ${RATE}/s for ${SECONDS} s after ${WARMUP_SECONDS} s of warm-up, operator running)${label}\n`);
  process.stdout.write(`  jobs submitted / Jobs created      ${sentAt.size} / ${lat.length}\n`);
  process.stdout.write(`  latency p50 / p99 / max (ms)       ${pct(lat, 50).toFixed(1)} / ${pct(lat, 99).toFixed(1)} / ${lat[lat.length - 1]?.toFixed(1)}   (goal: p99 < 1000)\n`);
  process.stdout.write(`  of which POST → MediaJob p50 / p99  ${pct(toMj, 50).toFixed(1)} / ${pct(toMj, 99).toFixed(1)}\n`);
  process.stdout.write(`  CPU ms per job                     ${cpu.join(', ')}\n`);
  return { p50: pct(lat, 50), p99: pct(lat, 99), created: lat.length, submitted: sentAt.size };
}

/** The rate phase for each platform setting, PLATFORM_ROUNDS rounds, the order turned each round; medians side by side. */
async function platformComparison(): Promise<void> {
  const runs = new Map<Platforms, RateFigures[]>(PLATFORM_SETTINGS.map((p) => [p, []]));
  for (let round = 0; round < PLATFORM_ROUNDS; round++) {
    const order = PLATFORM_SETTINGS.map((_, i) => PLATFORM_SETTINGS[(i + round) % PLATFORM_SETTINGS.length]!);
    for (const platforms of order) {
      await withService(undefined, async (svc) => {
        runs.get(platforms)!.push(await ratePhase(svc, `; MediaPlatforms: ${platforms}, round ${round + 1} (load ${loadAverage()})`));
      }, platforms);
    }
  }
  const none = runs.get('none')!;
  const base = { p50: median(none.map((r) => r.p50)), p99: median(none.map((r) => r.p99)) };
  process.stdout.write(`\nPOST /jobs → runner Job at ${RATE}/s by MediaPlatforms configured: medians of ${PLATFORM_ROUNDS} alternating runs each (goal: p99 within 10% of none)\n`);
  process.stdout.write(`  ${'platforms'.padEnd(24)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)}  p99 vs none  runs' p99 (ms)                     Jobs created\n`);
  for (const [platforms, rs] of runs) {
    const p50 = median(rs.map((r) => r.p50));
    const p99 = median(rs.map((r) => r.p99));
    const vs = platforms === 'none' ? '' : `${p99 >= base.p99 ? '+' : ''}${(((p99 - base.p99) / base.p99) * 100).toFixed(1)}%`;
    process.stdout.write(`  ${platforms.padEnd(24)} ${p50.toFixed(1).padStart(8)} ${p99.toFixed(1).padStart(8)}  ${vs.padStart(11)}  ${rs.map((r) => r.p99.toFixed(0)).join(' / ').padEnd(34)} ${rs.map((r) => `${r.created}/${r.submitted}`).join(' ')}\n`);
  }
}

/** BURST POSTs at concurrency 50 against a throttled API server: acceptance time, then every MediaJob created. */
async function burstPhase(svc: Service): Promise<void> {
  const mjs = await firstSeen(svc.kc, MEDIAJOBS, (o) => o.metadata?.name);
  const jobs = await firstSeen(svc.kc, '/apis/batch/v1/namespaces/default/jobs', (o) => o.metadata?.labels?.['mediajobs.io/job-id']);
  const accepted: string[] = [];
  const refused = new Map<number, number>();
  let next = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: BURST_CONCURRENCY }, async () => {
    while (next++ < BURST) {
      const r = await fetch(`${svc.url}/jobs`, { method: 'POST', headers: { 'x-api-key': svc.key, 'Content-Type': 'application/json' }, body: BODY });
      if (r.status === 201) accepted.push(((await r.json()) as { job_id: string }).job_id);
      else refused.set(r.status, (refused.get(r.status) ?? 0) + 1);
    }
  }));
  const acceptedMs = performance.now() - start;
  const missing = () => accepted.filter((id) => !mjs.at.has(id)).length;
  await until(() => missing() === 0, 600_000);
  const drainMs = performance.now() - start;
  const withoutJob = () => accepted.filter((id) => !jobs.at.has(id)).length;
  await until(() => withoutJob() === 0, 600_000);
  const runnersMs = performance.now() - start;
  mjs.stop();
  jobs.stop();
  const throttled = parseExposition(await (await fetch(svc.metricsUrl)).text()).value('mediajobs_materialized_total', { kind: 'MediaJob', result: 'throttled' });
  process.stdout.write(`\nBurst of ${BURST} POSTs (concurrency ${BURST_CONCURRENCY}), local cluster throttled to ${THROTTLE} writes/s\n`);
  process.stdout.write(`  accepted (201) / refused            ${accepted.length} / ${[...refused.values()].reduce((a, b) => a + b, 0)}${refused.size ? ` (${[...refused].map(([s, n]) => `${n}× ${s}`).join(', ')})` : ''}\n`);
  process.stdout.write(`  all accepted in                     ${(acceptedMs / 1000).toFixed(2)} s (${(accepted.length / (acceptedMs / 1000)).toFixed(0)} jobs/s)\n`);
  process.stdout.write(`  MediaJobs created / missing         ${accepted.length - missing()} / ${missing()}\n`);
  process.stdout.write(`  time to drain (first POST → last)   ${(drainMs / 1000).toFixed(2)} s\n`);
  process.stdout.write(`  … until every runner Job exists     ${(runnersMs / 1000).toFixed(2)} s${withoutJob() ? ` (${withoutJob()} still without one)` : ''}\n`);
  process.stdout.write(`  MediaJob creates answered 429       ${throttled}\n`);
}

async function main(): Promise<void> {
  process.stdout.write(`submit-to-job (${machine(loadAverage())})\n`);
  if (PLATFORM_ROUNDS > 0) await platformComparison();
  else await withService(undefined, async (svc) => void await ratePhase(svc));
  if (BURST > 0) await withService(THROTTLE, burstPhase);
}

runBench(main);
