// A job cancelled while its runner uploads to managed storage on S3 leaves
// nothing in the bucket (docs/adr/0012, 0013). The row turns Cancelled
// first; the runner, stopped after, aborts its multipart upload and deletes
// what it had stored, through its upload grant. Real parts throughout: the
// jobs row in Postgres and lib's cancelJob, the gateway's grant route over
// the broker and the jobs table, the operator's runner document, the
// runner's destination and its cancellable uploads, and s3rver (with the
// AbortMultipartUpload it lacks, test/support/s3rver-abort.ts).
import { expect } from 'chai';
import express from 'express';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { cancelJob, grantJobState } from '@mediajobs/lib/db/jobs';
import { createLogger } from '@mediajobs/lib/logger';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { PgGrantLedger } from '@mediajobs/lib/storage/grant-ledger';
import { S3StorageProvider } from '@mediajobs/lib/storage/s3';
import { managedKeyPrefix } from '@mediajobs/lib/storage/types';
import { CLEANUP_SECONDS, UPLOAD_GRANT_PATH, UploadGrantBroker, UploadGrantKeys } from '@mediajobs/lib/storage/upload-grants';
import { uploadGrantsRouter } from '../api-gateway/src/routes/upload-grants.js';
import { runnerDocuments } from '../operator/src/managed-storage.js';
import { cancellable, resolveDestination, uploadJobFile } from '../runner-image/src/destination.js';
import { endlessBody } from './support/endless-body.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from './support/postgres.js';
import { startS3rver, type RunningS3rver } from './support/s3rver.js';
import { s3rverWithAbort, type S3rverWithAbort } from './support/s3rver-abort.js';

const BUCKET = 'managed';
const MiB = 1024 * 1024;

/** A body that goes on until it is destroyed (ffmpeg still muxing). */
const endless = () => endlessBody(7, 2);

async function until(what: string, check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 20))) {
    if (await check()) return;
  }
  expect.fail(`timed out waiting for ${what}`);
}

