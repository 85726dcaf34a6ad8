// AbortMultipartUpload for s3rver, which lacks it (3.7.1 answers 405), and
// a look at the multipart uploads it holds, which it cannot list either.
// A front on a loopback port passes every request on to s3rver unchanged,
// except `DELETE /<bucket>/<key>?uploadId=<id>`, which it answers as S3
// does: 204 after removing the upload and its parts from s3rver's own store
// (the directory its CompleteMultipartUpload removes), 404 NoSuchUpload when
// there is none. Tests that need an upload to be really gone use the front's
// endpoint in place of s3rver's. With `partBytesPerSecond`, the front
// passes UploadPart bodies on at that pace, so a whole-system test can stop
// the service while a part is on its way.
import { readFile, readdir, rm } from 'node:fs/promises';
import http from 'node:http';
import { Transform } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { RunningS3rver } from './s3rver.js';

export interface S3rverWithAbort {
  /** Use with forcePathStyle, as s3rver's. */
  endpoint: string;
  /** The multipart uploads begun in `bucket` and neither completed nor aborted: each one's key and how many parts it holds. */
  pendingUploads(bucket: string): Promise<Array<{ key: string; parts: number }>>;
  /** An outage: every connection cut and the port closed (s3rver keeps its files), until resume(). */
  pause(): Promise<void>;
  /** Listen again on the same port. */
  resume(): Promise<void>;
  close(): Promise<void>;
}

/** Where s3rver's FilesystemStore keeps a bucket's unfinished uploads, one directory per upload id. */
const uploadsDir = (s3: RunningS3rver, bucket: string) => path.join(s3.directory, bucket, '._S3rver_uploads');

const noSuchUpload = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message></Error>';

/** Passes bytes on at `bytesPerSecond`, a tenth of a second's worth at a time. */
function pace(bytesPerSecond: number): Transform {
  const slice = Math.max(1, Math.floor(bytesPerSecond / 10));
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      void (async () => {
        for (let at = 0; at < chunk.length; at += slice) {
          this.push(chunk.subarray(at, at + slice));
          await sleep(100);
        }
      })().then(() => done(), done);
    },
  });
}

export async function s3rverWithAbort(s3: RunningS3rver, opts: { partBytesPerSecond?: number } = {}): Promise<S3rverWithAbort> {
  const upstream = new URL(s3.endpoint);
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://front');
    const uploadId = url.searchParams.get('uploadId');
    if (req.method === 'DELETE' && uploadId !== null) {
      req.resume();
      void abort(url.pathname.split('/')[1] ?? '', uploadId).then((found) => {
        if (found) res.writeHead(204).end();
        else res.writeHead(404, { 'content-type': 'application/xml' }).end(noSuchUpload);
      }, () => res.writeHead(500).end());
      return;
    }
    const up = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    // A client cut off mid-body (an outage's closed connections) cuts the upstream request too: s3rver would
    // otherwise wait for the rest of the body, and its close() for that request, until its 300 s request timeout.
    req.on('close', () => {
      if (!req.complete) up.destroy();
    });
    const paced = opts.partBytesPerSecond && req.method === 'PUT' && url.searchParams.has('partNumber');
    if (paced) req.pipe(pace(opts.partBytesPerSecond!)).pipe(up);
    else req.pipe(up);
  });

  async function abort(bucket: string, uploadId: string): Promise<boolean> {
    // s3rver's upload ids are hex; anything else names no upload (and no path).
    if (!/^[A-Za-z0-9]+$/.test(uploadId) || !/^[a-z0-9.-]+$/.test(bucket)) return false;
    const dir = path.join(uploadsDir(s3, bucket), uploadId);
    const there = (await readdir(uploadsDir(s3, bucket)).catch((): string[] => [])).includes(uploadId);
    if (there) await rm(dir, { recursive: true, force: true });
    return there;
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const closed = () => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    pause: closed,
    resume: () => new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    }),
    pendingUploads: async (bucket) => {
      const ids = await readdir(uploadsDir(s3, bucket)).catch((): string[] => []);
      const found = await Promise.all(ids.sort().map(async (id) => {
        const dir = path.join(uploadsDir(s3, bucket), id);
        // initiateUpload writes `key` and `metadata`; putPart `<n>` and `<n>.md5`. An upload completed or
        // aborted between the listing and these reads is gone: not pending (ENOENT), not an error.
        const read = await Promise.all([readFile(path.join(dir, 'key'), 'utf8'), readdir(dir)]).catch((err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT') return undefined;
          throw err;
        });
        return read && { key: read[0], parts: read[1].filter((f) => /^\d+$/.test(f)).length };
      }));
      return found.filter((u): u is { key: string; parts: number } => u !== undefined);
    },
    close: () => (server.listening ? closed() : Promise.resolve()),
  };
}
