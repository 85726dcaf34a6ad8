// Live streams: the pure decisions (live or not, what to record, how long to
// wait) on yt-dlp-shaped info, and the recorder on a real live HLS stream
// made by ffmpeg in real time.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { pino } from 'pino';
import type { MaxResolution, NormalisedMediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { LocalStorageProvider } from '@mediajobs/lib/storage/index';
import type { RunResult } from '../src/child.js';
import { runJob } from '../src/pipeline.js';
import { StatusReporter } from '../src/report.js';
import {
  DEFAULT_LIVE_LIMITS, hlsLiveness, isLiveSource, livenessOf, notYetAvailable, probeWaitingForVideo, recordLive, recorderArgs,
  recordingPlan, selectedFormats, type LiveInfo, type RecordingPlan,
} from '../src/live.js';
import type { ProbeResult } from '../src/ytdlp.js';
import { startLiveStream, type LiveStream } from '../../test/support/media-live.js';

const run = promisify(execFile);
const logger = pino({ level: 'silent' });

const failedRun = (stderr: string, exitCode = 1): RunResult => ({ exitCode, signal: null, stdout: '', stderr, stdoutTruncated: false });

async function probeFile(file: string): Promise<{ duration: number; streams: string[] }> {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file]);
  const p = JSON.parse(stdout) as { format: { duration: string }; streams: { codec_type: string }[] };
  return { duration: Number(p.format.duration), streams: p.streams.map((s) => s.codec_type).sort() };
}

/** Decode every frame: a truncated or broken recording fails here, a playable one does not. */
async function decodesCleanly(file: string): Promise<void> {
  const { stderr } = await run('ffmpeg', ['-v', 'error', '-nostdin', '-i', file, '-f', 'null', '-']);
  expect(stderr.trim(), 'decoder errors').to.equal('');
}

