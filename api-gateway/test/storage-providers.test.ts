// The configuration endpoints and inline storage for the providers beyond
// S3, on the protocol servers the tests start: Azure Blob on Azurite (which
// verifies SharedKey signatures), OSS on the local OSS fake (V4 signatures,
// per-key permissions), GCS and Drive on their local fakes (service account
// JWTs verified at their token endpoints), all driven by the official
// clients through lib's providers. Saved destinations go to Kubernetes
// Secrets on the local cluster.
import { expect } from 'chai';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import { createProvider } from '@mediajobs/lib/storage/index';
import { objectKey } from '@mediajobs/lib/storage/types';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob } from '@mediajobs/lib/mediajob/types';
import { KubeSecretVault } from '../src/destinations/vault.js';
import { startAzurite, type RunningAzurite } from '../../test/support/azurite.js';
import { startFakeOss, type RunningFakeOss } from '../../test/support/fake-oss.js';
import { startFakeGcs, type FakeServiceAccount, type RunningFakeGcs } from '../../test/support/fake-gcs.js';
import { startFakeDrive, type RunningFakeDrive } from '../../test/support/fake-drive.js';
import { materialize, startClusterWithCrd, startTestGateway, type TestCluster, type TestGateway } from './support.js';

const SRC = 'https://media.example/watch?v=providers';
const DRIVE_EMAIL = 'uploader@mediajobs-test.iam.gserviceaccount.com';
const URL_SECRET = `file-url-secret-${randomBytes(8).toString('hex')}`;

/** A service account key file as the Cloud console downloads it, and its public half. */
function driveAccount(): { json: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const json = JSON.stringify({
    type: 'service_account', project_id: 'mediajobs-test', private_key_id: randomBytes(20).toString('hex'), private_key: privateKey,
    client_email: DRIVE_EMAIL, token_uri: 'https://oauth2.googleapis.com/token',
  });
  return { json, publicKey };
}

