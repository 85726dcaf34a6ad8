// Benchmark (issue 17 item 1): what the Prometheus metrics cost.
// POST /jobs and GET /jobs/{id} throughput through a gateway keeping metrics
// (the default) against the same load on one with METRICS_ENABLED=false, in
// the same run. The runs alternate (and which goes first, round by round)
// for BENCH_ROUNDS rounds so that other load on the machine falls on both;
// medians are compared. Goal: metrics on / off >= 0.95.
// Then GET /metrics on the gateway with metrics, once it has accepted at
// least 10,000 jobs (topped up with POST /jobs when the load runs made
// fewer), timed BENCH_SCRAPES times one after another. Goal: under 50 ms.
// Setting as rate-limit.ts: gateways and local cluster (no operator) each in
// their own process, a scratch database dropped at the end.
//
//   npx tsx api-gateway/bench/metrics.ts
//
// BENCH_DURATION (s per run, default 10), BENCH_ROUNDS (5), BENCH_CONNECTIONS (50), BENCH_SCRAPES (50),
// BENCH_DATABASE_ADMIN_URL (postgres://postgres@127.0.0.1:5432/test),
// BENCH_GATEWAY_LOG_LEVEL (info: the gateway logs every request, as in production).
import type { ChildProcess } from 'node:child_process';
import type autocannon from 'autocannon';
import { scrape } from '../../test/support/metrics.js';
import { createApiKey, createOrganization } from '../src/db/api-keys.js';
import {
  BENCH_ADMIN_URL, BENCH_POOL_MAX, cannon, type Figures, figures, GATEWAY_LOG_LEVEL as LOG_LEVEL, JOB_BODY, loadAverage, machine, median, postgresPids,
  rowPrinter, runBench, serviceEnv, startCluster, startGateway, withCpu, withScratch,
} from './support.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const SCRAPES = Number(process.env.BENCH_SCRAPES ?? 50);
/** Jobs the metrics gateway has accepted before its scrape is timed (the figure). */
const JOBS_BEFORE_SCRAPE = 10_000;

type Mode = 'on' | 'off';
type Load = 'POST /jobs' | 'GET /jobs/{id}';

interface Run extends Figures {
  /** CPU ms per 2xx answer of the gateway. */
  cpuMs: number;
}

interface Served {
  url: string;
  /** Its metrics listener (METRICS_PORT). */
  metricsUrl: string;
  proc: ChildProcess;
}

async function loadRun(gw: Served, load: Load, apiKey: string, jobIds: string[], seconds: number, helpers: () => number[]): Promise<Run> {
  const request: autocannon.Request = load === 'POST /jobs'
    ? { method: 'POST', path: '/jobs', body: JOB_BODY, headers: { 'content-type': 'application/json', 'x-api-key': apiKey } }
    : {
      method: 'GET', headers: { 'x-api-key': apiKey },
      setupRequest: (r: autocannon.Request) => ({ ...r, path: `/jobs/${jobIds[Math.floor(Math.random() * jobIds.length)]}` }),
    };
  const groups = { gateway: () => [gw.proc.pid!], serving: () => [gw.proc.pid!, ...helpers(), ...postgresPids()] };
  const r = await withCpu(groups, async () => figures(await cannon({ url: gw.url, connections: CONNECTIONS, duration: seconds, requests: [request] })));
  return { ...r, cpuMs: r.cpu.gateway };
}

