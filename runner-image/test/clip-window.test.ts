// A clip's window (clip-window.ts) and the first look that feeds it
// (source-read.ts readableFromUrl) against sources that misbehave: a size
// that cannot be true, a file that changes between the two reads, an index
// too large to hold, a server that trickles. Each time the window is given up
// and the clip is read from the URL as before; the job never fails for it.
// A faststart MP4 made by ffmpeg, served on loopback by a server without
// range support whose answers each case sets.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { pino } from 'pino';
import { fetchClipWindow, fetchPrefixWindow, frontIndexEnd } from '../src/clip-window.js';
import { readableFromUrl } from '../src/source-read.js';

const run = promisify(execFile);

/** What the server sends next: its body, the Content-Length it claims, and how (all at once, trickled, or stalled after some bytes). */
interface Answer {
  body: Buffer;
  contentLength?: number;
  trickle?: { bytes: number; everyMs: number };
  stallAfter?: number;
}

describe('runner: a clip\'s window from a source that misbehaves', function () {
  this.timeout(60_000);
  let dir: string;
  let mp4: Buffer;
  let server: Server;
  let url: string;
  let answer: Answer;
  let gets = 0;
  const open = new Set<ServerResponse>();
  const clip = { start: 10, end: 12 };
  const tools = (lines: string[] = []) => ({
    ffprobe: 'ffprobe', socketTimeoutSeconds: 5,
    logger: pino({ level: 'debug' }, new Writable({ write: (c: Buffer, _e, cb) => { lines.push(c.toString()); cb(); } })),
  });
  const format = () => ({ format_id: 'x', url });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'runner-clip-window-'));
    await run('ffmpeg', [
      '-hide_banner', '-loglevel', 'error', '-nostdin', '-y',
      '-f', 'lavfi', '-i', 'testsrc2=size=320x180:rate=30:duration=30', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000:duration=30',
      '-c:v', 'libx264', '-preset', 'ultrafast', '-g', '60', '-c:a', 'aac', '-movflags', '+faststart', join(dir, 'clip.mp4'),
    ]);
    mp4 = readFileSync(join(dir, 'clip.mp4'));
    // Without range support: the whole answer whatever is asked.
    server = createServer((_req, res) => {
      gets++;
      const a = answer;
      open.add(res);
      res.once('close', () => open.delete(res));
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(a.contentLength ?? a.body.length) });
      if (a.stallAfter !== undefined) {
        res.write(a.body.subarray(0, a.stallAfter));
        return;
      }
      if (!a.trickle) {
        res.end(a.body);
        return;
      }
      const { bytes, everyMs } = a.trickle;
      let at = 0;
      const next = () => {
        if (res.destroyed) return;
        if (at >= a.body.length) return void res.end();
        res.write(a.body.subarray(at, at + bytes));
        at += bytes;
        setTimeout(next, everyMs);
      };
      next();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/clip.mp4`;
  });

  beforeEach(() => {
    answer = { body: mp4 };
  });

  after(async () => {
    for (const res of open) res.destroy();
    await new Promise((r) => server?.close(r));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** The first look at the source, as a clip's read takes it: the index through the moov. */
  async function firstLook() {
    const head = await readableFromUrl(format(), 5, undefined, true);
    expect(head.readable).to.equal('front-to-back');
    expect(head.index, 'the index the window starts from').to.not.equal(undefined);
    return head.index!;
  }

  it('the same file twice: the window holds the clip (so the cases below can tell)', async () => {
    const index = await firstLook();
    const window = await fetchPrefixWindow(format(), mp4.length, clip, mkdtempSync(join(dir, 'w-')), tools(), index);
    expect(window).to.not.equal(undefined);
    // Read from the start to the clip's span's end: the file's own bytes that far.
    const through = window!.fetchedBytes - index.length;
    expect(through, 'read past the clip\'s start').to.be.above(mp4.length * 0.3);
    expect(readFileSync(window!.path).subarray(0, through).equals(mp4.subarray(0, through))).to.equal(true);
  });

  it('a size no file can have (Content-Length of 2^53-1): no window, and no error, from either window', async () => {
    const lying = Number.MAX_SAFE_INTEGER;
    const index = await firstLook();
    const lines: string[] = [];
    expect(await fetchPrefixWindow(format(), lying, clip, mkdtempSync(join(dir, 'w-')), tools(lines), index)).to.equal(undefined);
    expect(await fetchClipWindow(format(), lying, clip, mkdtempSync(join(dir, 'w-')), tools(lines))).to.equal(undefined);
    const logged = lines.map((l) => JSON.parse(l) as { level: number; err?: { code?: string } });
    expect(logged.filter((l) => l.level === 20 && l.err?.code === 'EFBIG'), 'logged at debug').to.have.length(2);
  });

  it('a file that changed between the first look and the window\'s read: no window, whether its length or its index differs', async () => {
    const index = await firstLook();
    // Longer: a new file behind the same URL.
    answer = { body: Buffer.concat([mp4, Buffer.alloc(4096, 1)]) };
    expect(await fetchPrefixWindow(format(), mp4.length, clip, mkdtempSync(join(dir, 'w-')), tools(), index), 'another length').to.equal(undefined);
    // As long, but one byte of the index differs (ftyp's minor version): another file's index is not this one's.
    const other = Buffer.from(mp4);
    other[12] = other[12]! ^ 0xff;
    answer = { body: other };
    const before = gets;
    expect(await fetchPrefixWindow(format(), mp4.length, clip, mkdtempSync(join(dir, 'w-')), tools(), index), 'another index').to.equal(undefined);
    expect(gets - before, 'the second read was made').to.equal(1);
  });

  it('an index above 8 MiB is not held in memory: the first look tells front-to-back and keeps no index', async () => {
    // ftyp, a 9 MiB moov (its body zeros; only its size counts here), a small mdat.
    const ftyp = mp4.subarray(0, mp4.readUInt32BE(0));
    const moov = Buffer.alloc(9 * 1024 * 1024);
    moov.writeUInt32BE(moov.length, 0);
    moov.write('moov', 4, 'latin1');
    const mdat = Buffer.alloc(4096);
    mdat.writeUInt32BE(mdat.length, 0);
    mdat.write('mdat', 4, 'latin1');
    const body = Buffer.concat([ftyp, moov, mdat]);
    expect(frontIndexEnd(body, body.length), 'an index the window could fetch to disk').to.be.a('number');
    answer = { body };
    const head = await readableFromUrl(format(), 5, undefined, true);
    expect(head).to.deep.equal({ readable: 'front-to-back', bytes: body.length });
  });

  it('the first look\'s timeout is one of silence: an index trickled over more than the timeout arrives, a stall does not hang it', async () => {
    const end = frontIndexEnd(mp4, mp4.length);
    expect(end).to.be.a('number');
    // 1 s timeout; the index comes 2 KiB every 100 ms: over a second in all.
    const trickle = { bytes: 2048, everyMs: 100 };
    expect(((end as number) / trickle.bytes) * trickle.everyMs, 'ms to send the index').to.be.above(1000);
    answer = { body: mp4, trickle };
    const head = await readableFromUrl(format(), 1, undefined, true);
    expect(head.index?.length).to.equal(end);
    answer = { body: mp4, stallAfter: 100 };
    const stalled = await readableFromUrl(format(), 1, undefined, true);
    expect(stalled).to.deep.equal({ readable: 'front-to-back', bytes: mp4.length });
  });
});
