// Benchmark (issue 37 item 7): what a 10 s clip from the middle of a
// 10-minute 360p MP4 (H.264 with a keyframe every 2 s + AAC, faststart,
// about 140 MB) costs the source, unthrottled on loopback and paced to
// BENCH_MBPS, with and without an upstream proxy (test/support/upstream-
// proxies.ts, chained behind the job's egress proxy): bytes the server sent
// (goal ≤ 10% of the file) and wall time, the runner's pipeline (runJob, in
// process, delivering to local managed storage) against bare
// `ffmpeg -ss 300 -to 310 -i URL -c copy` (through the same upstream with
// -http_proxy). Medians of BENCH_ROUNDS (3). The input is generated once
// into BENCH_CACHE_DIR.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import type { NormalisedMediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { LocalStorageProvider } from '@mediajobs/lib/storage/index';
import { startMediaServer, type MediaServer } from '../../test/support/media.js';
import { startUpstreamProxy, type UpstreamProxy } from '../../test/support/upstream-proxies.js';
import { runJob } from '../src/pipeline.js';
import { StatusReporter } from '../src/report.js';

const run = promisify(execFile);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const MBPS = Number(process.env.BENCH_MBPS ?? 100);
const CACHE = process.env.BENCH_CACHE_DIR ?? join(tmpdir(), 'mediajobs-bench-media');
const NAME = 'clip-360p30-600s.mp4';
const START = 300;
const END = 310;
const MB = 1024 * 1024;
const logger = pino({ level: 'silent' });

/** 10 minutes of 360p30 H.264 (1.75 Mbit/s, noise so it is spent; keyframe every 2 s) + AAC 128k, faststart; made once. */
async function input(): Promise<string> {
  const file = join(CACHE, NAME);
  if (existsSync(file)) return file;
  mkdirSync(CACHE, { recursive: true });
  const part = `${file}.${process.pid}.part.mp4`;
  process.stdout.write(`generating the 10-minute 360p input (once, cached in ${CACHE})...\n`);
  await run('ffmpeg', [
    '-hide_banner', '-loglevel', 'error', '-nostdin', '-y',
    '-f', 'lavfi', '-i', 'testsrc2=size=640x360:rate=30:duration=600', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000:duration=600',
    '-vf', 'noise=alls=12:allf=t', '-c:v', 'libx264', '-preset', 'ultrafast', '-b:v', '1750k', '-maxrate', '1750k', '-bufsize', '3500k',
    '-g', '60', '-keyint_min', '60', '-sc_threshold', '0', '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-b:a', '128k', '-movflags', '+faststart', part,
  ], { maxBuffer: 1 << 20 });
  renameSync(part, file);
  return file;
}

interface Outcome {
  seconds: number;
  bytes: number;
}

/** The runner's pipeline on the URL, its egress chained to `upstream` when given. */
async function runner(url: string, work: string, upstream?: UpstreamProxy): Promise<Outcome> {
  const dir = mkdtempSync(join(work, 'runner-'));
  const spec = {
    url, format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
    clipStart: String(START), clipEnd: String(END), owner: { apiKeyId: '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f' }, destination: { type: 'managed' },
  } as NormalisedMediaJobSpec;
  const t0 = performance.now();
  const report = await runJob({
    spec, jobId: '00000001-aaaa-4bbb-8ccc-000000000001', workDir: join(dir, 'work'), logger,
    reporter: new StatusReporter({ namespace: 'default', name: 'bench', logger, sink: { patch: async () => undefined } }),
    tools: {
      ytdlp: 'yt-dlp', ffmpeg: 'ffmpeg', ffprobe: 'ffprobe', socketTimeoutSeconds: 30,
      egress: { policy: new OutboundPolicy({ allowed: ['127.0.0.0/8'] }), ...(upstream ? { upstream: upstream.url } : {}) },
    },
    destination: { provider: new LocalStorageProvider({ dir: join(dir, 'store'), publicBaseUrl: 'http://127.0.0.1:1', secret: 'bench-secret-0123456789abcdef' }), baseFolder: 'videos' },
  });
  const seconds = (performance.now() - t0) / 1000;
  if (report.outcome !== 'completed') throw new Error(`runner: ${JSON.stringify(report)}`);
  rmSync(dir, { recursive: true, force: true });
  return { seconds, bytes: 0 };
}

