// Benchmark (issue 15: cancellation that really stops): time from
// POST /jobs/{id}/cancel to the job's status Cancelled and every process of
// its runner (the runner, yt-dlp, ffmpeg) gone, for BENCH_JOBS jobs (default
// 10) cancelled one after another mid-download. The whole service runs in
// this process as the end-to-end tests run it (local cluster with the real
// runner, Postgres, gateway, operator); the source is a slow loopback
// download, so each job is reliably in flight when it is cancelled.
// Goal: p99 < 3 s.
import { eventually } from '../../local-cluster/test/support.js';
import { startReceiver, startService } from '../../test/e2e/support.js';
import { jobProcesses } from '../../test/support/job-processes.js';
import { startMediaServer } from '../../test/support/media.js';

const JOBS = Number(process.env.BENCH_JOBS ?? 10);

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

async function main(): Promise<void> {
  const media = await startMediaServer();
  const receiver = await startReceiver();
  const svc = await startService();
  const stopped: number[] = [];
  const answered: number[] = [];
  try {
    for (let i = 0; i < JOBS; i++) {
      const id = (await svc.api('POST', '/jobs', { url: media.slowUrl(300), webhook_url: receiver.url })).body.job_id as string;
      // In flight: Processing, with the runner and its downloader running.
      await eventually(async () => (await svc.api('GET', `/jobs/${id}`)).body.status === 'Processing', 120_000, 50);
      await eventually(() => jobProcesses(id).length >= 2, 120_000, 20);
      const t0 = performance.now();
      const r = await svc.api('POST', `/jobs/${id}/cancel`);
      answered.push(performance.now() - t0);
      if (r.body.status !== 'Cancelled') throw new Error(`job ${id}: cancel answered ${r.status} ${JSON.stringify(r.body)}`);
      await eventually(() => jobProcesses(id).length === 0, 30_000, 10);
      stopped.push(performance.now() - t0);
      process.stdout.write('.');
    }
  } finally {
    await svc.stop();
    await receiver.stop();
    await media.stop();
  }
  const s = [...stopped].sort((a, b) => a - b);
  const a = [...answered].sort((x, y) => x - y);
  process.stdout.write(`\ncancel: POST /jobs/{id}/cancel to status Cancelled and no runner process left, n=${s.length}\n`);
  process.stdout.write(`  cancel answer (status Cancelled) p50 / p99 (ms)   ${pct(a, 50).toFixed(1)} / ${pct(a, 99).toFixed(1)}\n`);
  process.stdout.write(`  runner processes gone p50 / p99 / max (ms)        ${pct(s, 50).toFixed(1)} / ${pct(s, 99).toFixed(1)} / ${s.at(-1)?.toFixed(1)}\n`);
  process.stdout.write(`  goal p99 < 3000 ms: ${pct(s, 99) < 3000 ? 'met' : 'NOT met'}\n`);
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
