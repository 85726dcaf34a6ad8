// Benchmark (issue 39 item 5, docs/capacity.md): what one job costs the
// control plane and each process, counted as one counts it on a real
// cluster, from the API server's own /metrics (apiserver_request_total,
// apiserver_storage_objects) read with the administrator's credentials.
//
// For each rate of BENCH_CAPACITY_RATES (jobs/s; "20,100"), the service runs
// as deployed (operator/bench/service.ts: local cluster, gateway, operator,
// each its own process; runner pods kept Pending, so this is the submission
// path: POST → MediaJob → admission → runner Job and its pod), a warm-up of
// BENCH_WARMUP_SECONDS (2), then BENCH_SECONDS (10) of POSTs; once every
// runner Job exists and a settle time has passed, printed per job:
// - API requests by verb and resource, from apiserver_request_total's
//   difference (any code), with the totals of creates, writes (CREATE,
//   UPDATE, PATCH, APPLY, DELETE) and reads (GET, LIST);
// - objects stored, from apiserver_storage_objects' difference, and the
//   bytes each kind's object takes as JSON (every object LISTed and
//   measured: CRs are stored as JSON in etcd, built-in kinds as protobuf,
//   somewhat smaller);
// - CPU ms per job of each process (local cluster, gateway, operator,
//   every Postgres process of the machine), from /proc: all of it, and the
//   marginal part (less what each spent per second in BENCH_IDLE_SECONDS
//   (5) with no job, measured just before: leases, resyncs, timers);
// - Postgres: rows written per job in the scratch database
//   (pg_stat_database) and WAL bytes per job (pg_current_wal_lsn's
//   difference: the whole server's, so other work on the machine adds to it).
// Then the model's check (docs/capacity.md): the lowest rate's per-job
// figures times the highest rate (CPU: idle per second plus marginal per
// job), against what the highest rate measured.
import https from 'node:https';
import type * as k8s from '@kubernetes/client-node';
import { cpuSeconds, loadAverage, machine, postgresPids, runBench, sleep } from '../../api-gateway/bench/support.js';
import { clusterMetrics } from '../../test/support/cluster-metrics.js';
import { parseExposition, type Scrape } from '../../test/support/metrics.js';
import { RUNNER_JOBS, firstSeen, jobIdLabel, pct, postAtRate, until, withService, type Service } from './service.js';

const RATES = (process.env.BENCH_CAPACITY_RATES ?? '20,100').split(',').map(Number).filter((r) => r > 0);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
/** After the last runner Job: the status writes and Events that follow it land before the second reading. */
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 3000);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 5);
const WRITE_VERBS = new Set(['CREATE', 'POST', 'UPDATE', 'PUT', 'PATCH', 'APPLY', 'DELETE', 'DELETECOLLECTION']);
const READ_VERBS = new Set(['GET', 'LIST']);
/** The kinds whose stored size is measured: "plural.group" as apiserver_storage_objects names them, and where to list them. */
const KINDS: Record<string, string> = {
  'mediajobs.mediajobs.io': '/apis/mediajobs.io/v1alpha1/mediajobs',
  'jobs.batch': '/apis/batch/v1/jobs',
  pods: '/api/v1/pods',
  secrets: '/api/v1/secrets',
  serviceaccounts: '/api/v1/serviceaccounts',
  'roles.rbac.authorization.k8s.io': '/apis/rbac.authorization.k8s.io/v1/roles',
  'rolebindings.rbac.authorization.k8s.io': '/apis/rbac.authorization.k8s.io/v1/rolebindings',
  events: '/api/v1/events',
};

interface Reading {
  /** performance.now() when the CPU was read. */
  at: number;
  metrics: Scrape;
  cpu: Record<string, number>;
  walLsn: string;
  rows: number;
  commits: number;
}

interface Figures {
  rate: number;
  jobs: number;
  seconds: number;
  /** "VERB resource[/sub]" → requests per job. */
  requests: Map<string, number>;
  creates: number;
  writes: number;
  reads: number;
  watches: number;
  /** resource → objects per job still stored at the end. */
  stored: Map<string, number>;
  /** resource → mean JSON bytes of one object. */
  bytes: Map<string, number>;
  /** Per process: CPU ms per job in all, CPU ms per second when idle, and CPU ms per job above idle. */
  cpu: Record<string, number>;
  idleCpu: Record<string, number>;
  marginalCpu: Record<string, number>;
  walBytes: number;
  rows: number;
  commits: number;
  p50: number;
  p99: number;
}

const requestKey = (l: Record<string, string>) => `${l.verb} ${l.resource}${l.group ? `.${l.group}` : ''}${l.subresource ? `/${l.subresource}` : ''}`;

function requestCounts(m: Scrape): Map<string, number> {
  const counts = new Map<string, number>();
  for (const s of m.find('apiserver_request_total')) {
    if (!s.labels.resource) continue;
    const k = requestKey(s.labels);
    counts.set(k, (counts.get(k) ?? 0) + s.value);
  }
  return counts;
}

