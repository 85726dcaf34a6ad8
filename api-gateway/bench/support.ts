// What the gateway's benchmarks share: each server in its own process (as in
// production) with its output in a file, the local cluster with its CRDs, a
// scratch database and work directory that go at the end, autocannon runs and
// the CPU each process spent on them. What a bench measures and prints stays
// in the bench.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import autocannon from 'autocannon';
import pg from 'pg';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { migrate } from '../src/db/migrate.js';
import { freePort } from '../../test/support/ports.js';
import { applyCrds } from '../../scripts/apply-crds.js';

export { freePort };

export const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
/** The gateway logs every request by default, as in production. */
export const GATEWAY_LOG_LEVEL = process.env.BENCH_GATEWAY_LOG_LEVEL ?? 'info';
/** The POST /jobs body of the load runs. */
export const JOB_BODY = JSON.stringify({ url: 'https://media.example/watch?v=bench', format: 'mp4', max_resolution: '1080' });

/** Every process `start` began, for the clean-up after a bench, finished or failed. */
const children: ChildProcess[] = [];

export { startRedisServer, type RedisServer } from '../../test/support/redis.js';

/** The database the benches create their scratch databases from (BENCH_DATABASE_ADMIN_URL). */
export const BENCH_ADMIN_URL = process.env.BENCH_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** The median of a few runs' figures (the upper one of an even count). */
export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));


export interface StartOptions {
  args?: string[];
  env?: NodeJS.ProcessEnv;
  /** Node's own options, before the script (`--cpu-prof`). */
  nodeArgs?: string[];
}

/**
 * Start a TypeScript program in its own process, its output going to a file
 * (cheaper for it than a pipe someone must drain); resolves once `ready`
 * matches that output or answers true.
 */
export async function start(
  script: string, ready: RegExp | (() => Promise<boolean>), logFile: string, { args = [], env = {}, nodeArgs = [] }: StartOptions = {},
): Promise<ChildProcess> {
  const fd = openSync(logFile, 'w');
  const proc = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script, ...args], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  children.push(proc);
  const deadline = Date.now() + 90_000;
  for (;;) {
    const out = readFileSync(logFile, 'utf8');
    if (ready instanceof RegExp ? ready.test(out) : await ready().catch(() => false)) return proc;
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`${script} did not start (exit ${proc.exitCode}):\n${out.slice(-4000)}`);
    await sleep(50);
  }
}

export async function stop(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await Promise.race([exited, sleep(10_000)]);
  if (proc.exitCode === null) proc.kill('SIGKILL');
}

export interface BenchCluster {
  proc: ChildProcess;
  kubeconfig: string;
  kc: k8s.KubeConfig;
}

/** The local cluster in its own process, with the CRDs of `crds` (files in crds/) established; `args` go to its CLI, `env` to its environment. */
export async function startCluster(work: string, crds: string[], { args = [], nodeArgs = [], env = {} }: StartOptions = {}): Promise<BenchCluster> {
  const kubeconfig = join(work, 'kubeconfig');
  const proc = await start(join(root, 'local-cluster/src/cli.ts'), /local cluster at (\S+)/, join(work, 'local-cluster.log'), {
    args: ['--kubeconfig', kubeconfig, '--work-dir', join(work, 'cluster'), ...args], env: { LOG_LEVEL: 'warn', ...env }, nodeArgs,
  });
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfig);
  // As written (scripts/apply-crds.ts): a typed client would drop their CEL rules, enums and defaults.
  await applyCrds(kc, { files: crds, timeoutMs: 10_000 });
  return { proc, kubeconfig, kc };
}

/**
 * startCluster whose node runs one pod at a time, a sleeper in `runnerImage`: runner pods stay
 * Pending, so a bench measures submission and reconciliation, not downloads. `args` go to its CLI.
 */
