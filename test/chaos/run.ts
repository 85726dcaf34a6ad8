// `make chaos`: the fault suite at full size, printing its figures. Each
// scenario runs against a fresh service (local cluster with the real
// runner, Postgres, the gateway in this process, the operator as a child
// process) and is judged by the same breaches() as its reduced test in
// `make test`. Every process logs at debug, and each scenario ends by
// searching all of it for the run's secrets. Exit 1 when any scenario
// breached a rule.
//   CHAOS_JOBS (200), CHAOS_KILL_EVERY_S (5): operator kills;
//   CHAOS_RUNNER_KILLS (10): runners killed, half SIGKILL, half OOM;
//   CHAOS_UPLOAD_KILLS (3): runners OOM-killed after storing the media, before their report;
//   CHAOS_RESTART_JOBS (40): jobs around an API server restart of CHAOS_RESTART_DOWN_S (5);
//   CHAOS_GATEWAY_POSTS (2000), CHAOS_GATEWAY_KILLS (4): keyed POSTs around gateway SIGKILLs;
//   CHAOS_PG_JOBS (40): jobs around a Postgres restart of CHAOS_PG_DOWN_S (5);
//   CHAOS_STORAGE_JOBS (20): jobs uploading when managed storage stops for CHAOS_STORAGE_DOWN_S (3);
//   CHAOS_SCENARIOS (operator,runner,upload,apiserver,postgres,storage,gateway): which to run.
import { startChaos, type ChaosFixture } from './fixture.js';
import { breaches, look, type JobSeen, type Seen } from './outside.js';
import { runOperatorKills } from './operator-kills.js';
import { runApiServerRestart } from './apiserver-restart.js';
import { runGatewayKills } from './gateway-kills.js';
import { runPostgresRestart } from './postgres-restart.js';
import { startPagesServer } from '../support/media-pages.js';
import { startPostgresServer } from '../support/postgres-server.js';
import { CATEGORY, HeldSubtitles, runKillAfterUpload, runRunnerKill, type KillAfterUploadRun, type RunnerKill } from './runner-kills.js';
import { runStorageOutage, startStorageChaos, type StorageChaos } from './storage-outage.js';

const JOBS = Number(process.env.CHAOS_JOBS ?? 200);
const KILL_EVERY_S = Number(process.env.CHAOS_KILL_EVERY_S ?? 5);
const RUNNER_KILLS = Number(process.env.CHAOS_RUNNER_KILLS ?? 10);
const UPLOAD_KILLS = Number(process.env.CHAOS_UPLOAD_KILLS ?? 3);
const RESTART_JOBS = Number(process.env.CHAOS_RESTART_JOBS ?? 40);
const RESTART_DOWN_S = Number(process.env.CHAOS_RESTART_DOWN_S ?? 5);
const GATEWAY_POSTS = Number(process.env.CHAOS_GATEWAY_POSTS ?? 2000);
const GATEWAY_KILLS = Number(process.env.CHAOS_GATEWAY_KILLS ?? 4);
const PG_JOBS = Number(process.env.CHAOS_PG_JOBS ?? 40);
const PG_DOWN_S = Number(process.env.CHAOS_PG_DOWN_S ?? 5);
const STORAGE_JOBS = Number(process.env.CHAOS_STORAGE_JOBS ?? 20);
const STORAGE_DOWN_S = Number(process.env.CHAOS_STORAGE_DOWN_S ?? 3);

const out = (s: string) => process.stdout.write(s);
const row = (label: string, value: string | number) => out(`  ${label.padEnd(54)} ${value}\n`);
const s1 = (ms: number) => (ms / 1000).toFixed(1);
const p50max = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return `${s1(s[Math.floor(s.length / 2)] ?? NaN)} / ${s1(s.at(-1) ?? NaN)}`;
};

/** The rows every scenario shares: how the jobs ended, attempts, Jobs and pods, webhooks, storage, usage, breaches. */
function outcome(seen: Seen, found: string[]): void {
  const count = (f: (j: JobSeen) => string) => {
    const m = new Map<string, number>();
    for (const j of seen.jobs) m.set(f(j), (m.get(f(j)) ?? 0) + 1);
    return [...m].map(([k, n]) => `${k}: ${n}`).join(', ');
  };
  const perJob = seen.jobs.map((j) => j.terminalDeliveries.length);
  row('statuses', count((j) => j.status));
  row('jobs by attempts made', count((j) => `${j.attempt ?? '?'} attempt(s)`));
  row('runner Jobs / pods', `${seen.jobs.reduce((s, j) => s + j.runnerJobs.length, 0)} / ${seen.jobs.reduce((s, j) => s + j.runnerJobs.reduce((p, r) => p + r.pods, 0), 0)}`);
  row('terminal webhook deliveries per job min / max', `${Math.min(...perJob)} / ${Math.max(...perJob)}`);
  row('files in storage / usage_count', `${seen.storedKeys.length} / ${String(seen.usage.usage_count)}`);
  row('breaches (duplicates, lost webhooks, usage drift ...)', found.length);
  for (const b of found.slice(0, 20)) out(`    ${b}\n`);
}

