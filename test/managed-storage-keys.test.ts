// Managed storage keys carry their API key's prefix (managedKeyPrefix in
// lib/src/storage/types.ts), so one key cannot learn from a `-<suffix>`
// that another stored a file of the same name. Real parts: the operator's
// runner documents, the runner's destination and uploads (media and
// sidecars), on local disk and on S3 through the gateway's grant route over
// the jobs table (s3rver), and the download URLs managed storage signs,
// served as clients fetch them (the gateway's /files route, s3rver).
import { expect } from 'chai';
import express from 'express';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createLogger } from '@mediajobs/lib/logger';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { PgGrantLedger } from '@mediajobs/lib/storage/grant-ledger';
import { createManagedStorage, createUploadGrantBroker, type StorageProvider } from '@mediajobs/lib/storage/index';
import { DOWNLOAD_URL_TTL_SECONDS, managedKeyPrefix } from '@mediajobs/lib/storage/types';
import { UPLOAD_GRANT_PATH } from '@mediajobs/lib/storage/upload-grants';
import { filesRouter } from '../api-gateway/src/routes/files.js';
import { uploadGrantsRouter } from '../api-gateway/src/routes/upload-grants.js';
import { grantJobState } from '@mediajobs/lib/db/jobs';
import { runnerDocuments } from '../operator/src/managed-storage.js';
import { resolveDestination, uploadJobFile } from '../runner-image/src/destination.js';
import { uploadSidecar } from '../runner-image/src/sidecars.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from './support/postgres.js';
import { startS3rver, type RunningS3rver } from './support/s3rver.js';

const FILE_URL_SECRET = 'file-url-secret-0123456789abcdef';
const BUCKET = 'managed';

interface Backend {
  /** The operator's settings for managed storage. */
  settings: Parameters<typeof runnerDocuments>[0] & Parameters<typeof createManagedStorage>[0];
  /** Managed storage as the gateway and the operator build it: they sign the download URLs. */
  signer: StorageProvider;
}

