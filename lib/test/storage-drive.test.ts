// The drive provider against a local fake of the Drive v3 API and Google's
// OAuth token endpoint (test/support/fake-drive.ts), driven by the official
// client unchanged. The service account's key pair is made here; the fake
// verifies the JWT's signature with the public half.
import { expect } from 'chai';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { DriveStorageProvider, mapDriveError, type DriveStorageOptions } from '../src/storage/drive.js';
import {
  DRIVE_REASON_TEXT,
  SAVED_ONLY_PROVIDERS,
  StorageError,
  createProvider,
  isDriveProvider,
  verifyDriveDownload,
} from '../src/storage/index.js';
import { startFakeDrive, type RunningFakeDrive } from '../../test/support/fake-drive.js';
import { storageContract } from './storage-contract.js';
import { KiB, MiB, caught, describeErrorMapping, expectInvalidConfig, expectSanitised, generated as generatedIn, readAll, sha256 } from './storage-support.js';

/** Random data in 300 KiB pieces, so chunk boundaries fall inside them. */
const generated = (total: number) => generatedIn(total, 300 * KiB);

const EMAIL = 'uploader@mediajobs-test.iam.gserviceaccount.com';
const URL_SECRET = 'url-secret-' + randomBytes(8).toString('hex');
const PUBLIC_BASE = 'http://gateway.example.test/api';

function serviceAccount(email = EMAIL): { json: string; privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  // The shape the Cloud console downloads.
  const json = JSON.stringify({
    type: 'service_account',
    project_id: 'mediajobs-test',
    private_key_id: randomBytes(20).toString('hex'),
    private_key: privateKey,
    client_email: email,
    client_id: '100000000000000000001',
    auth_uri: 'https://accounts.google.com/o/oauth2/auth',
    token_uri: 'https://oauth2.googleapis.com/token',
    universe_domain: 'googleapis.com',
  });
  return { json, privateKey, publicKey };
}