async function scenario(
  title: string, body: (f: ChaosFixture) => Promise<boolean>, start: () => Promise<ChaosFixture> = () => startChaos(),
): Promise<boolean> {
  const f = await start();
  out(`\nchaos: ${title}\n`);
  try {
    const ok = await body(f);
    const op = f.svc.operator;
    row('operator processes started / crashes of its own', `${op.starts} / ${op.crashes.length}`);
    for (const c of op.crashes.slice(0, 3)) out(`    crash: ${c}\n`);
    const scan = await f.scanLogs();
    row(`secrets found in the logs (${scan.sources} logs, ${(scan.bytes / 1e6).toFixed(1)} MB, debug)`, scan.leaks.length);
    for (const l of scan.leaks.slice(0, 20)) out(`    ${l}\n`);
    return ok && op.crashes.length === 0 && scan.leaks.length === 0;
  } finally {
    await f.stop();
  }
}

const operatorKills = () => scenario(`operator SIGKILLed ${KILL_EVERY_S} s after each start took the Lease, while ${JOBS} short jobs run`, async (f) => {
  const run = await runOperatorKills(f, { jobs: JOBS, killEveryMs: KILL_EVERY_S * 1000, deadlineMs: 30 * 60_000 });
  const found = breaches(run.seen, { status: 'Completed', created: JOBS });
  row('operator kills (before the last job ended)', `${run.kills} (${run.killsMidRun})`);
  row('operator start to holding the Lease p50 / max (s)', p50max(run.msToLead));
  row('first POST to every job terminal (s)', s1(run.msToAllTerminal));
  row('then to every terminal webhook received (s)', s1(run.msToAllWebhooks));
  outcome(run.seen, found);
  return found.length === 0;
});

const runnerKills = () => scenario(`${RUNNER_KILLS} runners killed mid-download, half SIGKILLed, half OOM-killed`, async (f) => {
  const kinds: RunnerKill[] = Array.from({ length: RUNNER_KILLS }, (_, i) => (i % 2 ? 'oom' : 'sigkill'));
  const runs = await Promise.all(kinds.map((how) => runRunnerKill(f, how)));
  const seen = await look(f.svc, f.receiver, runs.map((r) => r.id));
  const found = breaches(seen, { status: 'Completed', created: kinds.length });
  // Each classified as ADR 0018 says and retried: a first attempt Failed with the kill's category, then Completed.
  const classified = seen.jobs.filter((j, i) => j.attempts[0]?.outcome === 'Failed' && j.attempts[0].category === CATEGORY[kinds[i]!]);
  for (const [i, j] of seen.jobs.entries()) {
    if (!classified.includes(j)) found.push(`${j.id}: attempts ${JSON.stringify(j.attempts)}, expected a first attempt Failed ${CATEGORY[kinds[i]!]}`);
  }
  row('kills classified as ADR 0018 says (evicted / oom_killed)', `${classified.length} of ${kinds.length}`);
  row('kill to job terminal p50 / max (s)', p50max(runs.map((r) => r.msToTerminal)));
  outcome(seen, found);
  return found.length === 0;
});

// The test pages with their held subtitle track live beside the service; scenario() stops the service, this the pages.
const uploadKills = async (): Promise<boolean> => {
  let held = new HeldSubtitles();
  const pages = await startPagesServer({ before: (path) => held.before(path) });
  try {
    return await scenario(`${UPLOAD_KILLS} runners OOM-killed between storing the media and their report, one at a time`, async (f) => {
      const runs: KillAfterUploadRun[] = [];
      for (let i = 0; i < UPLOAD_KILLS; i++) {
        held = new HeldSubtitles();
        runs.push(await runKillAfterUpload(f, pages.trackPageUrl, held, `kept-${i}`));
      }
      const seen = await look(f.svc, f.receiver, runs.map((r) => r.id));
      const found = breaches(seen, { status: 'Completed', created: runs.length });
      // The file attempt 1 left was removed before attempt 2 stored: the same name, no `-<suffix>` copy.
      const sameName = seen.jobs.filter((j, i) => j.s3Key === runs[i]!.storedByFirst);
      for (const [i, j] of seen.jobs.entries()) {
        if (!sameName.includes(j)) found.push(`${j.id}: stored ${String(j.s3Key)}, attempt 1 stored ${runs[i]!.storedByFirst}`);
      }
      row('retries stored under attempt 1\'s name (its file removed first)', `${sameName.length} of ${runs.length}`);
      row('kill to job terminal p50 / max (s)', p50max(runs.map((r) => r.msToTerminal)));
      outcome(seen, found);
      return found.length === 0;
    });
  } finally {
    await pages.stop();
  }
};