async function listen(app: express.Express): Promise<{ server: Server; url: string }> {
  const server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('managed storage: every API key has its own part of it', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let s3: RunningS3rver;
  let gateway: { server: Server; url: string };
  let alice: string;
  let bob: string;
  const dirs: string[] = [];
  const secretKeys = SecretBox.generateSpec('k1');
  const tmp = (label: string) => {
    const d = mkdtempSync(join(tmpdir(), `mj-${label}-`));
    dirs.push(d);
    return d;
  };
  const media = (() => {
    let file: string | undefined;
    return () => (file ??= (() => {
      const f = join(tmp('media'), 'talk.mp4');
      writeFileSync(f, 'the same talk');
      return f;
    })());
  })();

  /** A running job of `apiKeyId` (its row: the gateway's grant route reads it). */
  const job = async (apiKeyId: string): Promise<string> => {
    const id = randomUUID();
    await db.pool.query(
      `INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, cr_namespace, cr_name)
       VALUES ($1, $2, 'https://media.test/talk', 'Processing', 'Uploading', 80, '{}', 'mediajobs', $3)`, [id, apiKeyId, id]);
    return id;
  };

  /**
   * A new job of `apiKeyId` delivers `Talk.mp4` with its subtitles and thumbnail as its runner does, from the
   * document the operator wrote; without a key id, a document written before the operator named one. The keys,
   * and the job id's first 8 characters (a taken name's suffix).
   */
  async function deliver(b: Backend, apiKeyId: string | undefined): Promise<{ suffix: string; keys: { media: string; subtitle?: string; thumbnail?: string } }> {
    const jobId = await job(apiKeyId ?? alice);
    const creds = tmp('creds');
    writeFileSync(join(creds, 'destination.json'), JSON.stringify(runnerDocuments(b.settings)(jobId, apiKeyId)));
    const dest = await resolveDestination(creds, {}, {});
    const up = await uploadJobFile(dest, { file: media(), ext: 'mp4', contentType: 'video/mp4', jobId, filename: 'Talk' });
    if (!up.ok) throw up.error;
    const side = tmp('side');
    writeFileSync(join(side, 'talk.en.vtt'), 'WEBVTT\n');
    writeFileSync(join(side, 'talk.jpg'), Buffer.from([0xff, 0xd8, 0xff, 0xe0]));
    return {
      suffix: jobId.slice(0, 8),
      keys: {
        media: up.result.key,
        subtitle: await uploadSidecar(dest, up.result.key, { path: join(side, 'talk.en.vtt'), ext: 'vtt', lang: 'en' }, jobId),
        thumbnail: await uploadSidecar(dest, up.result.key, { path: join(side, 'talk.jpg'), ext: 'jpg' }, jobId),
      },
    };
  }

  /** What a client gets from the key's download URL. */
  const fetched = async (b: Backend, key: string) => {
    const res = await fetch(await b.signer.presign(key, DOWNLOAD_URL_TTL_SECONDS));
    return [res.status, await res.text()];
  };

  function sameNameTwice(backend: () => Backend): void {
    it('two keys delivering the same name both get it plainly, each under its own prefix; the same key again gets the suffix', async () => {
      const b = backend();
      const a = managedKeyPrefix(alice);
      const o = managedKeyPrefix(bob);
      expect(a).to.match(/^k[0-9a-f]{16}$/).and.not.equal(o);

      expect((await deliver(b, alice)).keys).to.deep.equal({ media: `${a}/videos/Talk.mp4`, subtitle: `${a}/videos/Talk.en.vtt`, thumbnail: `${a}/videos/Talk.jpg` });
      expect((await deliver(b, bob)).keys).to.deep.equal({ media: `${o}/videos/Talk.mp4`, subtitle: `${o}/videos/Talk.en.vtt`, thumbnail: `${o}/videos/Talk.jpg` });
      const again = await deliver(b, alice);
      const x = again.suffix;
      expect(again.keys).to.deep.equal({ media: `${a}/videos/Talk-${x}.mp4`, subtitle: `${a}/videos/Talk-${x}.en.vtt`, thumbnail: `${a}/videos/Talk-${x}.jpg` });

      for (const key of [`${a}/videos/Talk.mp4`, `${o}/videos/Talk.mp4`, again.keys.media]) expect(await fetched(b, key), key).to.deep.equal([200, 'the same talk']);
      expect(await fetched(b, `${o}/videos/Talk.en.vtt`)).to.deep.equal([200, 'WEBVTT\n']);
    });

    it('a file stored before keys had a prefix is still downloaded by its key, and a runner given no key writes there as before', async () => {
      const b = backend();
      await b.signer.upload('videos/Recorded before.mp4', Readable.from([Buffer.from('old file')]));
      expect(await fetched(b, 'videos/Recorded before.mp4')).to.deep.equal([200, 'old file']);
      // A document written before the operator named the key: the old layout, suffix and all.
      const legacy = await deliver(b, undefined);
      expect(legacy.keys.media).to.equal('videos/Talk.mp4');
      expect(await fetched(b, legacy.keys.media)).to.deep.equal([200, 'the same talk']);
    });
  }

  before(async () => {
    db = await createTestDatabase('mediajobs_managed_keys');
    alice = await insertApiKey(db.pool, 'alice');
    bob = await insertApiKey(db.pool, 'bob');
    s3 = await startS3rver({ buckets: [BUCKET] });
  });
  after(async () => {
    gateway?.server.closeAllConnections();
    await new Promise((resolve) => gateway?.server.close(resolve));
    await s3?.stop();
    await db?.drop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  describe('on local disk', () => {
    let b: Backend;
    before(async () => {
      const dir = tmp('store');
      const app = express();
      app.use(filesRouter({ dir, secret: FILE_URL_SECRET }));
      gateway = await listen(app);
      const settings = {
        MANAGED_STORAGE: 'local' as const, MANAGED_STORAGE_DIR: dir, PUBLIC_BASE_URL: gateway.url, FILE_URL_SECRET,
        MANAGED_S3_REGION: 'us-east-1', MANAGED_S3_FORCE_PATH_STYLE: true, JOB_ACTIVE_DEADLINE_SECONDS: 3600,
      };
      b = { settings, signer: await createManagedStorage(settings) };
    });
    after(async () => {
      gateway.server.closeAllConnections();
      await new Promise((resolve) => gateway.server.close(resolve));
    });
    sameNameTwice(() => b);
  });

  describe('on S3, through upload grants', () => {
    let b: Backend;
    let grants: { server: Server; url: string };
    before(async () => {
      const settings = {
        MANAGED_STORAGE: 's3' as const, MANAGED_STORAGE_DIR: '.unused', MANAGED_S3_ENDPOINT: s3.endpoint, MANAGED_S3_BUCKET: BUCKET,
        MANAGED_S3_REGION: 'us-east-1', MANAGED_S3_FORCE_PATH_STYLE: true, MANAGED_S3_ACCESS_KEY: s3.accessKeyId,
        MANAGED_S3_SECRET_KEY: s3.secretAccessKey, JOB_ACTIVE_DEADLINE_SECONDS: 3600, SECRET_KEYS: secretKeys, PUBLIC_BASE_URL: 'http://127.0.0.1:1',
      };
      const signer = await createManagedStorage(settings);
      // The gateway's wiring (server.ts): the broker over managed storage's settings and the jobs table.
      const broker = await createUploadGrantBroker(settings, (jobId: string) => grantJobState(db.pool, jobId), new PgGrantLedger(db.pool));
      const app = express();
      app.use(uploadGrantsRouter({ broker: broker!, logger: createLogger('api-gateway', 'silent') }));
      grants = await listen(app);
      b = { settings: { ...settings, PUBLIC_BASE_URL: grants.url }, signer };
    });
    after(async () => {
      grants.server.closeAllConnections();
      await new Promise((resolve) => grants.server.close(resolve));
      (b.signer as { destroy?: () => void }).destroy?.();
    });
    sameNameTwice(() => b);

    it("a grant writes only under its own key's prefix, so it cannot probe another's names", async () => {
      const jobId = await job(alice);
      const { grant } = runnerDocuments(b.settings)(jobId, alice) as { grant: { token: string } };
      const begin = async (key: string) => {
        const res = await fetch(`${grants.url}${UPLOAD_GRANT_PATH}/begin`, {
          method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${grant.token}` }, body: JSON.stringify({ key }),
        });
        return [res.status, await res.json()];
      };
      const outside = [403, { error: 'The key is outside managed storage', code: 'auth', reason: 'key_outside_layout' }];
      expect(await begin(`${managedKeyPrefix(bob)}/videos/Talk.mp4`)).to.deep.equal(outside);
      expect(await begin('videos/Talk.mp4')).to.deep.equal(outside);
      expect(await begin(`${managedKeyPrefix(alice)}/videos/Talk.mp4`)).to.deep.equal([409, { error: 'An object already exists at this key', code: 'conflict', reason: 'KeyExists' }]);
    });
  });
});
