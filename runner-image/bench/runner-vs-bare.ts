// Benchmark (issue 4): the runner against the bare yt-dlp + ffmpeg commands
// on the same input in the same run, for a 1080p stream-copy job (10 minutes
// by default) and a 1080p transcode job (1 minute by default: libx264 runs
// at about real time on 2 vCPUs, and both sides pay it equally). Reports:
//
// - wall time, runner / bare (goal ≤ 1.10×), with the input served over
//   loopback as fast as the disk goes (so only the runner's fixed costs
//   show) and paced to BENCH_MBPS, as a network source would be;
// - the runner's peak memory: the node process's VmHWM, and the largest RSS
//   sum over it and its children (yt-dlp, ffmpeg) at any sample (goal < 200
//   MB);
// - peak disk use of the runner's work directory / output size (goal ≤ 1.2×);
// - where the runner's time goes, from its own log: start (node, modules,
//   configuration, destination), probe (yt-dlp -J, the format choice, and
//   for a plain HTTP(S) source ffprobe of its URL), download (yt-dlp, and
//   ffprobe of each file as it completes; none for a plain HTTP(S) source,
//   which the mux reads itself: ADR 0007), mux and upload, and exit (final
//   report, clean-up);
// - what streaming the mux into the upload saves against muxing to a
//   faststart file and uploading that, with the runner's own functions, to
//   local managed storage and to an S3 server (s3rver).
//
// The runner runs as the image runs it: compiled by tsc with the image's
// tsconfigs, under plain node (`node runner-image/dist/main.js`), with no
// cluster to report to. In a pod it reports with one HTTPS request per
// status patch (report.ts inClusterSink), which the bench cannot give it (the
// ServiceAccount files are at a fixed path); that costs node's TLS, not
// client-node. The last row runs it as local mode does: under tsx, reporting
// to a local cluster through client-node (kubeconfig), which costs memory and
// start time. ffmpeg gets the same thread count on both sides (the runner's
// CPU budget, child.ts cpuBudget). The input is served by
// test/support/media.ts; inputs are generated once into BENCH_CACHE_DIR.
// Environment: BENCH_SECONDS (600), BENCH_TRANSCODE_SECONDS (60),
// BENCH_ROUNDS (3, the median is reported), BENCH_MBPS (100), BENCH_ONLY
// (a regular expression: run only the jobs whose name matches, and skip
// the mux + upload comparison; for measuring one change quickly).
import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { LocalStorageProvider } from '@mediajobs/lib/storage/index';
import { S3StorageProvider } from '@mediajobs/lib/storage/s3';
import { API_VERSION, GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { LocalCluster } from '@mediajobs/local-cluster';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { startMediaServer, type MediaServer } from '../../test/support/media.js';
import { startS3rver } from '../../test/support/s3rver.js';
import { applyCrds } from '../../scripts/apply-crds.js';
import { cpuBudget } from '../src/child.js';
import { uploadJobFile, type ResolvedDestination } from '../src/destination.js';
import { ffprobe, mux, muxPlan, muxToStream, PIPE_OUTPUT, type MuxInput } from '../src/ffmpeg.js';
import { containerFor } from '../src/plan.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MAIN = join(ROOT, 'runner-image/src/main.ts');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 600);
const TRANSCODE_SECONDS = Number(process.env.BENCH_TRANSCODE_SECONDS ?? 60);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const MBPS = Number(process.env.BENCH_MBPS ?? 100);
const ONLY = process.env.BENCH_ONLY ? new RegExp(process.env.BENCH_ONLY) : undefined;
const CACHE = process.env.BENCH_CACHE_DIR ?? join(tmpdir(), 'mediajobs-bench-media');
const SAMPLE_MS = 50;
const MB = 1024 * 1024;
const THREADS = cpuBudget();

/** A 1080p25 H.264 (4 Mbit/s, keyframe every 2 s) + AAC 128k MP4, made once and cached. */
async function input(seconds: number): Promise<string> {
  const file = join(CACHE, `testsrc2-1080p25-${seconds}s-4M.mp4`);
  if (existsSync(file)) return file;
  mkdirSync(CACHE, { recursive: true });
  const part = `${file}.${process.pid}.part.mp4`;
  process.stdout.write(`generating ${seconds} s of 1080p input (once, cached in ${CACHE})...\n`);
  await run('ffmpeg', [
    '-hide_banner', '-loglevel', 'error', '-nostdin', '-y',
    '-f', 'lavfi', '-i', `testsrc2=size=1920x1080:rate=25:duration=${seconds}`,
    '-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000:duration=${seconds}`,
    '-c:v', 'libx264', '-preset', 'ultrafast', '-b:v', '4M', '-maxrate', '4M', '-bufsize', '8M', '-g', '50', '-pix_fmt', 'yuv420p',
    '-c:a', 'aac', '-b:a', '128k', '-movflags', '+faststart', part,
  ], { maxBuffer: 1 << 20 });
  renameSync(part, file);
  return file;
}

interface Peaks {
  /** Largest RSS sum of the process and its descendants at one sample, bytes. */
  treeRss: number;
  /** VmHWM (peak RSS) per process name, the largest seen, bytes. */
  hwm: Map<string, number>;
  /** Largest disk use of the watched directory at one sample, bytes (allocated blocks). */
  disk: number;
}

function descendants(rootPid: number): number[] {
  const parent = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      // Field 4 of /proc/<pid>/stat is the parent; the name (field 2) may hold spaces, so parse after its ')'.
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parent.set(Number(d), ppid);
    } catch {
      // gone meanwhile
    }
  }
  const out = [rootPid];
  for (let i = 0; i < out.length; i++) for (const [pid, pp] of parent) if (pp === out[i]) out.push(pid);
  return out;
}

