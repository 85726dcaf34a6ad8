// Per-key limits as a job meets them (issue 14, "Per-key limits"): the
// options the gateway writes for a limited key (api-gateway/src/key-limits.ts,
// over lib's parseJobRequest), run by the real pipeline with yt-dlp and
// ffmpeg on media served over loopback, delivering to managed local storage
// (staged) and to S3 (s3rver: a streamed upload). A resolution-limited job
// gets a capped file: the largest rendition within the limit, or, when the
// source has none, its video scaled down to the limit (vertical video by its
// width, a live recording too), while a source within the limit is copied
// as it is; one over the duration limit fails with the clear error
// before anything is stored, whether the extractor gave the length (no media
// byte fetched) or only the files tell; one over the file-size limit fails
// with nothing stored, whichever way its file is delivered; a live recording
// stops at the limit.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { pino } from 'pino';
import { parseJobRequest } from '@mediajobs/lib/job-options';
import type { NormalisedMediaJobSpec, RunnerReport } from '@mediajobs/lib/mediajob/types';
import { LocalStorageProvider, type StorageProvider } from '@mediajobs/lib/storage/index';
import { S3StorageProvider } from '@mediajobs/lib/storage/s3';
import { applyKeyLimits, type KeyLimits } from '../../api-gateway/src/key-limits.js';
import { startLiveStream } from '../../test/support/media-live.js';
import { MEDIA, startMediaServer, type MediaServer } from '../../test/support/media.js';
import { startS3rver, type RunningS3rver } from '../../test/support/s3rver.js';
import { muxPlan, type Probed } from '../src/ffmpeg.js';
import { durationOverLimit } from '../src/key-limits.js';
import { DEFAULT_LIVE_LIMITS, recordingPlan, type LiveInfo, type RecordingPlan } from '../src/live.js';
import { runJob } from '../src/pipeline.js';
import { containerFor, frameScale } from '../src/plan.js';
import { StatusReporter } from '../src/report.js';

const run = promisify(execFile);
const logger = pino({ level: 'silent' });
const NO_LIMITS: KeyLimits = { maxResolution: null, maxDurationSeconds: null, maxFilesizeBytes: null };
/** What yt-dlp reads from the page: a VideoObject saying the (3 s) MP4 is an hour and two minutes long. */
const CLAIMED_SECONDS = 3720;

/** The profile of the sources' H.264 (x264 ultrafast); the runner's own encodes (veryfast) are High. */
const COPIED = 'Constrained Baseline';

async function ffprobeJson(file: string): Promise<{
  format: { duration: string }; streams: { codec_type: string; codec_name?: string; profile?: string; width?: number; height?: number }[];
}> {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file]);
  return JSON.parse(stdout) as Awaited<ReturnType<typeof ffprobeJson>>;
}

