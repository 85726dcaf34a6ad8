// Measuring an audio rendition yt-dlp knows no codec or bitrate of (HLS
// EXT-X-MEDIA): the rules choose among renditions by what is measured, so a
// rendition whose first read fails is read once more rather than left out
// (left out, it loses to a worse one: a 64k mono track delivered for a
// 128k stereo request). Real ffprobe on a file ffmpeg made, over loopback HTTP.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { measureAudio } from '../src/ffmpeg.js';

const run = promisify(execFile);

describe('runner: measuring an audio rendition', function () {
  this.timeout(60_000);
  let dir: string;
  let audio: Buffer;
  let server: Server;
  let base: string;
  /** Requests seen per path, and how many of the first ones to refuse with 503. */
  const seen = new Map<string, number>();
  const refuseFirst = new Map<string, number>();

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'runner-measure-'));
    const file = join(dir, 'a.m4a');
    await run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=8',
      '-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-movflags', '+faststart', file]);
    audio = readFileSync(file);
    server = createServer((req, res) => {
      const n = (seen.get(req.url!) ?? 0) + 1;
      seen.set(req.url!, n);
      if (n <= (refuseFirst.get(req.url!) ?? 0)) {
        res.writeHead(503, { 'content-type': 'text/plain' }).end('busy');
        return;
      }
      res.writeHead(200, { 'content-type': 'audio/mp4', 'content-length': audio.length }).end(audio);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(() => {
    server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const rendition = (path: string) => ({ format_id: path.slice(1), url: `${base}${path}`, ext: 'm4a' }) as Parameters<typeof measureAudio>[1];

  it('reads the codec and the bitrate from the first seconds', async () => {
    const m = await measureAudio('ffprobe', rendition('/plain'), { timeoutSeconds: 10 });
    expect(m?.codec).to.equal('aac');
    expect(m?.kbps).to.be.within(100, 160);
    expect(seen.get('/plain')).to.equal(1);
  });

  it('reads once more when the first read is refused, and measures the rendition', async () => {
    refuseFirst.set('/flaky', 1);
    const m = await measureAudio('ffprobe', rendition('/flaky'), { timeoutSeconds: 10 });
    expect(m?.codec).to.equal('aac');
    expect(m?.kbps).to.be.within(100, 160);
    expect(seen.get('/flaky')).to.equal(2);
  });

  it('gives up after the second refusal: the rendition is unmeasured', async () => {
    refuseFirst.set('/down', 100);
    expect(await measureAudio('ffprobe', rendition('/down'), { timeoutSeconds: 10 })).to.equal(undefined);
    expect(seen.get('/down')).to.equal(2);
  });
});
