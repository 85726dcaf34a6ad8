// What decides whether a source is read straight from its URL (range
// support, where an MP4 keeps its index) and the check of a delivered file
// (verify.ts) against the request, on files made by ffmpeg and served by a
// server no one here wrote (Python's http.server, which answers no range
// request).
import { expect } from 'chai';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createReadStream, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { LocalStorageProvider } from '@mediajobs/lib/storage/index';
import { parseSpec } from '../src/config.js';
import { deliver } from '../src/deliver.js';
import { ffprobe, muxPlan } from '../src/ffmpeg.js';
import { clipOf, containerFor, type Clip } from '../src/plan.js';
import { StatusReporter } from '../src/report.js';
import { readableFromUrl, streamsFrontToBack } from '../src/source-read.js';
import { JobSteps } from '../src/steps.js';
import { expectedOf, inspectFile, inspectStream, mismatch, wrongDelivery, type Expected, type Observed } from '../src/verify.js';
import { freePort } from '../../test/e2e/support.js';
import { startMediaServer, type MediaServer } from '../../test/support/media.js';

const run = promisify(execFile);
const ffmpeg = (args: string[]) => run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y', ...args]);
const SOURCE = ['-f', 'lavfi', '-i', 'testsrc=size=160x120:rate=25:duration=6', '-f', 'lavfi', '-i', 'sine=duration=6'];
const H264 = ['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-g', '50'];
const FILES = {
  /** As ffmpeg writes an MP4 unless told otherwise: the index (moov) after the media (mdat). */
  'moov-last.mp4': [...SOURCE, ...H264, '-c:a', 'aac'],
  'faststart.mp4': [...SOURCE, ...H264, '-c:a', 'aac', '-movflags', '+faststart'],
  'fragmented.mp4': [...SOURCE, ...H264, '-c:a', 'aac', '-movflags', '+frag_keyframe+empty_moov'],
  'moov-last.mov': [...SOURCE, ...H264, '-c:a', 'aac', '-f', 'mov'],
  'faststart.m4a': [...SOURCE.slice(4), '-c:a', 'aac', '-movflags', '+faststart'],
  'plain.mkv': [...SOURCE, ...H264, '-c:a', 'aac'],
  'plain.webm': [...SOURCE, '-c:v', 'libvpx-vp9', '-deadline', 'realtime', '-cpu-used', '8', '-c:a', 'libopus'],
  'audio.mp3': [...SOURCE.slice(4), '-c:a', 'libmp3lame'],
  'audio.ogg': [...SOURCE.slice(4), '-c:a', 'libopus', '-f', 'ogg'],
} as const;
type Name = keyof typeof FILES;

