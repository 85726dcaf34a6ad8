// Upload grants end to end on the storage side (docs/adr/0012): the
// gateway's /internal/upload-grants router over lib's broker and a real S3
// protocol server (s3rver), and the runner's provider built from the
// destination document a runner gets, which holds a job-scoped token and no
// bucket credentials. The router is mounted in a bare express app here; the
// gateway's app mounts it the same way.
import { expect } from 'chai';
import express from 'express';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { inspect } from 'node:util';
import { createLogger } from '@mediajobs/lib/logger';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { createProvider, createUploadGrantBroker, type StorageProvider } from '@mediajobs/lib/storage/index';
import { S3StorageProvider } from '@mediajobs/lib/storage/s3';
import { PgGrantLedger } from '@mediajobs/lib/storage/grant-ledger';
import { JOB_METADATA, UPLOAD_GRANT_PATH, UploadGrantBroker, UploadGrantKeys, type GrantJob } from '@mediajobs/lib/storage/upload-grants';
import { uploadGrantsRouter } from '../src/routes/upload-grants.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/postgres.js';
import { startS3rver, type RunningS3rver } from '../../test/support/s3rver.js';
import { MiB, caught, expectSanitised, generated, readPresigned, sha256 } from '../../lib/test/storage-support.js';

const BUCKET = 'managed';
const JOB = '11111111-2222-4333-8444-555555555555';
const OTHER = '99999999-8888-4777-8666-555555555555';
const HOUR = 3600;

interface Gateway {
  url: string;
  /** Each grant operation the router was asked for, in order, with the part URLs it handed out. */
  ops: string[];
  partUrls: string[];
  logs: string[];
  close(): Promise<void>;
}

