// The contract every storage provider keeps (StorageProvider in
// src/storage/types.ts), as one set of cases run against each provider's
// backend. A provider's test file calls storageContract() inside its own
// describe with a small harness: how to make the provider, read back what
// its backend holds, and whatever else its backend can show. What only one
// provider does (its part sizes, signatures, error reasons) stays in its file.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { inspect } from 'node:util';
import type { StorageProvider } from '../src/storage/types.js';
import { caught, download, expectSanitised, generated, sha256, withSilentServer } from './storage-support.js';

export interface ContractHarness {
  /** The provider as the file configures it, optionally under a folder prefix. */
  provider(opts?: { folderPrefix?: string }): StorageProvider;
  /** A provider holding a secret of its own, and every text of that secret a leak would contain. */
  withSecrets(): { provider: StorageProvider; secrets: string[] };
  /** A provider, and a byte count that takes one of its uploads past the first part, block or chunk. */
  staged(): { provider: StorageProvider; bytes: number };
  /** The bytes the backend holds under `key`, or undefined when it holds none. */
  read(key: string): Promise<Buffer | undefined>;
  /** Every key the backend holds, where it can list them. */
  keys?(): Promise<string[]>;
  /** Asserts the backend holds no unfinished upload (multipart upload, session). */
  nothingOpen?(): void;
  /** Asserts what the backend shows of an upload of `key` given up part way (aborted, cancelled, never committed). */
  abandoned?(key: string): void | Promise<void>;
  /** The provider looks a key up before it reads the body, so a refused upload reads none of it (S3, Drive). */
  refusesUnread?: boolean;
  /** The longest URL lifetime presign() accepts, in seconds; omitted where there is none. */
  maxExpiry?: number;
  /** Cases this provider or its backend is known not to keep yet, each with why: they show as pending. */
  pending?: Partial<Record<PendingCase, string>>;
  /** presign() gives a URL the backend itself serves. */
  presigned?: boolean;
  /** Writes the backend saw, as `put <key>` / `delete <key>` or the raw request when it was not the expected success. */
  writes?: { mark(): number | Promise<number>; since(mark: number): string[] | Promise<string[]> };
  /** A bucket or container that does not exist. */
  missing?: {
    noun: string;
    reason: string;
    /** Delete fails too; where it does not, a missing bucket looks like a missing key, which delete accepts. */
    deleteFails: boolean;
    readsAtMost: number;
    provider(): StorageProvider;
    hidden(): string[];
  };
  /** A provider for a backend started and stopped again, and what its errors must not show. */
  stopped?(): Promise<{ provider: StorageProvider; hidden: string[] }>;
  /** A provider, with short timeouts, for a server on 127.0.0.1:`port` that never answers, and the reason it gives. */
  silent?: { reason: string; provider(port: number): StorageProvider };
}

/** The cases a harness may mark pending. */
export type PendingCase = 'empty upload' | 'secrets';

const text = (s: string) => Readable.from([Buffer.from(s)]);