function status(pid: number): { name: string; rss: number; hwm: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) * 1024;
    return { name: /^Name:\s+(.*)$/m.exec(text)?.[1] ?? '?', rss: kb('VmRSS'), hwm: kb('VmHWM') };
  } catch {
    return undefined;
  }
}

function diskUse(dir: string): number {
  let total = 0;
  const walk = (d: string) => {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      return;
    }
    for (const n of names) {
      try {
        const st = lstatSync(join(d, n));
        if (st.isDirectory()) walk(join(d, n));
        else total += st.blocks * 512;
      } catch {
        // removed meanwhile
      }
    }
  };
  walk(dir);
  return total;
}

/** Sample a process tree's memory and a directory's disk use until stopped. */
function sampler(rootPid: number | undefined, dir: string): { stop(): Peaks; setRoot(pid: number): void } {
  const peaks: Peaks = { treeRss: 0, hwm: new Map(), disk: 0 };
  let root = rootPid;
  const tick = () => {
    if (root !== undefined) {
      let sum = 0;
      for (const pid of descendants(root)) {
        const s = status(pid);
        if (!s) continue;
        sum += s.rss;
        peaks.hwm.set(s.name, Math.max(peaks.hwm.get(s.name) ?? 0, s.hwm));
      }
      peaks.treeRss = Math.max(peaks.treeRss, sum);
    }
    peaks.disk = Math.max(peaks.disk, diskUse(dir));
  };
  const timer = setInterval(tick, SAMPLE_MS);
  return {
    setRoot: (pid) => (root = pid),
    stop: () => {
      clearInterval(timer);
      return peaks;
    },
  };
}

interface Outcome {
  seconds: number;
  peaks: Peaks;
  outputBytes: number;
  /** The runner's phases, seconds, from its log (see PHASES). */
  phases?: number[];
  /** How long the runner waited for the check of what it delivered (verify.ts), from its log. */
  verifySeconds?: number;
  /** Bytes the media server sent for the input during the run. */
  bytesRead?: number;
}

/** Log messages that open each phase of a runner, after its start. */
const PHASE_MARKS = ['probing source', 'downloading', 'muxing', 'job completed'];
const PHASES = ['start', 'probe', 'download', 'mux + upload', 'exit'];

