// The mux plan against the real ffmpeg 5.1: every container takes the codecs
// plan.ts gives it, clips come out the length asked for (copy when the start
// is a keyframe, encode when not), and the streaming mux ends its stream only
// on success. Sources are made here with ffmpeg, tiny and short.
import { execFile } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { FORMATS, type Format, type MediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { parseSpec } from '../src/config.js';
import { ffprobe, keyframeAt, mux, muxPlan, muxToStream, PIPE_OUTPUT, planMux, type MuxInput, type MuxPlan } from '../src/ffmpeg.js';
import { containerFor, type Clip } from '../src/plan.js';

const run = promisify(execFile);
const FPS = 25;
const FRAME = 1 / FPS;
const AAC_PACKET = 1024 / 48000;

interface Probe {
  format: { duration?: string; format_name: string };
  streams: { codec_type: string; codec_name: string; start_time?: string; duration?: string; width?: number }[];
}

async function probeFile(file: string): Promise<Probe> {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file]);
  return JSON.parse(stdout) as Probe;
}

async function ffmpeg(args: string[]): Promise<void> {
  await run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y', ...args]);
}

async function input(path: string, carriesAudio = false): Promise<MuxInput> {
  const p = await ffprobe('ffprobe', path);
  if (!p.ok) throw new Error(`ffprobe ${path}: ${p.run.stderr}`);
  return { path, probed: p.probed, carriesAudio };
}

/** Run a plan into `file`, through stdout and a stream when it is a streaming plan, as the runner uploads it. */
async function runTo(plan: MuxPlan, file: string): Promise<void> {
  if (plan.streaming) {
    const m = muxToStream('ffmpeg', plan);
    await pipeline(m.body, createWriteStream(file));
    expect((await m.done).exitCode).to.equal(0);
  } else {
    const r = await mux('ffmpeg', plan);
    expect(r.exitCode, r.stderr).to.equal(0);
  }
}

/** A spec as muxPlan gets it in the pod: through parseSpec, so normalised (a preset's CRF in videoQuality). */
const spec = (o: Partial<MediaJobSpec> = {}) => parseSpec(JSON.stringify({ url: 'https://media.example/v', videoCodec: 'copy', audioBitrate: '128k', videoQuality: 30, ...o }));

/** Run at most `n` at once: ffmpeg runs are CPU-bound and the machine is shared. */
async function limited<T>(n: number, jobs: (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < jobs.length) {
      const i = next++;
      out[i] = await jobs[i]!();
    }
  }));
  return out;
}