describe('storage: drive provider on a fake Drive API', function () {
  this.timeout(60_000);
  let drive: RunningFakeDrive;
  const account = serviceAccount();
  let sharedDrive: string; // the account is content manager
  let contributorDrive: string; // the account is contributor (writer)
  let personalFolder: string; // a person's My Drive folder shared with the account as editor
  let readerFolder: string;
  let privateFolder: string; // not shared with the account

  function provider(overrides: Partial<DriveStorageOptions> = {}): DriveStorageProvider {
    return new DriveStorageProvider({
      credentials: account.json,
      folderId: sharedDrive,
      rootUrl: drive.rootUrl,
      tokenUri: drive.tokenUri,
      chunkSize: 256 * KiB,
      maxRetries: 1,
      download: { baseUrl: PUBLIC_BASE, secret: URL_SECRET, ref: 'job-1' },
      ...overrides,
    });
  }

  before(async () => {
    drive = await startFakeDrive();
    drive.addServiceAccount(EMAIL, account.publicKey);
    sharedDrive = drive.addSharedDrive('Media', { [EMAIL]: 'fileOrganizer', 'alice@example.test': 'organizer' });
    contributorDrive = drive.addSharedDrive('Contrib', { [EMAIL]: 'writer' });
    personalFolder = drive.addFolder({ name: 'Uploads', owner: 'alice@example.test', sharedWith: { [EMAIL]: 'writer' } });
    readerFolder = drive.addFolder({ name: 'Read only', owner: 'alice@example.test', sharedWith: { [EMAIL]: 'reader' } });
    privateFolder = drive.addFolder({ name: 'Private', owner: 'alice@example.test' });
  });
  after(async () => {
    await drive.stop();
  });

  storageContract({
    provider: (opts) => provider(opts),
    withSecrets: () => ({ provider: provider(), secrets: [account.privateKey.split('\n')[5] as string, URL_SECRET] }),
    maxExpiry: 7 * 86_400,
    staged: () => ({ provider: provider(), bytes: 600 * KiB }),
    read: async (key) => drive.at(sharedDrive, key)?.content,
    nothingOpen: () => expect(drive.openSessions()).to.equal(0),
    abandoned: () => {
      expect(drive.events.some((e) => e.op === 'upload.cancel' && e.status === 499)).to.equal(true);
    },
    refusesUnread: true,
    stopped: async () => {
      const gone = await startFakeDrive();
      await gone.stop();
      return { provider: provider({ rootUrl: gone.rootUrl, tokenUri: gone.tokenUri, maxRetries: 0 }), hidden: [gone.rootUrl] };
    },
  });

  it('streams a file of unknown length through a resumable session into folders made for its key', async () => {
    const p = provider({ chunkSize: MiB });
    const { stream, sha256: expected } = generated(3 * MiB + 5);
    const before = drive.events.length;
    const result = await p.upload('videos/big/resumable.mp4', stream, { contentType: 'video/mp4' });
    expect(result).to.deep.equal({ key: 'videos/big/resumable.mp4', size: 3 * MiB + 5 });

    const file = drive.at(sharedDrive, 'videos/big/resumable.mp4');
    expect(file?.mimeType).to.equal('video/mp4');
    expect(sha256(file!.content)).to.equal(expected);
    const ops = drive.events.slice(before).map((e) => `${e.op} ${e.status}`);
    // The JWT was exchanged once (its signature verified by the fake), then one session: 3 full chunks and the last.
    expect(ops.filter((o) => o.startsWith('token'))).to.deep.equal(['token 200']);
    expect(ops.filter((o) => o.startsWith('upload.'))).to.deep.equal([
      'upload.start 200',
      'upload.chunk 308',
      'upload.chunk 308',
      'upload.chunk 308',
      'upload.chunk 200',
    ]);
    expect(drive.openSessions()).to.equal(0);
  });

  it('reuses existing folders and declares a known size to the session', async () => {
    const p = provider();
    const { stream, sha256: expected } = generated(700 * KiB);
    await p.upload('videos/big/sized.mkv', stream, { size: 700 * KiB });
    expect(drive.childrenOf(sharedDrive).filter((f) => f.name === 'videos')).to.have.length(1);
    expect(sha256(drive.at(sharedDrive, 'videos/big/sized.mkv')!.content)).to.equal(expected);
  });

  it('resumes a chunk the service kept only part of', async () => {
    const p = provider({ chunkSize: 512 * KiB });
    drive.injectChunkFault({ status: 503, keep: 256 * KiB });
    const { stream, sha256: expected } = generated(1200 * KiB);
    const before = drive.events.length;
    await p.upload('videos/resumed.mp4', stream);
    expect(sha256(drive.at(sharedDrive, 'videos/resumed.mp4')!.content)).to.equal(expected);
    const ops = drive.events.slice(before).map((e) => `${e.op} ${e.status}`);
    expect(ops).to.include('upload.chunk 503');
    expect(ops).to.include('upload.status 308'); // asked what was kept, then sent the rest
  });

  it('refuses an overwrite on the lookup (KeyExists): no session is opened, and the first file stays the only one', async () => {
    const p = provider();
    const key = 'videos/taken/clip.mp4';
    await p.upload(key, Readable.from([Buffer.from('first')]), { contentType: 'video/mp4' });
    const folder = drive.at(sharedDrive, 'videos/taken')!;
    const before = drive.events.length;
    const err = await caught(p.upload(key, Readable.from([Buffer.from('second')])));
    expect([err.code, err.reason]).to.deep.equal(['conflict', 'KeyExists']);
    // Refused on the lookup: no session was even opened.
    expect(drive.events.slice(before).map((e) => e.op)).not.to.include('upload.start');
    const files = drive.childrenOf(folder.id).filter((f) => f.name === 'clip.mp4');
    expect(files.map((f) => f.content.toString())).to.deep.equal(['first']);
    expect((await readAll((await p.openDownload(key)).body)).toString()).to.equal('first');
  });

  it('refuses to overwrite a file created under the key while the upload ran: checked again before the last chunk, and the session is cancelled', async () => {
    const [p, other] = [provider(), provider()];
    const key = 'videos/late/clip.mp4';
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    async function* slow() {
      yield randomBytes(300 * KiB); // more than a chunk: the session is under way
      await gate;
      yield randomBytes(10);
    }
    const before = drive.events.length;
    const pending = caught(p.upload(key, Readable.from(slow())));
    while (!drive.events.slice(before).some((e) => e.op === 'upload.chunk')) await sleep(5);
    await other.upload(key, Readable.from([Buffer.from('other')]));
    release();
    const err = await pending;
    expect([err.code, err.reason]).to.deep.equal(['conflict', 'KeyExists']);
    expect(drive.events.slice(before).some((e) => e.op === 'upload.cancel' && e.status === 499)).to.equal(true);
    expect(drive.openSessions()).to.equal(0);
    const folder = drive.at(sharedDrive, 'videos/late')!;
    expect(drive.childrenOf(folder.id).filter((f) => f.name === 'clip.mp4').map((f) => f.content.toString())).to.deep.equal(['other']);
  });

  it('a trashed file frees its key', async () => {
    const p = provider();
    await p.upload('videos/reused.mp4', Readable.from([Buffer.from('old')]));
    await p.delete('videos/reused.mp4');
    await p.upload('videos/reused.mp4', Readable.from([Buffer.from('new')]));
    expect(drive.at(sharedDrive, 'videos/reused.mp4')?.content.toString()).to.equal('new');
  });

  it('concurrent uploads into a new folder converge on one folder', async () => {
    const [a, b] = [provider(), provider()];
    await Promise.all([
      a.upload('videos/race/a.mp4', Readable.from([Buffer.from('a')])),
      b.upload('videos/race/b.mp4', Readable.from([Buffer.from('b')])),
    ]);
    const videos = drive.at(sharedDrive, 'videos')!;
    const race = drive.childrenOf(videos.id).filter((f) => f.name === 'race');
    expect(race).to.have.length(1);
    expect(drive.childrenOf(race[0]!.id).map((f) => f.name).sort()).to.deep.equal(['a.mp4', 'b.mp4']);
  });

  it('presign makes a signed gateway URL, and openDownload streams the file (with ranges) for it', async () => {
    const p = provider();
    const body = randomBytes(300 * KiB);
    await p.upload('videos/dl/Film title.mp4', Readable.from([body]), { contentType: 'video/mp4' });
    const url = new URL(await p.presign('videos/dl/Film title.mp4', 86_400));
    expect(`${url.origin}${url.pathname}`).to.equal(`${PUBLIC_BASE}/drive-files/job-1/videos/dl/Film%20title.mp4`);
    const expires = url.searchParams.get('expires')!;
    const sig = url.searchParams.get('sig')!;
    expect(Number(expires) - Math.floor(Date.now() / 1000)).to.be.within(86_390, 86_400);
    expect(verifyDriveDownload('job-1', 'videos/dl/Film title.mp4', expires, sig, URL_SECRET)).to.equal(true);
    expect(verifyDriveDownload('job-2', 'videos/dl/Film title.mp4', expires, sig, URL_SECRET)).to.equal(false);
    expect(verifyDriveDownload('job-1', 'videos/dl/other.mp4', expires, sig, URL_SECRET)).to.equal(false);
    expect(verifyDriveDownload('job-1', 'videos/dl/Film title.mp4', String(Number(expires) + 1), sig, URL_SECRET)).to.equal(false);
    expect(verifyDriveDownload('job-1', 'videos/dl/Film title.mp4', expires, sig, URL_SECRET, (Number(expires) + 1) * 1000)).to.equal(false);

    const whole = await p.openDownload('videos/dl/Film title.mp4');
    expect(whole.status).to.equal(200);
    expect(whole.contentType).to.equal('video/mp4');
    expect(whole.fileName).to.equal('Film title.mp4');
    expect(sha256(await readAll(whole.body))).to.equal(sha256(body));

    const part = await p.openDownload('videos/dl/Film title.mp4', { range: 'bytes=100-199' });
    expect(part.status).to.equal(206);
    expect(part.contentRange).to.equal(`bytes 100-199/${body.length}`);
    expect((await readAll(part.body)).equals(body.subarray(100, 200))).to.equal(true);

    const missing = await caught(p.openDownload('videos/dl/none.mp4'));
    expect(missing.code).to.equal('not_found');
    const unconfigured = await caught(provider({ download: undefined }).presign('videos/dl/Film title.mp4', 60));
    expect(unconfigured.reason).to.equal('presign_unavailable');
  });

  it('delete trashes the file rather than removing it', async () => {
    const p = provider();
    await p.upload('videos/gone.mp4', Readable.from([Buffer.from('x')]));
    const id = drive.at(sharedDrive, 'videos/gone.mp4')!.id;
    await p.delete('videos/gone.mp4');
    expect(drive.file(id)?.trashed).to.equal(true);
  });

  it('probe creates and trashes verify_credentials.txt in a shared drive where the account is content manager', async () => {
    await provider({ folderPrefix: 'team/archive' }).probe();
    const probes = [...drive.childrenOf(sharedDrive)].filter((f) => f.name === 'verify_credentials.txt');
    expect(probes).to.have.length(0);
    // Directly in folder_id: the probe leaves no folders behind.
    expect(drive.childrenOf(sharedDrive).some((f) => f.name === 'team')).to.equal(false);
  });

  it('rule 3: a My Drive folder shared with the account fails with storageQuotaExceeded, at probe and at upload', async () => {
    const p = provider({ folderId: personalFolder });
    const probe = await caught(p.probe());
    expect([probe.code, probe.reason, probe.httpStatus]).to.deep.equal(['auth', 'storageQuotaExceeded', 403]);
    expect(probe.message).to.include('shared drive');
    const upload = await caught(p.upload('videos/x.mp4', Readable.from([Buffer.from('x')])));
    expect([upload.code, upload.reason]).to.deep.equal(['auth', 'storageQuotaExceeded']);
    // The account's own root (an empty folder_id) is a My Drive too.
    const root = await caught(provider({ folderId: '' }).probe());
    expect(root.reason).to.equal('storageQuotaExceeded');
  });

  it('a folder shared read-only, not shared at all, or missing fails with insufficient permissions on folder', async () => {
    for (const folderId of [readerFolder, privateFolder, 'NoSuchFolderId123']) {
      const err = await caught(provider({ folderId }).probe());
      expect([err.code, err.reason], folderId).to.deep.equal(['auth', 'insufficient_permissions']);
      expect(DRIVE_REASON_TEXT[err.reason]).to.equal('insufficient permissions on folder');
    }
  });

  it('a contributor on a shared drive can upload but the probe fails: the spec asks for content manager', async () => {
    const p = provider({ folderId: contributorDrive });
    await p.upload('videos/contrib.mp4', Readable.from([Buffer.from('c')]));
    const err = await caught(p.probe());
    expect([err.code, err.reason]).to.deep.equal(['auth', 'insufficient_permissions']);
  });

  it('a key the token endpoint does not know fails with invalid_grant, and nothing secret is in the error', async () => {
    const other = serviceAccount(); // same email, a key Google never issued
    const err = await caught(provider({ credentials: other.json }).probe());
    expect([err.code, err.reason]).to.deep.equal(['auth', 'invalid_grant']);
    expect(drive.events.some((e) => e.op === 'token' && e.reason === 'invalid_grant')).to.equal(true);
    expectSanitised(err, [other.privateKey.slice(40, 80), drive.rootUrl, '127.0.0.1', 'ya29.']);
  });

  it('a revoked account fails the next call with an auth error', async () => {
    const revoked = serviceAccount('revoked@mediajobs-test.iam.gserviceaccount.com');
    drive.addServiceAccount('revoked@mediajobs-test.iam.gserviceaccount.com', revoked.publicKey);
    const drive2 = drive.addSharedDrive('Revoked', { 'revoked@mediajobs-test.iam.gserviceaccount.com': 'fileOrganizer' });
    const p = provider({ credentials: revoked.json, folderId: drive2 });
    await p.probe();
    drive.revokeServiceAccount('revoked@mediajobs-test.iam.gserviceaccount.com');
    const err = await caught(p.upload('videos/after-revoke.mp4', Readable.from([Buffer.from('x')])));
    expect(err.code).to.equal('auth');
  });

  it('accepts service_account_json as escaped JSON or Base64 and refuses anything else with the spec message', async () => {
    await provider({ credentials: JSON.stringify(account.json) }).probe();
    await provider({ credentials: Buffer.from(account.json).toString('base64') }).probe();
    for (const bad of ['not json', '{"type":"service_account"}', JSON.stringify({ ...JSON.parse(account.json), private_key: 'x' })]) {
      let err: unknown;
      try {
        provider({ credentials: bad });
      } catch (e) {
        err = e;
      }
      expect(err).to.be.instanceOf(StorageError);
      expect((err as StorageError).code).to.equal('invalid_config');
      expect((err as StorageError).message).to.equal('Invalid configuration: invalid service account JSON');
    }
  });

  it('refuses invalid configuration without a network call', () => {
    const bad: Array<[Partial<DriveStorageOptions>, string]> = [
      [{ folderId: "abc' or '1'='1" }, 'invalid_folder_id'],
      [{ chunkSize: 1000 }, 'invalid_chunk_size'],
      [{ rootUrl: 'ftp://x.test/' }, 'invalid_root_url'],
      [{ download: { baseUrl: 'http://g.test', secret: '', ref: 'j' } }, 'missing_download_secret'],
    ];
    expectInvalidConfig(provider, bad);
  });

  it('createProvider builds a drive provider from destination.json with the spec field names', async () => {
    const p = await createProvider(
      {
        provider: 'drive',
        service_account_json: Buffer.from(account.json).toString('base64'),
        folder_id: sharedDrive,
        folder_prefix: 'dest',
        base_folder: 'clips',
      },
      { drive: { rootUrl: drive.rootUrl, tokenUri: drive.tokenUri, download: { baseUrl: PUBLIC_BASE, secret: URL_SECRET, ref: 'job-9' } } },
    );
    // isDriveProvider, not instanceof: under mocha the provider comes from an ESM copy of drive.ts (see StorageError's hasInstance).
    expect(isDriveProvider(p)).to.equal(true);
    expect(p.name).to.equal('drive');
    await p.probe();
    expect(await p.presign('dest/clips/x.mp4', 60)).to.match(/\/drive-files\/job-9\/dest\/clips\/x\.mp4\?expires=\d+&sig=[0-9a-f]{64}$/);
    expect(SAVED_ONLY_PROVIDERS).to.include('drive');
  });
});

