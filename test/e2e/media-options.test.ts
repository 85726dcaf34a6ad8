// The media rules of POST /jobs through the whole system: POST /jobs → the
// gateway's validation and rule-4 corrections → MediaJob → operator → the
// runner (yt-dlp + ffmpeg) on the local cluster → managed storage → GET
// /jobs/{id} → download s3_url → ffprobe. The sources are the HLS and DASH
// ladders of test/support/media.ts (horizontal 144p–1080p, vertical with
// gaps; AAC 64k mono, AAC 128k stereo and Opus 48k mono audio renditions).
//
// Every job is submitted up front and runs concurrently; each `it` waits for
// its own and checks the delivered file.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MEDIA, startMediaServer, type MediaServer } from '../support/media.js';
import { startS3rver, type RunningS3rver } from '../support/s3rver.js';
import { eventually } from '../../local-cluster/test/support.js';
import { startService, type Service } from './support.js';

const run = promisify(execFile);
const FRAME = 1 / MEDIA.ladder.fps;
const AAC_PACKET = 1024 / 48000;
const FULL = MEDIA.ladder.durationSeconds;
/** The ladders' H.264 profile (x264 ultrafast); the runner's own encodes are High. */
const COPIED = 'Constrained Baseline';

interface Stream {
  codec_type: string;
  codec_name: string;
  codec_tag_string?: string;
  profile?: string;
  width?: number;
  height?: number;
  channels?: number;
}

interface Delivered {
  job: Record<string, unknown>;
  formatName: string;
  duration: number;
  video?: Stream;
  audio?: Stream;
  streams: Stream[];
  /** Audio bitrate counted from the packets, kbit/s. */
  audioKbps?: number;
  /** The file's bytes as latin1 text, to find encoder settings x264/x265 write into the stream. */
  text: string;
  bytes: number;
}

