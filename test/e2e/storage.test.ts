// Delivery to the user's own storage, end to end through every component:
// a saved S3 destination and inline S3 credentials (s3rver), the operator
// building the runner's destination.json from the Secret or the sealed
// payload, the real runner uploading, and the job's presigned URL downloaded
// and compared byte for byte with the stored object; likewise a saved Blob
// destination (Azurite), inline OSS (the OSS fake), and saved GCS and Drive
// destinations (their fakes, reached through the deployment's
// GCS_*/DRIVE_* endpoint settings, which the gateway, the operator and the
// runner pods all honour). Then the failures that must never fall back to
// another destination: credentials revoked between submit and upload (S3
// and GCS), and a destination that cannot be resolved. Last, every log line
// of the run is searched for every secret it used: API keys, storage
// credentials, service-account keys, webhook and chat URLs, the webhook
// signing secret and SECRET_KEYS (test/support/secret-scan.ts).
import { expect } from 'chai';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { createApiKey } from '../../api-gateway/src/db/api-keys.js';
import { eventually } from '../../local-cluster/test/support.js';
import { startAzurite, type RunningAzurite } from '../support/azurite.js';
import { startFakeDrive, type RunningFakeDrive } from '../support/fake-drive.js';
import { startFakeGcs, type FakeServiceAccount, type RunningFakeGcs } from '../support/fake-gcs.js';
import { startFakeOss, type RunningFakeOss } from '../support/fake-oss.js';
import { startMediaServer, type MediaServer } from '../support/media.js';
import { startS3rver, type RunningS3rver } from '../support/s3rver.js';
import { assertNoLeaks, secretKeysOf, type RunSecret } from '../support/secret-scan.js';
import { runnerLogs, startReceiver, startService, type Receiver, type Service } from './support.js';

// s3rver accepts only registered access key ids (SigV4 signatures are not
// checked), so registering and revoking a key pair is real revocation.
const s3rverAccounts = createRequire(import.meta.url)('s3rver/lib/models/account.js') as {
  DUMMY_ACCOUNT: { createKeyPair(id: string, secret: string): void; revokeAccessKey(id: string): void };
};

interface KeyPair {
  accessKey: string;
  secretKey: string;
}

function newS3Key(): KeyPair {
  const pair = { accessKey: `MJE2E${randomBytes(6).toString('hex').toUpperCase()}`, secretKey: `mj-e2e-secret-${randomBytes(16).toString('hex')}` };
  s3rverAccounts.DUMMY_ACCOUNT.createKeyPair(pair.accessKey, pair.secretKey);
  return pair;
}

const TERMINAL = ['Completed', 'Failed', 'Warning', 'Skipped'];

/**
 * The lines of a PEM private key's body: a key leaks into a log as JSON text
 * (newlines escaped) or as itself, and either way carries these lines whole.
 * Short last lines are left out, as they could occur anywhere by chance.
 */
function pemLines(pem: string): string[] {
  return pem.split('\n').filter((l) => l.length >= 32 && !l.startsWith('-----'));
}

/** A Drive service account key file (as the Cloud console downloads it) and its public half for the fake. */
function driveServiceAccount(): { email: string; json: string; privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const email = `uploader-${randomBytes(4).toString('hex')}@mediajobs-test.iam.gserviceaccount.com`;
  const json = JSON.stringify({
    type: 'service_account', project_id: 'mediajobs-test', private_key_id: randomBytes(20).toString('hex'), private_key: privateKey,
    client_email: email, token_uri: 'https://oauth2.googleapis.com/token',
  });
  return { email, json, privateKey, publicKey };
}

/** Where the gateway keeps saved destinations here (DESTINATIONS_NAMESPACE), apart from the MediaJobs' namespace. */
const VAULT_NAMESPACE = 'mediajobs-destinations';

