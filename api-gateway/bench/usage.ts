// Benchmark (issue 14): GET /usage latency for a key with 1,000,000 jobs
// (goal: p99 under 10 ms), against the same for a key with none, side by
// side: the usage totals are kept on the job counter shards, so the cost
// does not grow with a key's history. The gateway runs in its own process
// on a scratch database (dropped at the end); the jobs are written in SQL
// (generate_series) with their counters, as POST /jobs would leave them.
//
//   npx tsx api-gateway/bench/usage.ts
//
// BENCH_JOBS (1000000), BENCH_DURATION (s per run, 10), BENCH_ROUNDS (3),
// BENCH_CONNECTIONS (10), BENCH_DATABASE_ADMIN_URL
// (postgres://postgres@127.0.0.1:5432/test), BENCH_GATEWAY_LOG_LEVEL (info).
import { createApiKey } from '../src/db/api-keys.js';
import {
  BENCH_ADMIN_URL, cannon, type Figures, figures, loadAverage, machine, median, rowPrinter, runBench, serviceEnv, startCluster,
  startGateway, withScratch,
} from './support.js';

const JOBS = Number(process.env.BENCH_JOBS ?? 1_000_000);
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);


function usageRun(url: string, apiKey: string, seconds: number): Promise<Figures> {
  return cannon({ url: `${url}/usage`, connections: CONNECTIONS, duration: seconds, headers: { 'x-api-key': apiKey } }).then(figures);
}

async function main(): Promise<void> {
  const load0 = loadAverage();
  await withScratch({ adminUrl: BENCH_ADMIN_URL, poolMax: 2, workPrefix: 'mj-bench-usage-' }, async ({ dbUrl, pool, work }) => {
    const big = await createApiKey(pool, { name: 'a million jobs', storageLimitBytes: 1024 * 2 ** 30 });
    const small = await createApiKey(pool, { name: 'no jobs', storageLimitBytes: 1024 * 2 ** 30 });
    process.stdout.write(`writing ${JOBS.toLocaleString('en')} jobs...\n`);
    // Completed jobs of every size, with their counter shards as the inserts and the status mirror keep them.
    await pool.query(`INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, cr_namespace, cr_name, file_size, reserved_bytes)
      SELECT gen_random_uuid(), $1, 'https://media.example/watch?v=' || g, 'Completed', 'Finished', 100, '{}'::jsonb, 'default', 'j' || g,
             (g % 1000) * 1000, 0
        FROM generate_series(1, $2::int) g`, [big.id, JOBS]);
    await pool.query(`INSERT INTO job_counters (api_key_id, shard, count, uploaded_bytes)
      SELECT $1, s, count(*), sum(file_size) FROM (SELECT file_size, (row_number() OVER ()) % 16 AS s FROM jobs WHERE api_key_id = $1) x GROUP BY s`,
    [big.id]);
    await pool.query('VACUUM ANALYZE jobs');
    await pool.query('VACUUM ANALYZE job_counters');

    const cluster = await startCluster(work, ['mediajob.yaml']);
    const gateway = await startGateway(serviceEnv(dbUrl, cluster.kubeconfig, work), work);
    const check = await fetch(`${gateway.url}/usage`, { headers: { 'x-api-key': big.key } }).then((r) => r.json()) as { usage_count: number };
    if (check.usage_count !== JOBS) throw new Error(`GET /usage said ${check.usage_count} jobs, not ${JOBS}`);
    await usageRun(gateway.url, big.key, 2); // warm-up: JIT, connections, prepared statements
    await usageRun(gateway.url, small.key, 2);

    const many: Figures[] = [];
    const none: Figures[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      process.stdout.write(`round ${round}/${ROUNDS}: GET /usage ${DURATION} s for the key with ${JOBS.toLocaleString('en')} jobs, then for the key with none, c=${CONNECTIONS}...\n`);
      many.push(await usageRun(gateway.url, big.key, DURATION));
      none.push(await usageRun(gateway.url, small.key, DURATION));
    }
    const line = rowPrinter(58, 24);
    process.stdout.write(`\nGET /usage benchmark (gateway LOG_LEVEL=${process.env.BENCH_GATEWAY_LOG_LEVEL ?? 'info'}, ${machine(load0)})\n`);
    line(`p99 ms per round, ${JOBS.toLocaleString('en')} jobs`, many.map((r) => r.p99.toFixed(1)).join(' / '));
    line('p99 ms per round, no jobs', none.map((r) => r.p99.toFixed(1)).join(' / '));
    line(`median p99 ms, ${JOBS.toLocaleString('en')} jobs / none`, `${median(many.map((r) => r.p99)).toFixed(1)} / ${median(none.map((r) => r.p99)).toFixed(1)}`, '< 10');
        line('median req/s, jobs / none', `${median(many.map((r) => r.rps)).toFixed(0)} / ${median(none.map((r) => r.rps)).toFixed(0)}`);
    line('non-2xx or errors', `${[...many, ...none].reduce((a, r) => a + r.bad, 0)}`, '0');
  });
}

runBench(main);
