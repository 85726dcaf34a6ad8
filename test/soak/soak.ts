// Soak (`make soak`; issue 16 item 6, issue 34 item 3): test/soak/run-soak.ts
// with compressed timers, bursts of load and idle gaps of several watchdog
// periods, for SOAK_SECONDS after a warm-up. Prints each process's memory
// after the warm-up and at the end (goal: growth under 10%), the LISTs per
// minute per kind while idle (goal: at most one per relist period), the
// warning lines per hour (goal: none while idle), and how every job ended.
//
//   npx tsx test/soak/soak.ts
//
// SOAK_SECONDS (default 1800: measured, after the warm-up), SOAK_WARMUP_SECONDS (420: past the API
// server's 5-minute watch history, which fills for 5 minutes and then holds steady), SOAK_RATE (1 job/s
// in a burst), SOAK_BURST_SECONDS (60), SOAK_IDLE_SECONDS (90: several watchdog periods),
// SOAK_WATCHDOG_SECONDS (20), SOAK_RELIST_SECONDS (300), SOAK_RESYNC_SECONDS (60), SOAK_BOOKMARK_MS (5000),
// SOAK_WATCH_FAULTS (the local cluster's LOCAL_CLUSTER_WATCH_FAULTS past bookmarks, e.g.
// "drop=0.005,expire=0.2"; default none), SOAK_KEEP_LOGS=1 (keep every process log),
// BENCH_DATABASE_ADMIN_URL (postgres://postgres@127.0.0.1:5432/test).
import { loadAverage, machine, rowPrinter, runBench } from '../../api-gateway/bench/support.js';
import { runSoak, type ProcessName } from './run-soak.js';

const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback);

runBench(async () => {
  const loadAtStart = loadAverage();
  const o = {
    seconds: num('SOAK_SECONDS', 1800), warmUpSeconds: num('SOAK_WARMUP_SECONDS', 420), rate: num('SOAK_RATE', 1),
    burstSeconds: num('SOAK_BURST_SECONDS', 60), idleSeconds: num('SOAK_IDLE_SECONDS', 90),
    timers: {
      watchdogSeconds: num('SOAK_WATCHDOG_SECONDS', 20), relistSeconds: num('SOAK_RELIST_SECONDS', 300),
      resyncSeconds: num('SOAK_RESYNC_SECONDS', 60), bookmarkMs: num('SOAK_BOOKMARK_MS', 5000),
    },
    watchFaults: process.env.SOAK_WATCH_FAULTS, keepLogs: process.env.SOAK_KEEP_LOGS === '1',
    progress: (line: string) => process.stdout.write(`  ${line}\n`),
  };
  process.stdout.write(`soak: ${o.warmUpSeconds} s warm-up, then ${o.seconds} s measured; bursts of ${o.burstSeconds} s at ${o.rate} jobs/s, `
    + `idle gaps of ${o.idleSeconds} s; watchdog ${o.timers.watchdogSeconds} s, relist ${o.timers.relistSeconds} s, resync ${o.timers.resyncSeconds} s, `
    + `bookmarks every ${o.timers.bookmarkMs} ms${o.watchFaults ? `, watch faults ${o.watchFaults}` : ''}...\n`);
  const r = await runSoak(o);

  const row = rowPrinter(62, 30);
  process.stdout.write(`\nSoak (${machine(loadAtStart)}; ${r.seconds.toFixed(0)} s, of which ${r.idleSeconds.toFixed(0)} s idle; scripted runner)\n`);
  row('jobs accepted / ended / still running', `${r.accepted} / ${r.ended} / ${r.stillRunning}`, 'all end');
  row('longest wait for a burst\'s jobs to end, s', String(r.longestDrainSeconds));
  row('webhook deliveries received', String(r.webhooks));
  for (const [k, m] of Object.entries(r.memory) as [ProcessName, SoakResultMemory][]) {
    row(`${k} RSS MB after warm-up / end / peak (growth)`, `${m.warm.toFixed(0)} / ${m.end.toFixed(0)} / ${m.peak.toFixed(0)} (${((m.end - m.warm) / m.warm * 100).toFixed(1)}%)`, '< 10%');
  }
  const perMinute = (n: number, seconds: number) => (seconds > 0 ? (n / seconds) * 60 : 0).toFixed(2);
  const allowed = perMinute(1, o.timers.relistSeconds);
  for (const kind of Object.keys({ ...r.lists, ...r.idleLists }).sort()) {
    row(`LISTs of ${kind}: whole run / while idle (per minute idle)`, `${r.lists[kind] ?? 0} / ${r.idleLists[kind] ?? 0} (${perMinute(r.idleLists[kind] ?? 0, r.idleSeconds)})`, `≤ ${allowed}/min`);
  }
  row('warning lines: whole run / while idle (per hour)', `${r.warnings.length} / ${r.idleWarnings.length} (${perMinute(r.warnings.length, r.seconds / 60)} / h)`, '0 while idle');
  for (const w of r.idleWarnings.slice(0, 10)) process.stdout.write(`    idle: ${w}\n`);
  const byMessage = new Map<string, number>();
  for (const w of r.warnings) byMessage.set(w, (byMessage.get(w) ?? 0) + 1);
  for (const [w, n] of [...byMessage].sort((a, b) => b[1] - a[1]).slice(0, 10)) process.stdout.write(`    ${n} × ${w}\n`);
  row('errors (unexpected answers)', Object.keys(r.errors).length ? JSON.stringify(r.errors) : '0', '0');
  row('jobs that ended otherwise than their script', Object.keys(r.wrongEnd).length ? JSON.stringify(r.wrongEnd) : '0', '0');
});

type SoakResultMemory = { warm: number; end: number; peak: number };
