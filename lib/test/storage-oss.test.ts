// The oss provider against a local fake of the OSS REST API that verifies
// V4 signatures (test/support/fake-oss.ts), driven by the official ali-oss
// client unchanged.
import { expect } from 'chai';
import OSS from 'ali-oss';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { createProvider } from '../src/storage/index.js';
import { OssStorageProvider, mapOssError, ossRegionFromEndpoint, type OssStorageOptions } from '../src/storage/oss.js';
import { startFakeOss, type RunningFakeOss } from '../../test/support/fake-oss.js';
import { storageContract } from './storage-contract.js';
import { MiB, caught, describeErrorMapping, download, expectInvalidConfig, expectSanitised, generated } from './storage-support.js';

const BUCKET = 'media';
const KEY_ID = 'LTAI5tFakeKeyId0001';
const SECRET = 'fake-oss-secret-' + randomBytes(8).toString('hex');
const READ_KEY_ID = 'LTAI5tReadOnlyKey01';
const OTHER_BUCKET_KEY_ID = 'LTAI5tOtherBucket01';

describe('storage: oss provider on a fake OSS', function () {
  this.timeout(60_000);
  let oss: RunningFakeOss;

  function provider(overrides: Partial<OssStorageOptions> = {}): OssStorageProvider {
    return new OssStorageProvider({
      endpoint: oss.endpoint,
      region: 'cn-hangzhou', // an IP endpoint names no region
      bucket: BUCKET,
      accessKeyId: KEY_ID,
      accessKeySecret: SECRET,
      maxAttempts: 1,
      ...overrides,
    });
  }

  function eventsFor(key: string): string[] {
    return oss.events.filter((e) => e.key === key).map((e) => `${e.op} ${e.status}`);
  }

  before(async () => {
    oss = await startFakeOss({
      buckets: [BUCKET, 'other'],
      boundBucket: BUCKET,
      keys: [
        { accessKeyId: KEY_ID, accessKeySecret: SECRET },
        { accessKeyId: READ_KEY_ID, accessKeySecret: SECRET, access: 'read' },
        { accessKeyId: OTHER_BUCKET_KEY_ID, accessKeySecret: SECRET, buckets: ['other'] },
      ],
    });
  });
  after(async () => {
    await oss.stop();
  });

  // The fake's log: a PutObject answered 200 and a DeleteObject answered 204 are the expected successes.
  const writeOf = (e: { op: string; key: string; status: number }) =>
    e.op === 'PutObject' && e.status === 200 ? `put ${e.key}` : e.op === 'DeleteObject' && e.status === 204 ? `delete ${e.key}` : `${e.op} ${e.status} ${e.key}`;

  storageContract({
    provider: (opts) => provider(opts),
    withSecrets: () => ({ provider: provider(), secrets: [SECRET] }),
    maxExpiry: 7 * 86_400,
    staged: () => ({ provider: provider({ partSize: MiB }), bytes: 3 * MiB }),
    read: async (key) => oss.objects(BUCKET).get(key)?.body,
    keys: async () => [...oss.objects(BUCKET).keys()],
    nothingOpen: () => expect(oss.pendingUploads()).to.equal(0),
    abandoned: (key) => {
      expect(eventsFor(key)).to.include('AbortMultipartUpload 204');
    },
    presigned: true,
    writes: { mark: () => oss.events.length, since: (from) => oss.events.slice(from).map(writeOf) },
    missing: {
      noun: 'bucket',
      reason: 'NoSuchBucket',
      deleteFails: true,
      readsAtMost: 200 * MiB,
      provider: () => provider({ bucket: 'no-such-bucket' }),
      hidden: () => [SECRET, KEY_ID, String(oss.port), 'no-such-bucket'],
    },
    stopped: async () => {
      const gone = await startFakeOss({ buckets: [BUCKET], keys: [{ accessKeyId: KEY_ID, accessKeySecret: SECRET }] });
      await gone.stop();
      return { provider: provider({ endpoint: gone.endpoint }), hidden: [String(gone.port), SECRET] };
    },
    silent: { reason: 'timeout', provider: (port) => provider({ endpoint: `http://127.0.0.1:${port}`, timeoutMs: 300 }) },
  });

  it('streams 20 MiB of unknown length as a V4-signed multipart upload and serves it byte for byte through a 24 h signed URL', async () => {
    const p = provider();
    const { stream, sha256 } = generated(20 * MiB);
    const key = 'videos/big/multipart.mp4';
    const result = await p.upload(key, stream, { contentType: 'video/mp4' });
    expect(result).to.deep.equal({ key, size: 20 * MiB });
    // 16 MiB parts for a stream of unknown length: two parts.
    expect(eventsFor(key)).to.deep.equal([
      'InitiateMultipartUpload 200',
      'UploadPart 200',
      'UploadPart 200',
      'CompleteMultipartUpload 200',
    ]);
    expect(oss.events.filter((e) => e.key === key).every((e) => e.auth === 'v4')).to.equal(true);

    const url = await p.presign(key, 86_400);
    const q = new URL(url).searchParams;
    expect(q.get('x-oss-signature-version')).to.equal('OSS4-HMAC-SHA256');
    expect(q.get('x-oss-expires')).to.equal('86400');
    expect(q.get('x-oss-credential')).to.match(/\/cn-hangzhou\/oss\/aliyun_v4_request$/);
    // Nothing but the URL is needed: no extra headers are signed.
    expect(q.has('x-oss-additional-headers')).to.equal(false);
    expect(await download(url)).to.deep.include({ status: 200, bytes: 20 * MiB, sha256: sha256, contentType: 'video/mp4' });
    expect(oss.events.at(-1)).to.include({ op: 'GetObject', auth: 'v4-query', status: 200 });
  });

  it('uses the declared size to plan parts and still counts the bytes', async () => {
    const p = provider();
    const { stream, sha256 } = generated(17 * MiB + 123);
    const key = 'videos/sized.mkv';
    const result = await p.upload(key, stream, { size: 17 * MiB + 123 });
    expect(result.size).to.equal(17 * MiB + 123);
    expect(eventsFor(key).filter((e) => e.startsWith('UploadPart'))).to.have.length(3); // 8 MiB parts
    expect((await download(await p.presign(key, 60))).sha256).to.equal(sha256);
  });

  it('uploads a small stream with one PutObject', async () => {
    const key = 'videos/small.m4a';
    await provider().upload(key, Readable.from([Buffer.from('hello '), Buffer.from('world')]), { contentType: 'audio/mp4' });
    expect(eventsFor(key)).to.deep.equal(['PutObject 200']);
  });

  it('refuses to overwrite with PutObject: a second small upload to the same key fails with conflict (409 FileAlreadyExists, not retried) and the first object stays', async () => {
    const p = provider({ maxAttempts: 3 });
    const key = 'videos/taken.mp4';
    await p.upload(key, Readable.from([Buffer.from('first')]), { contentType: 'video/mp4' });
    const second = Readable.from([Buffer.from('second')]);
    const err = await caught(p.upload(key, second, { contentType: 'video/webm' }));
    expect(err.code).to.equal('conflict');
    expect(err.reason).to.equal('KeyExists');
    expect(err.httpStatus).to.equal(409);
    expect(err.message).to.include('FileAlreadyExists');
    expect(second.destroyed, 'the refused body is destroyed, so a producer stops').to.equal(true);
    expect(eventsFor(key)).to.deep.equal(['PutObject 200', 'PutObject 409']);
    expect(oss.events.filter((e) => e.key === key).every((e) => e.forbidOverwrite === true)).to.equal(true);
    const kept = oss.objects(BUCKET).get(key);
    expect(kept?.body.toString()).to.equal('first');
    expect(kept?.contentType).to.equal('video/mp4');
    expect((await download(await p.presign(key, 60))).body.toString()).to.equal('first');
  });

  it('refuses to overwrite on the multipart path: CompleteMultipartUpload fails with conflict, the upload is aborted and the first object stays', async () => {
    const p = provider({ partSize: MiB, maxAttempts: 3 });
    const key = 'videos/taken-multipart.mp4';
    const first = generated(3 * MiB);
    await p.upload(key, first.stream);
    const from = oss.events.length;
    const err = await caught(p.upload(key, generated(3 * MiB).stream));
    expect(err.code).to.equal('conflict');
    expect(err.reason).to.equal('KeyExists');
    expect(err.httpStatus).to.equal(409);
    const refused = oss.events.slice(from).filter((e) => e.key === key);
    expect(refused.map((e) => `${e.op} ${e.status}`)).to.deep.equal([
      'InitiateMultipartUpload 200',
      'UploadPart 200',
      'UploadPart 200',
      'UploadPart 200',
      'CompleteMultipartUpload 409',
      'AbortMultipartUpload 204',
    ]);
    // The header goes with the Initiate and the Complete, where OSS documents it; parts carry none.
    expect(refused.filter((e) => e.forbidOverwrite).map((e) => e.op)).to.deep.equal(['InitiateMultipartUpload', 'CompleteMultipartUpload']);
    expect(oss.pendingUploads()).to.equal(0);
    expect(createHash('sha256').update(oss.objects(BUCKET).get(key)!.body).digest('hex')).to.equal(first.sha256);
  });

  it('sends a part again after a transient failure', async () => {
    const p = provider({ partSize: MiB, maxAttempts: 3 });
    oss.injectFault('UploadPart', 503, 'ServiceUnavailable');
    const { stream, sha256 } = generated(3 * MiB);
    await p.upload('videos/retried.mp4', stream);
    expect(eventsFor('videos/retried.mp4').filter((e) => e === 'UploadPart 503')).to.have.length(1);
    expect(createHash('sha256').update(oss.objects(BUCKET).get('videos/retried.mp4')!.body).digest('hex')).to.equal(sha256);
  });

  it('aborts the multipart upload when a part keeps failing', async () => {
    const p = provider({ partSize: MiB, maxAttempts: 1 });
    oss.injectFault('UploadPart', 500, 'InternalError');
    const err = await caught(p.upload('videos/failing.mp4', generated(3 * MiB).stream));
    expect(err.code).to.equal('unreachable');
    expect(err.reason).to.equal('InternalError');
    expect(eventsFor('videos/failing.mp4')).to.include('AbortMultipartUpload 204');
    expect(oss.pendingUploads()).to.equal(0);
  });

  it('a wrong secret fails the V4 signature check: auth with the spec reason AccessDenied', async () => {
    const secret = 'wrong-secret-' + randomBytes(8).toString('hex');
    const err = await caught(provider({ accessKeySecret: secret }).probe());
    expect(err.code).to.equal('auth');
    expect(err.reason).to.equal('AccessDenied');
    expect(err.message).to.include('SignatureDoesNotMatch');
    expect(err.httpStatus).to.equal(403);
    expect(oss.events.at(-1)).to.include({ op: 'PutObject', status: 403 });
    expectSanitised(err, [secret, SECRET, KEY_ID, String(oss.port)]);
  });

  it('an unknown key id is auth (AccessDenied, InvalidAccessKeyId)', async () => {
    const err = await caught(provider({ accessKeyId: 'LTAI5tUnknownKey999' }).probe());
    expect(err.code).to.equal('auth');
    expect(err.reason).to.equal('AccessDenied');
    expect(err.message).to.include('InvalidAccessKeyId');
    expectSanitised(err, ['LTAI5tUnknownKey999', SECRET]);
  });

  it('a key without write permission, or limited to another bucket, fails the probe with AccessDenied', async () => {
    const readOnly = await caught(provider({ accessKeyId: READ_KEY_ID }).probe());
    expect([readOnly.code, readOnly.reason]).to.deep.equal(['auth', 'AccessDenied']);
    const elsewhere = await caught(provider({ accessKeyId: OTHER_BUCKET_KEY_ID }).probe());
    expect([elsewhere.code, elsewhere.reason]).to.deep.equal(['auth', 'AccessDenied']);
  });

  it('a signed URL works only for its key, unaltered and unexpired', async () => {
    const p = provider();
    await p.upload('videos/signed.mp4', Readable.from([Buffer.from('signed')]));
    await p.upload('videos/other.mp4', Readable.from([Buffer.from('other')]));
    const url = new URL(await p.presign('videos/signed.mp4', 60));

    const otherKey = new URL(url);
    otherKey.pathname = '/videos/other.mp4';
    expect((await fetch(otherKey)).status).to.equal(403);

    const tampered = new URL(url);
    tampered.searchParams.set('x-oss-signature', '0'.repeat(64));
    const res = await fetch(tampered);
    expect(res.status).to.equal(403);
    expect(await res.text()).to.include('<Code>SignatureDoesNotMatch</Code>');

    const longer = new URL(url);
    longer.searchParams.set('x-oss-expires', '7200'); // the expiry is signed too
    expect((await fetch(longer)).status).to.equal(403);

    const short = await p.presign('videos/signed.mp4', 1);
    await sleep(2100);
    const expired = await fetch(short);
    expect(expired.status).to.equal(403);
    expect(await expired.text()).to.include('Request has expired');
  });

  it('refuses invalid configuration without a network call', () => {
    const bad: Array<[Partial<OssStorageOptions>, string]> = [
      [{ bucket: '' }, 'missing_bucket'],
      [{ accessKeySecret: '' }, 'missing_credentials'],
      [{ endpoint: 'ftp://oss-cn-hangzhou.aliyuncs.com' }, 'invalid_endpoint'],
      [{ endpoint: 'https://user:pw@oss-cn-hangzhou.aliyuncs.com' }, 'invalid_endpoint'],
      [{ endpoint: 'https://oss-cn-hangzhou.aliyuncs.com/media' }, 'invalid_endpoint'],
      [{ endpoint: 'media.oss-cn-hangzhou.aliyuncs.com' }, 'invalid_endpoint'],
      [{ endpoint: 'oss-accelerate.aliyuncs.com', region: undefined }, 'region_required'],
      [{ endpoint: 'cdn.example.test', region: undefined }, 'region_required'],
      [{ region: 'cn hangzhou' }, 'invalid_region'],
      [{ partSize: 1024 }, 'invalid_part_size'],
      [{ bucket: 'Bad_Bucket' }, 'invalid_bucket'],
    ];
    expectInvalidConfig(provider, bad);
  });

  it('reads the region from a standard endpoint', () => {
    expect(provider({ endpoint: 'oss-cn-hangzhou.aliyuncs.com', region: undefined }).region).to.equal('cn-hangzhou');
    expect(provider({ endpoint: 'https://oss-eu-central-1-internal.aliyuncs.com', region: undefined }).region).to.equal('eu-central-1');
    expect(provider({ endpoint: 'oss-cn-hangzhou.aliyuncs.com', region: 'oss-ap-southeast-1' }).region).to.equal('ap-southeast-1');
    expect(ossRegionFromEndpoint('oss-accelerate.aliyuncs.com')).to.equal(undefined);
    expect(ossRegionFromEndpoint('s3.amazonaws.com')).to.equal(undefined);
  });

  it('createProvider builds an oss provider from destination.json with the spec field names', async () => {
    const p = await createProvider({
      provider: 'oss',
      endpoint: oss.endpoint,
      region: 'cn-hangzhou',
      bucket: BUCKET,
      access_key_id: KEY_ID,
      access_key_secret: SECRET,
      folder_prefix: 'dest',
      base_folder: 'clips',
    });
    expect(p.name).to.equal('oss');
    await p.probe();
    expect(oss.events.some((e) => e.key === 'dest/verify_credentials.txt' && e.op === 'PutObject' && e.status === 200)).to.equal(true);
  });
});

