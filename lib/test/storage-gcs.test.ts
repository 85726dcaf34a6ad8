// The GCS provider against a local fake of the GCS JSON API and OAuth token
// endpoint (test/support/fake-gcs.ts), driven by the official client
// unchanged: the fake verifies the client's JWTs and V4 signatures with the
// public half of a key pair each test generates.
import { expect } from 'chai';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { Readable } from 'node:stream';
import { inspect } from 'node:util';
import {
  createProvider,
  destinationKeyLayout,
  objectKey,
  parseDestination,
  parseServiceAccountJson,
} from '../src/storage/index.js';
import { GcsStorageProvider, mapGcsError, type GcsStorageOptions } from '../src/storage/gcs.js';
import { startFakeGcs, type FakeServiceAccount, type RunningFakeGcs } from '../../test/support/fake-gcs.js';
import { storageContract } from './storage-contract.js';
import { KiB, MiB, caught, describeErrorMapping, download, expectInvalidConfig, expectSanitised, generated, sha256, thrown } from './storage-support.js';

const BUCKET = 'media';
const DAY = 86_400;

/** Wait for `ready` to hold, polling; fails after `ms`. */
async function until(ready: () => boolean, ms = 10_000): Promise<void> {
  for (const deadline = Date.now() + ms; !ready(); ) {
    if (Date.now() > deadline) expect.fail('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The PEM body without its armour: what a leak of the key would contain. */
const keyBody = (pem: string) => pem.split('\n').slice(1, 3).join('');

describe('storage: gcs provider on the fake GCS', function () {
  this.timeout(60_000);
  let gcs: RunningFakeGcs;
  let sa: FakeServiceAccount;

  function provider(overrides: Partial<GcsStorageOptions> = {}): GcsStorageProvider {
    return new GcsStorageProvider({
      projectId: 'mediajobs-test',
      bucket: BUCKET,
      credentials: sa.json(),
      apiEndpoint: gcs.apiEndpoint,
      tokenUri: gcs.tokenUri,
      ...overrides,
    });
  }

  /** `kind status range` of the requests for one object since `from`. */
  function trail(name: string, from = 0): string[] {
    return gcs.requests
      .slice(from)
      .filter((r) => r.object === name)
      .map((r) => [r.kind, r.status, r.range].filter((x) => x !== undefined && x !== '').join(' '));
  }

  before(async () => {
    gcs = await startFakeGcs({ buckets: [BUCKET] });
    sa = gcs.createServiceAccount();
  });
  after(async () => {
    await gcs?.stop();
  });

  // The fake's log of object requests: a multipart upload answered 200 and a delete answered 204 are the expected successes.
  const writeOf = (r: { kind: string; status: number; object?: string }) =>
    r.kind === 'upload.multipart' && r.status === 200 ? `put ${r.object}` : r.kind === 'object.delete' && r.status === 204 ? `delete ${r.object}` : `${r.kind} ${r.status} ${r.object}`;

  storageContract({
    provider: (opts) => provider(opts),
    withSecrets: () => ({ provider: provider(), secrets: [keyBody(sa.privateKey)] }),
    maxExpiry: 7 * 86_400,
    staged: () => ({ provider: provider({ chunkSize: MiB }), bytes: 3 * MiB }),
    read: async (key) => gcs.object(BUCKET, key)?.data,
    presigned: true,
    writes: { mark: () => gcs.requests.length, since: (from) => gcs.requests.slice(from).filter((r) => r.object !== undefined).map(writeOf) },
    missing: {
      noun: 'bucket',
      reason: 'NoSuchBucket',
      deleteFails: false,
      readsAtMost: 64 * MiB,
      provider: () => provider({ bucket: 'no-such-bucket' }),
      hidden: () => [sa.email, keyBody(sa.privateKey), String(gcs.port), 'no-such-bucket'],
    },
    stopped: async () => {
      const gone = await startFakeGcs({ buckets: [BUCKET] });
      const account = gone.createServiceAccount();
      await gone.stop();
      return {
        provider: provider({ credentials: account.json(), apiEndpoint: gone.apiEndpoint, tokenUri: gone.tokenUri, maxRetries: 0 }),
        hidden: [String(gone.port), account.email],
      };
    },
    silent: {
      reason: 'timeout',
      provider: (port) => provider({ apiEndpoint: `http://127.0.0.1:${port}`, maxRetries: 0, timeoutMs: 300, chunkTimeoutMs: 300 }),
    },
  });

  it('streams 20 MiB of unknown length through a resumable session and serves it byte for byte through a 24 h V4 signed URL', async () => {
    const p = provider({ chunkSize: 8 * MiB });
    const { stream, sha256: expected } = generated(20 * MiB);
    const key = 'videos/big/resumable.mp4';
    const from = gcs.requests.length;
    const result = await p.upload(key, stream, { contentType: 'video/mp4' });
    expect(result).to.deep.equal({ key, size: 20 * MiB });
    // One session; 8 MiB chunks acknowledged with 308 until the last one, whose total is known only then.
    expect(trail(key, from)).to.deep.equal([
      'upload.resumable.start 200',
      'upload.resumable.query 308 bytes */*',
      'upload.resumable.chunk 308 bytes 0-8388607/*',
      'upload.resumable.chunk 308 bytes 8388608-16777215/*',
      `upload.resumable.chunk 200 bytes 16777216-20971519/${20 * MiB}`,
    ]);
    expect(gcs.object(BUCKET, key)?.contentType).to.equal('video/mp4');

    const url = await p.presign(key, DAY);
    const q = new URL(url).searchParams;
    expect(q.get('X-Goog-Algorithm')).to.equal('GOOG4-RSA-SHA256');
    expect(q.get('X-Goog-Expires')).to.equal(String(DAY));
    expect(q.get('X-Goog-SignedHeaders')).to.equal('host');
    expect(q.get('X-Goog-Credential')?.startsWith(`${sa.email}/`)).to.equal(true);
    expect(await download(url)).to.deep.include({ status: 200, bytes: 20 * MiB, sha256: expected, contentType: 'video/mp4' });
    expect(gcs.requests.at(-1)).to.include({ kind: 'signed.get', status: 200, account: sa.email });
  });

  it('gets its token with a JWT the fake verified against the account key, asking only for read_write', async () => {
    const other = gcs.createServiceAccount();
    const from = gcs.requests.length;
    await provider({ credentials: other.json() }).probe();
    const tokens = gcs.requests.slice(from).filter((r) => r.kind === 'token');
    expect(tokens).to.have.length(1);
    expect(tokens[0]).to.include({ status: 200, account: other.email });
    expect(tokens[0]?.scopes).to.deep.equal(['https://www.googleapis.com/auth/devstorage.read_write']);
  });

  it('resumes from the offset the service confirmed after a chunk fails mid-request', async () => {
    const p = provider({ chunkSize: 2 * MiB });
    const { stream, sha256: expected } = generated(5 * MiB + 3);
    const key = 'videos/resumed.mp4';
    const from = gcs.requests.length;
    // The second chunk breaks after 1.1 MiB reached the service, which keeps whole 256 KiB units (1 MiB).
    gcs.failNextChunk({ status: 503, persistBytes: 1.1 * MiB, after: 1 });
    await p.upload(key, stream);
    const t = trail(key, from);
    expect(t).to.include('upload.resumable.chunk 503 bytes 2097152-4194303/*');
    // Asked where to go on, and went on from 3 MiB (2 MiB + the 1 MiB kept), not from 2 MiB or 4 MiB.
    const afterFailure = t.slice(t.indexOf('upload.resumable.chunk 503 bytes 2097152-4194303/*') + 1);
    expect(afterFailure[0]).to.equal('upload.resumable.query 308 bytes */*');
    expect(afterFailure[1]).to.match(/^upload\.resumable\.chunk (200|308) bytes 3145728-/);
    expect(sha256((gcs.object(BUCKET, key) as { data: Buffer }).data)).to.equal(expected);
  });

  it('refuses to overwrite: a second upload to the same key fails with conflict (one 412, not retried) and the first object stays', async () => {
    const p = provider({ maxRetries: 3 });
    const key = 'videos/taken.mp4';
    await p.upload(key, Readable.from([Buffer.from('first')]), { contentType: 'video/mp4' });
    const first = gcs.object(BUCKET, key);
    const from = gcs.requests.length;
    const second = Readable.from([Buffer.from('second')]);
    const err = await caught(p.upload(key, second, { contentType: 'video/webm' }));
    expect(err.code).to.equal('conflict');
    expect(err.reason).to.equal('KeyExists');
    expect(err.httpStatus).to.equal(412);
    expect(second.destroyed, 'the refused body is destroyed, so a producer stops').to.equal(true);
    // A create-only session; the service refused once, when the object would have been created, and nothing was sent again.
    expect(trail(key, from)).to.deep.equal(['upload.resumable.start 200', 'upload.resumable.query 308 bytes */*', 'upload.resumable.chunk 412 bytes 0-5/6']);
    expect(gcs.requests.slice(from).filter((r) => r.object === key).map((r) => r.ifGenerationMatch)).to.deep.equal(['0', '0', '0']);
    const kept = gcs.object(BUCKET, key);
    expect(kept?.data.toString()).to.equal('first');
    expect(kept?.generation).to.equal(first?.generation);
    expect(kept?.contentType).to.equal('video/mp4');
    expect((await download(await p.presign(key, 60))).text).to.equal('first');
  });

  it('refuses atomically: an object created under the key while a multi-chunk upload runs is kept, and the upload fails with conflict at its last chunk', async () => {
    const p = provider({ chunkSize: 256 * KiB });
    const key = 'videos/raced.mp4';
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    async function* slow() {
      // One whole chunk goes out; the byte after it waits, with the rest, for the gate.
      yield randomBytes(256 * KiB + 1);
      await gate;
      yield randomBytes(100 * KiB);
    }
    const from = gcs.requests.length;
    const late = p.upload(key, Readable.from(slow()));
    try {
      await until(() => trail(key, from).includes('upload.resumable.chunk 308 bytes 0-262143/*'));
      await p.upload(key, Readable.from([Buffer.from('won the race')]));
    } finally {
      release();
    }
    const err = await caught(late);
    expect(err.code).to.equal('conflict');
    expect(err.httpStatus).to.equal(412);
    expect(trail(key, from).at(-1)).to.equal(`upload.resumable.chunk 412 bytes 262144-${256 * KiB + 100 * KiB}/${256 * KiB + 1 + 100 * KiB}`);
    expect(gcs.object(BUCKET, key)?.data.toString()).to.equal('won the race');
  });

  it('a key the account does not have is AuthenticationFailed (the JWT signature fails at the token endpoint)', async () => {
    const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    const forged = JSON.stringify({ ...(JSON.parse(sa.json()) as object), private_key: stranger });
    const p = provider({ credentials: forged, maxRetries: 0 });
    const from = gcs.requests.length;
    const probe = await caught(p.probe());
    expect(probe.code).to.equal('auth');
    expect(probe.reason).to.equal('AuthenticationFailed');
    const upload = await caught(p.upload('videos/x.mp4', Readable.from([Buffer.from('x')])));
    expect(upload.reason).to.equal('AuthenticationFailed');
    // Refused at the token endpoint; nothing reached the bucket.
    expect(gcs.requests.slice(from).every((r) => r.kind === 'token' && r.status === 400)).to.equal(true);
    expectSanitised(probe, [sa.email, keyBody(stranger), String(gcs.port)]);
  });

  it('a deleted key is AuthenticationFailed, and an account without access to the bucket AccessDenied', async () => {
    const doomed = gcs.createServiceAccount();
    const p = provider({ credentials: doomed.json(), maxRetries: 0 });
    await p.probe();
    doomed.revoke();
    // The token it already holds is refused too (401), not just new ones.
    expect((await caught(p.probe())).reason).to.equal('AuthenticationFailed');

    const elsewhere = gcs.createServiceAccount({ buckets: ['other-bucket'] });
    const denied = await caught(provider({ credentials: elsewhere.json(), maxRetries: 0 }).probe());
    expect(denied.code).to.equal('auth');
    expect(denied.reason).to.equal('AccessDenied');
    expect(denied.httpStatus).to.equal(403);
    expectSanitised(denied, [elsewhere.email, String(gcs.port)]);
  });

  it('signed URLs are checked as GCS checks them: altered, expired, unsigned or from a deleted key are refused', async () => {
    const signer = gcs.createServiceAccount();
    const p = provider({ credentials: signer.json() });
    const key = 'videos/guarded file.mp4';
    await p.upload(key, Readable.from([Buffer.from('guarded')]), { contentType: 'video/mp4' });
    const url = new URL(await p.presign(key, 60));
    expect((await download(url)).text).to.equal('guarded');

    const longer = new URL(url);
    longer.searchParams.set('X-Goog-Expires', String(7 * DAY));
    const altered = await download(longer);
    expect(altered.status).to.equal(403);
    expect(altered.text).to.include('<Code>SignatureDoesNotMatch</Code>');
    const otherObject = new URL(url);
    otherObject.pathname = `/${BUCKET}/videos/other.mp4`;
    expect((await download(otherObject)).status).to.equal(403);
    const unsigned = new URL(url);
    unsigned.search = '';
    expect((await download(unsigned)).status).to.equal(403);

    const shortLived = await p.presign(key, 1);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const expired = await download(shortLived);
    expect(expired.status).to.equal(400);
    expect(expired.text).to.include('<Code>ExpiredToken</Code>');

    signer.revoke();
    expect((await download(url)).status).to.equal(403);
  });

  it("ignores the key file's token_uri: the token goes only where the deployment says", async () => {
    const hits: string[] = [];
    const decoy = http.createServer((req, res) => {
      hits.push(req.url ?? '');
      res.writeHead(500).end();
    });
    await new Promise<void>((resolve) => decoy.listen(0, '127.0.0.1', resolve));
    try {
      const decoyUri = `http://127.0.0.1:${(decoy.address() as net.AddressInfo).port}/token`;
      const json = JSON.stringify({ ...(JSON.parse(sa.json()) as object), token_uri: decoyUri, universe_domain: 'example.test' });
      await provider({ credentials: json }).probe();
      expect(hits).to.deep.equal([]);
    } finally {
      await new Promise((resolve) => decoy.close(resolve));
    }
  });

  it('keeps the private key out of the parsed key when inspected or serialised', () => {
    const body = keyBody(sa.privateKey);
    const parsed = parseServiceAccountJson(sa.json());
    expect(parsed.privateKey).to.equal(sa.privateKey);
    expect(inspect(parsed, { depth: 10 }) + JSON.stringify(parsed) + JSON.stringify({ parsed })).not.to.include(body);
  });

  it('refuses invalid configuration without a network call', () => {
    const bad: Array<[Partial<GcsStorageOptions>, string]> = [
      [{ projectId: '' }, 'project_id_required'],
      [{ projectId: '  ' }, 'project_id_required'],
      [{ bucket: '' }, 'missing_bucket'],
      [{ chunkSize: 100 * KiB }, 'invalid_chunk_size'],
      [{ chunkSize: 300 * KiB }, 'invalid_chunk_size'],
      [{ apiEndpoint: 'ftp://example.test' }, 'invalid_api_endpoint'],
      [{ tokenUri: 'http://user:pw@example.test/token' }, 'invalid_token_uri'],
      [{ credentials: '{"type":"service_account","client_email":"a@b.c"}' }, 'missing_private_key'],
    ];
    expectInvalidConfig(provider, bad);
  });

  it('createProvider builds a gcs provider from destination.json; the key layout lands the file', async () => {
    const destination = {
      provider: 'gcs',
      project_id: 'mediajobs-test',
      bucket: BUCKET,
      service_account_json: Buffer.from(sa.json()).toString('base64'),
      folder_prefix: 'tenant-9',
      base_folder: 'clips',
    };
    const p = await createProvider(destination, { gcs: { apiEndpoint: gcs.apiEndpoint, tokenUri: gcs.tokenUri } });
    expect(p.name).to.equal('gcs');
    const from = gcs.requests.length;
    await p.probe();
    expect(trail('tenant-9/verify_credentials.txt', from)).to.deep.equal(['upload.multipart 200', 'object.delete 204']);
    const key = objectKey({ ...destinationKeyLayout(parseDestination(destination)), name: 'Mañana: live?', fallback: 'job', ext: 'webm' });
    expect(key).to.equal('tenant-9/clips/Mañana_ live_.webm');
    const { stream, sha256: expected } = generated(MiB + 1);
    await p.upload(key, stream, { contentType: 'video/webm' });
    expect((await download(await p.presign(key, DAY))).sha256).to.equal(expected);
  });

  it("project_id is a construction requirement, not a shape one (the spec's step 2), and key file errors use the spec's words", async () => {
    const base = { provider: 'gcs', bucket: BUCKET, service_account_json: sa.json() };
    expect(parseDestination(base)).to.deep.include({ provider: 'gcs', bucket: BUCKET });
    const noProject = await caught(createProvider(base));
    expect(noProject).to.include({ code: 'invalid_config', reason: 'project_id_required' });

    const { private_key: _dropped, ...withoutKey } = JSON.parse(sa.json()) as Record<string, unknown>;
    const noKey = await caught(createProvider({ ...base, project_id: 'p-1', service_account_json: JSON.stringify(withoutKey) }));
    expect(noKey.message).to.equal("Invalid service account JSON: missing 'private_key' field");
    expect(noKey.reason).to.equal('missing_private_key');

    const shape = thrown(() => parseDestination({ ...base, bucket: 'Not A Bucket' }));
    expect(shape.reason).to.equal('invalid_bucket');
    expect(thrown(() => parseDestination({ ...base, service_account_json: undefined })).reason).to.equal('service_account_json_required');
  });
});

describe('storage: parseServiceAccountJson', () => {
  const { privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const file = {
    type: 'service_account',
    project_id: 'proj-1',
    private_key_id: 'abc123',
    private_key: privateKey,
    client_email: 'uploader@proj-1.iam.gserviceaccount.com',
  };
  const text = JSON.stringify(file);

  const accepted: Array<[string, string]> = [
    ['JSON text', text],
    ['JSON text with surrounding whitespace', `\n  ${text}\n`],
    ['escaped JSON (a JSON string holding the JSON)', JSON.stringify(text)],
    ['Base64 of the JSON', Buffer.from(text).toString('base64')],
    ['URL-safe Base64 without padding', Buffer.from(text).toString('base64url')],
    ['a PEM whose newlines arrived as literal \\n', JSON.stringify({ ...file, private_key: privateKey.replace(/\n/g, '\\n') })],
  ];
  for (const [title, raw] of accepted) {
    it(`accepts ${title}`, () => {
      const key = parseServiceAccountJson(raw);
      expect(key.clientEmail).to.equal(file.client_email);
      expect(key.privateKeyId).to.equal('abc123');
      expect(key.projectId).to.equal('proj-1');
      expect(key.privateKey).to.equal(privateKey);
    });
  }

  const refused: Array<[string, unknown, string, string]> = [
    ['nothing', '', 'missing_service_account_json', 'service_account_json is required'],
    ['not a string', 42, 'missing_service_account_json', 'service_account_json is required'],
    ['not JSON', '{"type": "service_account",', 'invalid_service_account_json', 'not JSON or Base64 of JSON'],
    ['Base64 of something else', Buffer.from('hello').toString('base64'), 'invalid_service_account_json', 'not JSON or Base64 of JSON'],
    ['a JSON array', '[1,2]', 'invalid_service_account_json', 'not JSON or Base64 of JSON'],
    ['no private_key', JSON.stringify({ ...file, private_key: undefined }), 'missing_private_key', "missing 'private_key' field"],
    ['no client_email', JSON.stringify({ ...file, client_email: '' }), 'missing_client_email', "missing 'client_email' field"],
    [
      'another credential type (external_account makes the library fetch URLs)',
      JSON.stringify({ ...file, type: 'external_account', credential_source: { url: 'http://169.254.169.254/' } }),
      'unsupported_credential_type',
      "'type' must be 'service_account'",
    ],
    ['a private key that is not one', JSON.stringify({ ...file, private_key: 'not-a-key-SECRETSECRET' }), 'invalid_private_key', "'private_key' is not an RSA private key in PEM form"],
  ];
  for (const [title, raw, reason, detail] of refused) {
    it(`refuses ${title} with the spec's wording and without echoing it`, () => {
      const err = thrown(() => parseServiceAccountJson(raw));
      expect(err.code).to.equal('invalid_config');
      expect(err.reason).to.equal(reason);
      expect(err.message).to.equal(`Invalid service account JSON: ${detail}`);
      expect(err.message).not.to.include('SECRETSECRET');
      expect(err.message).not.to.include(keyBody(privateKey));
    });
  }
});

describe('storage: mapGcsError', () => {
  const gaxios = (status: number, data: unknown) =>
    Object.assign(new Error(`request to http://10.1.2.3/upload failed: uploader@proj.iam.gserviceaccount.com`), { response: { status, data } });
  const cases: Array<[string, unknown, string, string]> = [
    ['token endpoint invalid_grant', gaxios(400, { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' }), 'auth', 'AuthenticationFailed'],
    ['JSON API 401', { code: 401, errors: [{ reason: 'authError' }], message: 'Invalid Credentials' }, 'auth', 'AuthenticationFailed'],
    ['JSON API 403', { code: 403, errors: [{ reason: 'forbidden' }], message: 'uploader@proj does not have access' }, 'auth', 'AccessDenied'],
    ['JSON API 404', { code: 404, errors: [{ reason: 'notFound' }] }, 'not_found', 'NoSuchBucket'],
    ['resumable upload failure (code = status)', Object.assign(new Error('Upload failed'), { code: 503 }), 'unreachable', 'HTTP503'],
    ['429', gaxios(429, { error: { code: 429 } }), 'unreachable', 'HTTP429'],
    ['400 from the JSON API', gaxios(400, { error: { code: 400, message: 'Invalid bucket name' } }), 'invalid_config', 'HTTP400'],
    ['ECONNREFUSED inside a GaxiosError', Object.assign(new Error('x'), { error: Object.assign(new Error('connect ECONNREFUSED 10.1.2.3'), { code: 'ECONNREFUSED' }) }), 'unreachable', 'ECONNREFUSED'],
    ['ENOTFOUND', Object.assign(new Error('getaddrinfo ENOTFOUND storage.example.test'), { code: 'ENOTFOUND' }), 'unreachable', 'ENOTFOUND'],
    ['node-fetch timeout', Object.assign(new Error('network timeout at: http://10.1.2.3/'), { type: 'request-timeout' }), 'unreachable', 'timeout'],
    ['checksum mismatch', Object.assign(new Error('The uploaded data did not match'), { code: 'FILE_NO_UPLOAD' }), 'failed', 'checksum_mismatch'],
    [
      'failed ifGenerationMatch=0 on the last chunk',
      { code: 412, errors: [{ reason: 'conditionNotMet', domain: 'global' }], message: 'At least one of the pre-conditions you specified did not hold.' },
      'conflict',
      'KeyExists',
    ],
    ['failed ifGenerationMatch=0 on opening the session', gaxios(412, { error: { code: 412, errors: [{ reason: 'conditionNotMet' }] } }), 'conflict', 'KeyExists'],
    ['anything else', new Error('boom http://10.1.2.3'), 'failed', 'unknown'],
  ];
  describeErrorMapping(mapGcsError, cases, /10\.1\.2\.3|example\.test|iam\.gserviceaccount|http:\/\//);
});
