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
import * as k8s from '@kubernetes/client-node';
import { cpuSeconds, loadAverage, machine, median, postgresPids, runBench } from '../../api-gateway/bench/support.js';
import { parseExposition } from '../../test/support/metrics.js';
import { MEDIAJOBS, RUNNER_JOBS, firstSeen, jobIdLabel, pct, postAtRate, until, withService as withBenchService, type Service } from './service.js';

const RATE = Number(process.env.BENCH_RATE ?? 100);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const BURST = Number(process.env.BENCH_BURST ?? 5000);
const THROTTLE = Number(process.env.BENCH_THROTTLE ?? 200);
const BURST_CONCURRENCY = 50;
const BODY = JSON.stringify({ url: 'https://media.example/video.mp4' });
const PLATFORM_ROUNDS = Number(process.env.BENCH_PLATFORM_ROUNDS ?? 3);

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

/** The service with MediaPlatforms as `platforms` says; MAX_RUNNING_JOBS above every job the bench sends. */
function withService(throttle: number | undefined, then: (svc: Service) => Promise<void>, platforms?: Platforms): Promise<void> {
  return withBenchService({
    throttle, workPrefix: 'mj-bench-submit-', maxRunning: Math.max(BURST, RATE * (SECONDS + WARMUP_SECONDS)) * 2,
    setup: async (kc) => {
      if (!platforms || platforms === 'none') return;
      const custom = kc.makeApiClient(k8s.CustomObjectsApi);
      for (const body of mediaPlatforms(platforms === 'five, all matching one')) {
        await custom.createClusterCustomObject({ group: 'mediajobs.io', version: 'v1alpha1', plural: 'mediaplatforms', body });
      }
    },
  }, then);
}

/** Latency of one rate phase, POST → runner Job (ms). */
interface RateFigures {
  p50: number;
  p99: number;
  created: number;
  submitted: number;
}

async function ratePhase(svc: Service, label = ''): Promise<RateFigures> {
  const jobs = await firstSeen(svc.kc, RUNNER_JOBS, jobIdLabel);
  const mjs = await firstSeen(svc.kc, MEDIAJOBS, (o) => o.metadata?.name);
  const warm = await postAtRate(svc, RATE * WARMUP_SECONDS, RATE);
  await until(() => [...warm.keys()].every((id) => jobs.at.has(id)), 60_000);

  const total = RATE * SECONDS;
  const procs = { ...Object.fromEntries(Object.entries(svc.procs).map(([k, p]) => [k, [p.pid!]])), Postgres: postgresPids() };
  const cpu0 = Object.fromEntries(Object.entries(procs).map(([k, pids]) => [k, cpuSeconds(pids)]));
  const self0 = process.cpuUsage();
  const sentAt = await postAtRate(svc, total, RATE);
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
  const jobs = await firstSeen(svc.kc, RUNNER_JOBS, jobIdLabel);
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