/** Phase durations from the runner's pino lines: spawn → each mark → exit. */
function phasesOf(log: string, startedAt: number, endedAt: number): number[] | undefined {
  const at = new Map<string, number>();
  for (const line of log.split('\n')) {
    try {
      const j = JSON.parse(line) as { msg?: string; time?: number };
      if (j.msg && j.time && PHASE_MARKS.includes(j.msg) && !at.has(j.msg)) at.set(j.msg, j.time);
    } catch {
      // not a log line
    }
  }
  if (PHASE_MARKS.some((m) => !at.has(m))) return undefined;
  const marks = [startedAt, ...PHASE_MARKS.map((m) => at.get(m)!), endedAt];
  return marks.slice(1).map((t, i) => (t - marks[i]!) / 1000);
}

/** The verifyMs of the runner's "delivered file verified" line. */
function verifySecondsOf(log: string): number | undefined {
  for (const line of log.split('\n')) {
    try {
      const j = JSON.parse(line) as { msg?: string; verifyMs?: number };
      if (j.msg === 'delivered file verified' && typeof j.verifyMs === 'number') return j.verifyMs / 1000;
    } catch {
      // not a log line
    }
  }
  return undefined;
}

/** A local cluster with the MediaJob CRD, for the runner to report to as in local mode. */
interface BenchCluster {
  cluster: LocalCluster;
  custom: k8s.CustomObjectsApi;
}

async function startCluster(work: string): Promise<BenchCluster> {
  const cluster = await LocalCluster.start({ port: 0, workDir: join(work, 'cluster'), logger: pino({ level: 'silent' }) });
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(cluster.kubeconfigPath);
  await applyCrds(kc, { files: ['mediajob.yaml'] });
  return { cluster, custom: kc.makeApiClient(k8s.CustomObjectsApi) };
}