async function bare(url: string, work: string, upstream?: UpstreamProxy): Promise<Outcome> {
  const dir = mkdtempSync(join(work, 'bare-'));
  const t0 = performance.now();
  await run('ffmpeg', [
    '-hide_banner', '-nostdin', '-loglevel', 'error', '-y', ...(upstream ? ['-http_proxy', upstream.url] : []),
    '-ss', String(START), '-to', String(END), '-i', url, '-c', 'copy', join(dir, 'out.mp4'),
  ]);
  const seconds = (performance.now() - t0) / 1000;
  rmSync(dir, { recursive: true, force: true });
  return { seconds, bytes: 0 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

async function main(): Promise<void> {
  const file = await input();
  const fileBytes = statSync(file).size;
  const work = mkdtempSync(join(tmpdir(), 'mj-bench-clip-'));
  const servers: [string, MediaServer][] = [
    ['loopback, unthrottled', await startMediaServer({ root: CACHE })],
    [`${MBPS} Mbit/s`, await startMediaServer({ root: CACHE, bytesPerSecond: (MBPS * 1e6) / 8 })],
  ];
  const proxy = await startUpstreamProxy({ id: 'bench', sourceAddress: '127.0.0.10' });
  const rows: string[] = [];
  try {
    for (const [link, server] of servers) {
      for (const upstream of [undefined, proxy]) {
        const url = `${server.baseUrl}/${NAME}`;
        const counted = async (f: () => Promise<Outcome>): Promise<Outcome> => {
          const before = server.bytesSent(`/${NAME}`);
          const o = await f();
          return { ...o, bytes: server.bytesSent(`/${NAME}`) - before };
        };
        const r: Outcome[] = [];
        const b: Outcome[] = [];
        for (let i = 0; i < ROUNDS; i++) {
          r.push(await counted(() => runner(url, work, upstream)));
          b.push(await counted(() => bare(url, work, upstream)));
        }
        const pct = (n: number) => `${(n / MB).toFixed(1)} MB (${((n / fileBytes) * 100).toFixed(1)}%)`;
        const rs = median(r.map((o) => o.seconds));
        const bs = median(b.map((o) => o.seconds));
        rows.push(`| ${link} | ${upstream ? 'http upstream' : 'none'} | ${pct(median(r.map((o) => o.bytes)))} | ${pct(median(b.map((o) => o.bytes)))} | ${rs.toFixed(2)} s | ${bs.toFixed(2)} s | ${(rs / bs).toFixed(2)}× |`);
        process.stdout.write(`  ${link}, ${upstream ? 'upstream' : 'no upstream'}: done\n`);
      }
    }
  } finally {
    await Promise.all([...servers.map(([, s]) => s.stop()), proxy.stop()]);
    rmSync(work, { recursive: true, force: true });
  }
  console.log(`\na 10 s clip (${START}–${END} s) of a 10-minute 360p MP4 (${(fileBytes / MB).toFixed(0)} MB), runner vs bare \`ffmpeg -ss ${START} -to ${END} -i URL -c copy\` (median of ${ROUNDS} rounds;`);
  console.log('"read" is what the server sent, including what it pushed into socket buffers before a client that had what it needed closed)');
  console.log('| link | upstream proxy | runner read (goal ≤ 10%) | bare read | runner | bare | ratio |');
  console.log('|---|---|---|---|---|---|---|');
  for (const row of rows) console.log(row);
}

await main();
