// Benchmark (issue 3): POST /jobs through the gateway, Postgres and the
// local cluster (no operator) at concurrency 50 for 20 s, against a bare
// express handler doing one INSERT in the same run; then GET /jobs/{id} and
// GET /jobs?limit=100 with 1,000,000 rows in the jobs table. Each server
// runs in its own process, as in production; everything uses a scratch
// database that is dropped at the end.
//
//   npx tsx api-gateway/bench/post-jobs.ts
//
// BENCH_DURATION (s, default 20), BENCH_CONNECTIONS (50), BENCH_ROWS
// (1000000), BENCH_GET_DURATION (10), BENCH_GET_CONNECTIONS (10),
// BENCH_DATABASE_ADMIN_URL (postgres://postgres@127.0.0.1:5432/test),
// BENCH_GATEWAY_LOG_LEVEL (info: the gateway logs every request, as in production),
// BENCH_CPU_PROFILE_DIR (unset: with it, the gateway and the local cluster write V8 CPU profiles there on exit).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import autocannon from 'autocannon';
import pg from 'pg';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { createApiKey } from '../src/db/api-keys.js';
import { migrate } from '../src/db/migrate.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '../..');
const DURATION = Number(process.env.BENCH_DURATION ?? 20);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const GET_DURATION = Number(process.env.BENCH_GET_DURATION ?? 10);
const GET_CONNECTIONS = Number(process.env.BENCH_GET_CONNECTIONS ?? 10);
const ADMIN_URL = process.env.BENCH_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const LOG_LEVEL = process.env.BENCH_GATEWAY_LOG_LEVEL ?? 'info';
const PROFILE_DIR = process.env.BENCH_CPU_PROFILE_DIR;
const profile = PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : [];
const BODY = JSON.stringify({ url: 'https://media.example/watch?v=bench', format: 'mp4', max_resolution: '1080' });

const children: ChildProcess[] = [];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/**
 * Start a TypeScript program in its own process, its output going to a file
 * (cheaper for it than a pipe someone must drain); resolves once `ready`
 * appears there.
 */