async function timed(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; watchDir: string; track?: boolean }): Promise<{ seconds: number; peaks: Peaks; code: number | null; out: string; startedAt: number; endedAt: number }> {
  const startedAt = Date.now();
  const t0 = performance.now();
  const child = spawn(cmd, args, { env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const s = sampler(opts.track === false ? undefined : child.pid, opts.watchDir);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const seconds = (performance.now() - t0) / 1000;
  return { seconds, peaks: s.stop(), code, out, startedAt, endedAt: Date.now() };
}

/** How the runner is started: the image's compiled JavaScript, or local mode's tsx. */
type RunnerCommand = string[];

/**
 * Compile the runner and the library as the image's Dockerfile does (same
 * tsconfigs; the library's exports pointed at its compiled files) into
 * `work`, with the repository's node_modules beside them.
 */
async function buildRunner(work: string): Promise<RunnerCommand> {
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

const TSX_RUNNER: RunnerCommand = [process.execPath, '--import', 'tsx', MAIN];

async function runRunner(runner: RunnerCommand, url: string, extra: Partial<MediaJobSpec>, work: string, cluster?: BenchCluster): Promise<Outcome> {
  const jobId = randomUUID();
  const dir = join(work, `runner-${jobId.slice(0, 8)}`);
  const tmp = join(dir, 'tmp');
  const creds = join(dir, 'creds');
  const store = join(dir, 'store');
  for (const d of [tmp, creds, store]) mkdirSync(d, { recursive: true });
  writeFileSync(join(creds, 'destination.json'), JSON.stringify({ provider: 'managed' }));
  const termination = join(dir, 'termination.log');
  const spec = { jobId, owner: { apiKeyId: randomUUID() }, url, format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false, destination: { type: 'managed' }, ...extra };
  if (cluster) {
    await cluster.custom.createNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL,
      body: {
        apiVersion: API_VERSION, kind: 'MediaJob', metadata: { name: jobId },
        spec: { ...spec, downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false },
      },
    });
  }
  const r = await timed(runner[0]!, runner.slice(1), {
    watchDir: tmp,
    env: {
      PATH: process.env.PATH, HOME: dir, TMPDIR: tmp, LOG_LEVEL: 'info',
      ...(cluster ? { KUBECONFIG: cluster.cluster.kubeconfigPath, MEDIAJOB_NAME: jobId, MEDIAJOB_NAMESPACE: 'default' } : {}),
      MEDIAJOB_SPEC: JSON.stringify(spec), MEDIAJOB_JOB_ID: jobId, MEDIAJOBS_CREDENTIALS_DIR: creds,
      LOCAL_CLUSTER_TERMINATION_LOG: termination,
      MANAGED_STORAGE: 'local', MANAGED_STORAGE_DIR: store, FILE_URL_SECRET: 'bench-secret-0123456789abcdef', PUBLIC_BASE_URL: 'http://127.0.0.1:1',
      // The input is served on loopback, which the runner's egress refuses unless allowed (ADR 0014), as the tests allow it.
      OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8',
    },
  });
  const report = JSON.parse(readFileSync(termination, 'utf8') || '{}') as { outcome?: string; result?: { fileSize?: number } };
  if (r.code !== 0 || report.outcome !== 'completed') throw new Error(`runner failed (exit ${r.code}): ${r.out.slice(-3000)}`);
  rmSync(dir, { recursive: true, force: true });
  const verifySeconds = verifySecondsOf(r.out);
  return { seconds: r.seconds, peaks: r.peaks, outputBytes: report.result?.fileSize ?? 0, phases: phasesOf(r.out, r.startedAt, r.endedAt), ...(verifySeconds !== undefined ? { verifySeconds } : {}) };
}

/** The same work by hand: yt-dlp downloads, ffmpeg muxes with the runner's own arguments into a file. */
async function runBare(url: string, ffmpegArgs: (inputFile: string, outputFile: string) => string[], work: string): Promise<Outcome> {
  const dir = mkdtempSync(join(work, 'bare-'));
  const s = sampler(undefined, dir);
  const t0 = performance.now();
  const dl = await timed('yt-dlp', ['--ignore-config', '--no-cache-dir', '--no-progress', '-o', join(dir, 'in.%(ext)s'), url], { watchDir: dir, track: false });
  if (dl.code !== 0) throw new Error(`yt-dlp failed: ${dl.out}`);
  const downloaded = join(dir, readdirSync(dir).find((n) => n.startsWith('in.'))!);
  const output = join(dir, 'out.mp4');
  const ff = await timed('ffmpeg', ffmpegArgs(downloaded, output), { watchDir: dir });
  if (ff.code !== 0) throw new Error(`ffmpeg failed: ${ff.out}`);
  const seconds = (performance.now() - t0) / 1000;
  const peaks = s.stop();
  const outputBytes = statSync(output).size;
  rmSync(dir, { recursive: true, force: true });
  return { seconds, peaks: { ...peaks, treeRss: Math.max(dl.peaks.treeRss, ff.peaks.treeRss) }, outputBytes };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

interface Row {
  job: string;
  runner: Outcome[];
  bare: Outcome[];
}

async function compare(job: string, runner: RunnerCommand, url: string, file: string, extra: Partial<MediaJobSpec>, work: string, cluster?: BenchCluster): Promise<Row> {
  // The runner's own mux arguments for this input, so both sides do the same ffmpeg work.
  const probed = await ffprobe('ffprobe', file);
  if (!probed.ok) throw new Error('ffprobe failed on the input');
  const spec = { videoCodec: 'copy' as const, audioBitrate: '192k' as const, videoQuality: 23, ...extra };
  const container = containerFor({ format: 'mp4', audioOnly: false });
  const args = (inputFile: string, outputFile: string) =>
    muxPlan([{ path: inputFile, probed: probed.probed }], outputFile, container, spec, { threads: THREADS })!.args;
  const row: Row = { job, runner: [], bare: [] };
  for (let i = 0; i < ROUNDS; i++) {
    // Alternate, so a noisy neighbour hurts both sides alike; and start each
    // with no dirty pages of the one before, which the kernel would otherwise
    // write back during it (the runner fsyncs what it stores, bare does not).
    await run('sync', []);
    row.runner.push(await runRunner(runner, url, extra, work, cluster));
    await run('sync', []);
    row.bare.push(await runBare(url, args, work));
    process.stdout.write(`  ${job} round ${i + 1}: runner ${row.runner[i]!.seconds.toFixed(1)} s, bare ${row.bare[i]!.seconds.toFixed(1)} s\n`);
  }
  return row;
}

/**
 * Issue 11: a 10 s clip from the middle of the copy input, runner against
 * bare `ffmpeg -ss S -to E -i URL -c copy` on the same range-capable server,
 * each with the bytes the server sent for it (goal: under 5% of the file;
 * wall time ratio goal: at most 1.2×).
 */
async function compareClip(runner: RunnerCommand, server: MediaServer, link: string, file: string, work: string): Promise<{ row: Row; fileBytes: number }> {
  const rel = file.slice(CACHE.length + 1);
  const url = `${server.baseUrl}/${rel}`;
  const start = Math.floor(SECONDS / 2);
  const end = start + 10;
  const row: Row = { job: `clip ${start}–${end} s of the copy input (10 s of ${SECONDS} s), ${link}`, runner: [], bare: [] };
  const counted = async (f: () => Promise<Outcome>): Promise<Outcome> => {
    const before = server.bytesSent(`/${rel}`);
    const o = await f();
    return { ...o, bytesRead: server.bytesSent(`/${rel}`) - before };
  };
  for (let i = 0; i < ROUNDS; i++) {
    await run('sync', []);
    row.runner.push(await counted(() => runRunner(runner, url, { clipStart: String(start), clipEnd: String(end) }, work)));
    await run('sync', []);
    row.bare.push(await counted(async () => {
      const dir = mkdtempSync(join(work, 'bare-clip-'));
      const out = join(dir, 'out.mp4');
      const r = await timed('ffmpeg', ['-hide_banner', '-nostdin', '-loglevel', 'error', '-y', '-ss', String(start), '-to', String(end), '-i', url, '-c', 'copy', out], { watchDir: dir });
      if (r.code !== 0) throw new Error(`ffmpeg failed: ${r.out}`);
      const outputBytes = statSync(out).size;
      rmSync(dir, { recursive: true, force: true });
      return { seconds: r.seconds, peaks: r.peaks, outputBytes };
    }));
    process.stdout.write(`  ${row.job} round ${i + 1}: runner ${row.runner[i]!.seconds.toFixed(2)} s, bare ${row.bare[i]!.seconds.toFixed(2)} s\n`);
  }
  return { row, fileBytes: statSync(file).size };
}

/** Mux + upload of one input: into a faststart file then uploaded, or streamed into the upload. */
async function overlap(file: string, dest: ResolvedDestination, work: string): Promise<{ sequential: number; streamed: number; fileBytes: number }> {
  const probed = await ffprobe('ffprobe', file);
  if (!probed.ok) throw new Error('ffprobe failed');
  const inputs: MuxInput[] = [{ path: file, probed: probed.probed }];
  const spec = { videoCodec: 'copy' as const, audioBitrate: '192k' as const, videoQuality: 23 };
  const mp4 = containerFor({ format: 'mp4', audioOnly: false });
  const target = { ext: 'mp4', contentType: 'video/mp4', filename: undefined, folder: 'bench' };

  const out = join(work, 'sequential.mp4');
  await run('sync', []);
  const t0 = performance.now();
  const plan = muxPlan(inputs, out, { ...mp4, muxerArgs: ['-movflags', '+faststart'], streamable: false }, spec)!;
  const m = await mux('ffmpeg', plan);
  if (m.exitCode !== 0) throw new Error(m.stderr);
  const up = await uploadJobFile(dest, { ...target, jobId: randomUUID(), file: out });
  if (!up.ok) throw new Error(String(up.error));
  const sequential = (performance.now() - t0) / 1000;
  const fileBytes = statSync(out).size;
  rmSync(out);

  await run('sync', []);
  const t1 = performance.now();
  const streamPlan = muxPlan(inputs, PIPE_OUTPUT, mp4, spec)!;
  let done: Promise<{ exitCode: number | null }> | undefined;
  const st = await uploadJobFile(dest, {
    ...target, jobId: randomUUID(), open: () => {
      const s = muxToStream('ffmpeg', streamPlan);
      done = s.done;
      return s.body;
    },
  });
  if (!st.ok || (await done!).exitCode !== 0) throw new Error(`streamed upload failed: ${String(!st.ok && st.error)}`);
  return { sequential, streamed: (performance.now() - t1) / 1000, fileBytes };
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'mj-bench-runner-'));
  const [copyInput, transcodeInput] = [await input(SECONDS), await input(TRANSCODE_SECONDS)];
  const compiled = await buildRunner(work);
  const server = await startMediaServer({ root: CACHE });
  const paced = await startMediaServer({ root: CACHE, bytesPerSecond: (MBPS * 1e6) / 8 });
  const s3 = await startS3rver({ buckets: ['bench'] });
  const cluster = await startCluster(work);
  const load0 = loadavg()[0]!.toFixed(1);
  try {
    const url = (srv: { baseUrl: string }, f: string) => `${srv.baseUrl}/${f.slice(CACHE.length + 1)}`;
    const jobs: { name: string; run: (name: string) => Promise<Row> }[] = [
      { name: `copy 1080p ${SECONDS}s, loopback`, run: (n) => compare(n, compiled, url(server, copyInput), copyInput, {}, work) },
      { name: `copy 1080p ${SECONDS}s, ${MBPS} Mbit/s`, run: (n) => compare(n, compiled, url(paced, copyInput), copyInput, {}, work) },
      { name: `transcode h264 1080p ${TRANSCODE_SECONDS}s, loopback`, run: (n) => compare(n, compiled, url(server, transcodeInput), transcodeInput, { videoCodec: 'h264' }, work) },
      { name: `copy 1080p ${SECONDS}s, loopback, local mode (tsx, reporting through client-node)`, run: (n) => compare(n, TSX_RUNNER, url(server, copyInput), copyInput, {}, work, cluster) },
    ];
    const rows: Row[] = [];
    for (const j of jobs) if (!ONLY || ONLY.test(j.name)) rows.push(await j.run(j.name));
    const clips = !ONLY || ONLY.test('clip')
      ? [await compareClip(compiled, server, 'loopback', copyInput, work), await compareClip(compiled, paced, `${MBPS} Mbit/s`, copyInput, work)]
      : [];

    const local: ResolvedDestination = {
      provider: new LocalStorageProvider({ dir: join(work, 'store'), publicBaseUrl: 'http://127.0.0.1:1', secret: 'bench-secret-0123456789abcdef' }),
      baseFolder: 'videos',
    };
    const s3dest: ResolvedDestination = {
      provider: new S3StorageProvider({ bucket: 'bench', region: 'us-east-1', endpoint: s3.endpoint, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, forcePathStyle: true }),
      baseFolder: 'videos',
    };
    const overlaps = ONLY ? [] : [
      { to: 'local managed storage', ...(await overlap(copyInput, local, work)) },
      { to: 'S3 (s3rver, loopback)', ...(await overlap(copyInput, s3dest, work)) },
    ];

    const mb = (b: number) => `${(b / MB).toFixed(0)} MB`;
    console.log(`\n${cpus().length} CPUs, ffmpeg threads sized for ${THREADS}, load average ${load0} at start and ${loadavg()[0]!.toFixed(1)} at the end`);
    console.log('\nrunner vs bare yt-dlp + ffmpeg (same input, same run; median of', ROUNDS, 'rounds)');
    console.log('| job | runner | bare | ratio (goal ≤ 1.10) | runner peak RSS, tree (goal < 200 MB) | node / yt-dlp / ffmpeg VmHWM | runner disk peak / output (goal ≤ 1.2) | bare disk peak / output |');
    console.log('|---|---|---|---|---|---|---|---|');
    for (const r of rows) {
      const rs = median(r.runner.map((o) => o.seconds));
      const bs = median(r.bare.map((o) => o.seconds));
      const last = r.runner[r.runner.length - 1]!;
      const hwm = (n: RegExp) => Math.max(0, ...r.runner.flatMap((o) => [...o.peaks.hwm].filter(([k]) => n.test(k)).map(([, v]) => v)));
      const disk = Math.max(...r.runner.map((o) => o.peaks.disk / o.outputBytes));
      const bareDisk = Math.max(...r.bare.map((o) => o.peaks.disk / o.outputBytes));
      console.log(`| ${r.job} | ${rs.toFixed(1)} s | ${bs.toFixed(1)} s | ${(rs / bs).toFixed(2)}× | ${mb(Math.max(...r.runner.map((o) => o.peaks.treeRss)))} | ${mb(hwm(/^(node|MainThread)/))} / ${mb(hwm(/^(yt-dlp|python)/))} / ${mb(hwm(/^ffmpeg/))} | ${disk.toFixed(2)}× (${mb(last.outputBytes)} output) | ${bareDisk.toFixed(2)}× |`);
    }
    console.log('\nthe check of what was delivered (verify.ts): time the runner waited for it (median), share of the job\'s wall time (goal < 3% for the 10-minute copy)');
    console.log('| job | verification | share of the job |');
    console.log('|---|---|---|');
    for (const r of rows) {
      const v = r.runner.map((o) => o.verifySeconds).filter((x): x is number => x !== undefined);
      if (!v.length) continue;
      const share = median(r.runner.filter((o) => o.verifySeconds !== undefined).map((o) => o.verifySeconds! / o.seconds));
      console.log(`| ${r.job} | ${(median(v) * 1000).toFixed(0)} ms | ${(share * 100).toFixed(1)}% |`);
    }
    if (clips.length) {
      console.log('\na 10 s clip from the middle, runner vs bare `ffmpeg -ss S -to E -i URL -c copy` (median of', ROUNDS, 'rounds;');
      console.log('"read" is what the server sent, including what it pushed into socket buffers before a client that had what it needed closed)');
      console.log('| job | runner | bare | ratio (goal ≤ 1.2) | runner read (goal < 5% of the file) | bare read |');
      console.log('|---|---|---|---|---|---|');
      for (const { row, fileBytes } of clips) {
        const rs = median(row.runner.map((o) => o.seconds));
        const bs = median(row.bare.map((o) => o.seconds));
        const read = (os: Outcome[]) => median(os.map((o) => o.bytesRead ?? 0));
        const pct = (b: number) => `${(b / MB).toFixed(1)} MB (${((b / fileBytes) * 100).toFixed(1)}%)`;
        console.log(`| ${row.job} | ${rs.toFixed(2)} s | ${bs.toFixed(2)} s | ${(rs / bs).toFixed(2)}× | ${pct(read(row.runner))} | ${pct(read(row.bare))} |`);
      }
    }
    console.log('\nwhere the runner\'s time goes (median of each phase, seconds; bare is one yt-dlp run then ffmpeg to a file)');
    console.log(`| job | ${PHASES.join(' | ')} |`);
    console.log(`|---|${PHASES.map(() => '---').join('|')}|`);
    for (const r of rows) {
      const phases = r.runner.map((o) => o.phases).filter((p): p is number[] => p !== undefined);
      if (!phases.length) continue;
      console.log(`| ${r.job} | ${PHASES.map((_, i) => median(phases.map((p) => p[i]!)).toFixed(2)).join(' | ')} |`);
    }
    if (overlaps.length) {
      console.log('\nmux + upload of the copy job, faststart file then upload vs streamed into the upload (fragmented MP4)');
      console.log('| destination | file, then upload | streamed | saved | disk for the output |');
      console.log('|---|---|---|---|---|');
      for (const o of overlaps) {
        console.log(`| ${o.to} | ${o.sequential.toFixed(1)} s | ${o.streamed.toFixed(1)} s | ${(o.sequential - o.streamed).toFixed(1)} s (${(((o.sequential - o.streamed) / o.sequential) * 100).toFixed(0)}%) | ${mb(o.fileBytes)} vs 0 |`);
      }
    }
    (s3dest.provider as S3StorageProvider).destroy();
  } finally {
    await server.stop();
    await paced.stop();
    await s3.stop();
    await cluster.cluster.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
