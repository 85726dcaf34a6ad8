// Benchmark (issue 13): batches. A 500-episode show, its lookup API and RSS
// feed served on loopback (a feed shaped like a real one: show notes,
// per-episode artwork, about 1 MB). Gateway, operator and local cluster each
// run in their own process, as in production, on a scratch database dropped
// at the end. Runner pods are kept out of the way as in
// operator/bench/submit-to-job.ts: the runner image is `sleep` and the
// cluster runs one pod at a time, so only submission and reconciliation
// are measured.
//
//   1. POST /jobs of a 500-episode show → 201, over BENCH_SHOWS shows (paused, each a new show id).
//   2. All 500 episode MediaJobs exist in the cluster: after POST /batch/{id}/start
//      of one of those paused shows, or after the POST of a show that is not paused
//      (rounds alternate; BENCH_ROUNDS rounds). The operator runs at its default
//      BATCH_CREATE_PER_SECOND unless that is set.
//   3. GET /batch/{id} latency while phase 2 runs (BENCH_GET_CONNECTIONS loops of GETs).
//   4. POST /jobs/bulk with 100 URLs, BENCH_BULK_REQUESTS requests, operator stopped
//      (the gateway only commits the 100 rows; their MediaJobs are the operator's
//      materializer's, so the gateway is measured alone, as post-jobs.ts measures POST /jobs).
//
//   npx tsx api-gateway/bench/batches.ts
//
// BENCH_SHOWS (10), BENCH_ROUNDS (4), BENCH_GET_CONNECTIONS (2), BENCH_BULK_REQUESTS (20),
// BENCH_DATABASE_ADMIN_URL (postgres://postgres@127.0.0.1:5432/postgres),
// BENCH_GATEWAY_LOG_LEVEL (info, as in production), BENCH_KEEP_LOGS (unset: with it, the work
// directory with every process's log is kept and named at the end).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import pg from 'pg';
import { getBatch } from '@mediajobs/lib/db/batches';
import { buildFeed, lookupResult, serve, startFakePlatform, type FakePlatform } from '../../lib/test/batches-support.js';
import { createApiKey } from '../src/db/api-keys.js';
import {
  GATEWAY_LOG_LEVEL as LOG_LEVEL, cpuSeconds, loadAverage, machine, root, rowPrinter, runBench, serviceEnv, sleep, start, startQuietCluster,
  startGateway, stop, withScratch,
} from './support.js';

const SHOWS = Number(process.env.BENCH_SHOWS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const GET_CONNECTIONS = Number(process.env.BENCH_GET_CONNECTIONS ?? 2);
const BULK_REQUESTS = Number(process.env.BENCH_BULK_REQUESTS ?? 20);
const ADMIN_URL = process.env.BENCH_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const EPISODES = 500;
const RUNNER_IMAGE = 'mediajobs/runner:bench';
const BATCH_LABEL = 'mediajobs.io/batch';
const NS = 'default';

/** The p-th percentile (nearest rank) of `xs`. */
function pct(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]! : NaN;
}

/** The gateway's own duration (its request log's `ms`) of every GET of these batches. */
function serverSideGets(logFile: string, batchIds: ReadonlySet<string>): number[] {
  const out: number[] = [];
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    if (!line.includes('"GET"') || !line.includes('/batch/')) continue;
    const entry = JSON.parse(line) as { method?: string; path?: string; ms?: number };
    const id = entry.path?.split('/')[2];
    if (entry.method === 'GET' && id && batchIds.has(id) && typeof entry.ms === 'number') out.push(entry.ms);
  }
  return out;
}

/** A show of `n` episodes as hosting platforms publish them: HTML show notes, artwork on every episode. */
function realisticFeed(showId: string, n: number): string {
  const notes = (i: number) => `<p>Episode ${i}: ${'we talk about examples, tools and the week in review. '.repeat(20)}</p>`
    + `<ul><li><a href="https://example.org/links/${i}?ref=feed&amp;x=1">Links</a></li><li>Sponsor: Example Co.</li></ul>`;
  return buildFeed({
    title: `Show ${showId}`,
    image: `https://img.example.org/${showId}/show-3000.jpg`,
    items: Array.from({ length: n }, (_x, k) => {
      const i = n - k;
      return {
        title: `Episode ${i}: a title of ordinary length`,
        description: notes(i),
        pubDate: new Date(Date.UTC(2024, 0, 1) - k * 86_400_000).toUTCString(),
        enclosure: { url: `https://media.example.org/${showId}/episode-${i}.mp3?source=rss`, type: 'audio/mpeg', length: 40_000_000 + i },
        image: `https://img.example.org/${showId}/ep-${i}.jpg`,
        guid: `${showId}-ep-${i}`,
      };
    }),
  });
}

