// The managed-storage document a runner gets in its per-job Secret
// (operator/src/managed-storage.ts, docs/adr/0012): never FILE_URL_SECRET,
// never the bucket's keys; on S3 an upload grant for its job alone.
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ConfigError } from '@mediajobs/lib/config';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { managedKeyPrefix } from '@mediajobs/lib/storage/types';
import { UploadGrantKeys } from '@mediajobs/lib/storage/upload-grants';
import { loadOperatorConfig } from '../src/config.js';
import { RUNNER_UID } from '../src/job-builder.js';
import { GRANT_MARGIN_SECONDS, runnerDocuments, shareWithRunners } from '../src/managed-storage.js';

const JOB = '0b7c0f5e-1111-4222-8333-944445555666';
const API_KEY = 'c0ffee00-1111-4222-8333-944445555666';
const NOW_MS = 1_780_000_000_000;
const SECRET_KEYS = SecretBox.generateSpec('op');
const BUCKET_SECRET = 'bucket-secret-key-0123456789';
const FILE_URL_SECRET = 'file-url-secret-0123456789abcdef';

const config = (env: Record<string, string>) => loadOperatorConfig({
  DATABASE_URL: 'postgres://x', SECRET_KEYS, FILE_URL_SECRET, PUBLIC_BASE_URL: 'https://media.example.test', ...env,
});
const s3 = {
  MANAGED_STORAGE: 's3', MANAGED_S3_ENDPOINT: 'http://minio.test:9000', MANAGED_S3_BUCKET: 'media',
  MANAGED_S3_ACCESS_KEY: 'bucket-access-key', MANAGED_S3_SECRET_KEY: BUCKET_SECRET,
};

describe('operator: the runner\'s managed storage document', () => {
  it('on local disk: the storage directory, and no FILE_URL_SECRET', () => {
    const doc = runnerDocuments(config({ MANAGED_STORAGE: 'local', MANAGED_STORAGE_DIR: '.local/store' }))(JOB);
    expect(doc).to.deep.equal({ provider: 'managed', managed: { MANAGED_STORAGE: 'local', MANAGED_STORAGE_DIR: resolve('.local/store') } });
    expect(JSON.stringify(doc)).not.to.include(FILE_URL_SECRET);
  });

  it('on S3: an upload grant for this job until its deadline plus the margin, and none of the bucket\'s settings or keys', () => {
    const cfg = config({ ...s3, JOB_ACTIVE_DEADLINE_SECONDS: '7200', UPLOAD_GRANT_URL: 'http://mediajobs-gateway.media.svc' });
    const doc = runnerDocuments(cfg, () => NOW_MS)(JOB) as { grant: { url: string; token: string } };
    expect(doc).to.deep.equal({ provider: 'managed', managed: { MANAGED_STORAGE: 's3' }, grant: { url: 'http://mediajobs-gateway.media.svc', token: doc.grant.token } });
    for (const secret of [BUCKET_SECRET, 'bucket-access-key', FILE_URL_SECRET, 'minio.test']) expect(JSON.stringify(doc)).not.to.include(secret);
    // The gateway, holding the same SECRET_KEYS, accepts it for this job only, until then.
    const expiresAt = NOW_MS / 1000 + 7200 + GRANT_MARGIN_SECONDS;
    expect(new UploadGrantKeys(SECRET_KEYS).verify(doc.grant.token, NOW_MS)).to.deep.equal({ ok: true, jobId: JOB, expiresAt, kid: 'op' });
    expect(new UploadGrantKeys(SECRET_KEYS).verify(doc.grant.token, expiresAt * 1000)).to.deep.equal({ ok: false, why: 'expired' });
  });

  it("puts the job's keys under its API key's prefix, on local disk and, through the grant's token, on S3", () => {
    const prefix = managedKeyPrefix(API_KEY);
    const local = runnerDocuments(config({ MANAGED_STORAGE: 'local', MANAGED_STORAGE_DIR: '.local/store' }))(JOB, API_KEY);
    expect(local).to.deep.equal({
      provider: 'managed', managed: { MANAGED_STORAGE: 'local', MANAGED_STORAGE_DIR: resolve('.local/store') }, folder_prefix: prefix,
    });
    const s3doc = runnerDocuments(config(s3), () => NOW_MS)(JOB, API_KEY) as { folder_prefix: string; grant: { token: string } };
    expect(s3doc.folder_prefix).to.equal(prefix);
    expect(new UploadGrantKeys(SECRET_KEYS).verify(s3doc.grant.token, NOW_MS)).to.deep.include({ ok: true, jobId: JOB, prefix });
    // The key id itself is in neither.
    for (const doc of [local, s3doc]) expect(JSON.stringify(doc)).not.to.include(API_KEY);
  });

  it('grants at PUBLIC_BASE_URL unless UPLOAD_GRANT_URL says otherwise', () => {
    const doc = runnerDocuments(config(s3))(JOB) as { grant: { url: string } };
    expect(doc.grant.url).to.equal('https://media.example.test');
  });

  it('needs SECRET_KEYS on S3, checked at start', () => {
    const { SECRET_KEYS: _none, ...cfg } = config(s3);
    expect(() => runnerDocuments(cfg)).to.throw(/SECRET_KEYS is required/);
  });

  it('UPLOAD_GRANT_URL is an http(s) URL without credentials; an error names the variable, not the value', () => {
    for (const bad of ['http://user:pw@gw.test', 'ftp://gw.test', 'gw']) {
      let err: unknown;
      try {
        config({ ...s3, UPLOAD_GRANT_URL: bad });
      } catch (e) {
        err = e;
      }
      expect(err, bad).to.be.instanceOf(ConfigError);
      expect((err as Error).message).to.include('UPLOAD_GRANT_URL');
      expect((err as Error).message).not.to.include(bad);
    }
  });
});

describe('operator: local managed storage is the runners\' to write', () => {
  it('as root, gives the tree the runner\'s group (its fsGroup), group read-write, setgid directories', function () {
    if (process.getuid?.() !== 0) this.skip();
    const dir = mkdtempSync(join(tmpdir(), 'mj-share-'));
    try {
      mkdirSync(join(dir, 'videos'), { mode: 0o755 });
      writeFileSync(join(dir, 'videos', 'a.mp4'), 'x', { mode: 0o644 });
      shareWithRunners(dir);
      const seen = ['', 'videos', 'videos/a.mp4'].map((p) => statSync(join(dir, p))).map((st) => [st.gid, (st.mode & 0o7777).toString(8)]);
      expect(seen).to.deep.equal([[RUNNER_UID, '2770'], [RUNNER_UID, '2775'], [RUNNER_UID, '664']]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('as root, makes a directory not there yet (a first start) and shares it', function () {
    if (process.getuid?.() !== 0) this.skip();
    const parent = mkdtempSync(join(tmpdir(), 'mj-share-'));
    try {
      const dir = join(parent, 'storage', 'not-yet');
      shareWithRunners(dir);
      expect([statSync(dir).gid, (statSync(dir).mode & 0o7777).toString(8)]).to.deep.equal([RUNNER_UID, '2770']);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });

  it('leaves it alone when not root (every process runs as the same user)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mj-share-'));
    try {
      const before = statSync(dir);
      shareWithRunners(dir, false);
      expect([statSync(dir).gid, statSync(dir).mode]).to.deep.equal([before.gid, before.mode]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
