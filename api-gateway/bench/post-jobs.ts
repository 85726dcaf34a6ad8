// Benchmark (issues 3 and 16): POST /jobs through the gateway and Postgres
// with the operator stopped (acceptance is the commit, docs/adr/0017: the
// API server is not on the path; the local cluster runs, idle) at
// concurrency 50 for 20 s, against a bare express handler doing one INSERT
// in the same run. The two alternate for BENCH_ROUNDS rounds, each round in
// the other order, and their medians are compared: on a shared machine one
// run of each can differ by a fifth either way. Then GET /jobs/{id} and
// GET /jobs?limit=100 with 1,000,000 rows in the jobs table. Each server
// runs in its own process, as in production; everything uses a scratch
// database that is dropped at the end.
//
//   npx tsx api-gateway/bench/post-jobs.ts
//
// BENCH_DURATION (s, default 20), BENCH_ROUNDS (3), BENCH_CONNECTIONS (50), BENCH_ROWS
// (1000000), BENCH_GET_DURATION (10), BENCH_GET_CONNECTIONS (10),
// BENCH_DATABASE_ADMIN_URL (postgres://postgres@127.0.0.1:5432/test),
// BENCH_GATEWAY_LOG_LEVEL (info: the gateway logs every request, as in production),
// BENCH_PG_POOL_MAX (20: each server's Postgres connections), BENCH_GATEWAY_NODE_ARGS
// (none: Node options of the gateway, e.g. --max-semi-space-size=32),
// BENCH_CPU_PROFILE_DIR (unset: with it, the gateway and the local cluster write V8 CPU profiles there on exit),
// BENCH_KEEP (unset: with it, the work directory and every process's log are kept, e.g. for --trace-gc).
import { join } from 'node:path';
import type autocannon from 'autocannon';
import { scrape } from '../../test/support/metrics.js';
import { createApiKey } from '../src/db/api-keys.js';
import {
  BENCH_ADMIN_URL, BENCH_POOL_MAX, cannon, type Figures, figures, freePort, GATEWAY_LOG_LEVEL as LOG_LEVEL, JOB_BODY, loadAverage, machine, median,
  postgresPids, root, rowPrinter, runBench, serviceEnv, sleep, start, startCluster, startGateway, stop, withCpu, withScratch,
} from './support.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 20);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const GET_DURATION = Number(process.env.BENCH_GET_DURATION ?? 10);
const GET_CONNECTIONS = Number(process.env.BENCH_GET_CONNECTIONS ?? 10);
const PROFILE_DIR = process.env.BENCH_CPU_PROFILE_DIR;
const profile = PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : [];
const gatewayNodeArgs = [...profile, ...(process.env.BENCH_GATEWAY_NODE_ARGS?.split(' ').filter(Boolean) ?? [])];

const cpuTotal = (cpu: Record<string, number>) => Object.values(cpu).reduce((a, b) => a + b, 0);
const cpuLine = (cpu: Record<string, number>) => `${Object.entries(cpu).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}; all ${cpuTotal(cpu).toFixed(2)}`;

interface PostRun extends Figures {
  cpu: Record<string, number>;
}

/** A POST /jobs server under load and the processes whose CPU it costs. */
interface Served {
  url: string;
  headers: Record<string, string>;
  groups: Record<string, () => number[]>;
}

async function postLoad({ url, headers, groups }: Served, seconds: number): Promise<PostRun> {
  const opts = { url: `${url}/jobs`, method: 'POST' as const, headers: { 'content-type': 'application/json', ...headers }, body: JOB_BODY, connections: CONNECTIONS };
  return withCpu(groups, async () => figures(await cannon({ ...opts, duration: seconds })));
}

/** The median of each figure over the rounds, CPU per process group included. */
function medianRun(runs: PostRun[]): PostRun {
  const of = (pick: (r: PostRun) => number) => median(runs.map(pick));
  const cpu = Object.fromEntries(Object.keys(runs[0]!.cpu).map((k) => [k, of((r) => r.cpu[k]!)]));
  return { rps: of((r) => r.rps), p50: of((r) => r.p50), p99: of((r) => r.p99), ok: of((r) => r.ok), bad: runs.reduce((a, r) => a + r.bad, 0), cpu };
}

/**
 * From the gateway's own metrics, over every POST /jobs run so far (warm-ups
 * included): its insert statements (ADR 0025) with their mean jobs, and the
 * share of POST /jobs it answered within 50 ms by its own clock, which
 * starts once a request is parsed: what is left of the client's p99 above
 * it is queueing outside the gateway's handlers (socket buffers, CPU). Undefined without metrics.
 */
async function gatewayOwnFigures(metricsUrl: string): Promise<{ statements: number; jobsPerStatement: number; within50ms: number } | undefined> {
  const m = await scrape(`${metricsUrl}/metrics`).catch(() => undefined);
  const statements = m?.value('mediajobs_job_insert_statement_jobs_count') ?? 0;
  if (!m || statements === 0) return undefined;
  const post = (le: string) => m.value('mediajobs_http_request_duration_seconds_bucket', { le, route: '/jobs', method: 'POST' });
  return { statements, jobsPerStatement: m.value('mediajobs_job_insert_statement_jobs_sum') / statements, within50ms: post('0.05') / post('+Inf') };
}

