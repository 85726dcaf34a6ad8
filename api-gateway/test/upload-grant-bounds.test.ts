// A grant is bounded (issue 35 item 2): at most the media file and its two
// sidecars per attempt, a byte cap (the job's file-size limit, else its
// reservation, plus room for the sidecars), a bound on parts, and part URLs
// that sign their Content-Length. Over a cap the gateway answers JSON the
// runner raises as StorageError `failed` (upload_failed), and the ledger
// keeps the size as stored. Real s3rver, real Postgres, the gateway's router.
import { expect } from 'chai';
import express from 'express';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { createLogger } from '@mediajobs/lib/logger';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { PgGrantLedger } from '@mediajobs/lib/storage/grant-ledger';
import { createProvider, type StorageProvider } from '@mediajobs/lib/storage/index';
import { S3StorageProvider } from '@mediajobs/lib/storage/s3';
import {
  GRANT_MAX_OBJECTS, GRANT_PART_SIGNINGS, GRANT_SIDECAR_BYTES, UPLOAD_GRANT_PATH, UploadGrantBroker, UploadGrantKeys, type GrantJob,
} from '@mediajobs/lib/storage/upload-grants';
import { uploadGrantsRouter } from '../src/routes/upload-grants.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/postgres.js';
import { startS3rver, type RunningS3rver } from '../../test/support/s3rver.js';
import { MiB, caught, generated, readPresigned } from '../../lib/test/storage-support.js';

const BUCKET = 'managed';
const JOB = '11111111-2222-4333-8444-555555555555';
const LIMITED = '22222222-3333-4444-8555-666666666666';

