// The Azure Blob provider against a real Blob protocol server (Azurite, in a
// child process), driven by the official SDK unchanged.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { BlobStorageProvider, mapBlobError, type BlobStorageOptions } from '../src/storage/blob.js';
import { createProvider, destinationKeyLayout, objectKey, parseDestination, type StorageError } from '../src/storage/index.js';
import { startAzurite, type RunningAzurite } from '../../test/support/azurite.js';
import { storageContract } from './storage-contract.js';
import { MiB, caught, describeErrorMapping, download, expectInvalidConfig, expectSanitised, generated, readPresigned, thrown } from './storage-support.js';

const CONTAINER = 'media';
const DAY = 86_400;

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

  /** Azurite's log of requests for verify_credentials.txt objects: a Put Blob answered 201 and a Delete answered 202 are the expected successes. */
  async function writesSince(from: number): Promise<string[]> {
    await az.settled();
    const prefix = `/${CONTAINER}/`;
    return az.requests
      .slice(from)
      // Only the probe's object: a block of an earlier, failed upload may land after that upload
      // has returned (an uncommitted block, which Azure drops), and has no place in this log.
      .filter((r) => r.path.startsWith(prefix) && r.path.endsWith('/verify_credentials.txt'))
      .map((r) => {
        const key = r.path.slice(prefix.length);
        if (r.method === 'PUT' && r.status === 201 && !/(?:^|&)comp=/.test(r.query)) return `put ${key}`;
        if (r.method === 'DELETE' && r.status === 202) return `delete ${key}`;
        return `${r.method} ${r.query} ${r.status} ${key}`;
      });
  }

  storageContract({
    provider: (opts) => provider(opts),
    withSecrets: () => ({ provider: provider(), secrets: [az.accountKey] }),
    maxExpiry: 7 * 86_400,
    staged: () => ({ provider: provider(), bytes: 9 * MiB }),
    read: (key) => readPresigned((k, t) => provider().presign(k, t), key),
    keys: async () => {
      const names: string[] = [];
      for await (const b of az.client().getContainerClient(CONTAINER).listBlobsFlat()) names.push(b.name);
      return names;
    },
    abandoned: async (key) => {
      expect(await requestsFor(key)).not.to.include('PUT blocklist 201');
    },
    presigned: true,
    writes: {
      mark: async () => {
        await az.settled(); // the log is written after the answer: wait for what came before
        return az.requests.length;
      },
      since: writesSince,
    },
    missing: {
      noun: 'container',
      reason: 'ContainerNotFound',
      deleteFails: true,
      readsAtMost: 100 * MiB,
      provider: () => provider({ container: 'no-such-container' }),
      hidden: () => [az.accountKey, az.accountName, String(az.port), 'no-such-container'],
    },
    stopped: async () => {
      const gone = await startAzurite({ containers: [CONTAINER], accessLog: false });
      await gone.stop();
      return {
        provider: provider({ endpoint: gone.endpoint, accountName: gone.accountName, accountKey: gone.accountKey, maxTries: 1 }),
        hidden: [String(gone.port), gone.accountKey],
      };
    },
    silent: { reason: 'timeout', provider: (port) => provider({ endpoint: `http://127.0.0.1:${port}/${az.accountName}`, maxTries: 1, tryTimeoutMs: 300 }) },
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
    expect(await download(url)).to.deep.include({ status: 200, bytes: 20 * MiB, sha256: sha256, contentType: 'video/mp4' });
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
    expectInvalidConfig(provider, bad, [az.accountKey]);
  });

  it('defaults to the public Azure endpoint and accepts a sovereign-cloud host', () => {
    expect(provider({ endpoint: undefined, accountName: 'myacct' }).url).to.equal('https://myacct.blob.core.windows.net');
    expect(provider({ endpoint: 'myacct.blob.core.chinacloudapi.cn/' }).url).to.equal('https://myacct.blob.core.chinacloudapi.cn');
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
  describeErrorMapping(mapBlobError, cases, /SECRET|10\.1\.2\.3|example\.test|https?:\/\//);
});