interface Gateway {
  url: string;
  key: string;
}

async function call(gw: Gateway, method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown>; ms: number }> {
  const t = performance.now();
  const r = await fetch(`${gw.url}${path}`, {
    method, headers: { 'x-api-key': gw.key, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await r.text();
  const ms = performance.now() - t;
  return { status: r.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, ms };
}

function expectStatus(r: { status: number; body: unknown }, status: number, what: string): void {
  if (r.status !== status) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body).slice(0, 500)}`);
}

/** Episode MediaJobs seen by a watch, per batch label: how many, and when the last one arrived. */
class EpisodeWatch {
  private readonly seen = new Map<string, Set<string>>();
  private readonly firstAt = new Map<string, number>();
  private readonly lastAt = new Map<string, number>();
  private req?: { abort(): void };

  async start(kc: k8s.KubeConfig): Promise<void> {
    this.req = await new k8s.Watch(kc).watch(`/apis/mediajobs.io/v1alpha1/namespaces/${NS}/mediajobs`, {}, (type, obj: k8s.KubernetesObject) => {
      const batch = obj.metadata?.labels?.[BATCH_LABEL];
      if (type !== 'ADDED' || !batch) return;
      const names = this.seen.get(batch) ?? new Set<string>();
      names.add(obj.metadata!.name!);
      this.seen.set(batch, names);
      if (!this.firstAt.has(batch)) this.firstAt.set(batch, performance.now());
      this.lastAt.set(batch, performance.now());
    }, () => undefined);
  }

  /** When the batch's `n`-th MediaJob arrived, waiting up to `timeoutMs` (`at` undefined if it did not), and its first. */
  async allExist(batchId: string, n: number, timeoutMs: number): Promise<{ at?: number; firstAt?: number; count: number }> {
    const deadline = performance.now() + timeoutMs;
    while ((this.seen.get(batchId)?.size ?? 0) < n && performance.now() < deadline) await sleep(20);
    const count = this.seen.get(batchId)?.size ?? 0;
    const firstAt = this.firstAt.get(batchId);
    return { count, ...(firstAt !== undefined && { firstAt }), ...(count >= n && { at: this.lastAt.get(batchId)! }) };
  }

  stop(): void {
    this.req?.abort();
  }
}

/** Sequential GET /batch/{id} loops until `until` settles; every latency and any non-200. */
async function getLoop(gw: Gateway, batchId: string, until: Promise<unknown>): Promise<{ ms: number[]; bad: number }> {
  let done = false;
  void until.finally(() => {
    done = true;
  });
  const ms: number[] = [];
  let bad = 0;
  await Promise.all(Array.from({ length: GET_CONNECTIONS }, async () => {
    while (!done) {
      const r = await call(gw, 'GET', `/batch/${batchId}`);
      if (r.status === 200) ms.push(r.ms);
      else bad++;
    }
  }));
  return { ms, bad };
}

/** getBatch's own time (its one query), sequentially from here, until `until` settles. */
async function queryLoop(pool: pg.Pool, batchId: string, until: Promise<unknown>): Promise<number[]> {
  let done = false;
  void until.finally(() => {
    done = true;
  });
  const ms: number[] = [];
  while (!done) {
    const t = performance.now();
    await getBatch(pool, batchId);
    ms.push(performance.now() - t);
  }
  return ms;
}

interface Round {
  how: 'start' | 'post';
  /** Trigger to the 500th MediaJob seen (ms); undefined when they were not all there in time. */
  allExistMs?: number;
  /** Trigger to the first MediaJob seen (ms). */
  firstMs?: number;
  count: number;
  /** The POST's own answer time (post rounds). */
  postMs?: number;
}

interface RoundResult extends Round {
  batchId: string;
  gets: { ms: number[]; bad: number };
  /** getBatch's query alone, meanwhile. */
  queries: number[];
}

/**
 * One phase-2 round: start a paused show (or POST an unpaused one), GET its
 * batch (and run its query alone from here) until all its MediaJobs exist.
 */
async function episodeRound(gw: Gateway, pool: pg.Pool, watch: EpisodeWatch, how: Round['how'], batchOrShow: string): Promise<RoundResult> {
  const t0 = performance.now();
  let batchId: string;
  let postMs: number | undefined;
  if (how === 'start') {
    batchId = batchOrShow;
    const r = await call(gw, 'POST', `/batch/${batchId}/start`);
    expectStatus(r, 200, 'POST /batch/{id}/start');
  } else {
    const r = await call(gw, 'POST', '/jobs', { url: `https://podcasts.apple.com/us/podcast/bench/id${batchOrShow}` });
    expectStatus(r, 201, 'POST /jobs (not paused)');
    batchId = r.body.batch_id as string;
    postMs = r.ms;
  }
  const exist = watch.allExist(batchId, EPISODES, 60_000);
  const [gets, queries] = await Promise.all([getLoop(gw, batchId, exist), queryLoop(pool, batchId, exist)]);
  const { at, firstAt, count } = await exist;
  return {
    how, batchId, count, gets, queries, ...(at !== undefined && { allExistMs: at - t0 }), ...(firstAt !== undefined && { firstMs: firstAt - t0 }),
    ...(postMs !== undefined && { postMs }),
  };
}

