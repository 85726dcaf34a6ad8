// Benchmark (issue 15): POST /jobs throughput with an Idempotency-Key (a new
// key per request: claim, job, stored answer) against the same gateway
// without one, side by side. The setting is post-jobs.ts's: gateway and
// local cluster (no operator) each in their own process, a scratch database
// dropped at the end, concurrency 50. The two runs alternate for
// BENCH_ROUNDS rounds so that other load on the machine falls on both; the
// medians are compared. Goal: keyed / plain >= 0.9.
//
//   npx tsx api-gateway/bench/idempotency.ts
//
// BENCH_DURATION (s per run, default 10), BENCH_ROUNDS (3), BENCH_CONNECTIONS (50),
// BENCH_DATABASE_ADMIN_URL (postgres://postgres@127.0.0.1:5432/test),
// BENCH_GATEWAY_LOG_LEVEL (info: the gateway logs every request, as in production).
//
// post-jobs.ts runs itself when imported and exports nothing, so its process
// and load helpers are repeated here in short.
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
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ADMIN_URL = process.env.BENCH_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const LOG_LEVEL = process.env.BENCH_GATEWAY_LOG_LEVEL ?? 'info';
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

/** A TypeScript program in its own process, output to a file; resolves once `ready` matches its output or answers true. */
async function start(script: string, args: string[], env: NodeJS.ProcessEnv, ready: RegExp | (() => Promise<boolean>), logFile: string): Promise<ChildProcess> {
  const fd = openSync(logFile, 'w');
  const proc = spawn(process.execPath, ['--import', 'tsx', script, ...args], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  children.push(proc);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const out = readFileSync(logFile, 'utf8');
    if (ready instanceof RegExp ? ready.test(out) : await ready().catch(() => false)) return proc;
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

function cannon(opts: autocannon.Options): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    autocannon(opts, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

/** CPU seconds (user + system) used so far by processes, from /proc (Linux); 0 elsewhere. */
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
  return ticks / 100; // USER_HZ
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

interface Run {
  rps: number;
  p99: number;
  ok: number;
  bad: number;
  /** CPU ms per 2xx answer: gateway, local cluster, Postgres (every backend on the machine), and their sum. */
  cpuMs: { gateway: number; cluster: number; postgres: number; all: number };
}

/** The processes serving the load, besides Postgres. */
const served: { gateway?: number; cluster?: number } = {};

let keyed = 0;
/** One load run of POST /jobs; with `withKey`, every request carries a new Idempotency-Key. */
async function postRun(url: string, apiKey: string, withKey: boolean, seconds: number): Promise<Run> {
  const run = `${process.pid}-${Date.now()}`;
  const request: autocannon.Request = {
    method: 'POST', path: '/jobs', body: BODY, headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    ...(withKey && { setupRequest: (r: autocannon.Request) => ({ ...r, headers: { ...r.headers, 'idempotency-key': `"bench-${run}-${++keyed}"` } }) }),
  };
  const groups = { gateway: () => [served.gateway!], cluster: () => [served.cluster!], postgres: postgresPids };
  const before = { gateway: cpuSeconds(groups.gateway()), cluster: cpuSeconds(groups.cluster()), postgres: cpuSeconds(groups.postgres()) };
  const r = await cannon({ url, connections: CONNECTIONS, duration: seconds, requests: [request] });
  const per = (k: keyof typeof groups) => ((cpuSeconds(groups[k]()) - before[k]) * 1000) / Math.max(1, r['2xx']);
  const [gateway, cluster, postgres] = [per('gateway'), per('cluster'), per('postgres')];
  const cpuMs = { gateway, cluster, postgres, all: gateway + cluster + postgres };
  return { rps: r['2xx'] / r.duration, p99: r.latency.p99, ok: r['2xx'], bad: r.non2xx + r.errors, cpuMs };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function startCluster(work: string): Promise<string> {
  const kubeconfig = join(work, 'kubeconfig');
  served.cluster = (await start(join(root, 'local-cluster/src/cli.ts'), ['--kubeconfig', kubeconfig, '--work-dir', join(work, 'cluster')], { LOG_LEVEL: 'warn' }, /local cluster at (\S+)/, join(work, 'local-cluster.log'))).pid!;
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfig);
  const ext = kc.makeApiClient(k8s.ApiextensionsV1Api);
  await ext.createCustomResourceDefinition({ body: k8s.loadYaml<k8s.V1CustomResourceDefinition>(readFileSync(join(root, 'crds/mediajob.yaml'), 'utf8')) });
  for (let i = 0; ; i++) {
    const crd = await ext.readCustomResourceDefinition({ name: 'mediajobs.mediajobs.io' });
    if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) return kubeconfig;
    if (i > 200) throw new Error('CRD not established');
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function main(): Promise<void> {
  const load0 = loadavg()[0]!.toFixed(2);
  const dbName = `mediajobs_bench_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const dbUrlObj = new URL(ADMIN_URL);
  dbUrlObj.pathname = `/${dbName}`;
  const dbUrl = dbUrlObj.toString();
  const work = mkdtempSync(join(tmpdir(), 'mj-bench-idem-'));
  const pool = new pg.Pool({ connectionString: dbUrl, max: 2 });
  try {
    await migrate(pool);
    const { key } = await createApiKey(pool, { name: 'bench' });
    const kubeconfig = await startCluster(work);
    const port = await freePort();
    const gateway = await start(join(root, 'api-gateway/src/main.ts'), [], {
      DATABASE_URL: dbUrl, PORT: String(port), HOST: '127.0.0.1', KUBECONFIG: kubeconfig, SECRET_KEYS: SecretBox.generateSpec('bench'),
      FILE_URL_SECRET: randomBytes(16).toString('hex'), MANAGED_STORAGE_DIR: join(work, 'storage'), LOG_LEVEL, PG_POOL_MAX: '20',
    }, async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).ok, join(work, 'gateway.log'));
    served.gateway = gateway.pid!;
    const url = `http://127.0.0.1:${port}`;

    // Warm-up of both paths: JIT, pool connections, prepared statements.
    await postRun(url, key, false, 2);
    await postRun(url, key, true, 2);
    const plain: Run[] = [];
    const withKey: Run[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      process.stdout.write(`round ${round}/${ROUNDS}: POST /jobs ${DURATION} s without, then ${DURATION} s with Idempotency-Key, c=${CONNECTIONS}...\n`);
      plain.push(await postRun(url, key, false, DURATION));
      withKey.push(await postRun(url, key, true, DURATION));
    }
    await new Promise((r) => setTimeout(r, 1000)); // requests given up on at the deadline may still be finishing
    const keys = Number((await pool.query("SELECT count(*) AS n FROM idempotency_keys WHERE status = 'completed'")).rows[0].n);

    const mPlain = median(plain.map((r) => r.rps));
    const mKeyed = median(withKey.map((r) => r.rps));
    const line = (what: string, value: string, goal = '') => process.stdout.write(`  ${what.padEnd(58)} ${value.padStart(24)}   ${goal}\n`);
    process.stdout.write(`\nIdempotency-Key benchmark (gateway LOG_LEVEL=${LOG_LEVEL}, pool 20, ${cpus().length} CPUs, load average at start ${load0})\n`);
    line('POST /jobs without key: req/s per round', plain.map((r) => r.rps.toFixed(0)).join(' / '));
    line('POST /jobs with a new key each: req/s per round', withKey.map((r) => r.rps.toFixed(0)).join(' / '));
    line('median req/s, without / with', `${mPlain.toFixed(0)} / ${mKeyed.toFixed(0)}`);
    line('ratio with / without (medians)', (mKeyed / mPlain).toFixed(2), '>= 0.9');
    line('median p99 ms, without / with', `${median(plain.map((r) => r.p99)).toFixed(1)} / ${median(withKey.map((r) => r.p99)).toFixed(1)}`);
    const cpu = (runs: Run[], k: keyof Run['cpuMs']) => median(runs.map((r) => r.cpuMs[k]));
    for (const k of ['gateway', 'cluster', 'postgres', 'all'] as const) {
      line(`median CPU ms per job, ${k}, without / with`, `${cpu(plain, k).toFixed(2)} / ${cpu(withKey, k).toFixed(2)}`);
    }
    // Everything shares the machine's CPUs: at saturation the CPU per job bounds the throughput ratio.
    line('ratio the CPU per job allows (without / with)', (cpu(plain, 'all') / cpu(withKey, 'all')).toFixed(2));
    line('non-2xx or errors, without / with', `${plain.reduce((a, r) => a + r.bad, 0)} / ${withKey.reduce((a, r) => a + r.bad, 0)}`, '0 / 0');
    line('completed idempotency rows / keyed requests sent (incl. warm-up)', `${keys} / ${keyed}`, 'equal');
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