describe('runner: reading sources directly, and checking what is delivered', function () {
  this.timeout(60_000);
  let dir: string;
  let python: ChildProcess;
  let plain: string;
  let ranged: MediaServer;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'runner-verify-'));
    await Promise.all(Object.entries(FILES).map(([name, args]) => ffmpeg([...args, join(dir, name)])));
    // A file whose index sits behind 100 KiB of padding: past the 64 KiB the runner looks at.
    const padded = Buffer.concat([readFileSync(join(dir, 'faststart.mp4')).subarray(0, 32), box('free', 100 * 1024)]);
    writeFileSync(join(dir, 'padded-head.mp4'), padded);
    const port = await freePort();
    python = spawn('python3', ['-m', 'http.server', String(port), '--bind', '127.0.0.1', '--directory', dir], { stdio: 'ignore' });
    plain = `http://127.0.0.1:${port}`;
    ranged = await startMediaServer({ root: dir });
    for (let i = 0; ; i++) {
      if ((await fetch(`${plain}/plain.mkv`).then((r) => r.status, () => 0)) === 200) break;
      if (i > 100) throw new Error('python3 -m http.server did not start');
      await new Promise((r) => setTimeout(r, 50));
    }
  });

  after(async () => {
    python?.kill();
    await ranged?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describe('which sources ffmpeg can read from their URL', () => {
    it('a file head: an MP4 or MOV only when its index comes before its media; other containers always', () => {
      const head = (name: string) => readFileSync(join(dir, name)).subarray(0, 64 * 1024);
      const verdicts = Object.fromEntries([...Object.keys(FILES), 'padded-head.mp4'].map((n) => [n, streamsFrontToBack(head(n))]));
      expect(verdicts).to.deep.equal({
        'moov-last.mp4': false, 'faststart.mp4': true, 'fragmented.mp4': true, 'moov-last.mov': false, 'faststart.m4a': true,
        'plain.mkv': true, 'plain.webm': true, 'audio.mp3': true, 'audio.ogg': true, 'padded-head.mp4': false,
      });
    });

    it('a server that answers range requests: any file; one without (python http.server): only what reads front to back', async () => {
      const verdict = async (base: string, name: Name) => (await readableFromUrl({ format_id: 'x', url: `${base}/${name}` }, 5)).readable;
      expect(await verdict(ranged.baseUrl, 'moov-last.mp4')).to.equal('seekable');
      expect(await verdict(plain, 'moov-last.mp4')).to.equal(false);
      expect(await verdict(plain, 'moov-last.mov')).to.equal(false);
      expect(await verdict(plain, 'faststart.mp4')).to.equal('front-to-back');
      expect(await verdict(plain, 'plain.webm')).to.equal('front-to-back');
      expect(await readableFromUrl({ format_id: 'x', url: `${plain}/missing.mp4` }, 5)).to.deep.equal({ readable: false });
    });

    it('the same request tells the file\'s size, from either server, readable or not (the job\'s storage reservation)', async () => {
      const size = (name: Name) => statSync(join(dir, name)).size;
      const bytes = async (base: string, name: Name) => (await readableFromUrl({ format_id: 'x', url: `${base}/${name}` }, 5)).bytes;
      expect(await bytes(ranged.baseUrl, 'moov-last.mp4'), 'Content-Range total').to.equal(size('moov-last.mp4'));
      expect(await bytes(plain, 'faststart.mp4'), 'Content-Length').to.equal(size('faststart.mp4'));
      expect(await bytes(plain, 'moov-last.mov'), 'not readable, still sized').to.equal(size('moov-last.mov'));
    });
  });

  describe('the check of a delivered file', () => {
    const expect6s = (format: Expected['container']['format'], video?: string, audio?: string): Expected => ({
      container: containerFor({ format, audioOnly: false }), ...(video ? { video } : {}), ...(audio ? { audio } : {}), durationSeconds: 6,
    });

    it('passes what was asked for, in every container, read from disk and from a pipe alike', async () => {
      const cases: [Name, Expected][] = [
        ['faststart.mp4', expect6s('mp4', 'h264', 'aac')],
        ['fragmented.mp4', expect6s('mp4', 'h264', 'aac')],
        ['moov-last.mov', expect6s('mov', 'h264', 'aac')],
        ['faststart.m4a', expect6s('m4a', undefined, 'aac')],
        ['plain.mkv', expect6s('mkv', 'h264', 'aac')],
        ['plain.webm', expect6s('webm', 'vp9', 'opus')],
        ['audio.mp3', expect6s('mp3', undefined, 'mp3')],
        ['audio.ogg', expect6s('ogg', undefined, 'opus')],
      ];
      for (const [name, expected] of cases) {
        const fromDisk = await inspectFile('ffprobe', join(dir, name), 6);
        expect(fromDisk, name).to.not.equal(undefined);
        expect(mismatch(expected, fromDisk!), `${name} from disk`).to.equal(undefined);
        if (name === 'faststart.mp4' || name === 'plain.mkv' || name === 'audio.ogg' || name === 'fragmented.mp4') {
          const copy = inspectStream('ffprobe');
          await pipeline(createReadStream(join(dir, name)), copy.input);
          expect(mismatch(expected, (await copy.observed)!), `${name} from a pipe`).to.equal(undefined);
        }
      }
    });

    it('fails a file with no frames, a truncated file, a missing or extra stream, a wrong codec or container, a wrong length', async () => {
      const file = (name: string) => join(dir, name);
      // What the runner once delivered as Completed: ffmpeg copying an MP4 it could not seek in (no range support).
      await ffmpeg(['-i', `${plain}/moov-last.mp4`, '-c', 'copy', '-f', 'mp4', '-movflags', '+frag_keyframe+empty_moov', file('empty.mp4')]).catch(() => undefined);
      const empty = await inspectFile('ffprobe', file('empty.mp4'), 6);
      expect(empty && mismatch(expect6s('mp4', 'h264', 'aac'), empty)).to.match(/no packets|could not/);
      // A Matroska file cut off at 40%: its header still says 6 s.
      const mkv = readFileSync(file('plain.mkv'));
      writeFileSync(file('cut.mkv'), mkv.subarray(0, Math.floor(mkv.length * 0.4)));
      const cut = await inspectFile('ffprobe', file('cut.mkv'), 6);
      expect(mismatch(expect6s('mkv', 'h264', 'aac'), cut!)).to.match(/spans/);
      const good = (await inspectFile('ffprobe', file('plain.mkv'), 6))!;
      expect(mismatch(expect6s('mkv', 'h264'), good)).to.equal('has audio that was not asked for');
      expect(mismatch(expect6s('mkv', 'h264', 'opus'), good)).to.equal('audio is aac, not opus');
      // Matroska and WebM share a demuxer; what tells a WebM is that it holds only WebM's codecs, checked above.
      const mp4 = (await inspectFile('ffprobe', file('faststart.mp4'), 6))!;
      expect(mismatch(expect6s('mov', 'h264', 'aac'), mp4)).to.equal('container is mp4 (isom), not mov');
      expect(mismatch(expect6s('mkv', 'h264', 'aac'), mp4)).to.match(/^container is mov,mp4,m4a/);
      expect(mismatch({ ...expect6s('mkv', 'h264', 'aac'), durationSeconds: 3 }, good)).to.match(/^runs 6\.\d+ s, asked for 3\.000 s$/);
      expect(mismatch({ ...expect6s('mkv', 'h264', 'aac'), durationSeconds: 9 }, good)).to.match(/^video spans/);
      const audioOnly = (await inspectFile('ffprobe', file('faststart.m4a'), 6))!;
      expect(mismatch(expect6s('m4a', 'h264', 'aac'), audioOnly)).to.equal('has 0 video streams, not 1');
    });

    it('reads a long stream from a pipe whole (thousands of packets), and does not count cover art as video', async () => {
      const long = join(dir, 'long-fragmented.mp4');
      await ffmpeg(['-f', 'lavfi', '-i', 'testsrc=size=160x120:rate=25:duration=60', '-f', 'lavfi', '-i', 'sine=duration=60', ...H264, '-c:a', 'aac',
        '-movflags', '+frag_keyframe+empty_moov', long]);
      const copy = inspectStream('ffprobe');
      await pipeline(createReadStream(long), copy.input);
      const observed = (await copy.observed)!;
      expect(mismatch({ ...expect6s('mp4', 'h264', 'aac'), durationSeconds: 60 }, observed)).to.equal(undefined);
      expect(observed.streams.map((s) => [s.type, s.first, Math.round(s.end!)])).to.deep.equal([['video', 0, 60], ['audio', 0, 60]]);
      // An MP3 with its cover as an attached picture: audio only, as asked.
      const png = join(dir, 'cover.png');
      await ffmpeg(['-f', 'lavfi', '-i', 'color=c=red:size=64x64', '-frames:v', '1', png]);
      const withCover = join(dir, 'cover.mp3');
      await ffmpeg(['-i', join(dir, 'audio.mp3'), '-i', png, '-map', '0', '-map', '1', '-c', 'copy', '-disposition:v', 'attached_pic', withCover]);
      expect(mismatch(expect6s('mp3', undefined, 'mp3'), (await inspectFile('ffprobe', withCover, 6))!)).to.equal(undefined);
    });

    it('a video stream that starts late (a copy cut before its first keyframe) fails even when the audio is whole', () => {
      const observed: Observed = {
        formatName: 'mov,mp4,m4a,3gp,3g2,mj2',
        streams: [{ index: 0, type: 'video', codec: 'h264', first: 4, end: 6 }, { index: 1, type: 'audio', codec: 'aac', first: 0, end: 6 }],
      };
      expect(mismatch(expect6s('mp4', 'h264', 'aac'), observed)).to.equal('video starts at 4.000 s');
    });

    it('compares with the request, not the plan: a clip asked is the clip\'s length, so a whole file never passes for it', async () => {
      const whole = (await inspectFile('ffprobe', join(dir, 'plain.mkv'), 6))!;
      const probed = await ffprobe('ffprobe', join(dir, 'plain.mkv'));
      if (!probed.ok) throw new Error('ffprobe failed');
      const container = containerFor({ format: 'mkv', audioOnly: false });
      const spec = { videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23 } as const;
      // What a runner that dropped the clip planned: the whole media, and a check of the plan would pass it.
      const lost = muxPlan([{ path: join(dir, 'plain.mkv'), probed: probed.probed, carriesAudio: true }], '/w/out.mkv', container, spec)!;
      expect(mismatch(expectedOf(lost, container, { mediaSeconds: 6 }), whole), 'the whole media, asked for').to.equal(undefined);
      const asked = { clip: clipOf({ clipStart: '00:01', clipEnd: '00:03' })!, mediaSeconds: 6 };
      expect(expectedOf(lost, container, asked).durationSeconds).to.equal(2);
      expect(wrongDelivery(expectedOf(lost, container, asked), whole, 1000, 1000)).to.match(/^runs 6\.\d+ s, asked for 2\.000 s$/);
      // A clip to the end: from its start to the media's end.
      expect(expectedOf(lost, container, { clip: clipOf({ clipStart: '4' })!, mediaSeconds: 6 }).durationSeconds).to.equal(2);
      expect(mismatch(expectedOf(lost, container, { clip: clipOf({ clipStart: '4' })!, mediaSeconds: 6 }), whole)).to.match(/^runs 6\.\d+ s, asked for 2\.000 s$/);
    });

    it('a delivery whose mux lost the clip the spec asks for fails output_unverified and stores nothing; the clip itself is delivered', async () => {
      const source = join(dir, 'faststart.mp4');
      const probed = await ffprobe('ffprobe', source);
      if (!probed.ok) throw new Error('ffprobe failed');
      const logger = pino({ level: process.env.LOG_LEVEL ?? 'silent' });
      // A file muxed then checked (mkv), and one streamed into local storage's staged file, checked before it is published (mp4).
      for (const format of ['mkv', 'mp4'] as const) {
        const spec = parseSpec(JSON.stringify({ url: 'https://media.example/v', format, clipStart: '00:01', clipEnd: '00:03' }));
        const container = containerFor(spec);
        const attempt = async (clip: Clip | undefined) => {
          const work = mkdtempSync(join(dir, 'deliver-'));
          const store = join(work, 'store');
          const provider = new LocalStorageProvider({ dir: store, publicBaseUrl: 'http://127.0.0.1:8080', secret: 'verify-test-secret-0123456789' });
          const steps = new JobSteps(new StatusReporter({ namespace: 'default', name: 'verify', logger, sink: { patch: async () => undefined } }), logger);
          const delivered = await deliver({
            spec, container, ...(clip ? { clip } : {}), tools: { ffmpeg: 'ffmpeg', ffprobe: 'ffprobe' },
            destination: { provider, baseFolder: 'videos' }, dlDir: join(work, 'download'), outDir: mkdtempSync(join(work, 'output-')), steps, logger,
            target: { ext: container.ext, contentType: container.contentType, jobId: '00000001-aaaa-4bbb-8ccc-000000000001', filename: undefined, folder: undefined },
          }, [{ path: source, probed: probed.probed, carriesAudio: true }], false);
          return { store, delivered };
        };
        // The mux given no clip (as when a runner dropped one): the whole 6 s, which the request's clip refuses.
        const lost = await attempt(undefined);
        expect(lost.delivered.ok, format).to.equal(false);
        expect(!lost.delivered.ok && lost.delivered.report, format).to.include({ outcome: 'failed', category: 'output_unverified', errorType: 'error' });
        expect(existsSync(join(lost.store, 'videos')), `${format}: nothing stored`).to.equal(false);
        const kept = await attempt(clipOf(spec));
        expect(kept.delivered.ok, `${format}: ${JSON.stringify(!kept.delivered.ok && kept.delivered.report)}`).to.equal(true);
        const file = join(kept.store, kept.delivered.ok ? kept.delivered.uploaded.result.key : '');
        const clipped = (await inspectFile('ffprobe', file, 2))!;
        expect(Math.max(...clipped.streams.map((x) => x.end ?? 0)), format).to.be.closeTo(2, 0.1);
      }
    });

    it('fails an empty file and one stored short, before looking inside', () => {
      const observed: Observed = { formatName: 'ogg', streams: [{ index: 0, type: 'audio', codec: 'opus', first: 0, end: 6 }] };
      expect(wrongDelivery(expect6s('ogg', undefined, 'opus'), observed, 0, 0)).to.equal('the file is empty');
      expect(wrongDelivery(expect6s('ogg', undefined, 'opus'), observed, 1000, 999)).to.equal('999 bytes stored of 1000 written');
      expect(wrongDelivery(expect6s('ogg', undefined, 'opus'), undefined, 1000, 1000)).to.equal('ffprobe could not read the file');
      expect(wrongDelivery(expect6s('ogg', undefined, 'opus'), observed, 1000, 1000)).to.equal(undefined);
    });
  });
});

/** An ISO BMFF box of `size` bytes (header included), zero-filled. */
function box(type: string, size: number): Buffer {
  const b = Buffer.alloc(size);
  b.writeUInt32BE(size, 0);
  b.write(type, 4, 'latin1');
  return b;
}