describe('storage: the fake OSS checks V1 signatures as OSS does', function () {
  this.timeout(20_000);
  let v1: RunningFakeOss;
  before(async () => {
    v1 = await startFakeOss({ buckets: [BUCKET], boundBucket: BUCKET, allowV1: true, keys: [{ accessKeyId: KEY_ID, accessKeySecret: SECRET }] });
  });
  after(async () => v1.stop());

  // ali-oss signs V1 unless told otherwise (authorizationV4: false is its default). It makes
  // no V1 URL for an IP endpoint, so the fake is reached as `localhost`, a domain bound
  // (`cname`) to the bucket.
  const v1Client = (endpoint: string, accessKeySecret: string) =>
    new OSS({
      endpoint: endpoint.replace('127.0.0.1', 'localhost'),
      cname: true,
      bucket: BUCKET,
      accessKeyId: KEY_ID,
      accessKeySecret,
      region: 'oss-cn-hangzhou',
    });

  it('accepts a V1 Authorization header and V1 signed URL made with the right secret', async () => {
    const client = v1Client(v1.endpoint, SECRET);
    await client.put('v1/object.txt', Buffer.from('v1 body'));
    expect(v1.events.at(-1)).to.include({ op: 'PutObject', auth: 'v1', status: 200 });
    const url = client.signatureUrl('v1/object.txt', { expires: 60 });
    expect(new URL(url).searchParams.get('OSSAccessKeyId')).to.equal(KEY_ID);
    const res = await fetch(url);
    expect(await res.text()).to.equal('v1 body');
    expect(v1.events.at(-1)).to.include({ op: 'GetObject', auth: 'v1-query', status: 200 });
  });

  it('refuses a V1 signature made with a wrong secret, and V1 altogether on a V4-only bucket', async () => {
    const wrong = await v1Client(v1.endpoint, 'not-the-secret').put('v1/x.txt', Buffer.from('x')).catch((e: { code?: string }) => e);
    expect((wrong as { code?: string }).code).to.equal('SignatureDoesNotMatch');
    const v4Only = await startFakeOss({ buckets: [BUCKET], keys: [{ accessKeyId: KEY_ID, accessKeySecret: SECRET }] });
    try {
      const refused = await v1Client(v4Only.endpoint, SECRET).put('v1/x.txt', Buffer.from('x')).catch((e: { code?: string }) => e);
      expect((refused as { code?: string }).code).to.equal('AccessDenied');
    } finally {
      await v4Only.stop();
    }
  });
});