describe('api-gateway: blob and oss destinations', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let core: k8s.CoreV1Api;
  let azurite: RunningAzurite;
  let oss: RunningFakeOss;
  let gcs: RunningFakeGcs;
  let drive: RunningFakeDrive;
  let gw: TestGateway;
  const ossKey = { accessKeyId: `LTAI${randomBytes(8).toString('hex')}`, accessKeySecret: randomBytes(18).toString('base64') };
  const ossReadOnly = { accessKeyId: `LTAI${randomBytes(8).toString('hex')}`, accessKeySecret: randomBytes(18).toString('base64'), access: 'read' as const };

  const blobBody = (over: Record<string, unknown> = {}) => ({
    account_name: azurite.accountName, account_key: azurite.accountKey, container: 'media', endpoint: azurite.endpoint, ...over,
  });
  const ossBody = (over: Record<string, unknown> = {}) => ({
    endpoint: oss.endpoint, region: oss.region, bucket: 'media', access_key_id: ossKey.accessKeyId, access_key_secret: ossKey.accessKeySecret, ...over,
  });
  const ossProbes = () => oss.events.filter((e) => e.op === 'PutObject' && e.key.endsWith('verify_credentials.txt') && e.status === 200).length;

  before(async () => {
    tc = await startClusterWithCrd();
    core = tc.kc.makeApiClient(k8s.CoreV1Api);
    azurite = await startAzurite({ containers: ['media'] });
    oss = await startFakeOss({ keys: [ossKey, ossReadOnly], buckets: ['media'] });
    gcs = await startFakeGcs({ buckets: ['media'] });
    drive = await startFakeDrive();
    gw = await startTestGateway({
      storage: {
        vault: new KubeSecretVault(tc.kc, 'default'), probeTimeoutMs: 10_000,
        providerSettings: {
          gcs: { apiEndpoint: gcs.apiEndpoint, tokenUri: gcs.tokenUri },
          drive: { rootUrl: drive.rootUrl, tokenUri: drive.tokenUri },
        },
        driveDownloadSecret: URL_SECRET,
      },
    });
  });

  after(async () => {
    await gw?.stop();
    await drive?.stop();
    await gcs?.stop();
    await oss?.stop();
    await azurite?.stop();
    await tc?.stop();
  });

  describe('POST /user/blob (the blob endpoint)', () => {
    it('probes the container, saves to a Secret, and GET shows it without the key', async () => {
      const k = await gw.newKey('blob');
      const r = await gw.request('POST', '/user/blob', { key: k.key, body: blobBody({ folder_prefix: 'team' }) });
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.deep.equal({ message: 'Blob storage configured successfully', provider: 'blob', container_or_bucket: 'media', folder_prefix: 'team' });
      await azurite.settled();
      const probe = azurite.requests.filter((q) => q.path.endsWith('/media/team/verify_credentials.txt'));
      expect(probe.map((q) => q.method)).to.deep.equal(['PUT', 'DELETE']);
      const secret = await core.readNamespacedSecret({ name: `mj-dest-key-${k.id}-blob`, namespace: 'default' });
      expect(secret.metadata?.labels).to.include({ 'mediajobs.io/provider': 'blob' });
      const got = await gw.request('GET', '/user/blob', { key: k.key });
      expect(got.body).to.include({ configured: true, provider: 'blob', container_or_bucket: 'media', folder_prefix: 'team', base_folder: 'videos', source: 'keyvault' });
      expect(got.text).to.not.include(azurite.accountKey);
    });

    it('a key Azurite rejects, and a container that does not exist: 400 Credential validation failed: <reason>', async () => {
      const wrongKey = randomBytes(64).toString('base64');
      const r1 = await gw.request('POST', '/user/blob', { body: blobBody({ account_key: wrongKey }) });
      expect(r1.status).to.equal(400);
      expect((r1.body as { error: string }).error).to.match(/^Credential validation failed: (AuthorizationFailure|AuthenticationFailed)$/);
      const r2 = await gw.request('POST', '/user/blob', { body: blobBody({ container: 'nothere' }) });
      expect([r2.status, r2.body]).to.deep.equal([400, { error: 'Credential validation failed: ContainerNotFound' }]);
      const r3 = await gw.request('POST', '/user/blob', { body: blobBody({ container: 'Not_Valid' }) });
      expect([r3.status, r3.body]).to.deep.equal([400, { error: 'Credential validation failed: invalid_container' }]);
    });

    it('inline blob storage is probed and accepted', async () => {
      const r = await gw.request('POST', '/jobs', { body: { url: SRC, storage: { provider: 'blob', ...blobBody() } } });
      expect(r.status, r.text).to.equal(201);
      const id = (r.body as { job_id: string }).job_id;
      // The MediaJob built from the row, created as the operator's materializer creates it, as the API server stored it.
      const mj = (await materialize(gw.pool)).jobs.find((j) => j.metadata.name === id);
      expect(mj, 'the MediaJob built from the row').to.not.equal(undefined);
      await tc.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, body: mj! });
      const cr = (await tc.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name: id })) as MediaJob;
      expect(cr.spec.destination).to.deep.equal({ type: 'inline', provider: 'blob' });
      const bad = await gw.request('POST', '/jobs', { body: { url: SRC, storage: { provider: 'blob', ...blobBody({ container: 'nothere' }) } } });
      expect([bad.status, bad.body]).to.deep.equal([400, { error: 'Storage credentials validation failed: ContainerNotFound' }]);
    });
  });

  describe('POST /user/oss', () => {
    it('probes the bucket and saves; the spec\'s AccessDenied and NoSuchBucket otherwise', async () => {
      const k = await gw.newKey('oss');
      const n0 = ossProbes();
      const r = await gw.request('POST', '/user/oss', { key: k.key, body: ossBody({ base_folder: 'media-files' }) });
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.deep.equal({ message: 'OSS storage configured successfully', provider: 'oss', container_or_bucket: 'media' });
      expect(ossProbes()).to.equal(n0 + 1);
      const got = await gw.request('GET', '/user/oss', { key: k.key });
      expect(got.body).to.include({ configured: true, base_folder: 'media-files', source: 'keyvault' });
      expect(got.text).to.not.include(ossKey.accessKeySecret).and.not.include(ossKey.accessKeyId);

      const cases: [Record<string, unknown>, string][] = [
        [{ access_key_id: ossReadOnly.accessKeyId, access_key_secret: ossReadOnly.accessKeySecret }, 'Credential validation failed: AccessDenied'],
        [{ access_key_secret: 'wrong-secret' }, 'Credential validation failed: AccessDenied'],
        [{ bucket: 'missing' }, 'Credential validation failed: NoSuchBucket'],
        [{ access_key_secret: undefined }, 'Credential validation failed: access_key_secret_required'],
      ];
      for (const [over, message] of cases) {
        const bad = await gw.request('POST', '/user/oss', { body: ossBody(over) });
        expect([bad.status, bad.body], message).to.deep.equal([400, { error: message }]);
      }
    });

    it('inline oss storage: probed once per credential set', async () => {
      const storage = { provider: 'oss', ...ossBody({ folder_prefix: `p${randomBytes(3).toString('hex')}` }) };
      const n0 = ossProbes();
      for (let i = 0; i < 3; i++) {
        const r = await gw.request('POST', '/jobs', { body: { url: SRC, storage } });
        expect(r.status, r.text).to.equal(201);
      }
      expect(ossProbes()).to.equal(n0 + 1);
    });
  });

  describe('POST /user/gcs', () => {
    let sa: FakeServiceAccount;
    before(() => {
      sa = gcs.createServiceAccount();
    });
    const gcsBody = (over: Record<string, unknown> = {}) => ({ project_id: sa.projectId, bucket: 'media', service_account_json: sa.json(), ...over });

    it('takes the key file as JSON or Base64, probes, and saves', async () => {
      for (const encoded of [sa.json(), Buffer.from(sa.json()).toString('base64')]) {
        const k = await gw.newKey('gcs');
        const r = await gw.request('POST', '/user/gcs', { key: k.key, body: gcsBody({ service_account_json: encoded }) });
        expect(r.status, r.text).to.equal(200);
        expect(r.body).to.deep.equal({ message: 'GCS storage configured successfully', provider: 'gcs', container_or_bucket: 'media' });
        const got = await gw.request('GET', '/user/gcs', { key: k.key });
        expect(got.body).to.include({ configured: true, provider: 'gcs', source: 'keyvault' });
        expect(got.text).to.not.include('PRIVATE KEY');
      }
      expect(gcs.requests.some((q) => q.kind === 'object.delete' && q.object === 'verify_credentials.txt' && q.status < 300)).to.equal(true);
    });

    it('the spec\'s messages: AuthenticationFailed for a key the account does not have, AccessDenied, NoSuchBucket', async () => {
      const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
      const forged = JSON.stringify({ ...(JSON.parse(sa.json()) as object), private_key: stranger });
      const elsewhere = gcs.createServiceAccount({ buckets: ['other-bucket'] });
      const cases: [Record<string, unknown>, string][] = [
        [{ service_account_json: forged }, 'Credential validation failed: AuthenticationFailed'],
        [{ service_account_json: elsewhere.json() }, 'Credential validation failed: AccessDenied'],
        [{ bucket: 'no-such-bucket' }, 'Credential validation failed: NoSuchBucket'],
      ];
      for (const [over, message] of cases) {
        const r = await gw.request('POST', '/user/gcs', { body: gcsBody(over) });
        expect([r.status, r.body], message).to.deep.equal([400, { error: message }]);
      }
    });

    it('inline gcs storage is probed and accepted', async () => {
      const r = await gw.request('POST', '/jobs', { body: { url: SRC, storage: { provider: 'gcs', ...gcsBody() } } });
      expect(r.status, r.text).to.equal(201);
    });
  });

  describe('POST /user/drive', () => {
    const account = driveAccount();
    let sharedDrive: string;
    let readerFolder: string;
    before(() => {
      drive.addServiceAccount(DRIVE_EMAIL, account.publicKey);
      sharedDrive = drive.addSharedDrive('Media', { [DRIVE_EMAIL]: 'fileOrganizer' });
      readerFolder = drive.addFolder({ name: 'Read only', owner: 'alice@example.test', sharedWith: { [DRIVE_EMAIL]: 'reader' } });
    });

    it('a shared drive where the account is content manager: probed and saved', async () => {
      const k = await gw.newKey('drive');
      const r = await gw.request('POST', '/user/drive', { key: k.key, body: { service_account_json: account.json, folder_id: sharedDrive } });
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.deep.equal({ message: 'Drive storage configured successfully', provider: 'drive', folder_id: sharedDrive, folder_prefix: null });
      const got = await gw.request('GET', '/user/drive', { key: k.key });
      expect(got.body).to.include({ configured: true, provider: 'drive', container_or_bucket: sharedDrive, source: 'keyvault' });
    });

    it('a folder shared read-only: 400 Credential validation failed: insufficient permissions on folder', async () => {
      const r = await gw.request('POST', '/user/drive', { body: { service_account_json: account.json, folder_id: readerFolder } });
      expect([r.status, r.body]).to.deep.equal([400, { error: 'Credential validation failed: insufficient permissions on folder' }]);
    });

    it("a job's Drive download URL streams the file through the gateway, until the destination is removed", async () => {
      const k = await gw.newKey('drive-download');
      const dest = { service_account_json: account.json, folder_id: sharedDrive, folder_prefix: 'dl' };
      expect((await gw.request('POST', '/user/drive', { key: k.key, body: dest })).status).to.equal(200);
      const created = await gw.request('POST', '/jobs', { key: k.key, body: { url: SRC, storage_provider: 'drive' } });
      expect(created.status, created.text).to.equal(201);
      const jobId = (created.body as { job_id: string }).job_id;

      // The runner's and the operator's part, with the same provider they use: upload at the job's key, sign its URL.
      const provider = await createProvider({ provider: 'drive', ...dest }, {
        drive: { rootUrl: drive.rootUrl, tokenUri: drive.tokenUri, download: { baseUrl: gw.url, secret: URL_SECRET, ref: jobId } },
      });
      const key = objectKey({ folderPrefix: 'dl', baseFolder: 'videos', name: 'clip été', fallback: jobId, ext: 'mp4' });
      const content = randomBytes(300_000);
      await provider.upload(key, Readable.from([content]), { size: content.length, contentType: 'video/mp4' });
      const url = await provider.presign(key, 86_400);
      expect(url.startsWith(`${gw.url}/drive-files/${jobId}/`)).to.equal(true);

      const full = await fetch(url);
      expect(full.status).to.equal(200);
      expect(Buffer.from(await full.arrayBuffer()).equals(content)).to.equal(true);
      expect(full.headers.get('content-disposition')).to.include("filename*=UTF-8''clip%20%C3%A9t%C3%A9.mp4");
      const part = await fetch(url, { headers: { range: 'bytes=10-19' } });
      expect(part.status).to.equal(206);
      expect(Buffer.from(await part.arrayBuffer()).equals(content.subarray(10, 20))).to.equal(true);

      const forged = new URL(url);
      forged.searchParams.set('sig', '0'.repeat(64));
      expect((await fetch(forged)).status).to.equal(403);
      const otherJob = url.replace(jobId, '0190a0a0-0000-7000-8000-000000000000');
      expect((await fetch(otherJob)).status).to.equal(403);

      expect((await gw.request('DELETE', '/user/drive', { key: k.key })).status).to.equal(200);
      const gone = await fetch(url);
      expect([gone.status, await gone.json()]).to.deep.equal([404, { error: 'File not found' }]);
    });

    it('refused as inline storage', async () => {
      const r = await gw.request('POST', '/jobs', { body: { url: SRC, storage: { provider: 'drive', service_account_json: account.json } } });
      expect([r.status, r.body]).to.deep.equal([400, { error: 'Invalid storage configuration: drive is available as a saved destination only (POST /user/drive)' }]);
    });
  });
});