async function start(
  script: string, args: string[], env: NodeJS.ProcessEnv, ready: RegExp | (() => Promise<boolean>), logFile: string,
  nodeArgs: string[] = [],
): Promise<{ proc: ChildProcess }> {
  const fd = openSync(logFile, 'w');
  const proc = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script, ...args], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  children.push(proc);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const out = readFileSync(logFile, 'utf8');
    if (ready instanceof RegExp ? ready.test(out) : await ready().catch(() => false)) return { proc };
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`${script} did not start (exit ${proc.exitCode}):\n${out.slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function stop(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
  if (proc.exitCode === null) proc.kill('SIGKILL');
}

/** CPU seconds (user + system) used so far by processes, from /proc (Linux); 0 elsewhere. */
const TICKS = 100; // USER_HZ on Linux
function cpuSeconds(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone, or not Linux
    }
  }
  return ticks / TICKS;
}

function postgresPids(): number[] {
  if (!existsSync('/proc')) return [];
  return readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((d) => {
    try {
      return readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'postgres';
    } catch {
      return false;
    }
  }).map(Number);
}

/** CPU milliseconds per 2xx response spent by each process group during `run`. */
async function withCpu<T extends Figures>(groups: Record<string, () => number[]>, run: () => Promise<T>): Promise<T & { cpu: Record<string, number> }> {
  const before = Object.fromEntries(Object.entries(groups).map(([k, pids]) => [k, cpuSeconds(pids())]));
  const self0 = process.cpuUsage();
  const result = await run();
  const selfUsage = process.cpuUsage(self0);
  const cpu: Record<string, number> = {};
  for (const [k, pids] of Object.entries(groups)) cpu[k] = ((cpuSeconds(pids()) - before[k]!) * 1000) / Math.max(1, result.ok);
  cpu['load generator'] = (selfUsage.user + selfUsage.system) / 1000 / Math.max(1, result.ok);
  return { ...result, cpu };
}

const cpuTotal = (cpu: Record<string, number>) => Object.values(cpu).reduce((a, b) => a + b, 0);
const cpuLine = (cpu: Record<string, number>) => `${Object.entries(cpu).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}; all ${cpuTotal(cpu).toFixed(2)}`;

function cannon(opts: autocannon.Options): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    autocannon(opts, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

interface Figures {
  rps: number;
  p50: number;
  p99: number;
  ok: number;
  bad: number;
}

function figures(r: autocannon.Result): Figures {
  return { rps: r['2xx'] / r.duration, p50: r.latency.p50, p99: r.latency.p99, ok: r['2xx'], bad: r.non2xx + r.errors };
}

async function postLoad(url: string, headers: Record<string, string>, groups: Record<string, () => number[]>) {
  const opts = { url: `${url}/jobs`, method: 'POST' as const, headers: { 'content-type': 'application/json', ...headers }, body: BODY, connections: CONNECTIONS };
  await cannon({ ...opts, duration: 2 }); // warm-up: JIT, pool connections, prepared statements
  return withCpu(groups, async () => figures(await cannon({ ...opts, duration: DURATION })));
}

async function main(): Promise<void> {
  // Everything here shares the machine's CPUs; other work running at the same time shows in the figures.
  const load0 = loadavg()[0]!.toFixed(2);
  const dbName = `mediajobs_bench_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const dbUrlObj = new URL(ADMIN_URL);
  dbUrlObj.pathname = `/${dbName}`;
  const dbUrl = dbUrlObj.toString();
  const work = mkdtempSync(join(tmpdir(), 'mj-bench-'));
  const pool = new pg.Pool({ connectionString: dbUrl, max: 4 });
  try {
    await migrate(pool);
    await pool.query('CREATE TABLE bare_jobs (LIKE jobs INCLUDING ALL)');
    const { id: apiKeyId, key } = await createApiKey(pool, { name: 'bench' });

    // Local cluster (its own process), with the MediaJob CRD; no operator.
    const kubeconfig = join(work, 'kubeconfig');
    await start(join(root, 'local-cluster/src/cli.ts'), ['--kubeconfig', kubeconfig, '--work-dir', join(work, 'cluster')], { LOG_LEVEL: 'warn' }, /local cluster at (\S+)/, join(work, 'local-cluster.log'), profile);
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(kubeconfig);
    const ext = kc.makeApiClient(k8s.ApiextensionsV1Api);
    await ext.createCustomResourceDefinition({ body: k8s.loadYaml<k8s.V1CustomResourceDefinition>(readFileSync(join(root, 'crds/mediajob.yaml'), 'utf8')) });
    for (let i = 0; ; i++) {
      const crd = await ext.readCustomResourceDefinition({ name: 'mediajobs.mediajobs.io' });
      if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (i > 200) throw new Error('CRD not established');
      await new Promise((r) => setTimeout(r, 50));
    }

    // Baseline first, alone on the machine.
    const barePort = await freePort();
    const bare = await start(join(here, 'bare-server.ts'), [], { DATABASE_URL: dbUrl, PORT: String(barePort), PG_POOL_MAX: '20' }, /bare server listening/, join(work, 'bare.log'));
    process.stdout.write(`bare express + INSERT: ${DURATION} s at concurrency ${CONNECTIONS}...\n`);
    const base = await postLoad(`http://127.0.0.1:${barePort}`, {}, { 'bare server': () => [bare.proc.pid!], postgres: postgresPids });
    await stop(bare.proc);

    const gwPort = await freePort();
    const gw = await start(join(root, 'api-gateway/src/main.ts'), [], {
      DATABASE_URL: dbUrl, PORT: String(gwPort), HOST: '127.0.0.1', KUBECONFIG: kubeconfig, SECRET_KEYS: SecretBox.generateSpec('bench'),
      FILE_URL_SECRET: randomBytes(16).toString('hex'), MANAGED_STORAGE_DIR: join(work, 'storage'), LOG_LEVEL, PG_POOL_MAX: '20',
    }, async () => (await fetch(`http://127.0.0.1:${gwPort}/readyz`)).ok, join(work, 'gateway.log'),
    profile);
    const gwUrl = `http://127.0.0.1:${gwPort}`;
    process.stdout.write(`gateway POST /jobs: ${DURATION} s at concurrency ${CONNECTIONS}...\n`);
    const cluster = children[0]!;
    const gateway = await postLoad(gwUrl, { 'x-api-key': key }, {
      gateway: () => [gw.proc.pid!], 'local cluster': () => [cluster.pid!], postgres: postgresPids,
    });
    // Requests the load generator gave up on at the deadline may still be finishing.
    await new Promise((r) => setTimeout(r, 1000));

    // Every accepted job has its row and its MediaJob.
    const rows = Number((await pool.query('SELECT count(*) AS n FROM jobs')).rows[0].n);
    const counted = Number((await pool.query('SELECT sum(count) AS n FROM job_counters WHERE api_key_id = $1', [apiKeyId])).rows[0].n);
    const custom = kc.makeApiClient(k8s.CustomObjectsApi);
    const crs = ((await custom.listNamespacedCustomObject({ group: 'mediajobs.io', version: 'v1alpha1', namespace: 'default', plural: 'mediajobs' })) as { items: unknown[] }).items.length;

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
      [`bare express + INSERT: jobs/s (c=${CONNECTIONS}, ${DURATION} s)`, base.rps.toFixed(0), ''],
      ['bare express + INSERT: p50 / p99 (ms)', `${ms(base.p50)} / ${ms(base.p99)}`, ''],
      [`gateway POST /jobs: jobs/s (c=${CONNECTIONS}, ${DURATION} s)`, gateway.rps.toFixed(0), '>= 1000'],
      ['gateway POST /jobs: p50 / p99 (ms)', `${ms(gateway.p50)} / ${ms(gateway.p99)}`, 'p99 < 50'],
      ['gateway / bare throughput ratio', (gateway.rps / base.rps).toFixed(2), '>= 0.5'],
      ['non-2xx or errors (bare / gateway)', `${base.bad} / ${gateway.bad}`, '0 / 0'],
      ['CPU ms per job, bare run', cpuLine(base.cpu), ''],
      ['CPU ms per job, gateway run', cpuLine(gateway.cpu), ''],
      // Every process of both runs shares this machine's CPUs, so the work a
      // job costs all of them together bounds the ratio a saturated run can show.
      ['ratio the CPU per job allows (bare all / gateway all)', (cpuTotal(base.cpu) / cpuTotal(gateway.cpu)).toFixed(2), ''],
      ['jobs rows / counter total / MediaJobs (after POST runs)', `${rows} / ${counted} / ${crs}`, 'equal'],
      [`GET /jobs/{id} p50 / p99 (ms), ${total} rows, c=${GET_CONNECTIONS}`, `${ms(getOne.p50)} / ${ms(getOne.p99)}`, 'p99 < 10'],
      [`GET /jobs/{id} req/s`, getOne.rps.toFixed(0), ''],
      [`GET /jobs?limit=100 p50 / p99 (ms), c=${GET_CONNECTIONS}`, `${ms(getList.p50)} / ${ms(getList.p99)}`, 'p99 < 30'],
      [`GET /jobs?limit=100&status=failed p50 / p99 (ms)`, `${ms(getFiltered.p50)} / ${ms(getFiltered.p99)}`, 'p99 < 30'],
      ['non-2xx or errors (GET runs)', `${getOne.bad + getList.bad + getFiltered.bad}`, '0'],
    ];
    process.stdout.write(`\napi-gateway benchmark (gateway LOG_LEVEL=${LOG_LEVEL}, pool 20, ${cpus().length} CPUs, load average at start ${load0})\n`);
    for (const [what, value, goal] of rowsOut) {
      if (value.length > 18) process.stdout.write(`  ${what}\n    ${value}\n`);
      else process.stdout.write(`  ${what.padEnd(64)} ${value.padStart(18)}   ${goal}\n`);
    }
  } finally {
    await pool.end();
    for (const c of children) await stop(c);
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
    rmSync(work, { recursive: true, force: true });
  }
}

main().then(() => process.exit(0), (e: unknown) => {
  process.stderr.write(`bench failed: ${(e as Error).stack ?? String(e)}\n`);
  for (const c of children) c.kill('SIGKILL');
  process.exit(1);
});
