// Benchmark (issue 14 item 5): what the request rate limit costs.
// POST /jobs and GET /jobs/{id} throughput through a gateway counting in
// Redis (a redis-server of this machine on a free loopback port) against
// the same load on a gateway counting in its own process, with the limit
// set so high that nothing is refused. The in-process counter is the
// baseline because a gateway always has a limit; its own cost is printed
// too (about a microsecond), so the ratio is, within that, the ratio to no
// limit at all. The runs alternate (and which goes first, round by round)
// for BENCH_ROUNDS rounds so that other load on the machine falls on both;
// medians are compared. Goal: with Redis / in process >= 0.9.
//
// The limiter's added latency is its own time per request: each gateway
// times every check (process.hrtime around the counter, src/rate-limit.ts)
// into mediajobs_rate_limit_check_duration_seconds, read from its /metrics
// before it stops (quantiles interpolated within the histogram's buckets,
// as PromQL's histogram_quantile does); warm-up runs included. Under the
// load runs that time includes waiting for a turn on the busy event loop,
// so a fresh gateway counting in Redis is also timed one request at a time.
// Setting as idempotency.ts: gateways and local cluster (no operator) each in
// their own process, a scratch database dropped at the end.
//
//   npx tsx api-gateway/bench/rate-limit.ts
//
// BENCH_DURATION (s per run, default 10), BENCH_ROUNDS (3), BENCH_CONNECTIONS (50),
// BENCH_DATABASE_ADMIN_URL (postgres://postgres@127.0.0.1:5432/test),
// BENCH_GATEWAY_LOG_LEVEL (info: the gateway logs every request, as in production).
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type autocannon from 'autocannon';
import { histogramQuantile, scrape } from '../../test/support/metrics.js';
import { createApiKey, createOrganization } from '../src/db/api-keys.js';
import {
  BENCH_ADMIN_URL, BENCH_POOL_MAX, cannon, type Figures, figures, GATEWAY_LOG_LEVEL as LOG_LEVEL, JOB_BODY, loadAverage, machine, median, postgresPids,
  rowPrinter, runBench, serviceEnv, sleep, startCluster, startGateway, startRedisServer, stop, withCpu, withScratch,
} from './support.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
/** High enough that no request of the load is refused: what is measured is the counting. */
const LIMIT = '1000000000';

type Counter = 'redis' | 'in-process';
type Load = 'POST /jobs' | 'GET /jobs/{id}';

interface Run extends Figures {
  /** CPU ms per 2xx answer of the gateway, and of every process serving it (gateway, cluster, Postgres, redis-server). */
  cpuMs: { gateway: number; all: number };
}

interface Served {
  url: string;
  /** Its metrics listener (METRICS_PORT). */
  metricsUrl: string;
  proc: ChildProcess;
  log: string;
  /** What else serves its requests besides Postgres: the local cluster, and redis-server for the Redis counter. */
  helpers: () => number[];
}


/** One load run against a gateway. */
async function loadRun(gw: Served, load: Load, apiKey: string, jobIds: string[], seconds: number, connections = CONNECTIONS): Promise<Run> {
  const request: autocannon.Request = load === 'POST /jobs'
    ? { method: 'POST', path: '/jobs', body: JOB_BODY, headers: { 'content-type': 'application/json', 'x-api-key': apiKey } }
    : {
      method: 'GET', headers: { 'x-api-key': apiKey },
      setupRequest: (r: autocannon.Request) => ({ ...r, path: `/jobs/${jobIds[Math.floor(Math.random() * jobIds.length)]}` }),
    };
  const groups = { gateway: () => [gw.proc.pid!], serving: () => [gw.proc.pid!, ...gw.helpers(), ...postgresPids()] };
  const r = await withCpu(groups, async () => figures(await cannon({ url: gw.url, connections, duration: seconds, requests: [request] })));
  return { ...r, cpuMs: { gateway: r.cpu.gateway, all: r.cpu.serving } };
}

/** The check times a gateway counted so far (its /metrics): how many, and their p50 and p99 in µs. */
async function checkTimes(gw: Served): Promise<{ checks: number; p50Us: number; p99Us: number }> {
  const m = await scrape(`${gw.metricsUrl}/metrics`);
  const name = 'mediajobs_rate_limit_check_duration_seconds';
  const us = (q: number) => Math.round(histogramQuantile(m, name, q) * 1e6);
  return { checks: m.value(`${name}_count`), p50Us: us(0.5), p99Us: us(0.99) };
}