describe('end to end: delivery to the user\'s own storage (S3, Blob, OSS, GCS, Drive)', function () {
  this.timeout(240_000);
  let svc: Service;
  let media: MediaServer;
  let s3: RunningS3rver;
  let receiver: Receiver;
  let azurite: RunningAzurite;
  let oss: RunningFakeOss;
  let gcs: RunningFakeGcs;
  let drive: RunningFakeDrive;
  const ossKey = { accessKeyId: `LTAI${randomBytes(8).toString('hex')}`, accessKeySecret: randomBytes(18).toString('base64') };
  const lines: string[] = [];
  /** Every secret this run handles; none may appear in any log. */
  const secrets: RunSecret[] = [];
  const secret = (kind: string, ...values: string[]) => secrets.push(...values.map((value) => ({ kind, value })));

  const waitForJob = (id: string, key?: string) => eventually(async () => {
    const r = await svc.api('GET', `/jobs/${id}`, undefined, key);
    return TERMINAL.includes(r.body.status as string) ? r.body : undefined;
  }, 90_000, 250);

  const s3Destination = (pair: KeyPair, bucket: string) => ({
    endpoint: s3.endpoint, bucket, region: 'us-east-1', access_key: pair.accessKey, secret_key: pair.secretKey,
  });

  async function storedObject(pair: KeyPair, bucket: string, key: string): Promise<Buffer> {
    const client = new S3Client({
      endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true,
      credentials: { accessKeyId: pair.accessKey, secretAccessKey: pair.secretKey },
    });
    try {
      const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      return Buffer.from(await out.Body!.transformToByteArray());
    } finally {
      client.destroy();
    }
  }

  async function download(url: string): Promise<Buffer> {
    const res = await fetch(url);
    expect(res.status, 'presigned download').to.equal(200);
    return Buffer.from(await res.arrayBuffer());
  }

  const managedFiles = () => readdirSync(svc.env.MANAGED_STORAGE_DIR!, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());

  before(async () => {
    media = await startMediaServer();
    s3 = await startS3rver({ buckets: ['saved', 'inline', 'revoked'] });
    receiver = await startReceiver();
    azurite = await startAzurite({ containers: ['media'] });
    // Signed URLs name the fake's address, not a bucket host: it serves them from boundBucket (a bound custom domain on OSS).
    oss = await startFakeOss({ keys: [ossKey], buckets: ['media'], boundBucket: 'media' });
    secret('Blob account key', azurite.accountKey);
    secret('OSS access key', ossKey.accessKeyId, ossKey.accessKeySecret);
    gcs = await startFakeGcs({ buckets: ['media'] });
    drive = await startFakeDrive();
    svc = await startService({
      // Deployment settings, as in a cluster using private endpoints: nothing in a destination names these servers.
      storageEnv: { GCS_API_ENDPOINT: gcs.apiEndpoint, GCS_TOKEN_URI: gcs.tokenUri, DRIVE_API_ENDPOINT: drive.rootUrl, DRIVE_TOKEN_URI: drive.tokenUri },
      // Chat notifications go to the receiver, under a path its token makes secret. Saved destinations in a
      // namespace of their own, as deployed (the gateway holds Secret rights there only).
      env: { CHAT_WEBHOOK_PREFIX: `${new URL(receiver.url).origin}/services/`, DESTINATIONS_NAMESPACE: VAULT_NAMESPACE },
      logDestination: { write: (line: string) => void lines.push(line) },
    });
    secret('API key', svc.apiKey);
    secrets.push(...secretKeysOf(String(svc.env.SECRET_KEYS)));
  });

  after(async () => {
    await svc?.stop();
    await receiver?.stop();
    await drive?.stop();
    await gcs?.stop();
    await oss?.stop();
    await azurite?.stop();
    await s3?.stop();
    await media?.stop();
  });

  it('a saved destination: the file lands at [folder_prefix/]base_folder/[folder/]name.ext and its URL downloads it', async () => {
    const pair = newS3Key();
    secret('S3 access key', pair.accessKey, pair.secretKey);
    const saved = await svc.api('POST', '/user/s3', { ...s3Destination(pair, 'saved'), folder_prefix: 'acme', base_folder: 'media' });
    expect(saved.status, JSON.stringify(saved.body)).to.equal(200);

    // The credentials are a Secret of DESTINATIONS_NAMESPACE, not of the namespace the MediaJobs and runners are in.
    const secretsIn = async (ns: string) => (await svc.cluster.kubectl(['get', 'secrets', '-n', ns, '-o', 'name'])).stdout;
    expect(await secretsIn(VAULT_NAMESPACE)).to.include(`secret/mj-dest-key-${svc.apiKeyId}-s3`);
    expect(await secretsIn('default')).not.to.include('mj-dest-');

    const created = await svc.api('POST', '/jobs', { url: media.mp4Url, filename: 'clip one', folder: 'season/1', webhook_url: receiver.url });
    expect(created.status).to.equal(201);
    const id = created.body.job_id as string;
    const job = await waitForJob(id);
    expect(job.status, String(job.error)).to.equal('Completed');
    expect(job.s3_key).to.equal('acme/media/season/1/clip one.mp4');

    const url = new URL(job.s3_url as string);
    expect(url.origin).to.equal(s3.endpoint);
    expect(url.searchParams.get('X-Amz-Expires')).to.equal('86400');
    const bytes = await download(url.toString());
    expect(bytes.length).to.equal(job.file_size);
    expect(bytes.equals(await storedObject(pair, 'saved', job.s3_key as string)), 'byte for byte').to.equal(true);

    const hook = await eventually(() => receiver.hooks.find((h) => h.body.job_id === id && h.body.type === 'job_completed'), 15_000);
    expect((await download(hook.body.s3_url as string)).equals(bytes)).to.equal(true);
    expect(managedFiles(), 'nothing in managed storage').to.have.length(0);
  });

  it('inline credentials: delivered, then deleted from the row and the cluster when the job ends', async () => {
    const pair = newS3Key();
    secret('S3 access key', pair.accessKey, pair.secretKey);
    const signing = await svc.api('POST', '/user/webhook-secret');
    expect(signing.status, JSON.stringify(signing.body)).to.be.oneOf([200, 201]);
    secret('webhook signing secret', signing.body.secret as string);
    const webhookUrl = `${receiver.url}?token=hook-${randomBytes(12).toString('hex')}`;
    secret('webhook URL', webhookUrl);
    const created = await svc.api('POST', '/jobs', {
      url: media.mp4Url, storage: { provider: 's3', ...s3Destination(pair, 'inline') }, webhook_url: webhookUrl,
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const id = created.body.job_id as string;
    const job = await waitForJob(id);
    expect(job.status, String(job.error)).to.equal('Completed');
    expect(job.s3_key).to.equal(`videos/${id}.mp4`);
    const bytes = await download(job.s3_url as string);
    expect(bytes.equals(await storedObject(pair, 'inline', job.s3_key as string)), 'byte for byte').to.equal(true);

    await eventually(async () => {
      const r = await svc.db.pool.query<{ storage_enc: string | null }>('SELECT storage_enc FROM jobs WHERE id = $1', [id]);
      return r.rows[0]!.storage_enc === null ? true : undefined;
    }, 15_000);
    await eventually(async () => {
      const out = await svc.cluster.kubectl(['get', 'secrets', '-l', `mediajobs.io/job-id=${id}`, '-o', 'name']);
      return out.stdout.trim() === '' ? true : undefined;
    }, 15_000);
    // The URL signed at completion still serves GET /jobs/{id}.
    const again = await svc.api('GET', `/jobs/${id}`);
    expect((await download(again.body.s3_url as string)).equals(bytes)).to.equal(true);
    // The webhook address, sealed for this row, was opened for its delivery, which was signed.
    const hook = await eventually(() => receiver.hooks.find((h) => h.body.job_id === id && h.body.type === 'job_completed'), 15_000);
    expect(hook.webhookId).to.be.a('string');
  });

  it('credentials revoked between submit and upload: Failed with reason storage_unreachable, delivered nowhere', async () => {
    const pair = newS3Key();
    secret('S3 access key', pair.accessKey, pair.secretKey);
    const other = await createApiKey(svc.db.pool, { name: 'revoked-destination' });
    secret('API key', other.key);
    expect((await svc.api('POST', '/user/s3', s3Destination(pair, 'revoked'), other.key)).status).to.equal(200);
    const chatUrl = `${new URL(receiver.url).origin}/services/T0/B0/chat-${randomBytes(12).toString('hex')}`;
    secret('chat URL', chatUrl);
    const chat = await svc.api('POST', '/user/chat', { webhook_url: chatUrl, notify_level: 'errors_only' }, other.key);
    expect(chat.status, JSON.stringify(chat.body)).to.equal(200);
    const created = await svc.api('POST', '/jobs', { url: media.mp4Url }, other.key);
    expect(created.status).to.equal(201);
    s3rverAccounts.DUMMY_ACCOUNT.revokeAccessKey(pair.accessKey);

    const id = created.body.job_id as string;
    const job = await waitForJob(id, other.key);
    expect(job).to.include({ status: 'Failed', reason: 'storage_unreachable', error_type: 'error', s3_key: null, s3_url: null });
    const uploads = s3.events.filter((e) => e.eventName.startsWith('ObjectCreated') && !e.key.endsWith('verify_credentials.txt'));
    expect(uploads.filter((e) => e.key.includes(id))).to.have.length(0);
    expect(managedFiles(), 'not delivered to managed storage either').to.have.length(0);
    // The failure's chat notification: its address, copied from the key's setting, opened and posted.
    await eventually(async () => (await svc.db.pool.query(
      `SELECT 1 FROM outbox WHERE channel = 'chat' AND chat_key_id = $1 AND delivered_at IS NOT NULL`, [other.id])).rowCount ? true : undefined, 15_000);
  });

  it('a destination that cannot be resolved, or is not the owner\'s: Failed with storage_unreachable before any download', async () => {
    const keyId = (await svc.db.pool.query<{ id: string }>('SELECT id FROM api_keys WHERE name = $1', ['e2e'])).rows[0]!.id;
    const stranger = await createApiKey(svc.db.pool, { name: 'stranger' });
    const requestsBefore = media.requests;
    const manifest = (name: string, owner: string, secretName: string) => svc.cluster.manifest(`${name}.yaml`, [
      'apiVersion: mediajobs.io/v1alpha1', 'kind: MediaJob', 'metadata:', `  name: ${name}`, 'spec:', `  url: ${media.mp4Url}`,
      '  owner:', `    apiKeyId: ${owner}`, '  destination:', '    type: saved', '    provider: s3', `    secretName: ${secretName}`, '',
    ].join('\n'));
    // No such Secret.
    await svc.cluster.kubectl(['apply', '-f', manifest('unresolvable', stranger.id, `mj-dest-key-${stranger.id}-s3`)]);
    // The e2e key's saved Secret exists, but the job belongs to another key.
    await svc.cluster.kubectl(['apply', '-f', manifest('not-the-owners', stranger.id, `mj-dest-key-${keyId}-s3`)]);
    for (const name of ['unresolvable', 'not-the-owners']) {
      const status = await eventually(async () => {
        const out = await svc.cluster.kubectl(['get', 'mediajob', name, '-o', 'jsonpath={.status.status}/{.status.reason}/{.status.step}']);
        return out.stdout.startsWith('Failed') ? out.stdout : undefined;
      }, 30_000, 200);
      expect(status, name).to.equal('Failed/storage_unreachable/Queued');
    }
    expect(media.requests, 'no download was attempted').to.equal(requestsBefore);
  });

  it('a saved Blob destination (Azurite): delivered and downloadable by its SAS URL, byte for byte', async () => {
    const k = await createApiKey(svc.db.pool, { name: 'blob-owner' });
    secret('API key', k.key);
    const saved = await svc.api('POST', '/user/blob', {
      account_name: azurite.accountName, account_key: azurite.accountKey, container: 'media', endpoint: azurite.endpoint, folder_prefix: 'az',
    }, k.key);
    expect(saved.status, JSON.stringify(saved.body)).to.equal(200);
    const created = await svc.api('POST', '/jobs', { url: media.mp4Url, filename: 'blob clip' }, k.key);
    const job = await waitForJob(created.body.job_id as string, k.key);
    expect(job.status, String(job.error)).to.equal('Completed');
    expect(job.s3_key).to.equal('az/videos/blob clip.mp4');
    const bytes = await download(job.s3_url as string);
    const stored = await azurite.client().getContainerClient('media').getBlobClient(job.s3_key as string).downloadToBuffer();
    expect(bytes.equals(stored), 'byte for byte').to.equal(true);
  });

  it('inline OSS credentials (OSS fake): delivered and downloadable by its signed URL, byte for byte', async () => {
    const created = await svc.api('POST', '/jobs', {
      url: media.mp4Url, folder: 'inline',
      storage: { provider: 'oss', endpoint: oss.endpoint, region: oss.region, bucket: 'media', access_key_id: ossKey.accessKeyId, access_key_secret: ossKey.accessKeySecret },
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const id = created.body.job_id as string;
    const job = await waitForJob(id);
    expect(job.status, String(job.error)).to.equal('Completed');
    expect(job.s3_key).to.equal(`videos/inline/${id}.mp4`);
    const bytes = await download(job.s3_url as string);
    expect(bytes.equals(oss.objects('media').get(job.s3_key as string)!.body), 'byte for byte').to.equal(true);
  });

  /** A key of its own with a saved GCS destination for a new service account (access to bucket `media`). */
  async function gcsOwner(name: string, folderPrefix?: string): Promise<{ key: string; account: FakeServiceAccount }> {
    const k = await createApiKey(svc.db.pool, { name });
    const account = gcs.createServiceAccount({ buckets: ['media'] });
    secret('API key', k.key);
    secret('GCS service account key', ...pemLines(account.privateKey));
    const saved = await svc.api('POST', '/user/gcs', {
      project_id: account.projectId, bucket: 'media', service_account_json: account.json(), ...(folderPrefix && { folder_prefix: folderPrefix }),
    }, k.key);
    expect(saved.status, JSON.stringify(saved.body)).to.equal(200);
    return { key: k.key, account };
  }

  it('a saved GCS destination (GCS fake): delivered and downloadable by its V4 signed URL, byte for byte', async () => {
    const { key, account } = await gcsOwner('gcs-owner', 'gc');
    const created = await svc.api('POST', '/jobs', { url: media.mp4Url, filename: 'gcs clip', storage_provider: 'gcs' }, key);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const job = await waitForJob(created.body.job_id as string, key);
    expect(job.status, String(job.error)).to.equal('Completed');
    expect(job.s3_key).to.equal('gc/videos/gcs clip.mp4');

    const url = new URL(job.s3_url as string);
    expect(url.origin, 'signed for the configured API endpoint').to.equal(gcs.apiEndpoint);
    expect(url.searchParams.get('X-Goog-Algorithm')).to.equal('GOOG4-RSA-SHA256');
    expect(url.searchParams.get('X-Goog-Expires')).to.equal('86400');
    const bytes = await download(url.toString());
    expect(bytes.length).to.equal(job.file_size);
    expect(bytes.equals(gcs.object('media', job.s3_key as string)!.data), 'byte for byte').to.equal(true);
    // The fake checked the URL's signature against the destination's own key.
    expect(gcs.requests.some((r) => r.kind === 'signed.get' && r.status === 200 && r.account === account.email)).to.equal(true);
    expect(managedFiles(), 'nothing in managed storage').to.have.length(0);
  });

  it('a saved Drive destination (Drive fake): delivered into the shared drive, and its gateway URL streams it byte for byte', async () => {
    const k = await createApiKey(svc.db.pool, { name: 'drive-owner' });
    const account = driveServiceAccount();
    const keyFile = Buffer.from(account.json).toString('base64');
    secret('API key', k.key);
    secret('Drive service account key', keyFile, ...pemLines(account.privateKey));
    drive.addServiceAccount(account.email, account.publicKey);
    const sharedDrive = drive.addSharedDrive('Media', { [account.email]: 'fileOrganizer' });
    const saved = await svc.api('POST', '/user/drive', { service_account_json: keyFile, folder_id: sharedDrive, folder_prefix: 'dr' }, k.key);
    expect(saved.status, JSON.stringify(saved.body)).to.equal(200);

    const created = await svc.api('POST', '/jobs', { url: media.mp4Url, filename: 'drive clip', storage_provider: 'drive' }, k.key);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const id = created.body.job_id as string;
    const job = await waitForJob(id, k.key);
    expect(job.status, String(job.error)).to.equal('Completed');
    expect(job.s3_key).to.equal('dr/videos/drive clip.mp4');
    const stored = drive.at(sharedDrive, job.s3_key as string);
    expect(stored, 'the file is in the shared drive').to.not.equal(undefined);

    // Drive has no presigned URLs: the job's URL is the gateway's, signed for this job, valid 24 h (lib/src/storage/README.md).
    const url = new URL(job.s3_url as string);
    expect(`${url.origin}${url.pathname}`).to.equal(`${svc.env.PUBLIC_BASE_URL}/drive-files/${id}/dr/videos/drive%20clip.mp4`);
    const nowSeconds = Date.now() / 1000;
    expect(Number(url.searchParams.get('expires'))).to.be.within(nowSeconds + 86_400 - 3600, nowSeconds + 86_400);
    const bytes = await download(url.toString());
    expect(bytes.length).to.equal(job.file_size);
    expect(bytes.equals(stored!.content), 'byte for byte').to.equal(true);
    expect(managedFiles(), 'nothing in managed storage').to.have.length(0);
  });

  it('GCS credentials revoked between submit and upload: Failed with reason storage_unreachable, delivered nowhere', async () => {
    const { key, account } = await gcsOwner('gcs-revoked');
    const created = await svc.api('POST', '/jobs', { url: media.mp4Url, storage_provider: 'gcs' }, key);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    account.revoke();

    const id = created.body.job_id as string;
    const job = await waitForJob(id, key);
    expect(job).to.include({ status: 'Failed', reason: 'storage_unreachable', error_type: 'error', s3_key: null, s3_url: null });
    // The runner got as far as asking for a token, and was refused.
    expect(gcs.requests.some((r) => r.kind === 'token' && r.account === account.email && r.status === 400)).to.equal(true);
    expect(gcs.object('media', `videos/${id}.mp4`)).to.equal(undefined);
    expect(gcs.requests.filter((r) => r.kind.startsWith('upload') && r.object?.includes(id))).to.have.length(0);
    expect(managedFiles(), 'not delivered to managed storage either').to.have.length(0);
  });

  describe('after the jobs above', () => {
    it('no log line of the gateway, the operator or a runner carries a credential', async () => {
      const runners = await runnerLogs(svc);
      expect(runners.length).to.be.at.least(3);
      // Gateway and operator write to one stream here; each line names its process.
      const byProcess = new Map<string, string[]>();
      for (const l of lines) {
        const name = /"name":"([^"]+)"/.exec(l)?.[1] ?? 'unnamed';
        byProcess.set(name, [...(byProcess.get(name) ?? []), l]);
      }
      expect(byProcess.get('api-gateway')?.length, 'gateway lines captured').to.be.greaterThan(10);
      expect(byProcess.get('operator')?.length, 'operator lines captured').to.be.greaterThan(10);
      expect(byProcess.get('api-gateway')!.join('')).to.include('storage destination saved');
      const logs = [...[...byProcess].map(([source, ls]) => ({ source, text: ls.join('') })), ...runners];
      expect(secrets.map((s) => s.kind)).to.include.members(['webhook URL', 'chat URL', 'webhook signing secret', 'SECRET_KEYS key e2e']);
      assertNoLeaks(secrets, logs);
    });
  });
});