const apiServerRestart = () => scenario(`API server restarted (state kept, ${RESTART_DOWN_S} s down) while ${RESTART_JOBS} jobs download, ${RESTART_JOBS / 2} more posted after`, async (f) => {
  const run = await runApiServerRestart(f, { before: RESTART_JOBS, after: RESTART_JOBS / 2, downMs: RESTART_DOWN_S * 1000, deadlineMs: 15 * 60_000 });
  const found = breaches(run.seen, { status: 'Completed', created: run.ids.length });
  row('jobs with a runner running at the restart', run.runningAtRestart);
  row('API server back to every job terminal (s)', s1(run.msToAllTerminal));
  row('posted after the restart: POST to running p50 / max (s)', p50max(run.msToStart));
  outcome(run.seen, found);
  return found.length === 0;
});

// Its own Postgres server, which the scenario stops and starts.
const postgresRestart = async (): Promise<boolean> => {
  const postgres = await startPostgresServer();
  try {
    return await scenario(`Postgres stopped for ${PG_DOWN_S} s and started again while ${PG_JOBS} jobs download, ${PG_JOBS / 2} more posted after`, async (f) => {
      const run = await runPostgresRestart(f, postgres, { before: PG_JOBS, after: PG_JOBS / 2, downMs: PG_DOWN_S * 1000, deadlineMs: 15 * 60_000 });
      const found = breaches(run.seen, { status: 'Completed', created: run.ids.length });
      found.push(...run.malformedOutageAnswers);
      if (Object.keys(run.outageAnswers).some((s) => s !== '503')) found.push(`answers other than 503 while Postgres was down: ${JSON.stringify(run.outageAnswers)}`);
      row('jobs with a runner running when Postgres stopped', run.runningAtStop);
      row('gateway answers while it was down, by status', JSON.stringify(run.outageAnswers));
      row('Postgres back to the first POST accepted (s)', s1(run.msToFirstAccept));
      row('Postgres back to every job terminal (s)', s1(run.msToAllTerminal));
      outcome(run.seen, found);
      return found.length === 0;
    }, () => startChaos({}, postgres.url));
  } finally {
    await postgres.remove();
  }
};

// Managed storage on s3rver behind a front that paces parts and can stop; scenario() stops the service, this the storage.
const storageOutage = async (): Promise<boolean> => {
  let c: StorageChaos | undefined;
  try {
    return await scenario(`managed storage (S3) stopped for ${STORAGE_DOWN_S} s while ${STORAGE_JOBS} runners upload`, async () => {
      const run = await runStorageOutage(c!, { jobs: STORAGE_JOBS, downMs: STORAGE_DOWN_S * 1000, deadlineMs: 15 * 60_000 });
      row('multipart uploads in flight when it stopped', run.uploadsAtStop);
      row('outcomes', JSON.stringify(run.outcomes));
      row('storage back to every job terminal (s)', s1(run.msToAllTerminal));
      row('storage back to no multipart upload left (s)', s1(run.msToNoUploads));
      row('multipart uploads left behind', run.uploadsLeft);
      outcome(run.seen, run.breaches);
      return run.breaches.length === 0;
    }, async () => {
      c = await startStorageChaos(STORAGE_JOBS);
      return c.f;
    });
  } finally {
    await c?.stopStorage();
  }
};

// Gateway and Postgres only: the jobs are judged by their rows, so no cluster is started.
const gatewayKills = async (): Promise<boolean> => {
  out(`\nchaos: gateway SIGKILLed ${GATEWAY_KILLS} times during ${GATEWAY_POSTS} keyed POST /jobs (concurrency 50), clients retrying with their key\n`);
  const run = await runGatewayKills({ posts: GATEWAY_POSTS, kills: GATEWAY_KILLS, concurrency: 50 });
  row('requests cut off by the kills / 201s that were replays', `${run.lost} / ${run.replays}`);
  row('answers before a key\'s 201, by status', JSON.stringify(run.refused));
  row('kill to the gateway ready again p50 / max (s)', p50max(run.msDown));
  row('first POST to every key answered 201 (s)', s1(run.msTotal));
  row('breaches (a key with two jobs, a lost job, usage drift ...)', run.breaches.length);
  for (const b of run.breaches.slice(0, 20)) out(`    ${b}\n`);
  return run.breaches.length === 0;
};

const SCENARIOS = {
  operator: operatorKills, runner: runnerKills, upload: uploadKills, apiserver: apiServerRestart, postgres: postgresRestart, storage: storageOutage, gateway: gatewayKills,
};

async function main(): Promise<void> {
  const chosen = (process.env.CHAOS_SCENARIOS ?? Object.keys(SCENARIOS).join(',')).split(',');
  const results: boolean[] = [];
  for (const name of chosen) {
    const run = SCENARIOS[name as keyof typeof SCENARIOS];
    if (!run) throw new Error(`CHAOS_SCENARIOS: no scenario ${name} (${Object.keys(SCENARIOS).join(', ')})`);
    results.push(await run());
  }
  process.exit(results.every(Boolean) ? 0 : 1);
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