async function main(): Promise<void> {
  const load0 = loadAverage();
  await withScratch({ adminUrl: BENCH_ADMIN_URL, poolMax: 2, workPrefix: 'mj-bench-rate-' }, async ({ dbUrl, pool, work }) => {
    const org = await createOrganization(pool, 'bench');
    const { key } = await createApiKey(pool, { name: 'bench', organizationId: org.id });
    const cluster = await startCluster(work, ['mediajob.yaml']);
    const redis = await startRedisServer();
    const env = { ...serviceEnv(dbUrl, cluster.kubeconfig, work), RATE_LIMIT_PER_SECOND: LIMIT };
    const gateway = async (counter: Counter, log: string): Promise<Served> => {
      const gw = await startGateway(counter === 'redis' ? { ...env, REDIS_URL: redis.url } : env, work, [], log);
      const helpers = counter === 'redis' ? () => [cluster.proc.pid!, redis.pid()!] : () => [cluster.proc.pid!];
      return { url: gw.url, metricsUrl: gw.metricsUrl, proc: gw.proc, log: join(work, log), helpers };
    };
    const gateways = { 'in-process': await gateway('in-process', 'gateway-in-process.log'), redis: await gateway('redis', 'gateway-redis.log') };

    // Warm-up of both gateways and both paths (JIT, pool connections, prepared statements); the POSTs make the jobs the GETs read.
    for (const counter of ['in-process', 'redis'] as const) await loadRun(gateways[counter], 'POST /jobs', key, [], 2);
    const jobIds = (await pool.query<{ id: string }>('SELECT id FROM jobs ORDER BY random() LIMIT 10000')).rows.map((r) => r.id);
    for (const counter of ['in-process', 'redis'] as const) await loadRun(gateways[counter], 'GET /jobs/{id}', key, jobIds, 2);

    const runs: Record<Load, Record<Counter, Run[]>> = {
      'POST /jobs': { 'in-process': [], redis: [] }, 'GET /jobs/{id}': { 'in-process': [], redis: [] },
    };
    for (let round = 1; round <= ROUNDS; round++) {
      // Which goes first alternates too: whatever the run before leaves behind (autovacuum, a checkpoint) falls on both.
      const order = round % 2 ? (['in-process', 'redis'] as const) : (['redis', 'in-process'] as const);
      for (const load of ['POST /jobs', 'GET /jobs/{id}'] as const) {
        process.stdout.write(`round ${round}/${ROUNDS}: ${load} ${DURATION} s counting ${order.join(', then ')}, c=${CONNECTIONS}...\n`);
        for (const counter of order) runs[load][counter].push(await loadRun(gateways[counter], load, key, jobIds, DURATION));
      }
    }
    await sleep(1000); // requests given up on at the deadline may still be finishing
    const times = { 'in-process': await checkTimes(gateways['in-process']), redis: await checkTimes(gateways.redis) };
    for (const counter of ['in-process', 'redis'] as const) await stop(gateways[counter].proc);

    // Under the load above a check's time includes waiting for its turn on
    // the busy event loop; one request at a time, it is the counter's own.
    process.stdout.write(`GET /jobs/{id} one request at a time, ${DURATION} s, on a fresh gateway counting in Redis...\n`);
    const alone = await gateway('redis', 'gateway-redis-c1.log');
    await loadRun(alone, 'GET /jobs/{id}', key, jobIds, 2, 1);
    const aloneRun = await loadRun(alone, 'GET /jobs/{id}', key, jobIds, DURATION, 1);
    const aloneTimes = await checkTimes(alone);
    await stop(alone.proc);
    await redis.stop();

    const line = rowPrinter(72, 20);
    process.stdout.write(`\nRate limit benchmark (gateway LOG_LEVEL=${LOG_LEVEL}, pool ${BENCH_POOL_MAX}, c=${CONNECTIONS}, ${machine(load0)})\n`);
    for (const load of ['POST /jobs', 'GET /jobs/{id}'] as const) {
      const { 'in-process': local, redis: shared } = runs[load];
      const [mLocal, mShared] = [median(local.map((r) => r.rps)), median(shared.map((r) => r.rps))];
      line(`${load} counting in process: req/s per round`, local.map((r) => r.rps.toFixed(0)).join(' / '));
      line(`${load} counting in Redis: req/s per round`, shared.map((r) => r.rps.toFixed(0)).join(' / '));
      line(`${load} ratio Redis / in process (medians)`, (mShared / mLocal).toFixed(2), '>= 0.9');
      line(`${load} median p99 ms, in process / Redis`, `${median(local.map((r) => r.p99)).toFixed(1)} / ${median(shared.map((r) => r.p99)).toFixed(1)}`);
      const cpu = (rs: Run[], k: keyof Run['cpuMs']) => median(rs.map((r) => r.cpuMs[k])).toFixed(3);
      line(`${load} median CPU ms per answer, gateway, in process / Redis`, `${cpu(local, 'gateway')} / ${cpu(shared, 'gateway')}`);
      line(`${load} median CPU ms per answer, all serving, in process / Redis`, `${cpu(local, 'all')} / ${cpu(shared, 'all')}`);
      line(`${load} non-2xx or errors, in process / Redis`, `${local.reduce((a, r) => a + r.bad, 0)} / ${shared.reduce((a, r) => a + r.bad, 0)}`, '0 / 0');
    }
    const us = (t: Awaited<ReturnType<typeof checkTimes>>) => `${t.p50Us} / ${t.p99Us}`;
    line(`limiter's own time, c=${CONNECTIONS}, in process: p50 / p99 µs`, us(times['in-process']));
    line(`limiter's own time, c=${CONNECTIONS}, Redis: p50 / p99 µs`, us(times.redis));
    line(`  checks timed (each, warm-up included)`, `${times['in-process'].checks} / ${times.redis.checks}`);
    line(`limiter's own time, c=1, Redis: p50 / p99 µs`, us(aloneTimes));
    line(`  c=1: checks timed / GET /jobs/{id} p50 / p99 ms`, `${aloneTimes.checks} / ${aloneRun.p50} / ${aloneRun.p99}`);
  });
}

runBench(main);