describe('storage: mapDriveError', () => {
  const api = (status: number, reason: string) => ({ response: { status, data: { error: { code: status, message: `m ${reason} 1AbCfileid`, errors: [{ reason }] } } } });
  const cases: Array<[string, unknown, string, string]> = [
    ['storageQuotaExceeded', api(403, 'storageQuotaExceeded'), 'auth', 'storageQuotaExceeded'],
    ['insufficientFilePermissions', api(403, 'insufficientFilePermissions'), 'auth', 'insufficient_permissions'],
    ['notFound', api(404, 'notFound'), 'not_found', 'notFound'],
    ['authError', api(401, 'authError'), 'auth', 'invalid_credentials'],
    ['rate limit', api(403, 'userRateLimitExceeded'), 'unreachable', 'rate_limited'],
    ['backendError', api(500, 'backendError'), 'unreachable', 'backendError'],
    ['token endpoint', { response: { status: 400, data: { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' } } }, 'auth', 'invalid_grant'],
    ['refused', Object.assign(new Error('request to http://10.1.2.3/ failed'), { cause: { code: 'ECONNREFUSED' } }), 'unreachable', 'ECONNREFUSED'],
    ['unlisted 502', { response: { status: 502, data: 'Bad Gateway' } }, 'unreachable', 'HTTP502'],
    ['anything else', new Error('boom http://host.example.test'), 'failed', 'unknown'],
  ];
  describeErrorMapping(mapDriveError, cases, /10\.1\.2\.3|example\.test|http:\/\/|1AbCfileid/);
});