export async function startQuietCluster(work: string, crds: string[], runnerImage: string, opts: Omit<StartOptions, 'env'> = {}): Promise<BenchCluster> {
  const imageMap = join(work, 'image-map.json');
  writeFileSync(imageMap, JSON.stringify({ [runnerImage]: ['sleep', '3600'] }));
  return startCluster(work, crds, { ...opts, args: ['--image-map', imageMap, '--max-running-pods', '1', ...(opts.args ?? [])] });
}

/** Postgres connections of each server under test (BENCH_PG_POOL_MAX, default 20). */
export const BENCH_POOL_MAX = Number(process.env.BENCH_PG_POOL_MAX ?? 20);

/** The settings the gateway and the operator must agree on (the same secrets, database, cluster and storage). */
export function serviceEnv(dbUrl: string, kubeconfig: string, work: string): NodeJS.ProcessEnv {
  return {
    DATABASE_URL: dbUrl, KUBECONFIG: kubeconfig, SECRET_KEYS: SecretBox.generateSpec('bench'),
    FILE_URL_SECRET: randomBytes(16).toString('hex'), MANAGED_STORAGE_DIR: join(work, 'storage'), PG_POOL_MAX: String(BENCH_POOL_MAX),
    // The benches measure what an answer costs: no request of theirs is to be refused by the rate limit
    // (its own bench, rate-limit.ts, sets the limit it needs).
    RATE_LIMIT_PER_SECOND: '1000000000',
  };
}

/**
 * The gateway in its own process on a free loopback port, its metrics on
 * another (`metricsUrl`, GET <metricsUrl>/metrics), logging to
 * `work`/`logName`; resolves once it is ready.
 */
export async function startGateway(
  env: NodeJS.ProcessEnv, work: string, nodeArgs: string[] = [], logName = 'gateway.log',
): Promise<{ proc: ChildProcess; url: string; metricsUrl: string }> {
  const port = await freePort();
  const metricsPort = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const proc = await start(join(root, 'api-gateway/src/main.ts'), async () => (await fetch(`${url}/readyz`)).ok, join(work, logName), {
    env: { METRICS_PORT: String(metricsPort), METRICS_HOST: '127.0.0.1', ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: GATEWAY_LOG_LEVEL },
    nodeArgs,
  });
  return { proc, url, metricsUrl: `http://127.0.0.1:${metricsPort}` };
}

export interface Scratch {
  dbUrl: string;
  /** A small pool on the scratch database, for the bench's own queries. */
  pool: pg.Pool;
  work: string;
  /** Have `fn` run at the end, before the processes stop (the last deferred first). */
  defer(fn: () => unknown): void;
}

export interface ScratchOptions {
  adminUrl: string;
  poolMax: number;
  /** Name prefix of the work directory. */
  workPrefix: string;
  /** Keep the work directory (every process's log) and name it at the end. */
  keepWork?: boolean;
}

/**
 * `run` with a migrated scratch database and a work directory; afterwards,
 * however it ended, what it deferred runs, every process `start` began is
 * stopped, the database dropped and the directory removed.
 */
export async function withScratch<T>({ adminUrl, poolMax, workPrefix, keepWork = false }: ScratchOptions, run: (s: Scratch) => Promise<T>): Promise<T> {
  const dbName = `mediajobs_bench_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  // Identifiers cannot be parameters; the name is made here from hex only.
  await admin.query(`CREATE DATABASE ${dbName}`);
  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/${dbName}`;
  const work = mkdtempSync(join(tmpdir(), workPrefix));
  const pool = new pg.Pool({ connectionString: dbUrl.toString(), max: poolMax });
  const deferred: (() => unknown)[] = [];
  try {
    await migrate(pool);
    return await run({ dbUrl: dbUrl.toString(), pool, work, defer: (fn) => deferred.unshift(fn) });
  } finally {
    for (const fn of deferred) await fn();
    await pool.end();
    for (const c of children) await stop(c);
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
    if (keepWork) process.stdout.write(`logs kept in ${work}\n`);
    else rmSync(work, { recursive: true, force: true });
  }
}