describe('api-gateway: an upload grant is bounded (s3rver, Postgres)', function () {
  this.timeout(120_000);
  let s3: RunningS3rver;
  let db: TestDatabase;
  let bucket: S3StorageProvider;
  let ledger: PgGrantLedger;
  let url: string;
  let close: () => Promise<void>;
  const keys = new UploadGrantKeys(SecretBox.generateSpec('g1'));
  const jobs = new Map<string, GrantJob>([
    [JOB, { status: 'Processing', finishedAt: null }],
    // A 1 MiB file-size limit: the grant takes 1 MiB and the sidecars' room.
    [LIMITED, { status: 'Processing', finishedAt: null, maxFilesizeBytes: MiB, reservedBytes: 512 * MiB }],
  ]);
  let minted = 0;
  /** A fresh token: one attempt's grant. */
  const grant = (jobId = JOB) => keys.mint(jobId, Math.floor(Date.now() / 1000) + 3600 + minted++);
  const runner = (token: string): Promise<StorageProvider> =>
    createProvider({ provider: 'managed', managed: { MANAGED_STORAGE: 's3' }, grant: { url, token } });
  const post = async (op: string, token: string, body: unknown) => {
    const res = await fetch(`${url}${UPLOAD_GRANT_PATH}/${op}`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify(body),
    });
    return { status: res.status, body: res.status === 204 ? undefined : ((await res.json()) as Record<string, unknown>) };
  };
  const read = (key: string) => readPresigned((k, s) => bucket.presign(k, s), key);

  before(async () => {
    db = await createTestDatabase('mediajobs_grant_bounds');
    ledger = new PgGrantLedger(db.pool);
    s3 = await startS3rver({ buckets: [BUCKET] });
    bucket = new S3StorageProvider({
      name: 'managed', endpoint: s3.endpoint, bucket: BUCKET, region: 'us-east-1',
      accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, forcePathStyle: true,
    });
    const app = express();
    app.use(uploadGrantsRouter({ broker: new UploadGrantBroker({ store: bucket, keys, jobs: async (id) => jobs.get(id), ledger }), logger: createLogger('api-gateway', 'silent') }));
    const server = createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    };
  });
  after(async () => {
    await close?.();
    bucket?.destroy();
    await s3?.stop();
    await db?.drop();
  });

  it('stores the media and two sidecars per grant, refuses a fourth object as an upload failure, and a taken key does not count', async () => {
    const token = grant();
    const p = await runner(token);
    await bucket.upload('videos/taken.mp4', Readable.from([Buffer.from('someone else')]));
    expect((await caught(p.upload('videos/taken.mp4', Readable.from([Buffer.from('x')])))).code).to.equal('conflict');
    for (const key of ['videos/a.mp4', 'videos/a.en.vtt', 'videos/a.jpg']) await p.upload(key, Readable.from([Buffer.from(key)]));

    const err = await caught(p.upload('videos/a-fourth.mp4', Readable.from([Buffer.from('more')])));
    expect([err.code, err.reason, err.httpStatus]).to.deep.equal(['failed', 'grant_objects_exceeded', 403]);
    expect(await read('videos/a-fourth.mp4')).to.equal(undefined);
    expect(await post('begin', token, { key: 'videos/a-fifth.mp4' })).to.deep.equal({
      status: 403, body: { error: `The upload grant allows ${GRANT_MAX_OBJECTS} objects: the media and its two sidecars`, code: 'failed', reason: 'grant_objects_exceeded' },
    });
    // The next attempt has a grant of its own.
    await (await runner(grant())).upload('videos/next-attempt.mp4', Readable.from([Buffer.from('again')]));
    expect((await read('videos/next-attempt.mp4'))?.toString()).to.equal('again');
  });

  it('signs each part URL for the length the runner declared', async () => {
    const token = grant();
    const upload = (await post('begin', token, { key: 'videos/signed.mp4' })).body!.upload as string;
    const part = await post('part', token, { key: 'videos/signed.mp4', upload, partNumber: 1, size: 1234 });
    expect(part.status).to.equal(200);
    const signed = new URL(part.body!.url as string).searchParams.get('X-Amz-SignedHeaders')!.split(';');
    expect(signed).to.include('content-length');
    expect((await post('part', token, { key: 'videos/signed.mp4', upload, partNumber: 2 })).status, 'a part without its size').to.equal(400);
  });

  it("refuses parts past the job's file-size limit (plus the sidecars' room), and the upload stores nothing", async () => {
    const size = MiB + GRANT_SIDECAR_BYTES + 6 * MiB;
    const { stream } = generated(size);
    const err = await caught((await runner(grant(LIMITED))).upload('videos/too-big.mp4', stream, { size }));
    expect([err.code, err.reason, err.httpStatus]).to.deep.equal(['failed', 'grant_bytes_exceeded', 413]);
    expect(await read('videos/too-big.mp4')).to.equal(undefined);
  });

  it('checks the stored size at complete: a body longer than its signed length (s3rver does not check V4 signatures) is deleted and refused', async () => {
    const token = grant(LIMITED);
    const upload = (await post('begin', token, { key: 'videos/lied.mp4' })).body!.upload as string;
    const part = await post('part', token, { key: 'videos/lied.mp4', upload, partNumber: 1, size: 10 });
    const put = await fetch(part.body!.url as string, { method: 'PUT', body: Buffer.alloc(MiB + GRANT_SIDECAR_BYTES + 1) });
    expect(put.status, 's3rver took the longer body').to.equal(200);
    expect(await post('complete', token, { key: 'videos/lied.mp4', upload, parts: [{ number: 1, etag: put.headers.get('etag') }] })).to.deep.equal({
      status: 413, body: { error: "The upload grant's byte limit is reached", code: 'failed', reason: 'grant_bytes_exceeded' },
    });
    expect(await read('videos/lied.mp4')).to.equal(undefined);
    expect((await ledger.storedBy(['videos/lied.mp4'])).size).to.equal(0);
  });

  it('signs one part a bounded number of times', async () => {
    const token = grant();
    const upload = (await post('begin', token, { key: 'videos/again.mp4' })).body!.upload as string;
    const ask = () => post('part', token, { key: 'videos/again.mp4', upload, partNumber: 1, size: 5 });
    for (let i = 0; i < GRANT_PART_SIGNINGS; i++) expect((await ask()).status).to.equal(200);
    expect(await ask()).to.deep.equal({ status: 413, body: { error: "The upload grant's part limit is reached", code: 'failed', reason: 'grant_parts_exceeded' } });
  });

  it('records what each grant completed with its size as stored, and forgets what it deleted', async () => {
    const p = await runner(grant());
    const size = 7 * MiB + 5;
    await p.upload('videos/recorded.mp4', generated(size).stream, { size });
    expect(Object.fromEntries(await ledger.storedBy(['videos/recorded.mp4', 'videos/never.mp4']))).to.deep.equal({
      'videos/recorded.mp4': { jobId: JOB, size },
    });
    await p.delete('videos/recorded.mp4');
    expect((await ledger.storedBy(['videos/recorded.mp4'])).size).to.equal(0);
  });
});