describe('runner: live streams', () => {
  describe('detection', () => {
    it('takes the extractor\'s word: is_live / live_status', () => {
      expect(livenessOf({ is_live: true })).to.equal('live');
      expect(livenessOf({ live_status: 'is_live' })).to.equal('live');
      expect(livenessOf({ is_live: false })).to.equal('not_live');
      expect(livenessOf({ live_status: 'was_live' })).to.equal('not_live');
      expect(livenessOf({ live_status: 'post_live' })).to.equal('not_live');
      // yt-dlp's generic extractor on a bare playlist says nothing
      expect(livenessOf({ is_live: null, live_status: null })).to.equal('unknown');
    });

    it('reads an HLS playlist: no end list and not VOD means live; a master points at its variant', () => {
      expect(hlsLiveness('#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:7\n#EXTINF:1.0,\ns00007.ts\n')).to.equal('live');
      expect(hlsLiveness('#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\na.ts\n#EXT-X-ENDLIST\n')).to.equal('vod');
      expect(hlsLiveness('#EXTM3U\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\na.ts\n')).to.equal('vod');
      expect(hlsLiveness('#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nlow/index.m3u8\n')).to.deep.equal({ variant: 'low/index.m3u8' });
      expect(hlsLiveness('<html></html>')).to.equal(undefined);
    });

    it('finds the selected formats: a merge, a listed single format, or the top-level one', () => {
      const v = { format_id: 'v', url: 'http://x/v.m3u8', protocol: 'm3u8_native', vcodec: 'avc1', acodec: 'none' };
      const a = { format_id: 'a', url: 'http://x/a.m3u8', protocol: 'm3u8_native', vcodec: 'none', acodec: 'mp4a.40.2' };
      expect(selectedFormats({ requested_formats: [v, a] }).map((f) => f.format_id)).to.deep.equal(['v', 'a']);
      expect(selectedFormats({ format_id: 'a', formats: [v, a] }).map((f) => f.format_id)).to.deep.equal(['a']);
      expect(selectedFormats({ format_id: '0', url: 'http://x/radio', protocol: 'http' })[0]).to.include({ url: 'http://x/radio' });
    });
  });

  describe('the recording plan', () => {
    const limits = DEFAULT_LIVE_LIMITS;

    it('separate renditions: video from one input, audio from the other', () => {
      const info: LiveInfo = {
        requested_formats: [
          { format_id: '720p', url: 'http://x/720.m3u8', protocol: 'm3u8_native', vcodec: 'avc1.64001f', acodec: 'none' },
          { format_id: 'audio', url: 'http://x/a.m3u8', protocol: 'm3u8_native', vcodec: 'none', acodec: 'mp4a.40.2' },
        ] as LiveInfo['requested_formats'],
      };
      const plan = recordingPlan(info, { liveFromStart: false, maxDuration: 30 }, false, limits) as RecordingPlan;
      expect(plan.maps).to.deep.equal(['0:v:0?', '1:a:0?']);
      expect(plan.capSeconds).to.equal(30);
      expect(plan.inputs.map((i) => i.hls)).to.deep.equal([true, true]);
    });

    it('records the formats the spec\'s rules chose, not yt-dlp\'s own pick', () => {
      const v360 = { format_id: '360', url: 'http://x/360.m3u8', protocol: 'm3u8_native', vcodec: 'avc1.64001e', acodec: 'none', width: 640, height: 360 };
      const v240 = { ...v360, format_id: '240', url: 'http://x/240.m3u8', width: 426, height: 240 };
      const audio = { format_id: 'audio', url: 'http://x/a.m3u8', protocol: 'm3u8_native', vcodec: 'none' };
      const info: LiveInfo = { formats: [audio, v240, v360], requested_formats: [v360, audio] };
      const plan = recordingPlan(info, { liveFromStart: false }, false, limits, [v240, audio]) as RecordingPlan;
      expect(plan.inputs.map((i) => i.url)).to.deep.equal(['http://x/240.m3u8', 'http://x/a.m3u8']);
      expect(plan.formatIds).to.deep.equal(['240', 'audio']);
      // Nothing chosen (a list with nothing usable): yt-dlp's selection.
      expect((recordingPlan(info, { liveFromStart: false }, false, limits, []) as RecordingPlan).formatIds).to.deep.equal(['360', 'audio']);
    });

    it('a muxed rendition gives both; an audio-only job takes only the audio', () => {
      const info = { format_id: '0', url: 'http://x/live.m3u8', protocol: 'm3u8_native' } as LiveInfo;
      expect((recordingPlan(info, { liveFromStart: false }, false, limits) as RecordingPlan).maps).to.deep.equal(['0:v:0?', '0:a:0?']);
      expect((recordingPlan(info, { liveFromStart: false }, true, limits) as RecordingPlan).maps).to.deep.equal(['0:a:0?']);
    });

    it('caps at maxDuration, and at the runner\'s maximum when the job gives none or more', () => {
      const info = { format_id: '0', url: 'http://x/live.m3u8', protocol: 'm3u8' } as LiveInfo;
      const cap = (maxDuration?: number) => (recordingPlan(info, { liveFromStart: false, maxDuration }, false, { ...limits, maxRecordingSeconds: 100 }) as RecordingPlan).capSeconds;
      expect(cap(10)).to.equal(10);
      expect(cap(undefined)).to.equal(100);
      expect(cap(1000)).to.equal(100);
    });

    it('refuses protocols ffmpeg cannot record (YouTube\'s from-start DASH fragments)', () => {
      const info = { format_id: '299', url: 'http://x', protocol: 'http_dash_segments_generator' } as LiveInfo;
      expect(recordingPlan(info, { liveFromStart: true }, false, limits)).to.deep.equal({ unsupported: 'http_dash_segments_generator' });
    });

    it('ffmpeg arguments: live point or start, headers per input, stream copy into MPEG-TS with the cap', () => {
      const plan: RecordingPlan = {
        inputs: [{ url: 'http://x/live.m3u8', headers: { 'User-Agent': 'UA', Referer: 'http://x/' }, hls: true }],
        maps: ['0:v:0?', '0:a:0?'], fromStart: true, capSeconds: 12, formatIds: ['0'],
      };
      const args = recorderArgs(plan, '/w/recording.ts', 30);
      const at = (flag: string) => args[args.indexOf(flag) + 1];
      expect(at('-live_start_index')).to.equal('0');
      expect(at('-headers')).to.equal('User-Agent: UA\r\nReferer: http://x/\r\n');
      expect(at('-rw_timeout')).to.equal('30000000');
      expect(args.indexOf('-live_start_index')).to.be.lessThan(args.indexOf('-i'));
      expect(args.slice(-7)).to.deep.equal(['-c', 'copy', '-t', '12', '-f', 'mpegts', '/w/recording.ts']);
      expect(recorderArgs({ ...plan, fromStart: false }, '/w/r.ts', 30)[recorderArgs({ ...plan, fromStart: false }, '/w/r.ts', 30).indexOf('-live_start_index') + 1]).to.equal('-1');
    });
  });

  describe('wait_for_video', () => {
    const notYet = (): ProbeResult => ({ ok: false, run: failedRun('ERROR: [youtube] abc: This live event will begin in 3 minutes.') });
    const ready = (): ProbeResult => ({ ok: true, info: { title: 'live' }, infoPath: '/w/info.json' });

    it('a scheduled stream or a playlist not published yet (404) is "not yet"; other failures are not', () => {
      expect(notYetAvailable('ERROR: [youtube] abc: Premieres in 2 hours', 1)).to.equal(true);
      expect(notYetAvailable("ERROR: [generic] None: Unable to download webpage: HTTP Error 404: File not found (caused by <HTTPError 404: 'File not found'>)", 1)).to.equal(true);
      expect(notYetAvailable("ERROR: [generic] None: Unable to download webpage: <urlopen error [Errno 111] Connection refused>", 1)).to.equal(false);
      expect(notYetAvailable('ERROR: [youtube] abc: Private video', 1)).to.equal(false);
    });

    it('polls until the stream is there', async () => {
      let clock = 0;
      const results = [notYet(), notYet(), ready()];
      const sleeps: number[] = [];
      const r = await probeWaitingForVideo(async () => results.shift()!, true, { waitForVideoMaxSeconds: 60, waitForVideoPollSeconds: 10 }, {
        logger, now: () => clock, sleep: async (ms) => { sleeps.push(ms); clock += ms; },
      });
      expect(r.ok).to.equal(true);
      expect(sleeps).to.deep.equal([10_000, 10_000]);
    });

    it('gives up after the documented maximum, as "upcoming"', async () => {
      let clock = 0;
      let probes = 0;
      const r = await probeWaitingForVideo(async () => (probes++, notYet()), true, { waitForVideoMaxSeconds: 25, waitForVideoPollSeconds: 10 }, {
        logger, now: () => clock, sleep: async (ms) => { clock += ms; },
      });
      expect(r).to.include({ ok: false, category: 'upcoming' });
      expect(probes).to.equal(4); // t = 0, 10, 20, 25
    });

    it('does not wait when the job did not ask to, nor for failures that waiting cannot fix', async () => {
      let probes = 0;
      const once = async () => (probes++, notYet());
      expect(await probeWaitingForVideo(once, false, DEFAULT_LIVE_LIMITS, { logger })).to.include({ ok: false });
      expect(probes).to.equal(1);
      const refused = async (): Promise<ProbeResult> => (probes++, { ok: false, run: failedRun('ERROR: [generic] None: Unable to download webpage: <urlopen error [Errno 111] Connection refused>') });
      await probeWaitingForVideo(refused, true, DEFAULT_LIVE_LIMITS, { logger });
      expect(probes).to.equal(2);
    });
  });

  describe('recording a real live HLS stream', function () {
    this.timeout(60_000);
    let stream: LiveStream;
    let dir: string;

    before(async () => {
      stream = await startLiveStream({ segmentSeconds: 1, listSize: 0 });
      await stream.ready;
    });
    after(async () => {
      await stream?.stop();
    });
    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), 'live-test-'));
    });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    const planFor = (capSeconds: number, fromStart = false): RecordingPlan => ({
      inputs: [{ url: stream.url, headers: {}, hls: true }], maps: ['0:v:0?', '0:a:0?'], fromStart, capSeconds, formatIds: ['0'],
    });

    it('is detected as live although yt-dlp\'s info says nothing', async () => {
      const info: LiveInfo = { format_id: '0', url: stream.url, protocol: 'm3u8_native', is_live: null };
      expect(await isLiveSource(info, { liveRecording: false })).to.equal(true);
    });

    it('stops at the cap with a playable recording of that length', async () => {
      const r = await recordLive(planFor(3), dir, { bin: 'ffmpeg', socketTimeoutSeconds: 10, logger });
      expect(r.ok).to.equal(true);
      const file = (r as { files: { path: string }[] }).files[0]!.path;
      const p = await probeFile(file);
      expect(p.streams).to.deep.equal(['audio', 'video']);
      expect(p.duration).to.be.closeTo(3, 0.3);
      await decodesCleanly(file);
    });

    it('records from the live point by default and from the first listed segment with liveFromStart', async () => {
      await new Promise((r) => setTimeout(r, 3000)); // let the stream build a history
      const before = stream.segmentRequests.length;
      await recordLive(planFor(1), dir, { bin: 'ffmpeg', socketTimeoutSeconds: 10, logger });
      const fromLive = stream.segmentRequests.slice(before);
      expect(fromLive[0]).to.not.equal('s00000.ts');
      const mid = stream.segmentRequests.length;
      await recordLive(planFor(1, true), dir, { bin: 'ffmpeg', socketTimeoutSeconds: 10, logger });
      expect(stream.segmentRequests[mid]).to.equal('s00000.ts');
    });

    it('stopped by its signal (what SIGTERM does to the runner) it leaves a finalized, playable recording', async () => {
      const stop = new AbortController();
      setTimeout(() => stop.abort(), 2500);
      const started = Date.now();
      const r = await recordLive(planFor(600), dir, { bin: 'ffmpeg', socketTimeoutSeconds: 10, logger, signal: stop.signal });
      expect(Date.now() - started).to.be.lessThan(10_000);
      expect(r.ok).to.equal(true);
      const file = join(dir, 'recording.ts');
      expect(statSync(file).size).to.be.greaterThan(0);
      const p = await probeFile(file);
      expect(p.streams).to.deep.equal(['audio', 'video']);
      expect(p.duration).to.be.greaterThan(1);
      await decodesCleanly(file);
    });

    it('a stream that is not there fails, classified from ffmpeg\'s words', async () => {
      const plan = { ...planFor(2), inputs: [{ url: stream.url.replace('live.m3u8', 'missing.m3u8'), headers: {}, hls: true }] };
      const r = await recordLive(plan, dir, { bin: 'ffmpeg', socketTimeoutSeconds: 5, logger });
      expect(r).to.include({ ok: false, category: 'unavailable' });
    });
  });

  describe('a live job on a live ladder (max_resolution, rule 3)', function () {
    this.timeout(90_000);
    let stream: LiveStream;
    let scratch: string;
    let n = 0;
    // Video-only renditions and one AAC rendition, as yt-dlp's generic extractor lists them from the master playlist.
    const variants = [{ name: '144p', width: 256, height: 144 }, { name: '240p', width: 426, height: 240 }, { name: '360p', width: 640, height: 360 }];

    before(async () => {
      scratch = mkdtempSync(join(tmpdir(), 'live-job-'));
      stream = await startLiveStream({ segmentSeconds: 1, listSize: 6, variants });
      await stream.ready;
    });
    after(async () => {
      await stream?.stop();
      if (scratch) rmSync(scratch, { recursive: true, force: true });
    });

    /** The whole pipeline (probe, format choice, recording, mux, upload to local storage), as the pod runs it. */
    async function liveJob(maxResolution: MaxResolution): Promise<{ height: number; width: number; duration: number; actualQuality?: string; segments: string[] }> {
      n++;
      const store = join(scratch, 'store');
      const workDir = join(scratch, `work-${n}`);
      const spec: NormalisedMediaJobSpec = {
        url: stream.url, owner: { apiKeyId: '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f' }, destination: { type: 'managed' },
        format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution, maxDuration: 2,
        audioOnly: false, downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false,
        waitForVideo: false, enableProgressWebhook: false,
      };
      const before = stream.segmentRequests.length;
      const report = await runJob({
        spec, jobId: `0000000${n}-aaaa-4bbb-8ccc-${String(n).padStart(12, '0')}`, workDir, logger,
        reporter: new StatusReporter({ namespace: 'default', name: 'live', logger, sink: { patch: async () => undefined } }),
        tools: { ytdlp: 'yt-dlp', ffmpeg: 'ffmpeg', ffprobe: 'ffprobe', socketTimeoutSeconds: 10 },
        destination: {
          provider: new LocalStorageProvider({ dir: store, publicBaseUrl: 'http://127.0.0.1:8080', secret: 'live-test-secret-0123456789' }),
          baseFolder: 'videos',
        },
      });
      expect(report, JSON.stringify(report)).to.include({ outcome: 'completed', step: 'Finished' });
      const file = join(store, report.result!.storageKey);
      const { stdout } = await run('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file]);
      const p = JSON.parse(stdout) as { format: { duration: string }; streams: { codec_type: string; width?: number; height?: number }[] };
      const video = p.streams.find((s) => s.codec_type === 'video')!;
      expect(p.streams.map((s) => s.codec_type).sort()).to.deep.equal(['audio', 'video']);
      return {
        width: video.width!, height: video.height!, duration: Number(p.format.duration), actualQuality: report.result!.actualQuality,
        segments: stream.segmentRequests.slice(before),
      };
    }

    it('max_resolution 240 records the 240p variant, not the best one', async () => {
      const r = await liveJob('240');
      expect([r.width, r.height]).to.deep.equal([426, 240]);
      expect(r.actualQuality).to.equal('240p');
      expect(r.duration).to.be.closeTo(2, 0.3);
      // Only that variant's (and the audio's) segments were fetched.
      const fetched = new Set(r.segments.map((s) => s.split('/')[0]));
      expect([...fetched].sort()).to.deep.equal(['240p', 'audio']);
    });

    it('lowest records the smallest variant', async () => {
      const r = await liveJob('lowest');
      expect([r.width, r.height]).to.deep.equal([256, 144]);
      expect(r.actualQuality).to.equal('144p');
    });
  });
});