async function deliveredFile(job: Record<string, unknown>): Promise<Delivered> {
  const dir = mkdtempSync(join(tmpdir(), 'mj-e2e-media-'));
  try {
    const res = await fetch(job.s3_url as string);
    expect(res.status, 'download status').to.equal(200);
    const body = Buffer.from(await res.arrayBuffer());
    const file = join(dir, 'out');
    writeFileSync(file, body);
    const { stdout } = await run('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file]);
    const probe = JSON.parse(stdout) as { format: { format_name: string; duration: string }; streams: Stream[] };
    const audio = probe.streams.find((s) => s.codec_type === 'audio');
    let audioKbps: number | undefined;
    if (audio) {
      const p = await run('ffprobe', ['-v', 'error', '-select_streams', 'a:0', '-show_entries', 'packet=size,pts_time', '-of', 'csv=p=0', file]);
      // Ogg's first packets carry no timestamp (N/A): only timed packets count.
      const packets = p.stdout.trim().split('\n').map((l) => l.split(',').map(Number) as [number, number]).filter(([t, n]) => Number.isFinite(t) && Number.isFinite(n));
      const span = packets[packets.length - 1]![0] - packets[0]![0];
      audioKbps = (packets.reduce((n, [, size]) => n + size, 0) * 8) / span / 1000;
    }
    return {
      job,
      formatName: probe.format.format_name,
      duration: Number(probe.format.duration),
      video: probe.streams.find((s) => s.codec_type === 'video'),
      audio,
      streams: probe.streams,
      audioKbps,
      text: body.toString('latin1'),
      bytes: body.length,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * How long a job may take from its submission. All 23 are submitted at once
 * and share two cores, so the last ones wait for the first: about 95 s on a
 * quiet machine, 170 s on a loaded CI host once. This bounds a stuck job; it
 * is not a timing goal (those are benchmarks).
 */
const JOB_DEADLINE_MS = 400_000;

async function finished(svc: Service, id: string): Promise<Record<string, unknown>> {
  return eventually(async () => {
    const r = await svc.api('GET', `/jobs/${id}`);
    return ['Completed', 'Failed', 'Warning'].includes(r.body.status as string) ? r.body : undefined;
  }, JOB_DEADLINE_MS, 500);
}

/** Submit now, check later: each job runs while the others do. */
function submitter(svc: () => Service) {
  const jobs = new Map<string, Promise<Delivered>>();
  return {
    submit(name: string, body: Record<string, unknown>): void {
      const p = (async () => {
        const created = await svc().api('POST', '/jobs', body);
        expect(created.status, `${name}: ${JSON.stringify(created.body)}`).to.equal(201);
        const job = await finished(svc(), created.body.job_id as string);
        expect(job.status, `${name}: ${String(job.error)}`).to.equal('Completed');
        return deliveredFile(job);
      })();
      p.catch(() => undefined); // awaited by the test that checks it
      jobs.set(name, p);
    },
    get: (name: string) => jobs.get(name)!,
  };
}

/**
 * The encoder settings x264 and x265 store in the stream (an SEI message in
 * the first frame of their encode), e.g. "crf=28.0".
 */
const encoderSays = (d: Delivered, setting: string) => new RegExp(`(x264|x265).{0,4000}\\b${setting.replace('.', '\\.')}\\b`, 's').test(d.text);

describe('end to end: media options (formats, codecs, resolution, clips, names)', function () {
  this.timeout(JOB_DEADLINE_MS + 20_000);
  let svc: Service;
  let media: MediaServer;
  const jobs = submitter(() => svc);

  before(async () => {
    [media, svc] = await Promise.all([startMediaServer(), startService({ operatorEnv: { MAX_RUNNING_JOBS: '12' } })]);
    const H = media.ladders.horizontal;
    const V = media.ladders.vertical;
    // Formats and codecs
    jobs.submit('default', { url: H.hls });
    jobs.submit('webm', { url: H.dash, format: 'webm', max_resolution: '240' });
    jobs.submit('mkv', { url: H.dash, format: 'mkv', max_resolution: '360' });
    jobs.submit('mov+vp9', { url: H.dash, format: 'mov', video_codec: 'vp9', max_resolution: '144' });
    jobs.submit('h265 preset', { url: H.dash, video_codec: 'h265', quality_preset: 'low', video_quality: 10, max_resolution: '144' });
    jobs.submit('h264 crf', { url: H.dash, video_codec: 'h264', video_quality: 30, max_resolution: '240' });
    jobs.submit('copy ignores crf', { url: H.dash, video_quality: 10, max_resolution: '240' });
    jobs.submit('audio_only', { url: H.hls, audio_only: true });
    jobs.submit('mp3', { url: H.dash, format: 'mp3' });
    jobs.submit('ogg+aac', { url: H.dash, format: 'ogg', audio_codec: 'aac' });
    jobs.submit('opus', { url: H.dash, format: 'opus' });
    jobs.submit('bitrate only', { url: H.dash, audio_bitrate: '64k', max_resolution: '144' });
    jobs.submit('m4a+mp3', { url: H.dash, format: 'm4a', audio_codec: 'mp3' });
    // Resolution
    jobs.submit('vertical 480', { url: V.dash, max_resolution: '480' });
    jobs.submit('vertical 144', { url: V.hls, max_resolution: '144' });
    jobs.submit('lowest', { url: H.dash, max_resolution: 'lowest' });
    jobs.submit('720', { url: H.dash, max_resolution: '720' });
    // Clips
    jobs.submit('clip on keyframe', { url: H.dash, max_resolution: '240', clip_start: '00:00:02', clip_end: '4.5' });
    jobs.submit('clip off keyframe', { url: H.dash, max_resolution: '240', clip_start: '1.5', clip_end: '0:04' });
    jobs.submit('clip audio', { url: H.dash, audio_only: true, clip_start: '1.3', clip_end: '3.1' });
    jobs.submit('clip end only', { url: V.hls, max_resolution: '240', clip_end: '3' });
    // Names: the same filename twice at once, from different renditions.
    jobs.submit('name 144', { url: H.dash, max_resolution: '144', filename: 'My: Clip?*', folder: 'shows/s1' });
    jobs.submit('name 240', { url: H.dash, max_resolution: '240', filename: 'My: Clip?*', folder: 'shows/s1' });
  });

  after(async () => {
    await svc?.stop();
    await media?.stop();
  });

  describe('formats and codecs', () => {
    // Slow (about 40 s): the first test awaits the file's jobs, which all started in `before` and run side by
    // side (submitter): its time is the whole set's; the tests after it find their jobs done.
    it('defaults to mp4 with the stream copied: the best video, the best AAC track (an HLS rendition yt-dlp knows no codec of)', async () => {
      const d = await jobs.get('default');
      expect(d.formatName).to.contain('mp4');
      expect(d.job).to.include({ actual_quality: '1080p', file_size: d.bytes });
      expect(d.video).to.include({ codec_name: 'h264', width: 1920, height: 1080 });
      expect(d.audio).to.include({ codec_name: 'aac', channels: 2 }); // the 128k rendition, not the Opus one yt-dlp would take
      expect(d.audioKbps).to.be.within(100, 150);
      expect(d.duration).to.be.closeTo(FULL, 0.05);
      expect(d.video?.profile, 'copied: the source is Constrained Baseline, the runner would encode High').to.equal(COPIED);
    });

    it('webm: h264 source re-encoded to VP9, the Opus track copied', async () => {
      const d = await jobs.get('webm');
      expect(d.formatName).to.contain('webm');
      expect(d.video).to.include({ codec_name: 'vp9', width: 426, height: 240 });
      expect(d.audio).to.include({ codec_name: 'opus', channels: 1 });
      expect(d.audioKbps).to.be.below(80);
    });

    it('mkv copies H.264 and AAC', async () => {
      const d = await jobs.get('mkv');
      expect(d.formatName).to.contain('matroska');
      expect(d.video).to.include({ codec_name: 'h264', width: 640, height: 360 });
      expect(d.audio).to.include({ codec_name: 'aac', channels: 2 });
    });

    it('mov with vp9, a pair mov cannot hold, comes out H.264', async () => {
      const d = await jobs.get('mov+vp9');
      expect(d.formatName).to.contain('mov');
      expect(d.video).to.include({ codec_name: 'h264', width: 256, height: 144 });
      expect(d.audio?.codec_name).to.equal('aac');
    });

    it('h265 with quality_preset low: HEVC (hvc1) at x265 CRF 32 (x264\'s 28), the preset overriding video_quality', async () => {
      const d = await jobs.get('h265 preset');
      expect(d.video).to.include({ codec_name: 'hevc', codec_tag_string: 'hvc1', width: 256, height: 144 });
      expect(encoderSays(d, 'crf=32.0')).to.equal(true);
    });

    it('h264 with video_quality 30: CRF 30', async () => {
      const d = await jobs.get('h264 crf');
      expect(d.video).to.include({ codec_name: 'h264', width: 426, height: 240 });
      expect(encoderSays(d, 'crf=30.0')).to.equal(true);
    });

    it('video_quality does nothing to a copy', async () => {
      const d = await jobs.get('copy ignores crf');
      expect(d.video?.profile).to.equal(COPIED);
      expect(encoderSays(d, 'rc=abr'), 'the source encoder settings').to.equal(true);
      expect(d.text).to.not.match(/crf=\d/);
    });

    it('audio_only delivers m4a with the AAC track copied, not re-encoded at audio_bitrate', async () => {
      const d = await jobs.get('audio_only');
      expect(d.formatName).to.contain('m4a');
      expect(d.streams.map((s) => s.codec_type)).to.deep.equal(['audio']);
      expect(d.audio).to.include({ codec_name: 'aac', channels: 2 });
      expect(d.audioKbps, 'the 128k source, not 192k').to.be.within(100, 150);
      expect(d.job.actual_quality).to.equal(null);
      expect(d.job.s3_key).to.match(/\.m4a$/);
    });

    it('mp3: encoded at the default audio_bitrate 192k', async () => {
      const d = await jobs.get('mp3');
      expect(d.formatName).to.equal('mp3');
      expect(d.streams.map((s) => s.codec_name)).to.deep.equal(['mp3']);
      expect(d.audioKbps).to.be.closeTo(192, 10);
    });

    it('ogg with aac: rule 4 makes it Opus', async () => {
      const d = await jobs.get('ogg+aac');
      expect(d.formatName).to.equal('ogg');
      expect(d.job.s3_key).to.match(/\.ogg$/);
      expect(d.streams.map((s) => s.codec_name)).to.deep.equal(['opus']);
    });

    it('opus copies the Opus track', async () => {
      const d = await jobs.get('opus');
      expect(d.formatName).to.equal('ogg');
      expect(d.job.s3_key).to.match(/\.opus$/);
      expect(d.audio).to.include({ codec_name: 'opus', channels: 1 });
      expect(d.audioKbps).to.be.below(80);
    });

    it('audio_bitrate without audio_codec: AAC encoded at that bitrate, from the best track', async () => {
      const d = await jobs.get('bitrate only');
      expect(d.audio).to.include({ codec_name: 'aac', channels: 2 });
      expect(d.audioKbps).to.be.closeTo(64, 12);
    });

    it('m4a with mp3, a pair the m4a muxer refuses, comes out AAC', async () => {
      const d = await jobs.get('m4a+mp3');
      expect(d.formatName).to.contain('m4a');
      expect(d.streams.map((s) => s.codec_name)).to.deep.equal(['aac']);
    });
  });

  describe('resolution (rule 3)', () => {
    it('vertical 480: the highest at or below by the shorter side (360x640), not resized', async () => {
      const d = await jobs.get('vertical 480');
      expect(d.video).to.include({ width: 360, height: 640 });
      expect(d.job.actual_quality).to.equal('360p');
    });

    it('vertical 144 when every format exceeds it: the smallest (240x426), not resized; the lowest AAC track', async () => {
      const d = await jobs.get('vertical 144');
      expect(d.video).to.include({ width: 240, height: 426 });
      expect(d.job.actual_quality).to.equal('240p');
      expect(d.audio).to.include({ codec_name: 'aac', channels: 1 });
      expect(d.audioKbps).to.be.below(90);
    });

    it('lowest: the smallest format and the lowest AAC track (not the smaller Opus one)', async () => {
      const d = await jobs.get('lowest');
      expect(d.video).to.include({ width: 256, height: 144 });
      expect(d.job.actual_quality).to.equal('144p');
      expect(d.audio).to.include({ codec_name: 'aac', channels: 1 });
    });

    it('720 on a horizontal ladder', async () => {
      const d = await jobs.get('720');
      expect(d.video).to.include({ width: 1280, height: 720 });
      expect(d.job.actual_quality).to.equal('720p');
    });
  });

  describe('clips', () => {
    it('a start on a keyframe (00:00:02 to 4.5) is copied and exact to a frame', async () => {
      const d = await jobs.get('clip on keyframe');
      expect(d.duration).to.be.closeTo(2.5, FRAME + 0.002);
      expect(d.video?.profile, 'copied').to.equal(COPIED);
    });

    it('a start off a keyframe (1.5 to 0:04) is re-encoded and exact to a frame', async () => {
      const d = await jobs.get('clip off keyframe');
      expect(d.duration).to.be.closeTo(2.5, FRAME + 0.002);
      expect(encoderSays(d, 'crf=23.0'), 're-encoded at the default CRF').to.equal(true);
      expect(d.video?.profile).to.equal('High');
      expect(d.video).to.include({ codec_name: 'h264', width: 426, height: 240 });
    });

    it('an audio clip is exact to an AAC packet', async () => {
      const d = await jobs.get('clip audio');
      expect(d.duration).to.be.closeTo(1.8, AAC_PACKET + 0.002);
      expect(d.audio?.codec_name).to.equal('aac');
    });

    it('clip_end alone cuts from the start (HLS, vertical)', async () => {
      const d = await jobs.get('clip end only');
      expect(d.duration).to.be.closeTo(3, FRAME + 0.002);
      expect(d.video).to.include({ width: 240, height: 426 });
    });

    it('clip_end not after clip_start is a 400, and nothing is created', async () => {
      const before = await svc.api('GET', '/jobs?limit=1');
      for (const [start, end] of [['00:00:05', '4'], ['1:00', '60']]) {
        const r = await svc.api('POST', '/jobs', { url: media.ladders.horizontal.dash, clip_start: start, clip_end: end });
        expect(r.status).to.equal(400);
        expect(r.body.error).to.match(/clip_end/);
      }
      const r = await svc.api('POST', '/jobs', { url: media.ladders.horizontal.dash, clip_start: '1:75' });
      expect(r.status).to.equal(400);
      expect((await svc.api('GET', '/jobs?limit=1')).body.total).to.equal(before.body.total);
    });
  });

  describe('names', () => {
    it('filename and folder make the key, sanitised; the same name twice never overwrites', async () => {
      const [a, b] = await Promise.all([jobs.get('name 144'), jobs.get('name 240')]);
      const keys = [a.job.s3_key, b.job.s3_key] as string[];
      const taken = `${svc.managedPrefix}/videos/shows/s1/My_ Clip_`;
      expect(keys).to.include(`${taken}.mp4`);
      const other = keys.find((k) => k !== `${taken}.mp4`)!;
      const second = a.job.s3_key === other ? a : b;
      expect(other).to.equal(`${taken}-${(second.job.id as string).slice(0, 8)}.mp4`);
      // Each job's file is its own: the rendition it asked for.
      expect(a.video).to.include({ height: 144 });
      expect(b.video).to.include({ height: 240 });
    });

    it('unsafe names are refused with 400', async () => {
      for (const body of [{ filename: 'a/b' }, { filename: '..x' }, { folder: '../up' }, { folder: '/abs' }, { folder: '  ' }]) {
        const r = await svc.api('POST', '/jobs', { url: media.ladders.horizontal.dash, ...body });
        expect(r.status, JSON.stringify(body)).to.equal(400);
      }
    });
  });
});

describe('end to end: names on S3 managed storage (s3rver)', function () {
  this.timeout(180_000);
  let svc: Service;
  let media: MediaServer;
  let s3: RunningS3rver;

  before(async () => {
    [media, s3] = await Promise.all([startMediaServer(), startS3rver({ buckets: ['managed'] })]);
    svc = await startService({
      storageEnv: {
        MANAGED_STORAGE: 's3', MANAGED_S3_ENDPOINT: s3.endpoint, MANAGED_S3_BUCKET: 'managed',
        MANAGED_S3_ACCESS_KEY: s3.accessKeyId, MANAGED_S3_SECRET_KEY: s3.secretAccessKey, MANAGED_S3_FORCE_PATH_STYLE: 'true',
      },
    });
  });

  after(async () => {
    await svc?.stop();
    await s3?.stop();
    await media?.stop();
  });

  it('a filename already taken in the bucket gets -<jobId 8>; the first object is never written again', async () => {
    const jobs = submitter(() => svc);
    const url = media.ladders.horizontal.dash;
    jobs.submit('first', { url, max_resolution: '144', filename: 'episode', folder: 'show' });
    const first = await jobs.get('first');
    jobs.submit('second', { url, max_resolution: '240', filename: 'episode', folder: 'show' });
    const second = await jobs.get('second');
    const taken = `${svc.managedPrefix}/videos/show/episode`;
    expect(first.job.s3_key).to.equal(`${taken}.mp4`);
    expect(second.job.s3_key).to.equal(`${taken}-${(second.job.id as string).slice(0, 8)}.mp4`);
    expect(first.video).to.include({ height: 144 });
    expect(second.video).to.include({ height: 240 });
    const created = s3.events.filter((e) => e.key === `${taken}.mp4` && e.eventName.startsWith('ObjectCreated'));
    expect(created, 'written once').to.have.length(1);
  });
});
