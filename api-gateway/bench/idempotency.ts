// Benchmark (issue 15): POST /jobs throughput with an Idempotency-Key (a new
// key per request: claim, job, stored answer) against the same gateway
// without one, side by side. The setting is post-jobs.ts's: gateway and
// local cluster (no operator) each in their own process, a scratch database
// dropped at the end, concurrency 50. The two runs alternate for
// BENCH_ROUNDS rounds, each round in the other order (the tables grow as
// the rounds go: the second run of a round always meets more rows), so that
// other load on the machine falls on both; the medians are compared. Goal:
// keyed / plain >= 0.9.
//
//   npx tsx api-gateway/bench/idempotency.ts
//
// BENCH_DURATION (s per run, default 10), BENCH_ROUNDS (5), BENCH_CONNECTIONS (50),
// BENCH_DATABASE_ADMIN_URL (postgres://postgres@127.0.0.1:5432/test),
// BENCH_GATEWAY_LOG_LEVEL (info: the gateway logs every request, as in production),
// BENCH_CPU_PROFILE_DIR (unset: with it, the gateway writes a V8 CPU profile there on exit).
import { randomUUID } from 'node:crypto';
import type autocannon from 'autocannon';
import type pg from 'pg';
import { createApiKey } from '../src/db/api-keys.js';
import {
  BENCH_ADMIN_URL, BENCH_POOL_MAX, cannon, type Figures, figures, GATEWAY_LOG_LEVEL as LOG_LEVEL, JOB_BODY, loadAverage, machine, median, postgresPids,
  rowPrinter, runBench, serviceEnv, sleep, startCluster, startGateway, withCpu, withScratch,
} from './support.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
/** Keys made ahead per second of a keyed run: more than this machine answers (past them, each is made as it is sent). */
const KEYS_PER_SECOND = 6000;

interface Run extends Figures {
  /** CPU ms per 2xx answer: gateway, local cluster, Postgres (every backend on the machine), the load generator, and their sum. */
  cpuMs: { gateway: number; cluster: number; postgres: number; 'load generator': number; all: number };
  /** Write-ahead log Postgres wrote per 2xx answer: what a second row in the job's commit costs it. */
  walBytes: number;
}

/** The processes serving the load, besides Postgres. */
const served: { gateway?: number; cluster?: number } = {};

let keyed = 0;
/**
 * One load run of POST /jobs; with `withKey`, every request carries a new
 * Idempotency-Key, a random UUID as clients are told to send (so the keys
 * land all over their index, not at its end). Both runs build each request
 * anew (autocannon's setupRequest), so that the load generator, which
 * shares the machine's CPUs, does the same work per request in both.
 */
async function postRun(pool: pg.Pool, url: string, apiKey: string, withKey: boolean, seconds: number): Promise<Run> {
  // The keys are made before the run: a client's own work is not the service's, and here it would share its CPUs.
  const keys = withKey ? Array.from({ length: KEYS_PER_SECOND * seconds }, () => `"${randomUUID()}"`) : [];
  const request: autocannon.Request = {
    method: 'POST', path: '/jobs', body: JOB_BODY, headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    setupRequest: (r: autocannon.Request) => {
      if (!withKey) return { ...r, headers: { ...r.headers } };
      const key = keys.pop() ?? `"${randomUUID()}"`;
      keyed++;
      return { ...r, headers: { ...r.headers, 'idempotency-key': key } };
    },
  };
  const groups = { gateway: () => [served.gateway!], cluster: () => [served.cluster!], postgres: postgresPids };
  const wal0 = await walPosition(pool);
  const r = await withCpu(groups, async () => figures(await cannon({ url, connections: CONNECTIONS, duration: seconds, requests: [request] })));
  const walBytes = await walSince(pool, wal0) / Math.max(1, r.ok);
  const { gateway, cluster, postgres, 'load generator': loadGenerator } = r.cpu;
  return { ...r, cpuMs: { gateway, cluster, postgres, 'load generator': loadGenerator, all: gateway + cluster + postgres + loadGenerator }, walBytes };
}

