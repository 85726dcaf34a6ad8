// What a cancelled runner leaves behind (docs/adr/0013): its uploads stop
// with nothing stored (an S3 multipart upload aborted, as seen on the wire in
// front of s3rver; a staged local file discarded), files it stored before
// the cancellation can be removed, and every process below it, grandchildren
// included, is found and signalled.
import { expect } from 'chai';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { LocalStorageProvider } from '@mediajobs/lib/storage/index';
import { S3StorageProvider } from '@mediajobs/lib/storage/s3';
import { startS3rver, type RunningS3rver } from '../../test/support/s3rver.js';
import { descendants, killProcessTree, liveSignalled, runProcess } from '../src/child.js';
import { CancellableProvider } from '../src/destination.js';

const MiB = 1024 * 1024;

/** A pass-through proxy in front of s3rver naming each S3 call (s3rver itself reports nothing of an unfinished multipart upload). */
async function recordingProxy(target: string): Promise<{ endpoint: string; ops: { op: string; key: string }[]; close(): Promise<void> }> {
  const upstream = new URL(target);
  const ops: { op: string; key: string }[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://proxy');
    const q = url.searchParams;
    const op = req.method === 'POST' && q.has('uploads') ? 'CreateMultipartUpload'
      : req.method === 'PUT' && q.has('uploadId') ? 'UploadPart'
        : req.method === 'POST' && q.has('uploadId') ? 'CompleteMultipartUpload'
          : req.method === 'DELETE' && q.has('uploadId') ? 'AbortMultipartUpload' : `${req.method}`;
    ops.push({ op, key: decodeURIComponent(url.pathname.split('/').slice(2).join('/')) });
    const up = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ops,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

/** A body that never ends on its own (ffmpeg still muxing a long download). */
function endless(): Readable {
  return new Readable({
    read() {
      setTimeout(() => this.push(Buffer.alloc(MiB, 7)), 5);
    },
  });
}

describe('runner: a cancelled job leaves nothing behind', function () {
  this.timeout(60_000);
  let s3: RunningS3rver;
  const dirs: string[] = [];
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'mj-cancel-'));
    dirs.push(d);
    return d;
  };

  before(async () => {
    s3 = await startS3rver({ buckets: ['media'] });
  });
  after(async () => {
    await s3?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('aborts an S3 multipart upload in progress: no object, never completed', async () => {
    const proxy = await recordingProxy(s3.endpoint);
    try {
      const inner = new S3StorageProvider({
        endpoint: proxy.endpoint, bucket: 'media', region: 'us-east-1', accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey,
        forcePathStyle: true, partSize: 5 * MiB,
      });
      const abort = new AbortController();
      const provider = new CancellableProvider(inner, abort.signal);
      const key = 'videos/cancelled.mp4';
      const upload = provider.upload(key, endless(), { contentType: 'video/mp4' });
      upload.catch(() => undefined);
      for (let i = 0; i < 400 && !proxy.ops.some((o) => o.op === 'UploadPart'); i++) await new Promise((r) => setTimeout(r, 25));
      expect(proxy.ops.map((o) => o.op), 'a part was on its way').to.include('UploadPart');
      abort.abort();
      const err = await upload.then(() => undefined, (e: unknown) => e);
      expect(err, 'the upload fails').to.be.instanceOf(Error);
      const ops = proxy.ops.filter((o) => o.key === key).map((o) => o.op);
      expect(ops).to.include('AbortMultipartUpload').and.not.include('CompleteMultipartUpload');
      expect((await fetch(await inner.presign(key, 60))).status).to.equal(404);
      expect(provider.deliveredKeys()).to.deep.equal([]);
    } finally {
      await proxy.close();
    }
  });

  it('refuses an upload once cancelled, discards a staged file instead of publishing it, and removes what it delivered before', async () => {
    const dir = tempDir();
    const abort = new AbortController();
    const provider = new CancellableProvider(new LocalStorageProvider({ dir, publicBaseUrl: 'http://127.0.0.1:1' }), abort.signal);
    await provider.upload('videos/a.mp4', Readable.from([Buffer.from('first')]));
    await provider.upload('videos/b.vtt', Readable.from([Buffer.from('second')]));
    expect(provider.deliveredKeys().sort()).to.deep.equal(['videos/a.mp4', 'videos/b.vtt']);
    const staged = await provider.stage!();
    writeSync(staged.fd, 'muxed so far');
    abort.abort();
    const refused = await staged.publish('videos/c.mp4').then(() => undefined, (e: Error) => e.name);
    expect(refused).to.equal('UploadCancelled');
    expect(await provider.upload('videos/d.mp4', Readable.from([Buffer.from('late')])).then(() => undefined, (e: Error) => e.name))
      .to.equal('UploadCancelled');
    expect(await provider.removeDelivered()).to.equal(2);
    const left = readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name);
    expect(left, 'nothing stored, nothing staged').to.deep.equal([]);
  });

  it('tells of each file stored and each deleted again, which status.storedFiles records; never of one a cancellation kept from being published', async () => {
    const dir = tempDir();
    const abort = new AbortController();
    const told: [string, number | null][] = [];
    const provider = new CancellableProvider(new LocalStorageProvider({ dir, publicBaseUrl: 'http://127.0.0.1:1' }), abort.signal, (k, n) => told.push([k, n]));
    await provider.upload('videos/a.mp4', Readable.from([Buffer.from('first')]));
    const staged = await provider.stage!();
    writeSync(staged.fd, 'muxed');
    await staged.publish('videos/b.mp4');
    await provider.delete('videos/a.mp4'); // failed its check: deleted by the runner itself
    await provider.delete('videos/never-stored.mp4');
    // Cancelled: what it removes is told of; a file published after the cancellation is discarded, never told of.
    abort.abort();
    const late = await provider.stage!();
    writeSync(late.fd, 'late');
    expect(await late.publish('videos/c.mp4').then(() => undefined, (e: Error) => e.name)).to.equal('UploadCancelled');
    expect(await provider.removeDelivered()).to.equal(1);
    expect(told).to.deep.equal([['videos/a.mp4', 5], ['videos/b.mp4', 5], ['videos/a.mp4', null], ['videos/b.mp4', null]]);
  });

  it('finds and stops every process the runner started, grandchildren included', async () => {
    // sh starts two sleeps of its own: a child that starts its own children, as yt-dlp starts ffmpeg.
    const run = runProcess('sh', ['-c', 'sleep 30 & sleep 30 & wait']);
    let below: number[] = [];
    for (let i = 0; i < 100 && below.length < 2; i++) {
      await new Promise((r) => setTimeout(r, 20));
      const sh = descendants().find((pid) => readFileSync(`/proc/${pid}/stat`, 'utf8').includes('(sh)'));
      below = sh === undefined ? [] : [sh, ...descendants(sh)];
    }
    expect(below.length, 'sh and its two sleeps').to.equal(3);
    expect(killProcessTree('SIGTERM')).to.equal(3);
    const r = await run;
    expect(r.signal).to.equal('SIGTERM');
    for (let i = 0; i < 100 && liveSignalled() > 0; i++) await new Promise((res) => setTimeout(res, 20));
    expect(below.filter((pid) => existsSync(`/proc/${pid}/stat`) && !zombie(pid)), 'still running').to.deep.equal([]);
    expect(liveSignalled()).to.equal(0);
  });
});

function zombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}