/** Registers the shared cases in the calling describe; `h` is read when the cases run, after the file's before(). */
export function storageContract(h: ContractHarness): void {
  describe('the shared storage contract', () => {
    it('uploads a small stream and stores it as sent', async () => {
      const result = await h.provider().upload('contract/small.m4a', Readable.from([Buffer.from('hello '), Buffer.from('world')]), { contentType: 'audio/mp4' });
      expect(result).to.deep.equal({ key: 'contract/small.m4a', size: 11 });
      expect((await h.read('contract/small.m4a'))?.toString()).to.equal('hello world');
    });

    it('uploads an empty stream as an empty object', async function () {
      if (h.pending?.['empty upload']) this.skip(); // the harness says why
      const empty = await h.provider().upload('contract/empty.mp3', Readable.from([]));
      expect(empty.size).to.equal(0);
      expect((await h.read('contract/empty.mp3'))?.length).to.equal(0);
    });

    it('stores a stream of declared size past the first part byte for byte, and counts the bytes', async () => {
      const { provider: p, bytes } = h.staged();
      const size = bytes + 123;
      const { stream, sha256: expected } = generated(size);
      const key = 'contract/sized.mkv';
      expect(await p.upload(key, stream, { size })).to.deep.equal({ key, size });
      expect(sha256((await h.read(key)) ?? Buffer.alloc(0))).to.equal(expected);
      if (h.presigned) expect((await download(await p.presign(key, 60))).sha256).to.equal(expected);
    });

    it('keeps a key with spaces and non-ASCII letters intact, signed and downloadable', async () => {
      const p = h.provider();
      const key = 'contract/Fête de la musique/Ünïcødé title + more.m4a';
      const result = await p.upload(key, Readable.from([Buffer.from('hello '), Buffer.from('world')]), { contentType: 'audio/mp4' });
      expect(result.size).to.equal(11);
      expect((await h.read(key))?.toString()).to.equal('hello world');
      if (!h.presigned) return;
      const got = await download(await p.presign(key, 60));
      expect([got.status, got.text, got.contentType]).to.deep.equal([200, 'hello world', 'audio/mp4']);
    });

    it('fails a stream longer or shorter than its declared size and leaves no object', async () => {
      const { provider: p, bytes } = h.staged();
      const cases: Array<[string, number, number]> = [
        ['contract/long.mp4', 100, 10],
        ['contract/long-past-first-part.mp4', bytes, 10],
        ['contract/short.mp4', 10, 100],
      ];
      for (const [key, sent, size] of cases) {
        const err = await caught(p.upload(key, Readable.from([Buffer.alloc(sent)]), { size }));
        expect([err.code, err.reason], key).to.deep.equal(['failed', 'size_mismatch']);
        expect(await h.read(key), key).to.equal(undefined);
      }
      h.nothingOpen?.();
    });

    it('reports a failing source as source_error, not as an unreachable backend, and commits nothing', async () => {
      const { provider: p, bytes } = h.staged();
      async function* broken() {
        yield randomBytes(bytes); // past the first part, so the upload is under way when the source dies
        throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
      }
      const key = 'contract/broken.mp4';
      const err = await caught(p.upload(key, Readable.from(broken())));
      expect(err.code).to.equal('failed');
      expect(err.reason).to.equal('source_error');
      await h.abandoned?.(key);
      h.nothingOpen?.();
      expect(await h.read(key)).to.equal(undefined);
    });

    it('refuses to overwrite: a second upload to the same key fails with conflict, its body destroyed, and the first object stays', async () => {
      const p = h.provider();
      const key = 'contract/taken.mp4';
      await p.upload(key, text('first'), { contentType: 'video/mp4' });
      let read = false;
      const second = Readable.from((function* () {
        read = true;
        yield Buffer.from('second');
      })());
      const err = await caught(p.upload(key, second, { contentType: 'video/webm' }));
      expect(err.code).to.equal('conflict');
      if (h.refusesUnread) expect(read, 'nothing of the second body was read').to.equal(false);
      expect(second.destroyed, 'the refused body is destroyed, so a producer stops').to.equal(true);
      expect((await h.read(key))?.toString()).to.equal('first');
      if (h.presigned) expect((await download(await p.presign(key, 60))).text).to.equal('first');
    });

    it('records the job an upload names, and stat reads back the size and job as stored', async () => {
      const p = h.provider();
      expect(p.stat, 'every provider the operator reads back has stat').to.be.a('function');
      await p.upload('contract/owned.mp4', Readable.from([Buffer.from('owned '), Buffer.from('bytes')]), { contentType: 'video/mp4', jobId: 'job-a' });
      await p.upload('contract/unowned.mp4', text('nobody'));
      expect(await p.stat!('contract/owned.mp4')).to.deep.equal({ size: 11, jobId: 'job-a' });
      expect(await p.stat!('contract/unowned.mp4'), 'an object stored without a job names none').to.deep.equal({ size: 6 });
      expect(await p.stat!('contract/never-stored.mp4')).to.equal(undefined);
    });

    it('a job\'s record goes with its object: the same key stored again by another job names that job', async () => {
      const p = h.provider();
      const key = 'contract/same name.mp4';
      await p.upload(key, text('first job'), { jobId: 'job-first' });
      // The other job's upload to the taken key is refused and changes nothing.
      expect((await caught(p.upload(key, text('second'), { jobId: 'job-second' }))).code).to.equal('conflict');
      expect(await p.stat!(key)).to.deep.equal({ size: 9, jobId: 'job-first' });
      await p.delete(key);
      expect(await p.stat!(key)).to.equal(undefined);
      await p.upload(key, text('second job'), { jobId: 'job-second' });
      expect(await p.stat!(key)).to.deep.equal({ size: 10, jobId: 'job-second' });
    });

    it('records the job of an upload past the first part, block or chunk', async () => {
      const { provider: p, bytes } = h.staged();
      const key = 'contract/owned-large.mkv';
      await p.upload(key, generated(bytes + 1).stream, { size: bytes + 1, jobId: 'job-large' });
      expect(await p.stat!(key)).to.deep.equal({ size: bytes + 1, jobId: 'job-large' });
    });

    it('delete removes an object and is idempotent, also for a key that never was', async () => {
      const p = h.provider();
      const key = 'contract/gone.mp4';
      await p.upload(key, text('x'));
      expect((await h.read(key))?.toString()).to.equal('x');
      await p.delete(key);
      await p.delete(key);
      expect(await h.read(key)).to.equal(undefined);
      if (h.presigned) expect((await download(await p.presign(key, 60))).status).to.equal(404);
      await p.delete('contract/nowhere/at/all.mp4');
    });

    it('keeps credentials out of the provider when inspected or serialised', function () {
      if (h.pending?.secrets) this.skip(); // the harness says why
      const { provider: p, secrets } = h.withSecrets();
      expect(secrets).to.have.length.greaterThan(0);
      for (const shown of [inspect(p, { depth: 10 }), JSON.stringify(p)]) {
        for (const s of secrets) expect(shown).not.to.include(s);
      }
    });

    it(`refuses an expiry that is not a whole number of seconds ${h.maxExpiry ? `from 1 to ${h.maxExpiry}` : 'above 0'}`, async () => {
      const p = h.provider();
      const refused = [0, -1, -5, 1.5, 2.5, ...(h.maxExpiry ? [h.maxExpiry + 1] : [])];
      for (const seconds of refused) {
        const err = await caught(p.presign('contract/x.mp4', seconds));
        expect([err.code, err.reason], String(seconds)).to.deep.equal(['invalid_config', 'invalid_expiry']);
      }
      await p.presign('contract/x.mp4', h.maxExpiry ?? 10 * 365 * 86_400);
    });

    if (h.writes) {
      const writes = h.writes;
      it('probe puts and deletes verify_credentials.txt at the root of the folder prefix', async () => {
        const from = await writes.mark();
        await h.provider().probe();
        await h.provider({ folderPrefix: '/team a/archive/' }).probe();
        expect(await writes.since(from)).to.deep.equal([
          'put verify_credentials.txt',
          'delete verify_credentials.txt',
          'put team a/archive/verify_credentials.txt',
          'delete team a/archive/verify_credentials.txt',
        ]);
        expect(await h.read('verify_credentials.txt')).to.equal(undefined);
        expect(await h.read('team a/archive/verify_credentials.txt')).to.equal(undefined);
        if (h.keys) expect((await h.keys()).filter((k) => k.endsWith('verify_credentials.txt'))).to.deep.equal([]);
      });
    }

    if (h.missing) {
      const missing = h.missing;
      it(`a missing ${missing.noun} is not_found with reason ${missing.reason}${missing.deleteFails ? ', for probe, upload and delete' : ''}`, async () => {
        const p = missing.provider();
        const probe = await caught(p.probe());
        expect([probe.code, probe.reason, probe.httpStatus]).to.deep.equal(['not_found', missing.reason, 404]);
        expect((await caught(p.upload('contract/x.mp4', text('x')))).code).to.equal('not_found');
        if (missing.deleteFails) expect((await caught(p.delete('contract/x.mp4'))).code).to.equal('not_found');
        expectSanitised(probe, missing.hidden());
      });

      it('stops reading the source when the backend fails mid-stream', async () => {
        let produced = 0;
        async function* endless() {
          for (;;) {
            produced += 1024 * 1024;
            yield Buffer.alloc(1024 * 1024);
          }
        }
        const body = Readable.from(endless());
        const err = await caught(missing.provider().upload('contract/endless.mp4', body));
        expect([err.code, err.reason]).to.deep.equal(['not_found', missing.reason]);
        expect(body.destroyed).to.equal(true);
        // Bounded by the part buffers, not by the (infinite) source.
        expect(produced).to.be.below(missing.readsAtMost);
      });
    }

    if (h.stopped) {
      const stopped = h.stopped;
      it('a stopped server is unreachable with reason ECONNREFUSED', async () => {
        const { provider: p, hidden } = await stopped();
        const probe = await caught(p.probe());
        expect([probe.code, probe.reason]).to.deep.equal(['unreachable', 'ECONNREFUSED']);
        expect((await caught(p.upload('contract/x.mp4', text('x')))).code).to.equal('unreachable');
        expectSanitised(probe, ['127.0.0.1', ...hidden]);
      });
    }

    if (h.silent) {
      const silent = h.silent;
      it(`a server that accepts and never answers is unreachable (${silent.reason})`, async () => {
        await withSilentServer(async (port) => {
          const p = silent.provider(port);
          expect(await caught(p.probe())).to.include({ code: 'unreachable', reason: silent.reason });
          expect(await caught(p.upload('contract/x.mp4', text('x')))).to.include({ code: 'unreachable', reason: silent.reason });
        });
      });
    }
  });
}
