// The Azure Blob provider against a real Blob protocol server (Azurite, in a
// child process), driven by the official SDK unchanged.
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { Readable } from 'node:stream';
import { inspect } from 'node:util';
import { BlobStorageProvider, mapBlobError, type BlobStorageOptions } from '../src/storage/blob.js';
import { createProvider, destinationKeyLayout, objectKey, parseDestination, type StorageError } from '../src/storage/index.js';
import { startAzurite, type RunningAzurite } from '../../test/support/azurite.js';
import { caught, expectSanitised, thrown } from './storage-support.js';

const MiB = 1024 * 1024;
const CONTAINER = 'media';
const DAY = 86_400;

/** `total` bytes of random data as a stream of 1 MiB chunks, with their sha256. */
function generated(total: number): { stream: Readable; sha256: string } {
  const chunks: Buffer[] = [];
  for (let left = total; left > 0; left -= MiB) chunks.push(randomBytes(Math.min(MiB, left)));
  const hash = createHash('sha256');
  for (const c of chunks) hash.update(c);
  return { stream: Readable.from(chunks), sha256: hash.digest('hex') };
}

async function download(url: string): Promise<{ status: number; sha256: string; bytes: number; contentType: string | null }> {
  const res = await fetch(url);
  const body = Buffer.from(await res.arrayBuffer());
  return {
    status: res.status,
    sha256: createHash('sha256').update(body).digest('hex'),
    bytes: body.length,
    contentType: res.headers.get('content-type'),
  };
}