describe('managed S3: a job cancelled mid-upload leaves nothing in the bucket', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let s3: RunningS3rver;
  let front: S3rverWithAbort;
  let bucket: S3StorageProvider;
  let server: Server;
  let gatewayUrl: string;
  let keyId: string;
  const dirs: string[] = [];
  const secretKeys = SecretBox.generateSpec('c1');
  /** The gateway's clock runs this far ahead: the cleanup window can be seen to close. */
  let clockAheadMs = 0;

  const jobRow = async (status = 'Processing'): Promise<string> => {
    const id = randomUUID();
    await db.pool.query(
      `INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, cr_namespace, cr_name)
       VALUES ($1, $2, 'https://media.test/talk', $3, 'Uploading', 80, '{}', 'mediajobs', $4)`, [id, keyId, status, id]);
    return id;
  };
  /** The runner of `jobId` as it starts: the operator's document in its credentials, its uploads cancellable by SIGTERM. */
  const runner = async (jobId: string) => {
    const cfg = { MANAGED_STORAGE: 's3' as const, MANAGED_STORAGE_DIR: '.unused', PUBLIC_BASE_URL: gatewayUrl, JOB_ACTIVE_DEADLINE_SECONDS: 3600, SECRET_KEYS: secretKeys };
    const doc = runnerDocuments(cfg)(jobId, keyId) as { grant: { token: string } };
    const creds = mkdtempSync(join(tmpdir(), 'mj-creds-'));
    dirs.push(creds);
    writeFileSync(join(creds, 'destination.json'), JSON.stringify(doc));
    const sigterm = new AbortController();
    return { dest: cancellable(await resolveDestination(creds, {}, {}), sigterm.signal), sigterm, token: doc.grant.token };
  };
  const post = async (op: string, token: string, body: unknown) => {
    const res = await fetch(`${gatewayUrl}${UPLOAD_GRANT_PATH}/${op}`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify(body),
    });
    return { status: res.status, body: res.status === 204 ? undefined : await res.json() };
  };
  const stored = async (key: string) => (await bucket.headObject(key)) !== undefined;

  before(async () => {
    db = await createTestDatabase('mediajobs_grant_cancel');
    keyId = await insertApiKey(db.pool);
    s3 = await startS3rver({ buckets: [BUCKET] });
    front = await s3rverWithAbort(s3);
    bucket = new S3StorageProvider({
      name: 'managed', endpoint: front.endpoint, bucket: BUCKET, region: 'us-east-1',
      accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, forcePathStyle: true,
    });
    const broker = new UploadGrantBroker({ store: bucket, keys: new UploadGrantKeys(secretKeys), jobs: (jobId: string) => grantJobState(db.pool, jobId), ledger: new PgGrantLedger(db.pool), now: () => Date.now() + clockAheadMs });
    const app = express();
    app.use(uploadGrantsRouter({ broker, logger: createLogger('api-gateway', 'silent') }));
    server = createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    gatewayUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    bucket?.destroy();
    await front?.close();
    await s3?.stop();
    await db?.drop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  afterEach(() => {
    clockAheadMs = 0;
  });

  it('the stored media is deleted and the upload in progress aborted, while nothing new is let in; the window then closes', async () => {
    const jobId = await jobRow();
    const { dest, sigterm, token } = await runner(jobId);
    const prefix = managedKeyPrefix(keyId);

    // The media is stored and not yet reported; a second file is on its way, parts already in the bucket.
    const work = mkdtempSync(join(tmpdir(), 'mj-work-'));
    dirs.push(work);
    const media = join(work, 'talk.mp4');
    writeFileSync(media, Buffer.alloc(3 * MiB, 1));
    const first = await uploadJobFile(dest, { file: media, ext: 'mp4', contentType: 'video/mp4', jobId, filename: 'Talk' });
    expect(first).to.deep.include({ ok: true, result: { key: `${prefix}/videos/Talk.mp4`, size: 3 * MiB } });
    const second = uploadJobFile(dest, { open: endless, ext: 'mkv', contentType: 'video/x-matroska', jobId, filename: 'Talk' });
    await until('a part of the second upload in the bucket', async () => (await front.pendingUploads(BUCKET)).some((u) => u.parts > 0));
    expect((await front.pendingUploads(BUCKET)).map((u) => u.key)).to.deep.equal([`${prefix}/videos/Talk.mkv`]);

    // POST /jobs/{id}/cancel's write: the row is Cancelled before the runner hears of it.
    expect(await cancelJob(db.pool, jobId, 'Cancelled', keyId)).to.deep.include({ outcome: 'cancelled' });
    expect(await post('begin', token, { key: `${prefix}/videos/Late.mp4` })).to.deep.equal({
      status: 403, body: { error: 'The job is not running', code: 'auth', reason: 'job_not_running' },
    });

    // SIGTERM: the upload stops (and is aborted), then what was stored goes.
    sigterm.abort();
    expect((await second).ok).to.equal(false);
    expect(await dest.provider.removeDelivered()).to.equal(1);

    expect(await front.pendingUploads(BUCKET)).to.deep.equal([]);
    expect(await stored(`${prefix}/videos/Talk.mp4`)).to.equal(false);
    expect(await stored(`${prefix}/videos/Talk.mkv`)).to.equal(false);
    expect(s3.events.filter((e) => e.key.startsWith(prefix)).map((e) => [e.eventName, e.key])).to.deep.equal([
      ['ObjectCreated:Post', `${prefix}/videos/Talk.mp4`],
      ['ObjectRemoved:Delete', `${prefix}/videos/Talk.mp4`],
    ]);

    // The cleanup is answered for CLEANUP_SECONDS after the job ended, not after.
    expect((await post('delete', token, { key: `${prefix}/videos/Talk.mp4` })).status).to.equal(204);
    clockAheadMs = (CLEANUP_SECONDS + 5) * 1000;
    expect(await post('delete', token, { key: `${prefix}/videos/Talk.mp4` })).to.deep.equal({
      status: 403, body: { error: 'The job is not running', code: 'auth', reason: 'job_not_running' },
    });
  });

  it("a completed job's runner can no longer delete or abort: the files are the user's", async () => {
    const jobId = await jobRow();
    const { dest, token } = await runner(jobId);
    const key = `${managedKeyPrefix(keyId)}/videos/Done.m4a`;
    const done = await uploadJobFile(dest, { open: () => Readable.from([Buffer.from('delivered')]), ext: 'm4a', contentType: 'audio/mp4', jobId, filename: 'Done' });
    expect(done).to.deep.include({ ok: true });
    const begun = await post('begin', token, { key: `${managedKeyPrefix(keyId)}/videos/Done.jpg` });
    await db.pool.query(`UPDATE jobs SET status = 'Completed', finished_at = now() WHERE id = $1`, [jobId]);

    const refused = { status: 403, body: { error: 'The job is not running', code: 'auth', reason: 'job_not_running' } };
    expect(await post('delete', token, { key })).to.deep.equal(refused);
    expect(await post('abort', token, { key: `${managedKeyPrefix(keyId)}/videos/Done.jpg`, upload: (begun.body as { upload: string }).upload })).to.deep.equal(refused);
    expect(await stored(key)).to.equal(true);
  });
});