/** Run a bench's `main`, then exit: 1, with every process it started killed, when it failed. */
export function runBench(main: () => Promise<void>): void {
  main().then(() => process.exit(0), (e: unknown) => {
    process.stderr.write(`bench failed: ${(e as Error).stack ?? String(e)}\n`);
    for (const c of children) c.kill('SIGKILL');
    process.exit(1);
  });
}

/** The machine as the figures' headings name it: everything shares its CPUs, so other work shows in the figures. */
export const machine = (loadAtStart: string) => `${cpus().length} CPUs, load average at start ${loadAtStart}`;
export const loadAverage = () => loadavg()[0]!.toFixed(2);

/** A printer of result rows: the measure padded to `whatWidth`, the value right-aligned in `valueWidth`, then the goal. */
export function rowPrinter(whatWidth: number, valueWidth: number): (what: string, value: string, goal?: string) => void {
  return (what, value, goal = '') => process.stdout.write(`  ${what.padEnd(whatWidth)} ${value.padStart(valueWidth)}   ${goal}\n`);
}

export function cannon(opts: autocannon.Options): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    autocannon(opts, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

export interface Figures {
  rps: number;
  p50: number;
  p99: number;
  ok: number;
  bad: number;
}

/** A load run's figures, counting only 2xx answers as served. */
export function figures(r: autocannon.Result): Figures {
  return { rps: r['2xx'] / r.duration, p50: r.latency.p50, p99: r.latency.p99, ok: r['2xx'], bad: r.non2xx + r.errors };
}

const USER_HZ = 100; // clock ticks per second in /proc on Linux

/** CPU seconds (user + system) each process has used so far, from /proc (Linux); a process gone (or not on Linux) is left out. */
function cpuByPid(pids: number[]): Map<number, number> {
  const used = new Map<number, number>();
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      used.set(pid, (Number(fields[11]) + Number(fields[12])) / USER_HZ);
    } catch {
      // gone, or not Linux
    }
  }
  return used;
}

/** CPU seconds (user + system) used so far by processes, from /proc (Linux); 0 elsewhere. */
export function cpuSeconds(pids: number[]): number {
  return [...cpuByPid(pids).values()].reduce((a, b) => a + b, 0);
}

/**
 * CPU seconds the processes used since `before` was taken: a process that
 * started since counts whole, one that ended since is left out (what it used
 * in between is gone with it) rather than taking its total off the sum.
 */
function cpuSince(before: Map<number, number>, pids: number[]): number {
  let used = 0;
  for (const [pid, now] of cpuByPid(pids)) used += now - (before.get(pid) ?? 0);
  return used;
}

/** Every Postgres process on the machine: a bench's queries are served by backends it did not start. */
export function postgresPids(): number[] {
  if (!existsSync('/proc')) return [];
  return readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((d) => {
    try {
      return readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'postgres';
    } catch {
      return false;
    }
  }).map(Number);
}

/** `run`'s result with the CPU milliseconds per 2xx answer each process group, and this process (the load generator), spent during it. */
export async function withCpu<K extends string, T extends { ok: number }>(
  groups: Record<K, () => number[]>, run: () => Promise<T>,
): Promise<T & { cpu: Record<K | 'load generator', number> }> {
  const keys = Object.keys(groups) as K[];
  const before = keys.map((k) => cpuByPid(groups[k]()));
  const self0 = process.cpuUsage();
  const result = await run();
  const self = process.cpuUsage(self0);
  const perAnswer = (seconds: number) => (seconds * 1000) / Math.max(1, result.ok);
  const cpu = Object.fromEntries(keys.map((k, i) => [k, perAnswer(cpuSince(before[i]!, groups[k]()))])) as Record<K, number>;
  return { ...result, cpu: { ...cpu, 'load generator': perAnswer((self.user + self.system) / 1e6) } };
}
