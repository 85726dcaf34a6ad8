// Managed storage on the local disk: atomic, never-overwriting uploads and
// HMAC-signed, expiring download URLs.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { readdirSync, writeSync } from 'node:fs';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import {
  LocalStorageProvider,
  StorageError,
  createManagedStorage,
  createProvider,
  decodeKeyPath,
  openFile,
  signFileUrl,
  verifySignedFileUrl,
} from '../src/storage/index.js';
import { storageContract } from './storage-contract.js';

const SECRET = 'local-test-secret-0123456789abcdef';

async function caught(p: Promise<unknown> | (() => unknown)): Promise<StorageError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    expect(err).to.be.instanceOf(StorageError);
    return err as StorageError;
  }
  expect.fail('expected a StorageError');
}

/** The stored file of `key` as the gateway reads it: through the descriptor openFile checked. */
async function readStored(dir: string, key: string): Promise<Buffer> {
  const { handle } = await openFile(dir, key);
  try {
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

/** What the gateway's /files route does with a presigned URL: decode, verify, open. */
async function serve(dir: string, url: string, secret = SECRET, nowMs = Date.now()): Promise<Buffer | 'forbidden'> {
  const u = new URL(url);
  const key = decodeKeyPath(u.pathname.replace(/^\/files\//, ''));
  if (!verifySignedFileUrl(key, u.searchParams.get('expires') ?? '', u.searchParams.get('sig') ?? '', secret, nowMs)) return 'forbidden';
  return readStored(dir, key);
}

describe('storage: managed local provider', () => {
  let dir: string;
  let p: LocalStorageProvider;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'mediajobs-local-'));
    p = new LocalStorageProvider({ dir, publicBaseUrl: 'http://127.0.0.1:8080/', secret: SECRET });
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** The file under `key`, found as the gateway finds it; undefined when there is none. */
  async function stored(key: string): Promise<Buffer | undefined> {
    try {
      return await readStored(dir, key);
    } catch (err) {
      if (err instanceof StorageError && err.code === 'not_found') return undefined;
      throw err;
    }
  }

  storageContract({
    provider: () => p,
    withSecrets: () => ({ provider: p, secrets: [SECRET] }),
    staged: () => ({ provider: p, bytes: 1024 * 1024 }),
    read: stored,
    nothingOpen: () => {
      // Synchronous: the temp area is read with the sync call the assertion needs.
      expect(readdirSync(path.join(dir, '.tmp'))).to.deep.equal([]);
    },
  });

  it('streams an upload to <dir>/<key> and serves it back through a verified presigned URL', async () => {
    const data = randomBytes(3 * 1024 * 1024 + 17);
    const key = 'videos/Show S01/Épisode 1 (final).mp4';
    const res = await p.upload(key, Readable.from([data.subarray(0, 1000), data.subarray(1000)]), { size: data.length });
    expect(res).to.deep.equal({ key, size: data.length });
    expect((await readFile(path.join(dir, key))).equals(data)).to.equal(true);
    // Nothing left in the temp area.
    expect(await readdir(path.join(dir, '.tmp'))).to.deep.equal([]);

    const url = await p.presign(key, 86_400);
    const u = new URL(url);
    expect(u.origin).to.equal('http://127.0.0.1:8080');
    expect(u.pathname).to.equal('/files/videos/Show%20S01/%C3%89pisode%201%20(final).mp4');
    const expires = Number(u.searchParams.get('expires'));
    expect(expires - Math.floor(Date.now() / 1000)).to.be.within(86_399, 86_400);
    expect(u.searchParams.get('sig')).to.equal(createHmacHex(`${key}\n${expires}`));

    const served = await serve(dir, url);
    expect(served).to.be.instanceOf(Buffer);
    expect(createHash('sha256').update(served as Buffer).digest('hex')).to.equal(createHash('sha256').update(data).digest('hex'));
  });

  it('keeps a path on PUBLIC_BASE_URL (gateway behind a proxy)', async () => {
    const proxied = new LocalStorageProvider({ dir, publicBaseUrl: 'https://media.example.test/api/', secret: SECRET });
    const url = await proxied.presign('videos/a.mp4', 60);
    expect(url).to.match(/^https:\/\/media\.example\.test\/api\/files\/videos\/a\.mp4\?expires=\d+&sig=[0-9a-f]{64}$/);
  });

  it('rejects tampered, re-keyed, expired and foreign-secret URLs', async () => {
    await p.upload('videos/a.mp4', Readable.from([Buffer.from('a')]));
    await p.upload('videos/b.mp4', Readable.from([Buffer.from('b')]));
    const url = new URL(await p.presign('videos/a.mp4', 3600));
    const expires = url.searchParams.get('expires') as string;
    const sig = url.searchParams.get('sig') as string;
    const now = Date.now();

    expect(verifySignedFileUrl('videos/a.mp4', expires, sig, SECRET, now)).to.equal(true);
    // another file with a's signature
    expect(verifySignedFileUrl('videos/b.mp4', expires, sig, SECRET, now)).to.equal(false);
    // a later expiry with the same signature
    expect(verifySignedFileUrl('videos/a.mp4', String(Number(expires) + 1), sig, SECRET, now)).to.equal(false);
    // the same expiry spelled differently
    expect(verifySignedFileUrl('videos/a.mp4', `0${expires}`, sig, SECRET, now)).to.equal(true);
    // one flipped hex digit, a truncated and a non-hex signature
    const flipped = (sig[0] === '0' ? '1' : '0') + sig.slice(1);
    expect(verifySignedFileUrl('videos/a.mp4', expires, flipped, SECRET, now)).to.equal(false);
    expect(verifySignedFileUrl('videos/a.mp4', expires, sig.slice(0, 63), SECRET, now)).to.equal(false);
    expect(verifySignedFileUrl('videos/a.mp4', expires, 'z'.repeat(64), SECRET, now)).to.equal(false);
    // expiry: valid until the second it names, not at or after it
    expect(verifySignedFileUrl('videos/a.mp4', expires, sig, SECRET, Number(expires) * 1000 - 1)).to.equal(true);
    expect(verifySignedFileUrl('videos/a.mp4', expires, sig, SECRET, Number(expires) * 1000)).to.equal(false);
    expect(await serve(dir, url.toString(), SECRET, Number(expires) * 1000 + 5000)).to.equal('forbidden');
    // garbage expiry, another secret
    expect(verifySignedFileUrl('videos/a.mp4', 'soon', sig, SECRET, now)).to.equal(false);
    expect(verifySignedFileUrl('videos/a.mp4', '-1', sig, SECRET, now)).to.equal(false);
    expect(verifySignedFileUrl('videos/a.mp4', expires, sig, 'another-secret-0123456789', now)).to.equal(false);
    // a URL signed by another installation
    const foreign = new LocalStorageProvider({ dir, publicBaseUrl: 'http://127.0.0.1:8080', secret: 'some-other-secret-abcdefgh' });
    expect(await serve(dir, await foreign.presign('videos/a.mp4', 60))).to.equal('forbidden');
  });

  it('lets exactly one of two concurrent uploads to one key win', async () => {
    const slow = (text: string) =>
      Readable.from(
        (async function* () {
          for (let i = 0; i < 20; i++) {
            yield Buffer.from(text);
            await new Promise((r) => setTimeout(r, 2));
          }
        })(),
      );
    const results = await Promise.allSettled([p.upload('videos/race.mp4', slow('A')), p.upload('videos/race.mp4', slow('B'))]);
    const ok = results.filter((r) => r.status === 'fulfilled');
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(ok).to.have.length(1);
    expect(failed).to.have.length(1);
    expect((failed[0]?.reason as StorageError).code).to.equal('conflict');
    const content = await readFile(path.join(dir, 'videos/race.mp4'), 'utf8');
    expect(content).to.be.oneOf(['A'.repeat(20), 'B'.repeat(20)]);
    expect(await readdir(path.join(dir, '.tmp'))).to.deep.equal([]);
  });

  it('refuses keys that could leave the directory or reach its temp area', async () => {
    const bad = [
      '../escape.mp4',
      'videos/../../escape.mp4',
      '/etc/passwd',
      'videos\\..\\x.mp4',
      'videos//x.mp4',
      'videos/./x.mp4',
      '.tmp/x.part',
      'videos/.hidden.mp4',
      'videos/x\u0000.mp4',
      '',
    ];
    for (const key of bad) {
      const up = await caught(p.upload(key, Readable.from([Buffer.from('x')])));
      expect(up.code, key).to.equal('invalid_config');
      expect((await caught(p.presign(key, 60))).code, key).to.equal('invalid_config');
      expect((await caught(openFile(dir, key))).code, key).to.equal('invalid_config');
      expect((await caught(p.delete(key))).code, key).to.equal('invalid_config');
    }
    // Encoded traversal through the gateway's decoder is caught as well.
    expect((await caught(() => decodeKeyPath('videos/%2E%2E/%2E%2E/etc/passwd'))).code).to.equal('invalid_config');
    expect((await caught(() => decodeKeyPath('..%2Fescape'))).code).to.equal('invalid_config');
    expect((await caught(() => decodeKeyPath('videos/%E0%A4%A.mp4'))).code).to.equal('invalid_config');
  });

  it('openFile follows no symlink: not out of the storage directory, not to another stored file, not through a linked directory', async () => {
    const outside = await mkdtemp(path.join(os.tmpdir(), 'mediajobs-outside-'));
    try {
      await writeFile(path.join(outside, 'secret.txt'), 'secret');
      await p.upload('videos/real.mp4', Readable.from([Buffer.from('stored')]));
      await symlink(path.join(outside, 'secret.txt'), path.join(dir, 'videos/link.mp4'));
      await symlink(outside, path.join(dir, 'videos/linkdir'));
      // Inside the directory: a link to a stored file, and a directory linked to a stored one.
      await symlink(path.join(dir, 'videos/real.mp4'), path.join(dir, 'videos/inside.mp4'));
      await symlink('real.mp4', path.join(dir, 'videos/relative.mp4'));
      await symlink(path.join(dir, 'videos'), path.join(dir, 'alias'));
      for (const key of ['videos/link.mp4', 'videos/linkdir/secret.txt', 'videos/inside.mp4', 'videos/relative.mp4', 'alias/real.mp4']) {
        expect((await caught(openFile(dir, key))).code, key).to.equal('not_found');
      }
      expect(await readStored(dir, 'videos/real.mp4')).to.deep.equal(Buffer.from('stored'));
      // a directory is not a file
      expect((await caught(openFile(dir, 'videos'))).code).to.equal('not_found');
      expect((await caught(openFile(dir, 'videos/missing.mp4'))).code).to.equal('not_found');
      expect((await caught(openFile(dir, 'videos/real.mp4/x'))).code).to.equal('not_found');
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });

  it('openFile serves a storage directory that is itself reached through a link (MANAGED_STORAGE_DIR)', async () => {
    await p.upload('videos/r.mp4', Readable.from([Buffer.from('12345')]));
    const alias = `${dir}-alias`;
    await symlink(dir, alias);
    try {
      expect(await readStored(alias, 'videos/r.mp4')).to.deep.equal(Buffer.from('12345'));
    } finally {
      await rm(alias, { force: true });
    }
  });

  it('openFile returns an open descriptor, the size and mtime of a stored file', async () => {
    await p.upload('videos/r.mp4', Readable.from([Buffer.from('12345')]));
    const f = await openFile(dir, 'videos/r.mp4');
    try {
      expect(f.size).to.equal(5);
      expect(f.mtime.getTime()).to.be.greaterThan(0);
      expect((await f.handle.readFile()).toString()).to.equal('12345');
    } finally {
      await f.handle.close();
    }
  });

  it("a source failing with ENOENT is the source's error, not not_found, and leaves neither the file nor a temp file", async () => {
    async function* broken() {
      yield Buffer.from('partial');
      throw Object.assign(new Error('source died'), { code: 'ENOENT' });
    }
    const err = await caught(p.upload('videos/broken.mp4', Readable.from(broken())));
    // The source's ENOENT is not the storage's: not not_found.
    expect(err.code).to.equal('failed');
    expect(err.reason).to.equal('source_error');
    expect((await caught(openFile(dir, 'videos/broken.mp4'))).code).to.equal('not_found');
    expect(await readdir(path.join(dir, '.tmp'))).to.deep.equal([]);
  });

  it('stage: a child process writes the file through its descriptor; it appears under its key only when published', async () => {
    const staged = await p.stage!();
    // What the runner does with ffmpeg: the staged file is the child's stdout.
    const child = spawn('head', ['-c', String(5 * 1024 * 1024), '/dev/urandom'], { stdio: ['ignore', staged.fd, 'ignore'] });
    expect(await new Promise((r) => child.on('close', r))).to.equal(0);
    expect(await readdir(dir)).to.deep.equal(['.tmp']);
    const [part] = await readdir(path.join(dir, '.tmp'));
    const written = await readFile(path.join(dir, '.tmp', part!));

    // A taken key is refused and the file stays staged for the next key.
    await writeFile(path.join(dir, 'taken.bin'), 'someone else');
    expect((await caught(staged.publish('taken.bin'))).code).to.equal('conflict');
    expect(await readFile(path.join(dir, 'taken.bin'), 'utf8')).to.equal('someone else');

    expect(await staged.publish('videos/out.bin')).to.deep.equal({ key: 'videos/out.bin', size: 5 * 1024 * 1024 });
    expect((await readFile(path.join(dir, 'videos/out.bin'))).equals(written)).to.equal(true);
    expect(await readdir(path.join(dir, '.tmp'))).to.deep.equal([]);
    // Published means done: neither a second key nor a discard touches it.
    expect((await caught(staged.publish('videos/again.bin'))).reason).to.equal('not_staged');
    await staged.discard();
    expect((await readFile(path.join(dir, 'videos/out.bin'))).length).to.equal(5 * 1024 * 1024);
  });

  it('stage: a discarded file leaves nothing behind, and an invalid key is refused without losing it', async () => {
    const staged = await p.stage!();
    writeSync(staged.fd, 'partial output');
    expect((await caught(staged.publish('../escape.bin'))).code).to.equal('invalid_config');
    expect(await readdir(path.join(dir, '.tmp'))).to.have.length(1);
    await staged.discard();
    await staged.discard();
    expect(await readdir(path.join(dir, '.tmp'))).to.deep.equal([]);
    expect(await readdir(dir)).to.deep.equal(['.tmp']);
  });

  it('probe writes and removes a file and reports an unwritable directory', async () => {
    await p.probe();
    expect(await readdir(path.join(dir, '.tmp'))).to.deep.equal([]);
    // A regular file where the directory should be: nothing can be written under it.
    const blocked = path.join(dir, 'blocked');
    await writeFile(blocked, '');
    const err = await caught(new LocalStorageProvider({ dir: blocked, publicBaseUrl: 'http://x.test', secret: SECRET }).probe());
    expect(err.code).to.be.oneOf(['not_found', 'failed']);
    expect(err.message).not.to.include(dir);
  });

  it('requires a FILE_URL_SECRET', async () => {
    expect((await caught(() => new LocalStorageProvider({ dir, publicBaseUrl: 'http://x.test', secret: '' }))).reason).to.equal('missing_secret');
    const err = await caught(() =>
      createManagedStorage({
        MANAGED_STORAGE: 'local',
        MANAGED_STORAGE_DIR: dir,
        PUBLIC_BASE_URL: 'http://127.0.0.1:8080',
        MANAGED_S3_REGION: 'us-east-1',
        MANAGED_S3_FORCE_PATH_STYLE: true,
      }),
    );
    expect(err.code).to.equal('invalid_config');
  });

  it('createProvider({provider: "managed"}) builds local managed storage from the environment', async () => {
    const m = await createProvider(
      { provider: 'managed' },
      { env: { MANAGED_STORAGE: 'local', MANAGED_STORAGE_DIR: dir, FILE_URL_SECRET: SECRET, PUBLIC_BASE_URL: 'http://127.0.0.1:9999' } },
    );
    expect(m.name).to.equal('managed');
    await m.upload('videos/env.mp4', Readable.from([Buffer.from('env')]));
    const url = await m.presign('videos/env.mp4', 60);
    expect(url.startsWith('http://127.0.0.1:9999/files/videos/env.mp4?')).to.equal(true);
    expect(String(await serve(dir, url))).to.equal('env');

    const bad = await caught(() => createProvider({ provider: 'managed' }, { env: { MANAGED_STORAGE: 'nfs' } }));
    expect(bad.code).to.equal('invalid_config');
  });

  it('signFileUrl signs "<key>\\n<expires>" with HMAC-SHA256', () => {
    expect(signFileUrl('videos/a.mp4', 1700000000, SECRET)).to.equal(createHmacHex('videos/a.mp4\n1700000000'));
  });
});

/** The expected signature, computed with node:crypto directly rather than the module under test. */
function createHmacHex(text: string): string {
  return createHmac('sha256', SECRET).update(text).digest('hex');
}