describe('runner mux: plans against ffmpeg 5.1', function () {
  this.timeout(180_000);
  let dir: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'runner-mux-'));
    const gop = ['-g', String(FPS), '-keyint_min', String(FPS), '-sc_threshold', '0'];
    const tiny = (d: number) => ['-f', 'lavfi', '-i', `testsrc=size=96x64:rate=${FPS}:duration=${d}`, '-f', 'lavfi', '-i', `sine=sample_rate=48000:duration=${d}`];
    await Promise.all([
      ffmpeg([...tiny(1), '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-c:a', 'aac', join(dir, 'h264-aac.mp4')]),
      ffmpeg([...tiny(1), '-c:v', 'libvpx-vp9', '-deadline', 'realtime', '-cpu-used', '8', '-c:a', 'libopus', join(dir, 'vp9-opus.webm')]),
      ffmpeg([
        '-f', 'lavfi', '-i', `testsrc2=size=256x144:rate=${FPS}:duration=2`, '-f', 'lavfi', '-i', 'sine=sample_rate=48000:duration=2',
        '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-c:a', 'aac', join(dir, '144p.mp4'),
      ]),
      // Six seconds, a keyframe every second: the clip sources, as separate
      // video and audio (a DASH/HLS download), muxed, and as MPEG-TS, whose
      // timestamps start at 1.4 s.
      ffmpeg([
        '-f', 'lavfi', '-i', `testsrc=size=320x240:rate=${FPS}:duration=6`, '-f', 'lavfi', '-i', 'sine=sample_rate=48000:duration=6',
        '-map', '0:v', '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', ...gop, join(dir, 'v.mp4'),
        '-map', '1:a', '-c:a', 'aac', '-b:a', '64k', join(dir, 'a.m4a'),
        '-map', '0:v', '-map', '1:a', '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', ...gop, '-c:a', 'aac', join(dir, 'muxed.mp4'),
        '-map', '0:v', '-map', '1:a', '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', ...gop, '-c:a', 'aac', '-f', 'mpegts', join(dir, 'muxed.ts'),
      ]),
    ]);
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  describe('CRF per encoder (the API\'s scale is libx264\'s)', () => {
    /**
     * The CRF an encode ran at, read from the delivered file: x264 and x265
     * store their settings in an SEI message ("crf=28.0"); libvpx stores
     * none, but in constant-quality mode every ordinary inter frame gets the
     * CRF's quantizer index (vp9_quantizer_to_qindex: 4 × CRF below 63),
     * which ffmpeg's trace_headers filter prints as base_q_idx (key and
     * alt-ref frames get lower ones).
     */
    async function crfInFile(file: string, codec: string): Promise<number | undefined> {
      if (codec !== 'vp9') {
        const m = /\bcrf=(\d+(?:\.\d+)?)/.exec(readFileSync(file).toString('latin1'));
        return m ? Number(m[1]) : undefined;
      }
      const { stderr } = await run('ffmpeg', ['-hide_banner', '-nostdin', '-loglevel', 'trace', '-i', file, '-map', '0:v', '-c', 'copy', '-bsf:v', 'trace_headers', '-f', 'null', '-'], { maxBuffer: 64 << 20 });
      const q = [...stderr.matchAll(/base_q_idx\s+[01]+\s+=\s+(\d+)/g)].map((m) => Number(m[1]));
      return q.length ? Math.max(...q) / 4 : undefined;
    }

    // quality_preset `low` (API CRF 28) with a video_quality it overrides, on a 2 s 144p clip.
    for (const [videoCodec, format, codec, crf] of [['h264', 'mp4', 'h264', 28], ['h265', 'mp4', 'hevc', 32], ['vp9', 'webm', 'vp9', 37]] as const) {
      it(`${videoCodec}: quality_preset low encodes at CRF ${crf} on ${videoCodec === 'vp9' ? 'libvpx-vp9\'s 0–63' : videoCodec === 'h265' ? 'x265\'s' : 'x264\'s'} scale`, async () => {
        const container = containerFor({ format, audioOnly: false });
        const out = join(dir, `crf-${videoCodec}.${container.ext}`);
        const plan = muxPlan([await input(join(dir, '144p.mp4'))], out, container, spec({ videoCodec, qualityPreset: 'low', videoQuality: 10 }))!;
        expect(plan.args.join(' ')).to.contain(`-crf ${crf}`);
        await runTo(plan, out);
        const video = (await probeFile(out)).streams.find((s) => s.codec_type === 'video')!;
        expect(video).to.include({ codec_name: codec, width: 256 });
        expect(await crfInFile(out, codec)).to.equal(crf);
      });
    }
  });

  it('x265 sizes its thread pool by the job\'s CPUs (pools), not the node\'s cores', async () => {
    const container = containerFor({ format: 'mp4', audioOnly: false });
    const source = await input(join(dir, '144p.mp4'));
    // x265 writes its settings into the stream (an SEI message): "numa-pools=3" when told.
    const pools = async (threads: number | undefined) => {
      const out = join(dir, `pools-${threads ?? 'default'}.mp4`);
      await runTo(muxPlan([source], out, container, spec({ videoCodec: 'h265' }), { threads })!, out);
      return /numa-pools=([\d,+-]+)/.exec(readFileSync(out).toString('latin1'))?.[1];
    };
    expect(await pools(3)).to.equal('3');
    expect(await pools(undefined), 'x265 left to count the cores').to.equal(undefined);
  });

  it('every container takes the codecs the plan gives it, for copy, explicit codecs and fallbacks', async () => {
    const videoCombos: Partial<MediaJobSpec>[] = [{}, { videoCodec: 'h264', audioCodec: 'aac' }, { videoCodec: 'h265', audioCodec: 'opus' }, { videoCodec: 'vp9', audioCodec: 'mp3' }];
    const audioCombos: Partial<MediaJobSpec>[] = [{}, { audioCodec: 'aac' }, { audioCodec: 'opus' }, { audioCodec: 'mp3' }];
    const [h264, vp9] = await Promise.all(['h264-aac.mp4', 'vp9-opus.webm'].map((f) => input(join(dir, f))));
    const jobs: (() => Promise<string>)[] = [];
    for (const format of FORMATS as readonly Format[]) {
      const container = containerFor({ format, audioOnly: false });
      for (const combo of container.audioOnly ? audioCombos : videoCombos) {
        // VP9/Opus only for copy, where it meets the fallbacks (mov, m4a, mp3); encodes do not depend on the source.
        for (const source of Object.keys(combo).length ? [h264!] : [h264!, vp9!]) {
          jobs.push(async () => {
            const out = join(dir, `out-${jobs.length}-${Math.random().toString(36).slice(2)}.${container.ext}`);
            const plan = muxPlan([source], out, container, spec(combo))!;
            const at = `${format} ${JSON.stringify(combo)} from ${source.path.split('/').pop()}`;
            const r = await mux('ffmpeg', plan);
            expect(r.exitCode, `${at}: ${r.stderr}`).to.equal(0);
            const got = await probeFile(out);
            rmSync(out);
            const codecs = (type: string) => got.streams.filter((s) => s.codec_type === type).map((s) => s.codec_name);
            expect(codecs('video'), at).to.deep.equal(plan.codecs.video ? [plan.codecs.video.codec] : []);
            expect(codecs('audio'), at).to.deep.equal([plan.codecs.audio!.codec]);
            return at;
          });
        }
      }
    }
    expect(await limited(2, jobs)).to.have.length(2 * (4 * 5));
  });

  describe('clips', () => {
    const cut = async (inputs: MuxInput[], format: Format, clip: Clip, o: Partial<MediaJobSpec> = {}) => {
      const container = containerFor({ format, audioOnly: false });
      const out = join(dir, `clip-${Math.random().toString(36).slice(2)}.${container.ext}`);
      const plan = (await planMux('ffprobe', inputs, container.streamable ? PIPE_OUTPUT : out, container, spec(o), clip))!;
      await runTo(plan, out);
      const probe = await probeFile(out);
      return { plan, probe, duration: Number(probe.format.duration) };
    };

    it('a start on a keyframe is cut by copy, exact to a frame', async () => {
      const inputs = [await input(join(dir, 'v.mp4')), await input(join(dir, 'a.m4a'), true)];
      const { plan, duration } = await cut(inputs, 'mp4', { start: 2, end: 4.5 });
      expect(plan.codecs.video).to.deep.include({ copy: true });
      expect(duration).to.be.closeTo(2.5, FRAME + 0.001);
    });

    it('a start off a keyframe re-encodes the video so the clip is exact to a frame', async () => {
      const inputs = [await input(join(dir, 'v.mp4')), await input(join(dir, 'a.m4a'), true)];
      const { plan, probe, duration } = await cut(inputs, 'mp4', { start: 1.5, end: 4 });
      expect(plan.codecs.video).to.deep.include({ copy: false, codec: 'h264' });
      expect(plan.codecs.audio).to.deep.include({ copy: true });
      expect(duration).to.be.closeTo(2.5, FRAME + 0.001);
      const video = probe.streams.find((s) => s.codec_type === 'video')!;
      expect(Number(video.duration)).to.be.closeTo(2.5, FRAME + 0.001);
    });

    it('a muxed input cut off a keyframe: the copied audio starts at the cut too, not at the keyframe before it', async () => {
      const { plan, probe, duration } = await cut([await input(join(dir, 'muxed.mp4'))], 'mkv', { start: 2.5, end: 4.5 });
      expect(plan.codecs.video?.copy).to.equal(false);
      expect(duration).to.be.closeTo(2, FRAME + 0.001);
      for (const s of probe.streams) expect(Number(s.start_time), s.codec_type).to.be.closeTo(0, FRAME + 0.001);
    });

    it('audio only (m4a, copied) is exact to an AAC packet', async () => {
      const { plan, duration } = await cut([await input(join(dir, 'a.m4a'), true)], 'm4a', { start: 1.3, end: 3.1 });
      expect(plan.codecs.audio?.copy).to.equal(true);
      expect(duration).to.be.closeTo(1.8, AAC_PACKET + 0.001);
    });

    it('keyframes are found in MPEG-TS, whose timestamps do not start at zero', async () => {
      const ts = await input(join(dir, 'muxed.ts'));
      expect(ts.probed.startSeconds).to.be.greaterThan(1);
      const v = ts.probed.streams.find((s) => s.codec_type === 'video')!;
      // The TS muxer starts the video a little after the audio (which carries
      // AAC priming), and -ss counts from the earliest stream: the keyframes
      // sit that little after each whole second of the file's time.
      const { stdout } = await run('ffprobe', ['-v', 'error', '-select_streams', 'v', '-show_entries', 'stream=start_time', '-of', 'csv=p=0', ts.path]);
      const offset = Number(stdout.trim().split('\n')[0]) - ts.probed.startSeconds!;
      expect(offset).to.be.greaterThan(FRAME / 2);
      expect(await keyframeAt('ffprobe', ts, v, 3 + offset)).to.be.closeTo(3 + offset, 0.001);
      expect(await keyframeAt('ffprobe', ts, v, 3 + offset + FRAME / 4), 'within half a frame counts: the keyframe itself').to.be.closeTo(3 + offset, 0.001);
      expect(await keyframeAt('ffprobe', ts, v, 3), 'more than half a frame off').to.equal(undefined);
      expect(await keyframeAt('ffprobe', ts, v, 3.5)).to.equal(undefined);
      const { plan, duration } = await cut([ts], 'mkv', { start: 3 + offset, end: 5 + offset });
      expect(plan.codecs.video?.copy).to.equal(true);
      expect(duration).to.be.closeTo(2, FRAME + 0.001);
    });

    it('a start just before a keyframe (within half a frame) is copied from that keyframe, not from the one a GOP earlier', async () => {
      // WebM from libvpx: the video starts 7 ms in (Opus pre-skip puts the audio at -7 ms), so "4" falls just before the keyframe at 4.007.
      const webm = join(dir, 'gop4.webm');
      await ffmpeg(['-f', 'lavfi', '-i', `testsrc=size=160x120:rate=${FPS}:duration=10`, '-f', 'lavfi', '-i', 'sine=duration=10',
        '-c:v', 'libvpx-vp9', '-deadline', 'realtime', '-cpu-used', '8', '-g', String(4 * FPS), '-c:a', 'libopus', '-shortest', webm]);
      const { plan, duration } = await cut([await input(webm)], 'webm', { start: 4, end: 8 });
      expect(plan.codecs.video?.copy).to.equal(true);
      expect(duration, 'not 8 s from the keyframe at 0').to.be.closeTo(4, 0.05);
    });
  });

  describe('streaming mux', () => {
    it('writes fragmented MP4 to the stream: MPEG-TS input with ADTS AAC, copied', async () => {
      const ts = await input(join(dir, 'muxed.ts'));
      const plan = muxPlan([ts], PIPE_OUTPUT, containerFor({ format: 'mp4', audioOnly: false }), spec())!;
      const out = join(dir, 'streamed.mp4');
      await runTo(plan, out);
      const probe = await probeFile(out);
      expect(probe.streams.map((s) => s.codec_name).sort()).to.deep.equal(['aac', 'h264']);
      expect(Number(probe.format.duration)).to.be.closeTo(6, 0.1);
    });

    it('a failing ffmpeg errors the stream instead of ending it, so no partial file is stored', async () => {
      const ts = await input(join(dir, 'muxed.ts'));
      const plan = muxPlan([{ ...ts, path: join(dir, 'missing.ts') }], PIPE_OUTPUT, containerFor({ format: 'mp4', audioOnly: false }), spec())!;
      const m = muxToStream('ffmpeg', plan);
      const chunks: Buffer[] = [];
      const err = await (async () => {
        try {
          for await (const c of m.body) chunks.push(c as Buffer);
        } catch (e) {
          return e as Error;
        }
        return undefined;
      })();
      expect(err?.message).to.match(/ffmpeg exited/);
      expect((await m.done).exitCode).to.not.equal(0);
    });

    it('a consumer that gives up stops ffmpeg', async () => {
      // An endless source: only the closed pipe can stop it.
      const plan: MuxPlan = {
        args: ['-hide_banner', '-nostdin', '-loglevel', 'error', '-progress', 'pipe:3', '-re', '-f', 'lavfi', '-i', 'testsrc=size=64x64:rate=25', '-f', 'mpegts', PIPE_OUTPUT],
        codecs: {}, streaming: true,
      };
      const m = muxToStream('ffmpeg', plan);
      await new Promise<void>((resolve) => m.body.once('data', () => resolve()));
      const t = Date.now();
      m.body.destroy();
      const r = await m.done;
      expect(r.exitCode === 0 && r.signal === null, 'ffmpeg stopped by the broken pipe').to.equal(false);
      expect(Date.now() - t).to.be.lessThan(5000);
    });
  });
});