async function main(): Promise<void> {
  // Everything here shares the machine's CPUs; other work running at the same time shows in the figures.
  const load0 = loadAverage();
  await withScratch({ adminUrl: BENCH_ADMIN_URL, poolMax: 4, workPrefix: 'mj-bench-', keepWork: !!process.env.BENCH_KEEP }, async ({ dbUrl, pool, work }) => {
    await pool.query('CREATE TABLE bare_jobs (LIKE jobs INCLUDING ALL)');
    const { id: apiKeyId, key } = await createApiKey(pool, { name: 'bench' });

    // Local cluster (its own process), with the MediaJob CRD; no operator.
    const { proc: cluster, kubeconfig } = await startCluster(work, ['mediajob.yaml'], { nodeArgs: profile });

    const barePort = await freePort();
    const bare = await start(join(root, 'api-gateway/bench/bare-server.ts'), /bare server listening/, join(work, 'bare.log'), {
      env: { DATABASE_URL: dbUrl, PORT: String(barePort), PG_POOL_MAX: String(BENCH_POOL_MAX) },
    });
    const gw = await startGateway(serviceEnv(dbUrl, kubeconfig, work), work, gatewayNodeArgs);
    const gwUrl = gw.url;
    const servers: Record<'bare' | 'gateway', Served> = {
      bare: { url: `http://127.0.0.1:${barePort}`, headers: {}, groups: { 'bare server': () => [bare.pid!], postgres: postgresPids } },
      gateway: {
        url: gwUrl, headers: { 'x-api-key': key },
        groups: { gateway: () => [gw.proc.pid!], 'local cluster': () => [cluster.pid!], postgres: postgresPids },
      },
    };
    // Warm-up of both: JIT, pool connections, prepared statements.
    for (const s of Object.values(servers)) await postLoad(s, 2);
    const runs: Record<'bare' | 'gateway', PostRun[]> = { bare: [], gateway: [] };
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 ? (['bare', 'gateway'] as const) : (['gateway', 'bare'] as const);
      process.stdout.write(`round ${round}/${ROUNDS}: POST /jobs ${DURATION} s each, ${order.join(', then ')}, c=${CONNECTIONS}...\n`);
      for (const which of order) runs[which].push(await postLoad(servers[which], DURATION));
    }
    await stop(bare);
    const own = await gatewayOwnFigures(gw.metricsUrl);
    const base = medianRun(runs.bare);
    const gateway = medianRun(runs.gateway);
    // Requests the load generator gave up on at the deadline may still be finishing.
    await sleep(1000);

    // Every accepted job has its row, counted once, waiting for the operator's materializer.
    const rows = Number((await pool.query('SELECT count(*) AS n FROM jobs')).rows[0].n);
    const counted = Number((await pool.query('SELECT sum(count) AS n FROM job_counters WHERE api_key_id = $1', [apiKeyId])).rows[0].n);
    const waiting = Number((await pool.query('SELECT count(*) AS n FROM jobs WHERE cr_created_at IS NULL')).rows[0].n);

    // Reads with 1,000,000 rows: the bench key owns a tenth of them, the
    // rest belong to 99 other keys, statuses spread as in a live system.
    const extra = Math.max(0, ROWS - rows);
    process.stdout.write(`bulk-loading ${extra} rows (total ${ROWS})...\n`);
    await pool.query(
      `INSERT INTO jobs (id, api_key_id, url, status, step, options, s3_key, file_size, created_at, finished_at)
       SELECT gen_random_uuid(),
              CASE WHEN g % 10 = 0 THEN $1::uuid ELSE ('00000000-0000-4000-8000-' || lpad((g % 99)::text, 12, '0'))::uuid END,
              'https://media.example/watch?v=' || g,
              (ARRAY['Completed','Completed','Completed','Failed','Pending','Processing','Warning'])[1 + g % 7],
              'Finished', '{"format":"mp4"}'::jsonb, 'videos/' || g || '.mp4', 1000000 + g,
              now() - make_interval(secs => g), now() - make_interval(secs => g) + interval '1 minute'
         FROM generate_series(1, $2::int) g`,
      [apiKeyId, extra],
    );
    await pool.query(`INSERT INTO job_counters (api_key_id, shard, count)
      SELECT api_key_id, 0, count(*) FROM jobs WHERE api_key_id <> $1 GROUP BY api_key_id`, [apiKeyId]);
    await pool.query(`UPDATE job_counters SET count = count + (SELECT count(*) FROM jobs WHERE api_key_id = $1) - $2
      WHERE api_key_id = $1 AND shard = 0`, [apiKeyId, counted]);
    await pool.query('VACUUM ANALYZE jobs');
    const total = Number((await pool.query('SELECT count(*) AS n FROM jobs')).rows[0].n);
    const sample = (await pool.query<{ id: string }>('SELECT id FROM jobs WHERE api_key_id = $1 ORDER BY random() LIMIT 10000', [apiKeyId])).rows.map((r) => r.id);

    const getOpts = { connections: GET_CONNECTIONS, headers: { 'x-api-key': key } };
    const byId = (r: autocannon.Request) => ({ ...r, path: `/jobs/${sample[Math.floor(Math.random() * sample.length)]}` });
    await cannon({ ...getOpts, url: gwUrl, duration: 2, requests: [{ method: 'GET', setupRequest: byId }] });
    process.stdout.write(`GET /jobs/{id}: ${GET_DURATION} s at concurrency ${GET_CONNECTIONS}...\n`);
    const getOne = figures(await cannon({ ...getOpts, url: gwUrl, duration: GET_DURATION, requests: [{ method: 'GET', setupRequest: byId }] }));
    process.stdout.write(`GET /jobs?limit=100: ${GET_DURATION} s at concurrency ${GET_CONNECTIONS}...\n`);
    await cannon({ ...getOpts, url: `${gwUrl}/jobs?limit=100`, duration: 2 });
    const getList = figures(await cannon({ ...getOpts, url: `${gwUrl}/jobs?limit=100`, duration: GET_DURATION }));
    const getFiltered = figures(await cannon({ ...getOpts, url: `${gwUrl}/jobs?limit=100&status=failed`, duration: GET_DURATION }));
    await stop(gw.proc);

    const ms = (n: number) => n.toFixed(1);
    const rowsOut: [string, string, string][] = [
      ['bare express + INSERT: jobs/s per round', runs.bare.map((r) => r.rps.toFixed(0)).join(' / '), ''],
      ['gateway POST /jobs: jobs/s per round', runs.gateway.map((r) => r.rps.toFixed(0)).join(' / '), ''],
      [`bare express + INSERT: median jobs/s (c=${CONNECTIONS}, ${DURATION} s)`, base.rps.toFixed(0), ''],
      ['bare express + INSERT: median p50 / p99 (ms)', `${ms(base.p50)} / ${ms(base.p99)}`, ''],
      [`gateway POST /jobs: median jobs/s (c=${CONNECTIONS}, ${DURATION} s)`, gateway.rps.toFixed(0), '>= 1000'],
      ['gateway POST /jobs: median p50 / p99 (ms)', `${ms(gateway.p50)} / ${ms(gateway.p99)}`, 'p99 < 50'],
      ['gateway / bare throughput ratio (medians)', (gateway.rps / base.rps).toFixed(2), '>= 0.6'],
      ['gateway: jobs per insert statement, mean (statements)', own ? `${own.jobsPerStatement.toFixed(1)} (${own.statements})` : 'no metrics', ''],
      ['gateway: POST /jobs answered within 50 ms by its own clock', own ? `${(own.within50ms * 100).toFixed(2)}%` : 'no metrics', ''],
      ['non-2xx or errors (bare / gateway)', `${base.bad} / ${gateway.bad}`, '0 / 0'],
      ['median CPU ms per job, bare runs', cpuLine(base.cpu), ''],
      ['median CPU ms per job, gateway runs', cpuLine(gateway.cpu), ''],
      // Every process of both runs shares this machine's CPUs, so the work a
      // job costs all of them together bounds the ratio a saturated run can show.
      ['ratio the CPU per job allows (bare all / gateway all)', (cpuTotal(base.cpu) / cpuTotal(gateway.cpu)).toFixed(2), ''],
      ['jobs rows / counter total / awaiting their MediaJob (after POST runs)', `${rows} / ${counted} / ${waiting}`, 'equal'],
      [`GET /jobs/{id} p50 / p99 (ms), ${total} rows, c=${GET_CONNECTIONS}`, `${ms(getOne.p50)} / ${ms(getOne.p99)}`, 'p99 < 10'],
      [`GET /jobs/{id} req/s`, getOne.rps.toFixed(0), ''],
      [`GET /jobs?limit=100 p50 / p99 (ms), c=${GET_CONNECTIONS}`, `${ms(getList.p50)} / ${ms(getList.p99)}`, 'p99 < 30'],
      [`GET /jobs?limit=100&status=failed p50 / p99 (ms)`, `${ms(getFiltered.p50)} / ${ms(getFiltered.p99)}`, 'p99 < 30'],
      ['non-2xx or errors (GET runs)', `${getOne.bad + getList.bad + getFiltered.bad}`, '0'],
    ];
    process.stdout.write(`\napi-gateway benchmark (gateway LOG_LEVEL=${LOG_LEVEL}, pool ${BENCH_POOL_MAX}, ${machine(load0)})\n`);
    const row = rowPrinter(64, 18);
    for (const [what, value, goal] of rowsOut) {
      if (value.length > 18) process.stdout.write(`  ${what}\n    ${value}\n`);
      else row(what, value, goal);
    }
  });
}

runBench(main);
