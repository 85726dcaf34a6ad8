// Benchmark (issue 17 item 7, sizing for docs/production.md): CPU seconds and
// peak memory of the runner's process tree (node, yt-dlp, ffmpeg) per job
// kind, on one BENCH_SECONDS-long (60 s) 1080p25 H.264 4 Mbit/s + AAC input
// served over loopback by test/support/media.ts:
// - MP4 copy (the default job: no re-encode);
// - a transcode to H.264 asking max_resolution 480 (maxResolution chooses
//   among the source's formats and does not scale: this source has only
//   1080p, so the output is a 1080p re-encode; the table shows its height);
// - audio only, MP3 (192k);
// - the same media as an HLS source (4 s MPEG-TS segments), copied to MP4.
// The runner runs as the image runs it (compiled with the image's tsconfigs,
// plain node), with no cluster to report to, under /usr/bin/time: CPU is
// user + system of the runner and every child it waited for (yt-dlp,
// ffmpeg); peak memory is the largest RSS sum of the process tree at one
// 50 ms sample (/proc), and the largest single process's peak (time's
// maximum resident set). ffmpeg's threads follow the CPUs this machine
// gives (cpuBudget): print them with the figures. BENCH_ROUNDS (3): the
// median CPU and the largest peak are printed.
import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { MediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { startMediaServer } from '../../test/support/media.js';
import { cpuBudget } from '../src/child.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SECONDS = Number(process.env.BENCH_SECONDS ?? 60);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const CACHE = process.env.BENCH_CACHE_DIR ?? join(tmpdir(), 'mediajobs-bench-media');
const MB = 1024 * 1024;

/** The 1080p MP4 (as runner-vs-bare.ts makes it) and the same as an HLS media playlist, made once. */
async function inputs(): Promise<{ mp4: string; hls: string }> {
  mkdirSync(CACHE, { recursive: true });
  const mp4 = `testsrc2-1080p25-${SECONDS}s-4M.mp4`;
  if (!existsSync(join(CACHE, mp4))) {
    const part = join(CACHE, `${mp4}.${process.pid}.part.mp4`);
    process.stdout.write(`generating ${SECONDS} s of 1080p input (once, cached in ${CACHE})...\n`);
    await run('ffmpeg', [
      '-hide_banner', '-loglevel', 'error', '-nostdin', '-y',
      '-f', 'lavfi', '-i', `testsrc2=size=1920x1080:rate=25:duration=${SECONDS}`,
      '-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000:duration=${SECONDS}`,
      '-c:v', 'libx264', '-preset', 'ultrafast', '-b:v', '4M', '-maxrate', '4M', '-bufsize', '8M', '-g', '50', '-pix_fmt', 'yuv420p',
      '-c:a', 'aac', '-b:a', '128k', '-movflags', '+faststart', part,
    ], { maxBuffer: 1 << 20 });
    renameSync(part, join(CACHE, mp4));
  }
  const hlsDir = `hls-1080p25-${SECONDS}s`;
  if (!existsSync(join(CACHE, hlsDir, 'index.m3u8'))) {
    mkdirSync(join(CACHE, hlsDir), { recursive: true });
    await run('ffmpeg', [
      '-hide_banner', '-loglevel', 'error', '-nostdin', '-y', '-i', join(CACHE, mp4), '-c', 'copy',
      '-f', 'hls', '-hls_time', '4', '-hls_playlist_type', 'vod', '-hls_segment_filename', join(CACHE, hlsDir, 'seg%03d.ts'), join(CACHE, hlsDir, 'index.m3u8'),
    ], { maxBuffer: 1 << 20 });
  }
  return { mp4, hls: `${hlsDir}/index.m3u8` };
}

/** The runner as the image's Dockerfile compiles it (see runner-vs-bare.ts buildRunner). */
async function buildRunner(work: string): Promise<string[]> {
  const out = join(work, 'image');
  await run('npx', ['tsc', '-p', 'runner-image/tsconfig.build.json', '--outDir', join(out, 'runner-image/dist')], { cwd: ROOT });
  await run('npx', ['tsc', '-p', 'runner-image/tsconfig.lib.json', '--outDir', join(out, 'lib/dist')], { cwd: ROOT });
  writeFileSync(join(out, 'package.json'), JSON.stringify({ type: 'module' }));
  writeFileSync(join(out, 'lib/package.json'), JSON.stringify({ name: '@mediajobs/lib', type: 'module', exports: { '.': './dist/index.js', './*': './dist/*.js' } }));
  mkdirSync(join(out, 'node_modules/@mediajobs'), { recursive: true });
  for (const name of readdirSync(join(ROOT, 'node_modules'))) {
    if (name !== '@mediajobs' && name !== '.bin') symlinkSync(join(ROOT, 'node_modules', name), join(out, 'node_modules', name));
  }
  symlinkSync(join(out, 'lib'), join(out, 'node_modules/@mediajobs/lib'));
  return [process.execPath, join(out, 'runner-image/dist/main.js')];
}

function treeRss(root: number): number {
  const parent = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const pids = [root];
  for (let i = 0; i < pids.length; i++) for (const [pid, pp] of parent) if (pp === pids[i]) pids.push(pid);
  let sum = 0;
  for (const pid of pids) {
    try {
      sum += Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
    } catch {
      // gone meanwhile
    }
  }
  return sum;
}

interface Measure { wall: number; cpu: number; treePeak: number; maxProcess: number; outputBytes: number; height?: number }

async function runOnce(runner: string[], work: string, url: string, extra: Partial<MediaJobSpec>): Promise<Measure> {
  const jobId = randomUUID();
  const dir = join(work, `runner-${jobId.slice(0, 8)}`);
  const [tmp, creds, store] = ['tmp', 'creds', 'store'].map((d) => join(dir, d)) as [string, string, string];
  for (const d of [tmp, creds, store]) mkdirSync(d, { recursive: true });
  writeFileSync(join(creds, 'destination.json'), JSON.stringify({ provider: 'managed' }));
  const termination = join(dir, 'termination.log');
  const timeFile = join(dir, 'time.txt');
  const spec = { jobId, owner: { apiKeyId: randomUUID() }, url, format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false, destination: { type: 'managed' }, ...extra };
  const t0 = performance.now();
  const child = spawn('/usr/bin/time', ['-f', '%U %S %M', '-o', timeFile, ...runner], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH, HOME: dir, TMPDIR: tmp, LOG_LEVEL: 'info',
      MEDIAJOB_SPEC: JSON.stringify(spec), MEDIAJOB_JOB_ID: jobId, MEDIAJOBS_CREDENTIALS_DIR: creds, LOCAL_CLUSTER_TERMINATION_LOG: termination,
      MANAGED_STORAGE: 'local', MANAGED_STORAGE_DIR: store, FILE_URL_SECRET: 'bench-secret-0123456789abcdef', PUBLIC_BASE_URL: 'http://127.0.0.1:1',
      OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8', // the loopback media server only
    },
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-4000)));
  child.stderr.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-4000)));
  let treePeak = 0;
  const timer = setInterval(() => (treePeak = Math.max(treePeak, treeRss(child.pid!))), 50);
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  clearInterval(timer);
  const wall = (performance.now() - t0) / 1000;
  const [user, sys, maxKb] = readFileSync(timeFile, 'utf8').trim().split('\n').at(-1)!.split(' ').map(Number) as [number, number, number];
  const report = JSON.parse(readFileSync(termination, 'utf8') || '{}') as { outcome?: string; result?: { fileSize?: number; storageKey?: string } };
  if (code !== 0 || report.outcome !== 'completed') throw new Error(`runner failed (exit ${code}): ${out}`);
  let height: number | undefined;
  const files = readdirSync(store, { recursive: true, withFileTypes: true }).filter((f) => f.isFile() && /\.(mp4|mp3)$/.test(f.name));
  if (files[0] && extra.audioOnly !== true) {
    const p = await run('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=height', '-of', 'csv=p=0', join(files[0].parentPath, files[0].name)]);
    height = Number(p.stdout.trim());
  }
  rmSync(dir, { recursive: true, force: true });
  return { wall, cpu: user + sys, treePeak, maxProcess: maxKb * 1024, outputBytes: report.result?.fileSize ?? 0, ...(height ? { height } : {}) };
}

