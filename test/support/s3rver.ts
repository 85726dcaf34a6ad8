// A real S3 protocol server for tests: s3rver in-process, on an ephemeral
// loopback port, storing into a fresh temp directory that stop() removes.
//
// What s3rver checks (s3rver 3.7.1, lib/middleware/authentication.js): the
// access key id must be a registered one (default S3RVER / S3RVER), else
// InvalidAccessKeyId; SigV4 signatures themselves are NOT verified (only V2
// ones are), so a wrong secret key with the right key id is accepted.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';

export const S3RVER_ACCESS_KEY = 'S3RVER';
export const S3RVER_SECRET_KEY = 'S3RVER';

/** An S3 event s3rver emitted: `ObjectCreated:Put` (PutObject), `ObjectCreated:Post` (CompleteMultipartUpload), `ObjectRemoved:Delete`. */
export interface S3rverEvent {
  eventName: string;
  bucket: string;
  key: string;
}

interface S3rverEventRecord {
  Records?: Array<{ eventName?: string; s3?: { bucket?: { name?: string }; object?: { key?: string } } }>;
}

export interface RunningS3rver {
  /** e.g. http://127.0.0.1:41234; use with forcePathStyle. */
  endpoint: string;
  port: number;
  /** Temp directory holding the buckets (s3rver's own layout). */
  directory: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Every object event so far, oldest first: how tests see which S3 calls really happened. */
  events: S3rverEvent[];
  /** Stop the server and delete its files; safe to call twice. */
  stop(): Promise<void>;
}

export async function startS3rver(opts: { buckets?: string[]; port?: number } = {}): Promise<RunningS3rver> {
  const directory = await mkdtemp(path.join(os.tmpdir(), 'mediajobs-s3rver-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: opts.port ?? 0,
    silent: true,
    directory,
    // Bucket names must come from the path: with vhostBuckets on, s3rver would
    // read any non-IP, non-localhost Host header as a bucket name.
    vhostBuckets: false,
    configureBuckets: (opts.buckets ?? []).map((name) => ({ name, configs: [] })),
  });
  const events: S3rverEvent[] = [];
  // s3rver is a Koa app; it emits S3-notification-shaped 'event's on it.
  (server as unknown as NodeJS.EventEmitter).on('event', (e: S3rverEventRecord) => {
    for (const r of e.Records ?? []) {
      events.push({ eventName: r.eventName ?? '', bucket: r.s3?.bucket?.name ?? '', key: r.s3?.object?.key ?? '' });
    }
  });
  const address = await server.run();
  let stopped = false;
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    port: address.port,
    directory,
    accessKeyId: S3RVER_ACCESS_KEY,
    secretAccessKey: S3RVER_SECRET_KEY,
    events,
    async stop() {
      if (stopped) return;
      stopped = true;
      // close() waits for every connection to end; one a test cut mid-request (an outage) would hold it for
      // s3rver's 300 s request timeout.
      (server as unknown as { httpServer?: { closeAllConnections(): void } }).httpServer?.closeAllConnections();
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