async function bulkPhase(gw: Gateway): Promise<{ ms: number[]; bad: number }> {
  const body = (n: number) => ({ urls: Array.from({ length: 100 }, (_x, i) => `https://media.example/watch?v=bulk-${n}-${i}`), format: 'mp4' });
  for (let w = 0; w < 2; w++) expectStatus(await call(gw, 'POST', '/jobs/bulk', body(-1 - w)), 201, 'POST /jobs/bulk (warm-up)');
  const ms: number[] = [];
  let bad = 0;
  for (let n = 0; n < BULK_REQUESTS; n++) {
    const r = await call(gw, 'POST', '/jobs/bulk', body(n));
    if (r.status === 201 && (r.body.count as number) === 100) ms.push(r.ms);
    else bad++;
  }
  return { ms, bad };
}

/** The local cluster with runner pods kept out of the way: the runner image is `sleep`, one pod runs at a time. */
function servePlatform(platform: FakePlatform, showIds: string[]): number {
  let bytes = 0;
  for (const id of showIds) {
    const feed = realisticFeed(id, EPISODES);
    bytes = Buffer.byteLength(feed);
    platform.routes.set(`/feeds/${id}.xml`, serve(feed));
    platform.shows.set(id, lookupResult(id, `${platform.baseUrl}/feeds/${id}.xml`));
  }
  return bytes;
}

const ms0 = (n: number | undefined) => (n === undefined || Number.isNaN(n) ? '-' : n.toFixed(0));
const ms1 = (n: number | undefined) => (n === undefined || Number.isNaN(n) ? '-' : n.toFixed(1));