async function main(): Promise<void> {
  const files = await inputs();
  const work = mkdtempSync(join(tmpdir(), 'mj-sizing-'));
  const media = await startMediaServer({ root: CACHE });
  try {
    const runner = await buildRunner(work);
    const jobs: { name: string; url: string; extra: Partial<MediaJobSpec> }[] = [
      { name: 'MP4 copy (1080p)', url: `${media.baseUrl}/${files.mp4}`, extra: {} },
      { name: 'transcode to H.264 (asked max 480)', url: `${media.baseUrl}/${files.mp4}`, extra: { videoCodec: 'h264', maxResolution: '480' } },
      { name: 'audio only, MP3 192k', url: `${media.baseUrl}/${files.mp4}`, extra: { format: 'mp3', audioOnly: true } },
      { name: 'HLS source, copy to MP4', url: `${media.baseUrl}/${files.hls}`, extra: {} },
    ];
    process.stdout.write(`\nRunner CPU and memory per job kind: ${SECONDS} s of 1080p25 4 Mbit/s input over loopback, ffmpeg threads ${cpuBudget()}, ${ROUNDS} rounds (median CPU, largest peaks)\n\n`);
    process.stdout.write('| job | wall s | CPU s (user+sys, tree) | CPU s per media minute | peak RSS, tree sum | peak RSS, largest process | output |\n|---|---|---|---|---|---|---|\n');
    for (const j of jobs) {
      const ms: Measure[] = [];
      for (let i = 0; i < ROUNDS; i++) ms.push(await runOnce(runner, work, j.url, j.extra));
      const med = (f: (m: Measure) => number) => [...ms].map(f).sort((a, b) => a - b)[Math.floor(ms.length / 2)]!;
      const max = (f: (m: Measure) => number) => Math.max(...ms.map(f));
      const out = `${(ms[0]!.outputBytes / MB).toFixed(1)} MB${ms[0]!.height ? `, ${ms[0]!.height}p` : ''}`;
      process.stdout.write(`| ${j.name} | ${med((m) => m.wall).toFixed(1)} | ${med((m) => m.cpu).toFixed(1)} | ${(med((m) => m.cpu) / (SECONDS / 60)).toFixed(1)} | ${(max((m) => m.treePeak) / MB).toFixed(0)} MB | ${(max((m) => m.maxProcess) / MB).toFixed(0)} MB | ${out} |\n`);
    }
  } finally {
    await media.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