describe('storage: mapOssError', () => {
  const cases: Array<[string, unknown, string, string]> = [
    ['NoSuchBucket', { name: 'NoSuchBucketError', code: 'NoSuchBucket', status: 404 }, 'not_found', 'NoSuchBucket'],
    ['AccessDenied', { name: 'AccessDeniedError', code: 'AccessDenied', status: 403 }, 'auth', 'AccessDenied'],
    ['InvalidAccessKeyId', { name: 'InvalidAccessKeyIdError', code: 'InvalidAccessKeyId', status: 403 }, 'auth', 'AccessDenied'],
    ['SignatureDoesNotMatch', { name: 'SignatureDoesNotMatchError', code: 'SignatureDoesNotMatch', status: 403 }, 'auth', 'AccessDenied'],
    ['unlisted 403', { name: 'UnknownError', status: 403 }, 'auth', 'AccessDenied'],
    ['FileAlreadyExists (x-oss-forbid-overwrite)', { name: 'FileAlreadyExistsError', code: 'FileAlreadyExists', status: 409 }, 'conflict', 'KeyExists'],
    ['ServiceUnavailable', { name: 'ServiceUnavailableError', code: 'ServiceUnavailable', status: 503 }, 'unreachable', 'ServiceUnavailable'],
    ['unlisted 502', { name: 'UnknownError', status: 502 }, 'unreachable', 'HTTP502'],
    [
      'refused connection',
      { name: 'RequestError', code: 'RequestError', status: -1, message: 'connect ECONNREFUSED 10.1.2.3:443 (req "error"), PUT http://b.example.test/k' },
      'unreachable',
      'ECONNREFUSED',
    ],
    ['response timeout', { name: 'ResponseTimeoutError', status: -2, message: 'Response timeout for 300ms' }, 'unreachable', 'timeout'],
    ['anything else', new Error('boom http://host.example.test'), 'failed', 'unknown'],
  ];
  describeErrorMapping(mapOssError, cases, /10\.1\.2\.3|example\.test|http:\/\//);
});