function storedCounts(m: Scrape): Map<string, number> {
  return new Map(m.find('apiserver_storage_objects').map((s) => [s.labels.resource!, s.value]));
}

async function read(svc: Service, procs: Record<string, number[]>): Promise<Reading> {
  // pg_stat_database is flushed by each backend at most once a second.
  await sleep(1100);
  const [wal, stat] = await Promise.all([
    svc.pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn'),
    svc.pool.query<{ rows: string; commits: string }>(
      'SELECT tup_inserted + tup_updated + tup_deleted AS rows, xact_commit AS commits FROM pg_stat_database WHERE datname = current_database()'),
  ]);
  const cpu = Object.fromEntries(Object.entries(procs).map(([k, pids]) => [k, cpuSeconds(pids)]));
  const at = performance.now();
  return {
    at, cpu,
    metrics: parseExposition(await clusterMetrics(svc.kc)),
    walLsn: wal.rows[0]!.lsn, rows: Number(stat.rows[0]!.rows), commits: Number(stat.rows[0]!.commits),
  };
}

/** The mean size of one object of each kind as the API server returns it in JSON (metadata.managedFields included). */
async function meanBytes(kc: k8s.KubeConfig): Promise<Map<string, number>> {
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const server = kc.getCurrentCluster()!.server;
  const out = new Map<string, number>();
  for (const [resource, path] of Object.entries(KINDS)) {
    const body = await new Promise<string>((resolve, reject) => {
      https.request(new URL(path, server), { ...opts, headers: { ...opts.headers, Accept: 'application/json' } }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d)).on('end', () => resolve(text)).on('error', reject);
      }).on('error', reject).end();
    });
    const items = (JSON.parse(body) as { items?: unknown[] }).items ?? [];
    if (items.length) out.set(resource, items.reduce<number>((sum, o) => sum + Buffer.byteLength(JSON.stringify(o)), 0) / items.length);
  }
  return out;
}

/** CPU ms per job in all; per second while idle (`idle` to `before`); per job above that idle rate (`before` to `after`). */
function cpuFigures(names: string[], idle: Reading, before: Reading, after: Reading, jobs: number): Pick<Figures, 'cpu' | 'idleCpu' | 'marginalCpu'> {
  const ms = (a: Reading, b: Reading, k: string) => 1000 * (b.cpu[k]! - a.cpu[k]!);
  const idleSeconds = (before.at - idle.at) / 1000;
  const busySeconds = (after.at - before.at) / 1000;
  const per = (f: (k: string) => number) => Object.fromEntries(names.map((k) => [k, f(k)]));
  const idleCpu = per((k) => ms(idle, before, k) / idleSeconds);
  return {
    cpu: per((k) => ms(before, after, k) / jobs),
    idleCpu,
    marginalCpu: per((k) => (ms(before, after, k) - idleCpu[k]! * busySeconds) / jobs),
  };
}

function lsnBytes(lsn: string): bigint {
  const [hi, lo] = lsn.split('/');
  return (BigInt(`0x${hi}`) << 32n) + BigInt(`0x${lo}`);
}

async function measure(rate: number): Promise<Figures> {
  let figures: Figures | undefined;
  const total = rate * SECONDS;
  await withService({ workPrefix: 'mj-bench-capacity-', maxRunning: 2 * rate * (SECONDS + WARMUP_SECONDS) }, async (svc) => {
    const jobs = await firstSeen(svc.kc, RUNNER_JOBS, jobIdLabel);
    const warm = await postAtRate(svc, rate * WARMUP_SECONDS, rate);
    await until(() => [...warm.keys()].every((id) => jobs.at.has(id)), 60_000);
    await sleep(SETTLE_MS);
    const procs = { ...Object.fromEntries(Object.entries(svc.procs).map(([k, p]) => [k, [p.pid!]])), Postgres: postgresPids() };
    const idle = await read(svc, procs);
    await sleep(IDLE_SECONDS * 1000);
    const before = await read(svc, procs);
    const t0 = performance.now();
    const sentAt = await postAtRate(svc, total, rate);
    await until(() => [...sentAt.keys()].every((id) => jobs.at.has(id)), 120_000);
    await sleep(SETTLE_MS);
    const after = await read(svc, procs);
    const seconds = (performance.now() - t0) / 1000;
    const lat = [...sentAt].filter(([id]) => jobs.at.has(id)).map(([id, t]) => jobs.at.get(id)! - t).sort((a, b) => a - b);
    jobs.stop();
    const perJob = (n: number) => n / total;
    const reqs0 = requestCounts(before.metrics);
    const requests = new Map([...requestCounts(after.metrics)].map(([k, v]) => [k, perJob(v - (reqs0.get(k) ?? 0))] as const).filter(([, v]) => v > 0));
    const sum = (verbs: Set<string>) => [...requests].filter(([k]) => verbs.has(k.split(' ')[0]!)).reduce((a, [, v]) => a + v, 0);
    const stored0 = storedCounts(before.metrics);
    figures = {
      rate, jobs: total, seconds, requests,
      creates: sum(new Set(['CREATE', 'POST'])), writes: sum(WRITE_VERBS), reads: sum(READ_VERBS), watches: sum(new Set(['WATCH'])),
      stored: new Map([...storedCounts(after.metrics)].map(([k, v]) => [k, perJob(v - (stored0.get(k) ?? 0))] as const).filter(([, v]) => v !== 0)),
      bytes: await meanBytes(svc.kc),
      ...cpuFigures(Object.keys(procs), idle, before, after, total),
      walBytes: Number(lsnBytes(after.walLsn) - lsnBytes(before.walLsn)) / total,
      rows: perJob(after.rows - before.rows), commits: perJob(after.commits - before.commits),
      p50: pct(lat, 50), p99: pct(lat, 99),
    };
  });
  return figures!;
}