/** Nothing secret or host-identifying may appear anywhere a logger could print. */
describe('storage: blob provider on Azurite', function () {
  this.timeout(60_000);
  let az: RunningAzurite;

  function provider(overrides: Partial<BlobStorageOptions> = {}): BlobStorageProvider {
    return new BlobStorageProvider({
      endpoint: az.endpoint,
      accountName: az.accountName,
      accountKey: az.accountKey,
      container: CONTAINER,
      ...overrides,
    });
  }

  /** Requests for one blob, as Azurite logged them: `PUT block`, `PUT blocklist`, `PUT blob`, `DELETE`, `GET`. */
  async function requestsFor(blobPath: string): Promise<string[]> {
    await az.settled();
    return az.requests
      .filter((r) => r.path === `/${CONTAINER}/${blobPath}`)
      .map((r) => {
        const comp = /(?:^|&)comp=([a-z]+)/.exec(r.query)?.[1];
        const what = r.method === 'PUT' ? (comp ?? 'blob') : '';
        return `${r.method}${what ? ` ${what}` : ''} ${r.status}`;
      });
  }

  before(async () => {
    az = await startAzurite({ containers: [CONTAINER] });
  });
  after(async () => {
    await az?.stop();
  });

  it('streams 20 MiB of unknown length as staged blocks and serves it byte for byte through a 24 h SAS URL', async () => {
    const p = provider();
    const { stream, sha256 } = generated(20 * MiB);
    const key = 'videos/big/blocks.mp4';
    const result = await p.upload(key, stream, { contentType: 'video/mp4' });
    expect(result).to.deep.equal({ key, size: 20 * MiB });
    // Size unknown, so 8 MiB blocks: three Put Block, then one Put Block List commits them.
    expect(await requestsFor(key)).to.deep.equal(['PUT block 201', 'PUT block 201', 'PUT block 201', 'PUT blocklist 201']);

    const before = Date.now();
    const url = await p.presign(key, DAY);
    const q = new URL(url).searchParams;
    expect(q.get('sp')).to.equal('r'); // read only
    expect(q.get('sr')).to.equal('b'); // this blob only
    expect(q.get('st'), 'no start time (clock skew)').to.equal(null);
    const expiry = Date.parse(q.get('se') as string);
    expect(expiry).to.be.within(before + DAY * 1000 - 2000, Date.now() + DAY * 1000 + 1000);
    const got = await download(url);
    expect(got.status).to.equal(200);
    expect(got.bytes).to.equal(20 * MiB);
    expect(got.sha256).to.equal(sha256);
    expect(got.contentType).to.equal('video/mp4');
  });

  it('uses 4 MiB blocks when the size is declared, and still counts the bytes', async () => {
    const p = provider();
    const { stream, sha256 } = generated(9 * MiB + 123);
    const key = 'videos/sized.mkv';
    const result = await p.upload(key, stream, { size: 9 * MiB + 123 });
    expect(result.size).to.equal(9 * MiB + 123);
    expect((await requestsFor(key)).filter((r) => r === 'PUT block 201')).to.have.length(3);
    expect((await download(await p.presign(key, 60))).sha256).to.equal(sha256);
  });

  it('uploads a small stream and keeps a key with spaces and non-ASCII letters intact', async () => {
    const p = provider();
    const key = 'videos/Fête de la musique/clip 1.m4a';
    const result = await p.upload(key, Readable.from([Buffer.from('hello '), Buffer.from('world')]), { contentType: 'audio/mp4' });
    expect(result.size).to.equal(11);
    const res = await fetch(await p.presign(key, 60));
    expect(res.status).to.equal(200);
    expect(await res.text()).to.equal('hello world');
    expect(res.headers.get('content-type')).to.equal('audio/mp4');
  });

  it('refuses to overwrite: a second upload to the same key fails with conflict at the commit, and the first blob stays whole', async () => {
    const p = provider();
    const key = 'videos/taken.mp4';
    const first = generated(5 * MiB + 1);
    await p.upload(key, first.stream, { contentType: 'video/mp4', size: 5 * MiB + 1 });
    const before = (await requestsFor(key)).length;

    // Several blocks, so the refused upload stages blocks against the existing blob before its commit is refused.
    const second = generated(9 * MiB).stream;
    const err = await caught(p.upload(key, second, { contentType: 'audio/mp4' }));
    expect([err.code, err.reason, err.httpStatus]).to.deep.equal(['conflict', 'BlobAlreadyExists', 409]);
    expect(second.destroyed, 'the refused body is destroyed, so a producer stops').to.equal(true);
    // Put Block takes no condition (two 8 MiB blocks, size unknown); Put Block List with If-None-Match: * is refused by the service itself.
    expect((await requestsFor(key)).slice(before)).to.deep.equal(['PUT block 201', 'PUT block 201', 'PUT blocklist 409']);

    const got = await download(await p.presign(key, 60));
    expect([got.status, got.bytes, got.sha256, got.contentType]).to.deep.equal([200, 5 * MiB + 1, first.sha256, 'video/mp4']);
  });

  it('refuses to overwrite under a race: of two uploads committing one new key at once, one lands and the other fails with conflict', async () => {
    const p = provider();
    const key = 'videos/raced.mp4';
    const results = await Promise.allSettled(
      ['one', 'two'].map((body) => p.upload(key, Readable.from([Buffer.from(body)]))),
    );
    const landed = results.flatMap((r, i) => (r.status === 'fulfilled' ? [['one', 'two'][i]] : []));
    const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as StorageError] : []));
    expect(landed).to.have.length(1);
    expect(refused.map((e) => [e.code, e.reason])).to.deep.equal([['conflict', 'BlobAlreadyExists']]);
    expect(await (await fetch(await p.presign(key, 60))).text()).to.equal(landed[0]);
  });

  it('a SAS URL whose signature or expiry was altered is refused', async () => {
    const p = provider();
    const key = 'videos/guarded.mp4';
    await p.upload(key, Readable.from([Buffer.from('secret video')]));
    const url = new URL(await p.presign(key, 60));
    const tampered = new URL(url);
    tampered.searchParams.set('se', new Date(Date.now() + 30 * DAY * 1000).toISOString().replace(/\.\d+Z$/, 'Z'));
    expect((await fetch(tampered)).status).to.equal(403);
    const otherBlob = new URL(url);
    otherBlob.pathname = otherBlob.pathname.replace('guarded', 'other');
    expect((await fetch(otherBlob)).status).to.equal(403);
    expect((await fetch(url)).status).to.equal(200);
  });

  it('fails a stream longer or shorter than its declared size and leaves no blob', async () => {
    const p = provider();
    const longer = await caught(p.upload('videos/long.mp4', Readable.from([Buffer.alloc(100)]), { size: 10 }));
    expect(longer.code).to.equal('failed');
    expect(longer.reason).to.equal('size_mismatch');
    const shorter = await caught(p.upload('videos/short.mp4', Readable.from([Buffer.alloc(10)]), { size: 100 }));
    expect(shorter.code).to.equal('failed');
    expect(shorter.reason).to.equal('size_mismatch');
    for (const key of ['videos/long.mp4', 'videos/short.mp4']) {
      expect((await fetch(await p.presign(key, 60))).status).to.equal(404);
    }
  });

  it('reports a failing source as source_error, not as an unreachable backend, and commits nothing', async () => {
    const p = provider();
    async function* broken() {
      yield randomBytes(9 * MiB); // past the first block, so staging is under way
      throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    }
    const err = await caught(p.upload('videos/broken.mp4', Readable.from(broken())));
    expect(err.code).to.equal('failed');
    expect(err.reason).to.equal('source_error');
    expect(await requestsFor('videos/broken.mp4')).not.to.include('PUT blocklist 201');
    expect((await fetch(await p.presign('videos/broken.mp4', 60))).status).to.equal(404);
  });

  it('stops reading the source when the backend fails mid-stream', async () => {
    const p = provider({ container: 'no-such-container' });
    let produced = 0;
    async function* endless() {
      for (;;) {
        produced += MiB;
        yield Buffer.alloc(MiB);
      }
    }
    const body = Readable.from(endless());
    const err = await caught(p.upload('videos/endless.mp4', body));
    expect(err.code).to.equal('not_found');
    expect(err.reason).to.equal('ContainerNotFound');
    expect(body.destroyed).to.equal(true);
    // Bounded by the block buffers, not by the (infinite) source.
    expect(produced).to.be.below(100 * MiB);
  });

  it('probe puts and deletes verify_credentials.txt at the root of the folder prefix', async () => {
    await provider().probe();
    await provider({ folderPrefix: '/team a/archive/' }).probe();
    expect(await requestsFor('verify_credentials.txt')).to.deep.equal(['PUT blob 201', 'DELETE 202']);
    expect(await requestsFor('team a/archive/verify_credentials.txt')).to.deep.equal(['PUT blob 201', 'DELETE 202']);
    const names: string[] = [];
    for await (const b of az.client().getContainerClient(CONTAINER).listBlobsFlat()) names.push(b.name);
    expect(names.filter((n) => n.endsWith('verify_credentials.txt'))).to.deep.equal([]);
  });

  it('delete removes a blob and is idempotent', async () => {
    const p = provider();
    await p.upload('videos/gone.mp4', Readable.from([Buffer.from('x')]));
    await p.delete('videos/gone.mp4');
    await p.delete('videos/gone.mp4');
    expect((await fetch(await p.presign('videos/gone.mp4', 60))).status).to.equal(404);
  });

  it('a missing container is not_found with reason ContainerNotFound', async () => {
    const p = provider({ container: 'no-such-container' });
    const probe = await caught(p.probe());
    expect(probe.code).to.equal('not_found');
    expect(probe.reason).to.equal('ContainerNotFound');
    expect(probe.httpStatus).to.equal(404);
    const upload = await caught(p.upload('videos/x.mp4', Readable.from([Buffer.from('x')])));
    expect(upload.code).to.equal('not_found');
    expect((await caught(p.delete('videos/x.mp4'))).code).to.equal('not_found');
    expectSanitised(probe, [az.accountKey, az.accountName, String(az.port), 'no-such-container']);
  });

  it('a wrong account key is auth, and the key appears nowhere in the error', async () => {
    const wrongKey = randomBytes(64).toString('base64');
    const p = provider({ accountKey: wrongKey, maxTries: 1 });
    const probe = await caught(p.probe());
    expect(probe.code).to.equal('auth');
    expect(probe.httpStatus).to.equal(403);
    // Azurite answers AuthorizationFailure; Azure itself AuthenticationFailed (see the mapping table below).
    expect(['AuthorizationFailure', 'AuthenticationFailed']).to.include(probe.reason);
    const upload = await caught(p.upload('videos/x.mp4', Readable.from([randomBytes(3 * MiB)])));
    expect(upload.code).to.equal('auth');
    expectSanitised(probe, [wrongKey, az.accountKey, az.accountName, String(az.port)]);
    expectSanitised(upload, [wrongKey, az.accountKey, az.accountName, String(az.port)]);
  });

  it('a stopped server is unreachable with reason ECONNREFUSED', async () => {
    const gone = await startAzurite({ containers: [CONTAINER], accessLog: false });
    await gone.stop();
    const p = provider({ endpoint: gone.endpoint, accountName: gone.accountName, accountKey: gone.accountKey, maxTries: 1 });
    const probe = await caught(p.probe());
    expect(probe.code).to.equal('unreachable');
    expect(probe.reason).to.equal('ECONNREFUSED');
    const upload = await caught(p.upload('videos/x.mp4', Readable.from([Buffer.from('x')])));
    expect(upload.code).to.equal('unreachable');
    expectSanitised(probe, ['127.0.0.1', String(gone.port), gone.accountKey]);
  });

  it('a server that accepts and never answers is unreachable (timeout)', async () => {
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((sock) => sockets.add(sock));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as net.AddressInfo).port;
    try {
      const p = provider({ endpoint: `http://127.0.0.1:${port}/${az.accountName}`, maxTries: 1, tryTimeoutMs: 300 });
      const err = await caught(p.probe());
      expect(err.code).to.equal('unreachable');
      expect(err.reason).to.equal('timeout');
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('keeps the account key out of the provider when inspected or serialised', () => {
    const p = provider();
    expect(inspect(p, { depth: 10 })).not.to.include(az.accountKey);
    expect(JSON.stringify(p)).not.to.include(az.accountKey);
  });

  it('refuses invalid configuration without a network call', () => {
    const bad: Array<[Partial<BlobStorageOptions>, string]> = [
      [{ accountName: '' }, 'missing_account_name'],
      [{ accountName: 'Has-Upper' }, 'invalid_account_name'],
      [{ container: '' }, 'missing_container'],
      [{ accountKey: '' }, 'missing_account_key'],
      [{ accountKey: 'not base64!' }, 'invalid_account_key'],
      [{ endpoint: 'ftp://example.test' }, 'invalid_endpoint'],
      [{ endpoint: 'https://user:pw@example.test' }, 'invalid_endpoint'],
      // A SAS token in the endpoint would be a secret in a field treated as public.
      [{ endpoint: 'https://acct.blob.core.windows.net/?sv=2024&sig=abc' }, 'invalid_endpoint'],
      [{ blockSize: 0 }, 'invalid_block_size'],
    ];
    for (const [overrides, reason] of bad) {
      const err = thrown(() => provider(overrides));
      expect(err.code, reason).to.equal('invalid_config');
      expect(err.reason).to.equal(reason);
      expect(err.message).not.to.include(az.accountKey);
    }
  });

  it('defaults to the public Azure endpoint and accepts a sovereign-cloud host', () => {
    expect(provider({ endpoint: undefined, accountName: 'myacct' }).url).to.equal('https://myacct.blob.core.windows.net');
    expect(provider({ endpoint: 'myacct.blob.core.chinacloudapi.cn/' }).url).to.equal('https://myacct.blob.core.chinacloudapi.cn');
  });

  it('refuses an expiry that is not 1 s to 7 days', async () => {
    const p = provider();
    for (const seconds of [0, -1, 1.5, 7 * DAY + 1]) {
      expect((await caught(p.presign('videos/x.mp4', seconds))).reason).to.equal('invalid_expiry');
    }
  });

  it('createProvider builds a blob provider from destination.json and the key layout lands the file', async () => {
    const destination = {
      provider: 'blob',
      account_name: az.accountName,
      container: CONTAINER,
      account_key: az.accountKey,
      endpoint: az.endpoint,
      folder_prefix: 'tenant-7',
    };
    const p = await createProvider(destination);
    expect(p.name).to.equal('blob');
    await p.probe();
    expect(await requestsFor('tenant-7/verify_credentials.txt')).to.deep.equal(['PUT blob 201', 'DELETE 202']);

    const key = objectKey({ ...destinationKeyLayout(parseDestination(destination)), folder: 'Show/S1', name: 'Épisode 1', ext: 'mp4' });
    expect(key).to.equal('tenant-7/videos/Show/S1/Épisode 1.mp4');
    const { stream, sha256 } = generated(2 * MiB + 7);
    await p.upload(key, stream, { contentType: 'video/mp4' });
    expect((await download(await p.presign(key, DAY))).sha256).to.equal(sha256);
  });

  it('parseDestination checks the shape of a blob destination without echoing values', () => {
    const ok = { provider: 'blob', account_name: 'myacct', container: 'media-1', account_key: 'a2V5' };
    expect(parseDestination({ ...ok, base_folder: 'clips' })).to.deep.equal({ ...ok, base_folder: 'clips' });
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...ok, account_name: undefined }, 'account_name_required'],
      [{ ...ok, account_name: 'My_Account' }, 'invalid_account_name'],
      [{ ...ok, container: 'Bad--Name' }, 'invalid_container'],
      [{ ...ok, account_key: undefined }, 'account_key_required'],
      [{ ...ok, account_key: 'top secret key' }, 'invalid_account_key'],
    ];
    for (const [raw, reason] of cases) {
      const err = thrown(() => parseDestination(raw));
      expect(err.reason).to.equal(reason);
      expect(err.message).not.to.match(/My_Account|Bad--Name|top secret key/);
    }
  });
});

