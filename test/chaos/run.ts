// `make chaos`: the fault suite at full size, printing its figures. Each
// scenario runs against a fresh service (local cluster with the real
// runner, Postgres, the gateway in this process, the operator as a child
// process) and is judged by the same breaches() as its reduced test in
// `make test`. Exit 1 when any scenario breached a rule.
//   CHAOS_JOBS (200), CHAOS_KILL_EVERY_S (5): the operator-kill scenario.
import { startMediaServer } from '../support/media.js';
import { startReceiver, startService } from '../e2e/support.js';
import { breaches } from './outside.js';
import { runOperatorKills } from './operator-kills.js';

const JOBS = Number(process.env.CHAOS_JOBS ?? 200);
const KILL_EVERY_S = Number(process.env.CHAOS_KILL_EVERY_S ?? 5);

function row(label: string, value: string | number): string {
  return `  ${label.padEnd(52)} ${value}\n`;
}

async function operatorKills(): Promise<boolean> {
  const media = await startMediaServer();
  const receiver = await startReceiver();
  const svc = await startService({ operatorProcess: true });
  try {
    const run = await runOperatorKills(svc, media, receiver, { jobs: JOBS, killEveryMs: KILL_EVERY_S * 1000, deadlineMs: 30 * 60_000 });
    const found = breaches(run.seen, { status: 'Completed', created: JOBS });
    const perJob = run.seen.jobs.map((j) => j.terminalDeliveries.length);
    const retried = run.seen.jobs.filter((j) => (j.attempt ?? 1) > 1).length;
    const statuses = new Map<string, number>();
    for (const j of run.seen.jobs) statuses.set(j.status, (statuses.get(j.status) ?? 0) + 1);
    process.stdout.write(`\nchaos: operator SIGKILLed ${KILL_EVERY_S} s after it takes the Lease, again and again, while ${JOBS} short jobs run\n`);
    process.stdout.write(row('jobs / statuses', `${JOBS} / ${[...statuses].map(([s, n]) => `${s} ${n}`).join(', ')}`));
    process.stdout.write(row('operator kills (before the last job ended)', `${run.kills} (${run.killsMidRun})`));
    process.stdout.write(row('operator processes started / crashes of its own', `${svc.operator.starts} / ${svc.operator.crashes.length}`));
    const lead = [...run.msToLead].sort((a, b) => a - b);
    process.stdout.write(row('operator start to holding the Lease p50 / max (s)', `${((lead[Math.floor(lead.length / 2)] ?? NaN) / 1000).toFixed(1)} / ${((lead.at(-1) ?? NaN) / 1000).toFixed(1)}`));
    process.stdout.write(row('first POST to every job terminal (s)', (run.msToAllTerminal / 1000).toFixed(1)));
    process.stdout.write(row('then to every terminal webhook received (s)', (run.msToAllWebhooks / 1000).toFixed(1)));
    process.stdout.write(row('runner Jobs / pods', `${run.seen.jobs.reduce((s, j) => s + j.runnerJobs.length, 0)} / ${run.seen.jobs.reduce((s, j) => s + j.runnerJobs.reduce((p, r) => p + r.pods, 0), 0)}`));
    process.stdout.write(row('jobs retried (attempt > 1)', retried));
    process.stdout.write(row('terminal webhook deliveries per job min / max', `${Math.min(...perJob)} / ${Math.max(...perJob)}`));
    process.stdout.write(row('files in storage / usage_count', `${run.seen.storedKeys.length} / ${String(run.seen.usage.usage_count)}`));
    process.stdout.write(row('breaches (duplicates, lost webhooks, usage drift ...)', found.length));
    for (const b of found.slice(0, 20)) process.stdout.write(`    ${b}\n`);
    for (const c of svc.operator.crashes.slice(0, 3)) process.stdout.write(`    crash: ${c}\n`);
    return found.length === 0 && svc.operator.crashes.length === 0;
  } finally {
    await svc.stop();
    await receiver.stop();
    await media.stop();
  }
}

async function main(): Promise<void> {
  const ok = await operatorKills();
  process.exit(ok ? 0 : 1);
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