const f2 = (n: number) => n.toFixed(2);

function print(f: Figures): void {
  const w = (s: string) => process.stdout.write(`${s}\n`);
  w(`\n${f.rate} jobs/s for ${SECONDS} s (${f.jobs} jobs; ${f.seconds.toFixed(1)} s until every runner Job existed and ${SETTLE_MS / 1000} s more), load ${loadAverage()}`);
  w(`  jobs/s carried (jobs / that time)     ${(f.jobs / f.seconds).toFixed(1)}`);
  w(`  POST → runner Job p50 / p99 (ms)      ${f.p50.toFixed(0)} / ${f.p99.toFixed(0)}`);
  w('  API requests per job (apiserver_request_total, any code)');
  for (const [k, v] of [...f.requests].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))) w(`    ${k.padEnd(52)} ${f2(v).padStart(7)}`);
  w(`    ${'creates / writes / reads / watches'.padEnd(52)} ${f2(f.creates)} / ${f2(f.writes)} / ${f2(f.reads)} / ${f2(f.watches)}`);
  w('  objects stored per job (apiserver_storage_objects) and JSON bytes per object');
  for (const [k, v] of [...f.stored].sort((a, b) => a[0].localeCompare(b[0]))) {
    w(`    ${k.padEnd(52)} ${f2(v).padStart(7)}   ${f.bytes.has(k) ? `${f.bytes.get(k)!.toFixed(0)} B` : ''}`);
  }
  const perJobBytes = [...f.stored].reduce((a, [k, v]) => a + v * (f.bytes.get(k) ?? 0), 0);
  w(`    ${'bytes stored per job (those counts × their sizes)'.padEnd(52)} ${perJobBytes.toFixed(0).padStart(7)} B`);
  const byProcess = (r: Record<string, number>) => Object.entries(r).map(([k, v]) => `${k} ${f2(v)}`).join(', ');
  w(`  CPU ms per job, all                   ${byProcess(f.cpu)}`);
  w(`  CPU ms per second, idle               ${byProcess(f.idleCpu)}`);
  w(`  CPU ms per job above idle             ${byProcess(f.marginalCpu)}`);
  w(`  Postgres per job                      ${f2(f.rows)} rows written, ${f2(f.commits)} commits, ${f.walBytes.toFixed(0)} WAL bytes (whole server)`);
}

/** The model's check: per-job costs measured at the lowest rate, scaled to the highest rate's jobs, against what it measured. */
function check(low: Figures, high: Figures): void {
  const w = (s: string) => process.stdout.write(`${s}\n`);
  w(`\nModel check: ${low.rate} jobs/s per-job figures × ${high.rate} jobs/s, against measured at ${high.rate} jobs/s`);
  w(`  ${'per second'.padEnd(34)} ${'predicted'.padStart(10)} ${'measured'.padStart(10)}  error`);
  const row = (what: string, lowPerJob: number, highPerJob: number) => {
    const predicted = lowPerJob * high.rate;
    const measured = highPerJob * high.rate;
    w(`  ${what.padEnd(34)} ${predicted.toFixed(1).padStart(10)} ${measured.toFixed(1).padStart(10)}  ${measured ? `${(((predicted - measured) / measured) * 100).toFixed(0)}%` : ''}`);
  };
  row('API creates', low.creates, high.creates);
  row('API writes', low.writes, high.writes);
  row('API reads', low.reads, high.reads);
  // CPU: the high rate's window at the low rate's idle cost per second plus its marginal cost per job.
  const window = high.seconds;
  for (const k of Object.keys(high.cpu)) {
    const predicted = low.idleCpu[k]! + (low.marginalCpu[k]! * high.jobs) / window;
    const measured = (high.cpu[k]! * high.jobs) / window;
    w(`  ${`CPU ms, ${k}`.padEnd(34)} ${predicted.toFixed(1).padStart(10)} ${measured.toFixed(1).padStart(10)}  ${(((predicted - measured) / measured) * 100).toFixed(0)}%`);
  }
  row('Postgres rows written', low.rows, high.rows);
}

async function main(): Promise<void> {
  process.stdout.write(`capacity (${machine(loadAverage())})\n`);
  const all: Figures[] = [];
  for (const rate of RATES) {
    const f = await measure(rate);
    print(f);
    all.push(f);
  }
  if (all.length > 1) check(all[0]!, all[all.length - 1]!);
}

runBench(main);