const walPosition = async (pool: pg.Pool) => (await pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!.lsn;
const walSince = async (pool: pg.Pool, lsn: string) =>
  Number((await pool.query<{ bytes: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1) AS bytes', [lsn])).rows[0]!.bytes);


async function main(): Promise<void> {
  const load0 = loadAverage();
  await withScratch({ adminUrl: BENCH_ADMIN_URL, poolMax: 2, workPrefix: 'mj-bench-idem-' }, async ({ dbUrl, pool, work }) => {
    const { key } = await createApiKey(pool, { name: 'bench' });
    const cluster = await startCluster(work, ['mediajob.yaml']);
    served.cluster = cluster.proc.pid!;
    const profile = process.env.BENCH_CPU_PROFILE_DIR;
    const gateway = await startGateway(serviceEnv(dbUrl, cluster.kubeconfig, work), work, profile ? ['--cpu-prof', `--cpu-prof-dir=${profile}`] : []);
    served.gateway = gateway.proc.pid!;
    const url = gateway.url;

    // Warm-up of both paths: JIT, pool connections, prepared statements.
    await postRun(pool, url, key, false, 2);
    await postRun(pool, url, key, true, 2);
    const plain: Run[] = [];
    const withKey: Run[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 ? (['without', 'with'] as const) : (['with', 'without'] as const);
      process.stdout.write(`round ${round}/${ROUNDS}: POST /jobs ${DURATION} s ${order.join(', then ')} Idempotency-Key, c=${CONNECTIONS}...\n`);
      for (const mode of order) {
        if (mode === 'with') withKey.push(await postRun(pool, url, key, true, DURATION));
        else plain.push(await postRun(pool, url, key, false, DURATION));
      }
    }
    await sleep(1000); // requests given up on at the deadline may still be finishing
    const keys = Number((await pool.query('SELECT count(*) AS n FROM idempotency_keys')).rows[0].n);

    const mPlain = median(plain.map((r) => r.rps));
    const mKeyed = median(withKey.map((r) => r.rps));
    const line = rowPrinter(58, 24);
    process.stdout.write(`\nIdempotency-Key benchmark (gateway LOG_LEVEL=${LOG_LEVEL}, pool ${BENCH_POOL_MAX}, ${machine(load0)})\n`);
    line('POST /jobs without key: req/s per round', plain.map((r) => r.rps.toFixed(0)).join(' / '));
    line('POST /jobs with a new key each: req/s per round', withKey.map((r) => r.rps.toFixed(0)).join(' / '));
    line('median req/s, without / with', `${mPlain.toFixed(0)} / ${mKeyed.toFixed(0)}`);
    line('ratio with / without (medians)', (mKeyed / mPlain).toFixed(2), '>= 0.9');
    line('median p99 ms, without / with', `${median(plain.map((r) => r.p99)).toFixed(1)} / ${median(withKey.map((r) => r.p99)).toFixed(1)}`);
    const cpu = (runs: Run[], k: keyof Run['cpuMs']) => median(runs.map((r) => r.cpuMs[k]));
    for (const k of ['gateway', 'cluster', 'postgres', 'load generator', 'all'] as const) {
      line(`median CPU ms per job, ${k}, without / with`, `${cpu(plain, k).toFixed(2)} / ${cpu(withKey, k).toFixed(2)}`);
    }
    // Everything shares the machine's CPUs: at saturation the CPU per job bounds the throughput ratio.
    line('ratio the CPU per job allows (without / with)', (cpu(plain, 'all') / cpu(withKey, 'all')).toFixed(2));
    line('median WAL bytes per job, without / with', `${median(plain.map((r) => r.walBytes)).toFixed(0)} / ${median(withKey.map((r) => r.walBytes)).toFixed(0)}`);
    line('non-2xx or errors, without / with', `${plain.reduce((a, r) => a + r.bad, 0)} / ${withKey.reduce((a, r) => a + r.bad, 0)}`, '0 / 0');
    line('idempotency rows / keyed requests sent (incl. warm-up)', `${keys} / ${keyed}`, 'equal');
  });
}

runBench(main);