async function listen(app: express.Express): Promise<{ server: Server; url: string }> {
  const server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** The router in a bare app over `broker`, recording the operations it answers and its log lines. */
async function gateway(broker: UploadGrantBroker): Promise<Gateway> {
  const ops: string[] = [];
  const partUrls: string[] = [];
  const logs: string[] = [];
  const logger = createLogger('api-gateway', 'debug', {}, { write: (line: string) => void logs.push(line) });
  const recording = {
    handle: async (op: string, token: string | undefined, body: unknown) => {
      ops.push(op);
      const answer = await broker.handle(op, token, body);
      if (op === 'part' && typeof answer?.url === 'string') partUrls.push(answer.url);
      return answer;
    },
  };
  const app = express();
  app.use(uploadGrantsRouter({ broker: recording, logger }));
  const { server, url } = await listen(app);
  return {
    url, ops, partUrls, logs,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe('api-gateway: upload grants to managed storage on S3 (s3rver)', function () {
  this.timeout(60_000);
  let s3: RunningS3rver;
  let bucket: S3StorageProvider;
  let gw: Gateway;
  let db: TestDatabase;
  let ledger: PgGrantLedger;
  const keys = new UploadGrantKeys(SecretBox.generateSpec('g1'));
  const RUNNING: GrantJob = { status: 'Processing', finishedAt: null };
  /** The jobs table as the broker sees it: a job without an entry has no row. */
  const jobs = new Map<string, GrantJob>([[JOB, RUNNING], [OTHER, RUNNING]]);
  // Each token its own expiry: a grant (one attempt) is bounded to three objects, and two tokens minted alike are one grant.
  let minted = 0;
  const inAnHour = () => Math.floor(Date.now() / 1000) + HOUR + minted++;

  /** The runner's provider, built from the document the operator puts in its Secret. */
  const runner = (jobId = JOB, token = keys.mint(jobId, inAnHour()), url = gw.url): Promise<StorageProvider> =>
    createProvider({ provider: 'managed', managed: { MANAGED_STORAGE: 's3' }, grant: { url, token } });
  const read = (key: string) => readPresigned((k, s) => bucket.presign(k, s), key);
  const post = async (op: string, token: string | undefined, body: unknown) => {
    const res = await fetch(`${gw.url}${UPLOAD_GRANT_PATH}/${op}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
    return { status: res.status, type: res.headers.get('content-type'), body: res.status === 204 ? undefined : ((await res.json()) as Record<string, unknown>) };
  };

  before(async () => {
    db = await createTestDatabase('mediajobs_grants');
    ledger = new PgGrantLedger(db.pool);
    s3 = await startS3rver({ buckets: [BUCKET] });
    bucket = new S3StorageProvider({
      name: 'managed', endpoint: s3.endpoint, bucket: BUCKET, region: 'us-east-1',
      accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, forcePathStyle: true,
    });
    gw = await gateway(new UploadGrantBroker({ store: bucket, keys, jobs: async (id) => jobs.get(id), ledger }));
  });
  after(async () => {
    await gw?.close();
    bucket?.destroy();
    await s3?.stop();
    await db?.drop();
  });
  beforeEach(() => {
    gw.ops.length = 0;
    gw.partUrls.length = 0;
  });

  it('a runner holding only the grant uploads a file of several parts, which go straight to the bucket, and the object names its job', async () => {
    const p = await runner();
    expect(p.name).to.equal('managed');
    const size = 12 * MiB + 123;
    const { stream, sha256: expected } = generated(size);
    expect(await p.upload('videos/multi.mp4', stream, { size, contentType: 'video/mp4' })).to.deep.equal({ key: 'videos/multi.mp4', size });

    expect(sha256((await read('videos/multi.mp4')) ?? Buffer.alloc(0))).to.equal(expected);
    expect(await bucket.headObject('videos/multi.mp4')).to.deep.equal({ metadata: { [JOB_METADATA]: JOB }, size });
    expect(gw.ops[0]).to.equal('begin');
    expect(gw.ops.slice(1, -1)).to.deep.equal(['part', 'part', 'part']);
    expect(gw.ops.at(-1)).to.equal('complete');
    // The gateway signs; the bytes never pass through it.
    for (const u of gw.partUrls) expect(new URL(u).origin).to.equal(s3.endpoint);
    expect(s3.events.filter((e) => e.key === 'videos/multi.mp4').map((e) => e.eventName)).to.deep.equal(['ObjectCreated:Post']);
  });

  it('a small file is one upload of one part, an empty one too, with its content type', async () => {
    const p = await runner();
    expect(await p.upload('videos/small.m4a', Readable.from([Buffer.from('hello '), Buffer.from('world')]), { contentType: 'audio/mp4' }))
      .to.deep.equal({ key: 'videos/small.m4a', size: 11 });
    expect(gw.ops).to.deep.equal(['begin', 'part', 'complete']);
    const url = await bucket.presign('videos/small.m4a', 60);
    const got = await fetch(url);
    expect([got.status, got.headers.get('content-type'), await got.text()]).to.deep.equal([200, 'audio/mp4', 'hello world']);

    expect(await p.upload('videos/empty.srt', Readable.from([]))).to.deep.equal({ key: 'videos/empty.srt', size: 0 });
    expect((await read('videos/empty.srt'))?.length).to.equal(0);
  });

  it('refuses a taken key with 409 before a byte of the body is read, and the stored object stays', async () => {
    const p = await runner();
    await p.upload('videos/taken.mp4', Readable.from([Buffer.from('first')]));
    gw.ops.length = 0;
    let read = false;
    const second = Readable.from((function* () {
      read = true;
      yield Buffer.from('second');
    })());
    const err = await caught((await runner(OTHER)).upload('videos/taken.mp4', second));
    expect([err.code, err.reason, err.httpStatus]).to.deep.equal(['conflict', 'KeyExists', 409]);
    expect(read, 'nothing of the body was read').to.equal(false);
    expect(second.destroyed).to.equal(true);
    expect(gw.ops).to.deep.equal(['begin']);
    expect((await readPresigned((k, s) => bucket.presign(k, s), 'videos/taken.mp4'))?.toString()).to.equal('first');

    expect(await post('begin', keys.mint(OTHER, inAnHour()), { key: 'videos/taken.mp4' })).to.deep.equal({
      status: 409, type: 'application/json; charset=utf-8', body: { error: 'An object already exists at this key', code: 'conflict', reason: 'KeyExists' },
    });
  });

  it('refuses to complete over an object stored under the key since the upload began', async () => {
    const token = keys.mint(JOB, inAnHour());
    const begun = await post('begin', token, { key: 'videos/raced.mp4' });
    const upload = begun.body!.upload as string;
    const part = await post('part', token, { key: 'videos/raced.mp4', upload, partNumber: 1, size: 4 });
    const put = await fetch(part.body!.url as string, { method: 'PUT', body: 'late' });
    await bucket.upload('videos/raced.mp4', Readable.from([Buffer.from('meanwhile')]));
    expect(await post('complete', token, { key: 'videos/raced.mp4', upload, parts: [{ number: 1, etag: put.headers.get('etag') }] })).to.deep.include({
      status: 409, body: { error: 'An object already exists at this key', code: 'conflict', reason: 'KeyExists' },
    });
    expect((await read('videos/raced.mp4'))?.toString()).to.equal('meanwhile');
  });

  it("deletes only objects this job's uploads stored; a missing key is already deleted", async () => {
    await (await runner(JOB)).upload('videos/mine.mp4', Readable.from([Buffer.from('mine')]));
    await bucket.upload('videos/put-by-hand.mp4', Readable.from([Buffer.from('by hand')]));

    const other = await runner(OTHER);
    for (const key of ['videos/mine.mp4', 'videos/put-by-hand.mp4']) {
      const err = await caught(other.delete(key));
      expect([err.code, err.reason, err.httpStatus], key).to.deep.equal(['auth', 'not_this_jobs_object', 403]);
    }
    expect(await post('delete', keys.mint(OTHER, inAnHour()), { key: 'videos/mine.mp4' })).to.deep.include({
      status: 403, body: { error: 'The object was not stored by this job', code: 'auth', reason: 'not_this_jobs_object' },
    });
    expect((await read('videos/mine.mp4'))?.toString()).to.equal('mine');
    expect((await read('videos/put-by-hand.mp4'))?.toString()).to.equal('by hand');

    const mine = await runner(JOB);
    await mine.delete('videos/mine.mp4');
    expect(await read('videos/mine.mp4')).to.equal(undefined);
    await mine.delete('videos/mine.mp4');
    await mine.delete('videos/never/was.mp4');
  });

  it('answers a missing, forged or expired grant with 401 and a finished job with 403, as JSON the runner reads as refused credentials', async () => {
    const genuine = keys.mint(JOB, inAnHour());
    const [job, expires, kid, mac] = genuine.split('.') as [string, string, string, string];
    const cases: Array<[string | undefined, number, Record<string, unknown>]> = [
      [undefined, 401, { error: 'Missing upload grant', code: 'auth', reason: 'grant_missing' }],
      ['not-a-token', 401, { error: 'Invalid upload grant', code: 'auth', reason: 'grant_invalid' }],
      [[OTHER, expires, kid, mac].join('.'), 401, { error: 'Invalid upload grant', code: 'auth', reason: 'grant_invalid' }],
      [[job, String(Number(expires) + 1), kid, mac].join('.'), 401, { error: 'Invalid upload grant', code: 'auth', reason: 'grant_invalid' }],
      [new UploadGrantKeys(SecretBox.generateSpec('g1')).mint(JOB, inAnHour()), 401, { error: 'Invalid upload grant', code: 'auth', reason: 'grant_invalid' }],
      [keys.mint(JOB, Math.floor(Date.now() / 1000) - 1), 401, { error: 'Upload grant has expired', code: 'auth', reason: 'grant_expired' }],
    ];
    for (const [token, status, body] of cases) {
      expect(await post('begin', token, { key: 'videos/refused.mp4' }), String(token)).to.deep.equal({ status, type: 'application/json; charset=utf-8', body });
    }
    const expired = await caught((await runner(JOB, keys.mint(JOB, Math.floor(Date.now() / 1000) - 1))).upload('videos/refused.mp4', Readable.from([Buffer.from('x')])));
    expect([expired.code, expired.reason]).to.deep.equal(['auth', 'grant_expired']);

    const finished = '33333333-4444-4555-8666-777777777777';
    expect(await post('check', keys.mint(finished, inAnHour()), {})).to.deep.include({
      status: 403, body: { error: 'The job is not running', code: 'auth', reason: 'job_not_running' },
    });
    const err = await caught((await runner(finished)).upload('videos/refused.mp4', Readable.from([Buffer.from('x')])));
    expect([err.code, err.reason]).to.deep.equal(['auth', 'job_not_running']);
    expect(await read('videos/refused.mp4')).to.equal(undefined);

    // A job cancelled mid-upload: nothing more goes in, but its runner may still abort what it began.
    const cancelled = '44444444-5555-4666-8777-888888888888';
    const token = keys.mint(cancelled, inAnHour());
    jobs.set(cancelled, RUNNING);
    const begun = await post('begin', token, { key: 'videos/cancelled.mp4' });
    jobs.set(cancelled, { status: 'Cancelled', finishedAt: Date.now() });
    const upload = begun.body!.upload as string;
    expect((await post('part', token, { key: 'videos/cancelled.mp4', upload, partNumber: 1, size: 1 })).status).to.equal(403);
    expect((await post('complete', token, { key: 'videos/cancelled.mp4', upload, parts: [{ number: 1, etag: '"e"' }] })).status).to.equal(403);
    // s3rver answers AbortMultipartUpload with 405: the grant let it through to the bucket.
    expect(await post('abort', token, { key: 'videos/cancelled.mp4', upload })).to.deep.include({ status: 502, body: { error: 'Managed storage failed', code: 'failed', reason: 'MethodNotAllowed' } });
    await (await runner(JOB)).probe();
    expect(gw.ops.at(-1)).to.equal('check');
  });

  it('refuses keys outside managed storage, and parts or completion of an upload another job began', async () => {
    const token = keys.mint(JOB, inAnHour());
    expect(await post('begin', token, { key: 'elsewhere/x.mp4' })).to.deep.include({
      status: 403, body: { error: 'The key is outside managed storage', code: 'auth', reason: 'key_outside_layout' },
    });
    expect(await post('begin', token, { key: 'videos/../x.mp4' })).to.deep.include({
      status: 400, body: { error: 'Invalid object key', code: 'invalid_config', reason: 'invalid_key' },
    });
    expect(await post('begin', token, { key: 42 })).to.deep.include({
      status: 400, body: { error: 'Invalid upload grant request', code: 'invalid_config', reason: 'invalid_request' },
    });
    const begun = await post('begin', token, { key: 'videos/begun.mp4' });
    expect(begun.status).to.equal(200);
    const upload = begun.body!.upload as string;
    const theirs = keys.mint(OTHER, inAnHour());
    const refusal = { status: 403, body: { error: 'The upload was not begun by this job', code: 'auth', reason: 'upload_not_granted' } };
    expect(await post('part', theirs, { key: 'videos/begun.mp4', upload, partNumber: 1, size: 1 })).to.deep.include(refusal);
    expect(await post('complete', theirs, { key: 'videos/begun.mp4', upload, parts: [{ number: 1, etag: '"x"' }] })).to.deep.include(refusal);
    expect(await post('abort', theirs, { key: 'videos/begun.mp4', upload })).to.deep.include(refusal);
    // Nor is the upload id good for another key of this same job.
    expect(await post('part', token, { key: 'videos/other.mp4', upload, partNumber: 1, size: 1 })).to.deep.include(refusal);
    const part = await post('part', token, { key: 'videos/begun.mp4', upload, partNumber: 1, size: 1 });
    expect(part.status).to.equal(200);
    expect(new URL(part.body!.url as string).searchParams.get('X-Amz-Expires')).to.equal('900');
  });

  it('aborts the upload when the source fails part way, and stores nothing', async () => {
    async function* broken() {
      yield randomBytes(6 * MiB);
      throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    }
    const err = await caught((await runner()).upload('videos/broken.mp4', Readable.from(broken())));
    expect([err.code, err.reason]).to.deep.equal(['failed', 'source_error']);
    expect(gw.ops[0]).to.equal('begin');
    expect(gw.ops.at(-1)).to.equal('abort');
    expect(gw.ops).not.to.include('complete');
    expect(await read('videos/broken.mp4')).to.equal(undefined);
  });

  it('removes a stored object that fell short of its declared size', async () => {
    const err = await caught((await runner()).upload('videos/short.mp4', Readable.from([Buffer.alloc(10)]), { size: 100 }));
    expect([err.code, err.reason]).to.deep.equal(['failed', 'size_mismatch']);
    expect(gw.ops).to.deep.equal(['begin', 'part', 'complete', 'delete']);
    expect(await read('videos/short.mp4')).to.equal(undefined);
  });

  it('keeps the token and the gateway address out of the provider and its errors; an unreachable gateway is unreachable', async () => {
    const token = keys.mint(JOB, inAnHour());
    const closed = await listen(express());
    await new Promise((resolve) => closed.server.close(resolve));
    const p = await runner(JOB, token, closed.url);
    for (const shown of [inspect(p, { depth: 10 }), JSON.stringify(p)]) {
      expect(shown).not.to.include(token);
      expect(shown).not.to.include(closed.url);
    }
    const err = await caught(p.probe());
    expect([err.code, err.reason]).to.deep.equal(['unreachable', 'ECONNREFUSED']);
    expectSanitised(err, [token, closed.url, new URL(closed.url).port]);
    expect((await caught(p.upload('videos/x.mp4', Readable.from([Buffer.from('x')])))).code).to.equal('unreachable');
    // The runner signs no download URL.
    expect(await caught(p.presign('videos/x.mp4', 60))).to.include({ code: 'invalid_config', reason: 'no_signing_key' });
  });

  it('answers 502 when the bucket is out of reach, and logs the failure without the token or any URL', async () => {
    const closed = await listen(express());
    await new Promise((resolve) => closed.server.close(resolve));
    const unreachable = new S3StorageProvider({
      name: 'managed', endpoint: closed.url, bucket: BUCKET, region: 'us-east-1',
      accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, forcePathStyle: true, maxAttempts: 1,
    });
    const down = await gateway(new UploadGrantBroker({ store: unreachable, keys, jobs: async () => RUNNING, ledger }));
    try {
      const token = keys.mint(JOB, inAnHour());
      const err = await caught((await runner(JOB, token, down.url)).upload('videos/x.mp4', Readable.from([Buffer.from('x')])));
      expect([err.code, err.reason, err.httpStatus]).to.deep.equal(['unreachable', 'ECONNREFUSED', 502]);
      expect(down.logs.map((l) => JSON.parse(l) as Record<string, unknown>).map((l) => [l.msg, l.op, l.status])).to.deep.equal([
        ['upload grant request failed', 'begin', 502],
      ]);
      const logged = down.logs.join('\n');
      for (const hidden of [token, closed.url, new URL(closed.url).port]) expect(logged).not.to.include(hidden);
    } finally {
      await down.close();
      unreachable.destroy();
    }
  });

  it("is built from the gateway's managed storage settings on S3, and not at all for local storage", async () => {
    const settings = {
      MANAGED_STORAGE: 's3' as const, MANAGED_STORAGE_DIR: '.local/storage', PUBLIC_BASE_URL: 'http://127.0.0.1:8080',
      MANAGED_S3_ENDPOINT: s3.endpoint, MANAGED_S3_BUCKET: BUCKET, MANAGED_S3_REGION: 'us-east-1', MANAGED_S3_FORCE_PATH_STYLE: true,
      MANAGED_S3_ACCESS_KEY: s3.accessKeyId, MANAGED_S3_SECRET_KEY: s3.secretAccessKey, SECRET_KEYS: SecretBox.generateSpec('gw'),
    };
    expect(await createUploadGrantBroker({ ...settings, MANAGED_STORAGE: 'local' }, async () => ({ status: 'Processing', finishedAt: null }), ledger)).to.equal(undefined);
    const broker = await createUploadGrantBroker(settings, async (id) => (id === JOB ? { status: 'Processing', finishedAt: null } : undefined), ledger);
    const built = await gateway(broker!);
    try {
      // The operator mints with the same SECRET_KEYS.
      const token = new UploadGrantKeys(settings.SECRET_KEYS).mint(JOB, inAnHour());
      await (await runner(JOB, token, built.url)).upload('videos/configured.mp4', Readable.from([Buffer.from('configured')]));
      expect((await read('videos/configured.mp4'))?.toString()).to.equal('configured');
      expect(built.ops).to.deep.equal(['begin', 'part', 'complete']);
    } finally {
      await built.close();
    }
  });

  it('answers a body that is not JSON with 400 JSON', async () => {
    const res = await fetch(`${gw.url}${UPLOAD_GRANT_PATH}/begin`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${keys.mint(JOB, inAnHour())}` }, body: '{"key":',
    });
    expect([res.status, await res.json()]).to.deep.equal([400, { error: 'Invalid JSON body', code: 'invalid_config', reason: 'invalid_request' }]);
    expect((await post('nothing', keys.mint(JOB, inAnHour()), {})).status).to.equal(404);
  });
});