async function main(): Promise<void> {
  const load0 = loadAverage();
  await withScratch({ adminUrl: BENCH_ADMIN_URL, poolMax: 2, workPrefix: 'mj-bench-metrics-' }, async ({ dbUrl, pool, work }) => {
    const org = await createOrganization(pool, 'bench');
    const { key } = await createApiKey(pool, { name: 'bench', organizationId: org.id });
    const cluster = await startCluster(work, ['mediajob.yaml']);
    const env = serviceEnv(dbUrl, cluster.kubeconfig, work);
    const helpers = () => [cluster.proc.pid!];
    const gateways: Record<Mode, Served> = {
      on: await startGateway(env, work, [], 'gateway-metrics-on.log'),
      off: await startGateway({ ...env, METRICS_ENABLED: 'false' }, work, [], 'gateway-metrics-off.log'),
    };

    // Warm-up of both gateways and both paths; the POSTs make the jobs the GETs read.
    for (const mode of ['on', 'off'] as const) await loadRun(gateways[mode], 'POST /jobs', key, [], 2, helpers);
    const jobIds = (await pool.query<{ id: string }>('SELECT id FROM jobs ORDER BY random() LIMIT 10000')).rows.map((r) => r.id);
    for (const mode of ['on', 'off'] as const) await loadRun(gateways[mode], 'GET /jobs/{id}', key, jobIds, 2, helpers);

    const runs: Record<Load, Record<Mode, Run[]>> = { 'POST /jobs': { on: [], off: [] }, 'GET /jobs/{id}': { on: [], off: [] } };
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 ? (['on', 'off'] as const) : (['off', 'on'] as const);
      for (const load of ['POST /jobs', 'GET /jobs/{id}'] as const) {
        process.stdout.write(`round ${round}/${ROUNDS}: ${load} ${DURATION} s, metrics ${order.join(', then ')}, c=${CONNECTIONS}...\n`);
        for (const mode of order) runs[load][mode].push(await loadRun(gateways[mode], load, key, jobIds, DURATION, helpers));
      }
    }

    // The scrape once the metrics gateway has accepted 10,000 jobs at least.
    const metricsUrl = `${gateways.on.metricsUrl}/metrics`;
    const accepted = async () => (await scrape(metricsUrl)).value('mediajobs_jobs_accepted_total');
    while (await accepted() < JOBS_BEFORE_SCRAPE) {
      const missing = JOBS_BEFORE_SCRAPE - (await accepted());
      process.stdout.write(`topping up: ${missing} more POST /jobs on the metrics gateway...\n`);
      await cannon({
        url: gateways.on.url, connections: CONNECTIONS, amount: missing,
        requests: [{ method: 'POST', path: '/jobs', body: JOB_BODY, headers: { 'content-type': 'application/json', 'x-api-key': key } }],
      });
    }
    const scrapeMs: number[] = [];
    let bytes = 0;
    let series = 0;
    for (let i = 0; i < SCRAPES; i++) {
      const t0 = process.hrtime.bigint();
      const res = await fetch(metricsUrl);
      const text = await res.text();
      scrapeMs.push(Number(process.hrtime.bigint() - t0) / 1e6);
      bytes = text.length;
      series = text.split('\n').filter((l) => l && !l.startsWith('#')).length;
    }
    const final = await scrape(metricsUrl);

    const line = rowPrinter(64, 22);
    process.stdout.write(`\nMetrics benchmark (gateway LOG_LEVEL=${LOG_LEVEL}, pool ${BENCH_POOL_MAX}, c=${CONNECTIONS}, ${machine(load0)})\n`);
    for (const load of ['POST /jobs', 'GET /jobs/{id}'] as const) {
      const { on, off } = runs[load];
      const [mOn, mOff] = [median(on.map((r) => r.rps)), median(off.map((r) => r.rps))];
      line(`${load} metrics off: req/s per round`, off.map((r) => r.rps.toFixed(0)).join(' / '));
      line(`${load} metrics on: req/s per round`, on.map((r) => r.rps.toFixed(0)).join(' / '));
      line(`${load} ratio on / off (medians)`, (mOn / mOff).toFixed(3), '>= 0.95');
      line(`${load} median p99 ms, off / on`, `${median(off.map((r) => r.p99)).toFixed(1)} / ${median(on.map((r) => r.p99)).toFixed(1)}`);
      line(`${load} median gateway CPU ms per answer, off / on`, `${median(off.map((r) => r.cpuMs)).toFixed(3)} / ${median(on.map((r) => r.cpuMs)).toFixed(3)}`);
      line(`${load} non-2xx or errors, off / on`, `${off.reduce((a, r) => a + r.bad, 0)} / ${on.reduce((a, r) => a + r.bad, 0)}`, '0 / 0');
    }
    const sorted = [...scrapeMs].sort((a, b) => a - b);
    line(`GET /metrics after ${final.value('mediajobs_jobs_accepted_total')} jobs: median / max ms`,
      `${median(scrapeMs).toFixed(2)} / ${sorted.at(-1)!.toFixed(2)}`, '< 50 ms');
    line(`  scrapes timed / answer bytes / samples`, `${SCRAPES} / ${bytes} / ${series}`);
    line(`  requests counted by the metrics gateway`, String(final.value('mediajobs_http_requests_total')));
  });
}

runBench(main);