describe('storage: mapBlobError', () => {
  const restError = (code: string, statusCode: number) => Object.assign(new Error(`${code} at https://acct.blob.core.windows.net/c?sig=SECRET`), { name: 'RestError', code, statusCode });
  const cases: Array<[string, unknown, string, string]> = [
    ['AuthenticationFailed (bad signature on Azure)', restError('AuthenticationFailed', 403), 'auth', 'AuthenticationFailed'],
    ['AuthorizationPermissionMismatch (SAS/RBAC lacks write)', restError('AuthorizationPermissionMismatch', 403), 'auth', 'AuthorizationPermissionMismatch'],
    ['ContainerNotFound', restError('ContainerNotFound', 404), 'not_found', 'ContainerNotFound'],
    ['InvalidResourceName', restError('InvalidResourceName', 400), 'invalid_config', 'InvalidResourceName'],
    ['ServerBusy', restError('ServerBusy', 503), 'unreachable', 'ServerBusy'],
    ['details.errorCode', { name: 'RestError', statusCode: 403, details: { errorCode: 'AccountIsDisabled' } }, 'auth', 'AccountIsDisabled'],
    ['BlobAlreadyExists (If-None-Match: * on an existing blob)', restError('BlobAlreadyExists', 409), 'conflict', 'BlobAlreadyExists'],
    ['unmodelled 409', restError('BlobArchived', 409), 'failed', 'BlobArchived'],
    ['status only', { name: 'RestError', statusCode: 500 }, 'unreachable', 'HTTP500'],
    ['ECONNREFUSED', Object.assign(new Error('connect ECONNREFUSED 10.1.2.3:443'), { name: 'RestError', code: 'ECONNREFUSED' }), 'unreachable', 'ECONNREFUSED'],
    ['ENOTFOUND in cause', Object.assign(new Error('x'), { cause: Object.assign(new Error('getaddrinfo ENOTFOUND acct.example.test'), { code: 'ENOTFOUND' }) }), 'unreachable', 'ENOTFOUND'],
    ['REQUEST_SEND_ERROR', Object.assign(new Error('send failed'), { name: 'RestError', code: 'REQUEST_SEND_ERROR' }), 'unreachable', 'REQUEST_SEND_ERROR'],
    ['per-try deadline', Object.assign(new Error('The operation was aborted.'), { name: 'AbortError' }), 'unreachable', 'timeout'],
    ['a reason that is not a token', restError('bad code with spaces http://host', 418), 'failed', 'unknown'],
  ];
  for (const [title, input, code, reason] of cases) {
    it(`${title} → ${code} (${reason})`, () => {
      const err = mapBlobError(input);
      expect(err.code).to.equal(code);
      expect(err.reason).to.equal(reason);
      expect(err.message).not.to.match(/SECRET|10\.1\.2\.3|example\.test|https?:\/\//);
    });
  }
});