async function main(): Promise<void> {
  const load0 = loadAverage();
  const keepWork = Boolean(process.env.BENCH_KEEP_LOGS);
  await withScratch({ adminUrl: ADMIN_URL, poolMax: 2, workPrefix: 'mj-bench-batches-', keepWork }, async ({ dbUrl, pool, work, defer }) => {
    const platform = await startFakePlatform();
    defer(() => platform.stop());
    const watch = new EpisodeWatch();
    defer(() => watch.stop());
    const { key } = await createApiKey(pool, { name: 'bench' });
    // Phase-1 shows, warm-up shows, and one new show per unpaused round.
    const showIds = Array.from({ length: SHOWS + 2 + ROUNDS }, (_x, i) => String(2_000_000_000 + i));
    const feedBytes = servePlatform(platform, showIds);

    const { proc: cluster, kubeconfig, kc } = await startQuietCluster(work, ['mediajob.yaml', 'mediabatch.yaml'], RUNNER_IMAGE);
    const env: NodeJS.ProcessEnv = {
      ...serviceEnv(dbUrl, kubeconfig, work),
      PODCAST_LOOKUP_ENDPOINT: platform.lookupEndpoint, OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8,::1/128',
      RUNNER_IMAGE, LEADER_ELECTION: 'false',
    };
    const { proc: gwProc, url } = await startGateway(env, work);
    const operator = await start(join(root, 'operator/src/main.ts'), /operator started/, join(work, 'operator.log'), { env: { ...env, LOG_LEVEL: 'info' } });
    const gw: Gateway = { url, key };
    await watch.start(kc);
    const procs = { gateway: gwProc, operator, 'local cluster': cluster };

    // Phase 1: paused shows, so their episodes wait for phase 2.
    const showUrl = (id: string) => `https://podcasts.apple.com/us/podcast/bench/id${id}`;
    for (const id of showIds.slice(SHOWS, SHOWS + 2)) expectStatus(await call(gw, 'POST', '/jobs', { url: showUrl(id), paused: true }), 201, 'POST /jobs (warm-up)');
    process.stdout.write(`POST /jobs of a ${EPISODES}-episode show (feed ${(feedBytes / 1e6).toFixed(2)} MB), ${SHOWS} shows...\n`);
    const postMs: number[] = [];
    const paused: string[] = [];
    for (const id of showIds.slice(0, SHOWS)) {
      const r = await call(gw, 'POST', '/jobs', { url: showUrl(id), paused: true });
      expectStatus(r, 201, 'POST /jobs (paused show)');
      if (r.body.total_episodes !== EPISODES) throw new Error(`expected ${EPISODES} episodes, got ${String(r.body.total_episodes)}`);
      postMs.push(r.ms);
      paused.push(r.body.batch_id as string);
    }

    // Baselines for phase 3 on the quiet system: the same GET with no episodes
    // being created, and its query alone from here.
    const idleBatch = paused[paused.length - 1]!;
    const idle = await getLoop(gw, idleBatch, sleep(3000));
    const queryMs: number[] = [];
    for (let i = 0; i < 300; i++) {
      const t = performance.now();
      await getBatch(pool, idleBatch);
      queryMs.push(performance.now() - t);
    }

    // Phases 2 and 3: rounds alternate between starting a paused show and posting an unpaused one.
    const rounds: RoundResult[] = [];
    const getMs: number[] = [];
    let getBad = idle.bad;
    const unpaused = showIds.slice(SHOWS + 2);
    const cpu0 = Object.fromEntries(Object.entries(procs).map(([k, p]) => [k, cpuSeconds([p.pid!])]));
    let roundsMs = 0;
    for (let i = 0; i < ROUNDS; i++) {
      const how = i % 2 === 0 ? 'start' : 'post';
      await sleep(3000); // the creation rate's bucket refills between rounds
      process.stdout.write(`round ${i + 1}/${ROUNDS}: ${how === 'start' ? 'POST /batch/{id}/start' : 'POST /jobs (not paused)'} → ${EPISODES} MediaJobs, GET /batch/{id} meanwhile...\n`);
      const t = performance.now();
      const r = await episodeRound(gw, pool, watch, how, how === 'start' ? paused[Math.floor(i / 2) % paused.length]! : unpaused[i]!);
      roundsMs += performance.now() - t;
      rounds.push(r);
      getMs.push(...r.gets.ms);
      getBad += r.gets.bad;
    }

    const cpu = Object.entries(procs).map(([k, p]) => `${k} ${((cpuSeconds([p.pid!]) - cpu0[k]!) / (roundsMs / 1000) * 100).toFixed(0)}%`).join(', ');

    // Phase 4 without the operator: the gateway alone, as post-jobs.ts measures POST /jobs.
    await stop(operator);
    process.stdout.write(`POST /jobs/bulk of 100 URLs, ${BULK_REQUESTS} requests (operator stopped)...\n`);
    const bulk = await bulkPhase(gw);
    await stop(gwProc);
    const server = (how: Round['how']) => serverSideGets(join(work, 'gateway.log'), new Set(rounds.filter((r) => r.how === how).map((r) => r.batchId)));
    const serverIdle = serverSideGets(join(work, 'gateway.log'), new Set([idleBatch]));

    const seconds = (x: number | undefined) => (x !== undefined && Number.isFinite(x) ? (x / 1000).toFixed(1) : 'timeout');
    // Each round as "first MediaJob → all": the trigger's delay, then the paced creation.
    const list = (how: Round['how']) => rounds.filter((r) => r.how === how).map((r) => `${seconds(r.firstMs)}→${seconds(r.allExistMs)}`).join(', ');
    const allExist = rounds.map((r) => r.allExistMs ?? Infinity);
    const unpausedPost = rounds.flatMap((r) => (r.postMs === undefined ? [] : [r.postMs]));
    type Rows = [string, string, string, boolean | undefined][];
    const rows: Rows = [
      [`POST /jobs, ${EPISODES}-episode show → 201 (paused), n=${postMs.length}: p50 / p99 ms`, `${ms0(pct(postMs, 50))} / ${ms0(pct(postMs, 99))}`, 'p50 < 1000', pct(postMs, 50) < 1000],
      [`POST /jobs, show not paused (operator busy), n=${unpausedPost.length}: each, ms`, unpausedPost.map(ms0).join(', ') || '-', '', undefined],
      [`all ${EPISODES} MediaJobs exist, n=${allExist.length}: median / max s`, `${(pct(allExist, 50) / 1000).toFixed(1)} / ${(Math.max(...allExist) / 1000).toFixed(1)}`, 'median < 10 s', pct(allExist, 50) < 10_000],
      ['  after POST /batch/{id}/start, each: first → all s', list('start'), '', undefined],
      ['  after POST /jobs (not paused), each: first → all s', list('post'), '', undefined],
      [`GET /batch/{id} meanwhile, n=${getMs.length}, c=${GET_CONNECTIONS}: p50 / p99 ms`, `${ms1(pct(getMs, 50))} / ${ms1(pct(getMs, 99))}`, 'p99 < 20', pct(getMs, 99) < 20 && getBad === 0],
      ...(['start', 'post'] as const).flatMap((how): Rows => {
        const of = rounds.filter((r) => r.how === how);
        const client = of.flatMap((r) => r.gets.ms);
        const q = of.flatMap((r) => r.queries);
        const srv = server(how);
        const after = how === 'start' ? 'after start' : 'after an unpaused POST';
        return [
          [`  ${after}, n=${client.length}: p50 / p99 ms`, `${ms1(pct(client, 50))} / ${ms1(pct(client, 99))}`, '', undefined],
          ['    gateway\'s own time (its request log): p50 / p99 ms', `${ms1(pct(srv, 50))} / ${ms1(pct(srv, 99))}`, '', undefined],
          [`    its query alone (getBatch, from the bench), n=${q.length}: p50 / p99 ms`, `${ms1(pct(q, 50))} / ${ms1(pct(q, 99))}`, '', undefined],
        ];
      }),
      [`GET /batch/{id} with no episodes being created, n=${idle.ms.length}: p50 / p99 ms`, `${ms1(pct(idle.ms, 50))} / ${ms1(pct(idle.ms, 99))}`, '', undefined],
      [`  same, gateway's own time: p50 / p99 ms`, `${ms1(pct(serverIdle, 50))} / ${ms1(pct(serverIdle, 99))}`, '', undefined],
      [`  its query alone (getBatch, from the bench), n=${queryMs.length}: p50 / p99 ms`, `${ms1(pct(queryMs, 50))} / ${ms1(pct(queryMs, 99))}`, '', undefined],
      [`POST /jobs/bulk, 100 URLs, n=${bulk.ms.length}: p50 / p99 ms`, `${ms0(pct(bulk.ms, 50))} / ${ms0(pct(bulk.ms, 99))}`, '', undefined],
      ['non-2xx (GET /batch, bulk)', `${getBad} / ${bulk.bad}`, '0 / 0', getBad === 0 && bulk.bad === 0],
    ];
    process.stdout.write(`\nbatches benchmark (gateway LOG_LEVEL=${LOG_LEVEL}, operator BATCH_CREATE_PER_SECOND=${process.env.BATCH_CREATE_PER_SECOND ?? 'default'}, `
      + `${machine(load0)}, at end ${loadAverage()})\n`);
    const row = rowPrinter(72, 20);
    for (const [what, value, goal, ok] of rows) {
      const verdict = ok === undefined ? '' : ok ? 'pass' : 'FAIL';
      row(what, value, `${goal.padEnd(11)} ${verdict}`);
    }
    process.stdout.write(`  CPU during the rounds (share of one core): ${cpu}\n`);
  });
}

runBench(main);