describe('runner: per-key limits', function () {
  this.timeout(120_000);
  let media: MediaServer;
  /** Plain MP4s of one rendition each (what a site with a single 240p file serves). */
  let single: MediaServer;
  let s3: RunningS3rver;
  let page: Server;
  let pageUrl: string;
  let dir: string;
  let n = 0;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'runner-key-limits-'));
    const singles = join(dir, 'singles');
    mkdirSync(singles);
    await Promise.all(['426x240', '240x426'].map((size) => run('ffmpeg', [
      '-hide_banner', '-loglevel', 'error', '-nostdin', '-y',
      '-f', 'lavfi', '-i', `testsrc2=size=${size}:rate=25:duration=2`, '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000:duration=2',
      '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-g', '25', '-c:a', 'aac', '-b:a', '64k', '-shortest', '-movflags', '+faststart',
      join(singles, `${size}.mp4`),
    ])));
    [media, single, s3] = await Promise.all([startMediaServer(), startMediaServer({ root: singles }), startS3rver({ buckets: ['media'] })]);
    // A page as video sites publish them: schema.org JSON-LD, which yt-dlp's generic extractor reads (duration included).
    page = createServer((_req, res) => {
      const ld = { '@context': 'https://schema.org', '@type': 'VideoObject', name: 'A long video', contentUrl: media.mp4Url, duration: 'PT1H2M' };
      res.writeHead(200, { 'content-type': 'text/html' })
        .end(`<!DOCTYPE html><html><head><title>A long video</title><script type="application/ld+json">${JSON.stringify(ld)}</script></head><body></body></html>`);
    });
    await new Promise<void>((r) => page.listen(0, '127.0.0.1', r));
    pageUrl = `http://127.0.0.1:${(page.address() as AddressInfo).port}/watch`;
  });

  after(async () => {
    await Promise.all([media?.stop(), single?.stop(), s3?.stop(), new Promise((r) => page?.close(r))]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** The spec the gateway makes of a POST /jobs body for a key with these limits. */
  function specFor(body: Record<string, unknown>, key: Partial<KeyLimits>): NormalisedMediaJobSpec {
    const parsed = parseJobRequest(body);
    if (!parsed.ok) throw new Error(parsed.error);
    const options = applyKeyLimits(parsed.request.options, { ...NO_LIMITS, ...key });
    return { ...options, owner: { apiKeyId: '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f' }, destination: { type: 'managed' } };
  }

  const localStore = () => {
    const store = join(dir, `store-${++n}`);
    return { store, provider: new LocalStorageProvider({ dir: store, publicBaseUrl: 'http://127.0.0.1:8080', secret: 'key-limits-test-secret-0123456789' }) };
  };

  /** The last job's scratch directory (downloads under download/), left for the test to look into. */
  let workDir = '';

  async function job(spec: NormalisedMediaJobSpec, provider: StorageProvider): Promise<RunnerReport> {
    const id = ++n;
    workDir = mkdtempSync(join(dir, 'work-'));
    return runJob({
      spec, jobId: `0000000${id % 10}-aaaa-4bbb-8ccc-${String(id).padStart(12, '0')}`, workDir, logger,
      reporter: new StatusReporter({ namespace: 'default', name: 'key-limits', logger, sink: { patch: async () => undefined } }),
      tools: { ytdlp: 'yt-dlp', ffmpeg: 'ffmpeg', ffprobe: 'ffprobe', socketTimeoutSeconds: 10 },
      destination: { provider, baseFolder: 'videos' },
    });
  }

  /** Every file under a local store, staging area included. */
  const filesIn = (store: string) => (existsSync(store) ? readdirSync(store, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name) : []);

  describe('max_resolution_limit', () => {
    it('a key limited to 720 asking for best gets the 720p rendition of a ladder that goes to 1080p', async () => {
      const { store, provider } = localStore();
      const report = await job(specFor({ url: media.ladders.horizontal.hls }, { maxResolution: '720' }), provider);
      expect(report, JSON.stringify(report)).to.include({ outcome: 'completed' });
      expect(report.result!.actualQuality).to.equal('720p');
      const video = (await ffprobeJson(join(store, report.result!.storageKey))).streams.find((s) => s.codec_type === 'video')!;
      expect([video.width, video.height]).to.deep.equal([1280, 720]);
    });

    /** The delivered video stream of a completed job, and its report. */
    async function deliveredVideo(store: string, report: RunnerReport) {
      expect(report, JSON.stringify(report)).to.include({ outcome: 'completed' });
      const probed = await ffprobeJson(join(store, report.result!.storageKey));
      return { video: probed.streams.find((s) => s.codec_type === 'video')!, probed };
    }

    it('a key limited to 144 on a source that only has 240p: scaled down to 256x144 (re-encoded), whatever max_resolution asks', async () => {
      for (const asked of [{}, { max_resolution: '1080' }, { max_resolution: 'lowest' }]) {
        const { store, provider } = localStore();
        const report = await job(specFor({ url: `${single.baseUrl}/426x240.mp4`, ...asked }, { maxResolution: '144' }), provider);
        const { video, probed } = await deliveredVideo(store, report);
        expect([video.width, video.height], JSON.stringify(asked)).to.deep.equal([256, 144]);
        expect(video.profile, 'the runner\'s own encode').to.equal('High');
        expect(report.result!.actualQuality).to.equal('144p');
        expect(probed.streams.map((s) => s.codec_type)).to.have.members(['video', 'audio']);
        expect(Number(probed.format.duration)).to.be.closeTo(2, 0.2);
      }
    });

    it('vertical video counts its width: the smallest rendition of a ladder (240x426) becomes 144x256; an asked codec is kept', async () => {
      const { store, provider } = localStore();
      // Downloaded by yt-dlp (HLS), muxed to a file.
      const report = await job(specFor({ url: media.ladders.vertical.hls, format: 'mkv' }, { maxResolution: '144' }), provider);
      const { video } = await deliveredVideo(store, report);
      expect([video.width, video.height]).to.deep.equal([144, 256]);
      expect(report.result!.actualQuality).to.equal('144p');
      // A plain vertical file, streamed into the upload, in the codec the job asks for.
      const other = localStore();
      const h265 = await job(specFor({ url: `${single.baseUrl}/240x426.mp4`, video_codec: 'h265' }, { maxResolution: '144' }), other.provider);
      const { video: hevc } = await deliveredVideo(other.store, h265);
      expect([hevc.width, hevc.height, hevc.codec_name]).to.deep.equal([144, 256, 'hevc']);
    });

    it('a source within the limit is copied, not scaled or re-encoded', async () => {
      for (const limit of ['240', '360']) {
        const { store, provider } = localStore();
        const report = await job(specFor({ url: `${single.baseUrl}/426x240.mp4` }, { maxResolution: limit }), provider);
        const { video } = await deliveredVideo(store, report);
        expect([video.width, video.height, video.profile], limit).to.deep.equal([426, 240, COPIED]);
        expect(report.result!.actualQuality).to.equal('240p');
      }
    });

    it('a live recording is scaled down too', async () => {
      const stream = await startLiveStream({ segmentSeconds: 1, listSize: 6 });
      try {
        await stream.ready;
        const { store, provider } = localStore();
        const report = await job(specFor({ url: stream.url, live_recording: true, max_duration: 2 }, { maxResolution: '144' }), provider);
        const { video } = await deliveredVideo(store, report);
        // The stream is 320x240.
        expect([video.width, video.height]).to.deep.equal([192, 144]);
      } finally {
        await stream.stop();
      }
    });

    it('frameScale: the shorter side down to the limit, the other by the aspect ratio and even; nothing within it', () => {
      expect(frameScale({ width: 426, height: 240 }, 144)?.frame).to.deep.equal({ width: 256, height: 144 });
      expect(frameScale({ width: 240, height: 426 }, 144)?.frame).to.deep.equal({ width: 144, height: 256 });
      expect(frameScale({ width: 1920, height: 1080 }, 720)?.frame).to.deep.equal({ width: 1280, height: 720 });
      expect(frameScale({ width: 1080, height: 1920 }, 360)?.frame).to.deep.equal({ width: 360, height: 640 });
      expect(frameScale({ width: 500, height: 500 }, 144)?.frame).to.deep.equal({ width: 144, height: 144 });
      // 4:3 at 360 lines: 480; an odd limit counts as the even number below it.
      expect(frameScale({ width: 640, height: 480 }, 360)?.frame).to.deep.equal({ width: 480, height: 360 });
      expect(frameScale({ width: 640, height: 480 }, 145)?.frame).to.deep.equal({ width: 192, height: 144 });
      expect(frameScale({ width: 426, height: 240 }, 240)).to.equal(undefined);
      expect(frameScale({ width: 240, height: 1000 }, 240), 'a tall frame is judged by its width').to.equal(undefined);
      expect(frameScale({ width: 1920, height: 1080 }, undefined)).to.equal(undefined);
      const unknown = frameScale({}, 144)!;
      expect(unknown.frame, 'an unknown frame is sized by the filter itself').to.equal(undefined);
      expect(unknown.filter).to.equal("scale=w='if(gte(iw,ih),-2,min(trunc(iw/2)*2,144))':h='if(gte(iw,ih),min(trunc(ih/2)*2,144),-2)'");
    });

    it('the mux: a frame over the limit is filtered and encoded (the source\'s family, or the asked codec); audio-only jobs are untouched', () => {
      const probed = (width?: number, height?: number, codec = 'h264'): Probed => ({
        durationSeconds: 2,
        streams: [{ index: 0, codec_type: 'video', codec_name: codec, ...(width ? { width, height } : {}) }, { index: 1, codec_type: 'audio', codec_name: 'aac' }],
      });
      const mp4 = containerFor({ format: 'mp4', audioOnly: false });
      const spec = (o: object = {}) => ({ videoCodec: 'copy', audioBitrate: '128k', videoQuality: 23, limits: { maxResolution: 144 }, ...o }) as const;
      const plan = (p: Probed, s = spec(), container = mp4) => muxPlan([{ path: '/w/v.mp4', probed: p }], '/w/o', container, s)!;
      const over = plan(probed(426, 240));
      expect(over.args.join(' ')).to.match(/-c:v libx264 .* -c:a copy .*-vf scale=w=/);
      expect(over.frame).to.deep.equal({ width: 256, height: 144 });
      expect(plan(probed(426, 240, 'vp9'), spec(), containerFor({ format: 'webm', audioOnly: false })).args).to.include('libvpx-vp9');
      expect(plan(probed(426, 240), spec({ videoCodec: 'h265' })).args).to.include.members(['libx265', '-vf']);
      const within = plan(probed(256, 144));
      expect(within.args.join(' ')).to.contain('-c:v copy').and.not.contain('-vf');
      expect(within.frame).to.deep.equal({ width: 256, height: 144 });
      expect(plan(probed(426, 240), spec({ limits: {} })).args, 'no limit').to.not.include('-vf');
      const unknown = plan(probed());
      expect(unknown.args).to.include('-vf');
      expect(unknown.frame).to.equal(undefined);
      const m4a = plan(probed(1920, 1080), spec(), containerFor({ format: 'm4a', audioOnly: true }));
      expect(m4a.args.join(' ')).to.not.contain('-vf').and.not.contain('-c:v');
    });
  });

  describe('max_duration_limit_seconds', () => {
    it('counts a clip\'s own length, in whole seconds', () => {
      expect(durationOverLimit(601, undefined, 600)).to.include({ outcome: 'failed', reason: 'duration_limit_exceeded' });
      expect(durationOverLimit(600.4, undefined, 600)).to.equal(undefined);
      expect(durationOverLimit(3720, { start: 0, end: 2 }, 600)).to.equal(undefined);
      expect(durationOverLimit(3720, { start: 3000 }, 600)!.error)
        .to.equal('The media is longer than this API key allows (max_duration_limit_seconds: 600, clip_seconds: 720)');
      expect(durationOverLimit(undefined, undefined, 600)).to.equal(undefined);
      expect(durationOverLimit(3720, undefined, undefined)).to.equal(undefined);
    });

    it('known from the probe: Failed with the clear error before the media is downloaded', async () => {
      const { store, provider } = localStore();
      const before = media.paths.length;
      const report = await job(specFor({ url: pageUrl }, { maxDurationSeconds: 600 }), provider);
      expect(report).to.deep.include({
        outcome: 'failed', errorType: 'error', reason: 'duration_limit_exceeded', step: 'Downloading', progress: 0,
        error: `The media is longer than this API key allows (max_duration_limit_seconds: 600, media_seconds: ${CLAIMED_SECONDS})`,
      });
      // yt-dlp's probe looks at the file once (its generic extractor checks what the URL is); the job itself reads none of it.
      expect(media.paths.slice(before), 'requests for the media').to.deep.equal(['/video.mp4']);
      expect(readdirSync(join(workDir, 'download')), 'downloads').to.deep.equal([]);
      expect(filesIn(store)).to.deep.equal([]);
    });

    it('a clip of such media within the limit is delivered: the clip is what counts', async () => {
      const { store, provider } = localStore();
      const report = await job(specFor({ url: pageUrl, clip_start: '0', clip_end: '2' }, { maxDurationSeconds: 600 }), provider);
      expect(report, JSON.stringify(report)).to.include({ outcome: 'completed' });
      expect(Number((await ffprobeJson(join(store, report.result!.storageKey))).format.duration)).to.be.closeTo(2, 0.1);
    });

    it('found from the files (the extractor says nothing): Failed before anything is muxed or stored, read directly or downloaded', async () => {
      for (const url of [media.mp4Url, media.hlsUrl]) {
        const { store, provider } = localStore();
        const report = await job(specFor({ url }, { maxDurationSeconds: 2 }), provider);
        const seconds = url === media.hlsUrl ? MEDIA.hls.durationSeconds : MEDIA.mp4.durationSeconds;
        expect(report, url).to.deep.include({
          outcome: 'failed', errorType: 'error', reason: 'duration_limit_exceeded',
          error: `The media is longer than this API key allows (max_duration_limit_seconds: 2, media_seconds: ${seconds})`,
        });
        expect(filesIn(store), url).to.deep.equal([]);
      }
      // The last 2 s of the 3 s MP4 fit the same limit.
      const { provider } = localStore();
      expect(await job(specFor({ url: media.mp4Url, clip_start: '1' }, { maxDurationSeconds: 2 }), provider)).to.include({ outcome: 'completed' });
    });

    it('a live recording without max_duration stops at the limit', async () => {
      const stream = await startLiveStream({ segmentSeconds: 1, listSize: 6 });
      try {
        await stream.ready;
        const { store, provider } = localStore();
        const report = await job(specFor({ url: stream.url, live_recording: true }, { maxDurationSeconds: 2 }), provider);
        expect(report, JSON.stringify(report)).to.include({ outcome: 'completed' });
        expect(Number((await ffprobeJson(join(store, report.result!.storageKey))).format.duration)).to.be.closeTo(2, 0.3);
      } finally {
        await stream.stop();
      }
      const info = { format_id: '0', url: 'http://x/live.m3u8', protocol: 'm3u8' } as LiveInfo;
      const cap = (spec: Parameters<typeof recordingPlan>[1]) => (recordingPlan(info, spec, false, DEFAULT_LIVE_LIMITS) as RecordingPlan).capSeconds;
      expect(cap({ liveFromStart: false, maxDuration: 900, limits: { maxDurationSeconds: 600 } })).to.equal(600);
      expect(cap({ liveFromStart: false, maxDuration: 300, limits: { maxDurationSeconds: 600 } })).to.equal(300);
    });
  });

  describe('max_filesize_limit_bytes', () => {
    const FILESIZE_ERROR = 'The file is larger than this API key allows (max_filesize_limit_bytes: 20000)';
    const overLimit = { outcome: 'failed', errorType: 'error', reason: 'filesize_limit_exceeded', error: FILESIZE_ERROR };

    it('an MP4 streamed into an S3 upload: the upload is aborted, no object', async () => {
      const provider = new S3StorageProvider({
        endpoint: s3.endpoint, bucket: 'media', region: 'us-east-1', accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, forcePathStyle: true,
      });
      const events = s3.events.length;
      const report = await job(specFor({ url: media.ladders.horizontal.hls }, { maxFilesizeBytes: 20_000 }), provider);
      expect(report).to.deep.include(overLimit);
      expect(s3.events.slice(events).filter((e) => e.eventName.startsWith('ObjectCreated'))).to.deep.equal([]);
    });

    it('an MP4 staged in local storage, and an MKV muxed to a file: never published, nothing left', async () => {
      for (const format of ['mp4', 'mkv']) {
        const { store, provider } = localStore();
        const report = await job(specFor({ url: media.mp4Url, format }, { maxFilesizeBytes: 20_000 }), provider);
        expect(report, format).to.deep.include(overLimit);
        expect(filesIn(store), format).to.deep.equal([]);
      }
    });

    it('a file within the limit is delivered', async () => {
      const { store, provider } = localStore();
      const report = await job(specFor({ url: media.mp4Url, format: 'mkv' }, { maxFilesizeBytes: 10_000_000 }), provider);
      expect(report, JSON.stringify(report)).to.include({ outcome: 'completed' });
      expect(filesIn(store)).to.have.length(1);
      expect(report.result!.fileSize).to.be.below(10_000_000);
    });
  });
});
