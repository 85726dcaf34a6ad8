// Storage destinations through the gateway's API, on real parts: Postgres,
// Kubernetes Secrets on the local cluster (the keyvault source), and s3rver
// for every S3 call (probes, listing). Covers the configuration endpoints'
// messages and status codes, GET /user/s3 for both sources, organizations,
// rule 9, inline storage's three checks and its 5-minute probe cache, and
// that no credential reaches a response, a MediaJob, a row's plain columns
// or a log line.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import * as k8s from '@kubernetes/client-node';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob } from '@mediajobs/lib/mediajob/types';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { sealedAt } from '@mediajobs/lib/db/sealed-columns';
import { runAdmin, UsageError } from '../src/admin.js';
import { createApiKey, createOrganization } from '../src/db/api-keys.js';
import { maskAccessKey } from '../src/destinations/fields.js';
import { ProbeCache, probeDestination } from '../src/destinations/probe.js';
import { saveDestination, setOrgAdmin, type NewDestination } from '../src/destinations/store.js';
import { KubeSecretVault } from '../src/destinations/vault.js';
import { startS3rver, type RunningS3rver } from '../../test/support/s3rver.js';
import { materialize, probeBounds, startClusterWithCrd, startTestGateway, type TestCluster, type TestGateway } from './support.js';

// s3rver checks that the access key id is registered (and nothing else for
// SigV4), so registering and revoking key pairs is real credential
// management against it.
const s3rverAccounts = createRequire(import.meta.url)('s3rver/lib/models/account.js') as {
  DUMMY_ACCOUNT: { createKeyPair(id: string, secret: string): void; revokeAccessKey(id: string): void };
};

function newS3Key(): { accessKey: string; secretKey: string } {
  const accessKey = `MJTEST${randomBytes(6).toString('hex').toUpperCase()}`;
  const secretKey = `mj-secret-${randomBytes(16).toString('hex')}`;
  s3rverAccounts.DUMMY_ACCOUNT.createKeyPair(accessKey, secretKey);
  return { accessKey, secretKey };
}

const SRC = 'https://media.example/watch?v=storage';

describe('api-gateway: storage destinations', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let core: k8s.CoreV1Api;
  let s3: RunningS3rver;
  let gw: TestGateway;
  let now = Date.now();
  const secretBox = new SecretBox(`k2:${randomBytes(32).toString('base64')},k1:${randomBytes(32).toString('base64')}`);
  const cred = newS3Key();
  /** Every credential value the tests send; none may come back or be logged. */
  const secrets: string[] = [cred.secretKey, cred.accessKey];

  const s3Body = (over: Record<string, unknown> = {}) => ({
    endpoint: s3.endpoint, bucket: 'dest', region: 'us-east-1', access_key: cred.accessKey, secret_key: cred.secretKey, ...over,
  });
  const probes = () => s3.events.filter((e) => e.key.endsWith('verify_credentials.txt') && e.eventName === 'ObjectCreated:Put').length;
  const readSecret = (name: string) => core.readNamespacedSecret({ name, namespace: 'default' });
  /**
   * A job's MediaJob as the API server stored it: first created, as the
   * operator's materializer creates them, from the rows accepted since the last call.
   */
  const mediaJob = async (name: string) => {
    for (const mj of (await materialize(gw.pool)).jobs) {
      await tc.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: mj.metadata.namespace!, plural: MEDIAJOB_PLURAL, body: mj });
    }
    return (await tc.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name })) as MediaJob;
  };
  const secretGone = async (name: string) => {
    try {
      await readSecret(name);
      return false;
    } catch (err) {
      return err instanceof k8s.ApiException && err.code === 404;
    }
  };

  before(async () => {
    tc = await startClusterWithCrd();
    core = tc.kc.makeApiClient(k8s.CoreV1Api);
    s3 = await startS3rver({ buckets: ['dest', 'other', 'inline'] });
    gw = await startTestGateway({
      secretBox,
      storage: {
        vault: new KubeSecretVault(tc.kc, 'default'),
        probeTimeoutMs: 5_000,
        probes: new ProbeCache((doc) => probeDestination(doc, probeBounds(5_000)), 5 * 60_000, 100, () => now),
      },
    });
  });

  after(async () => {
    await gw?.stop();
    await s3?.stop();
    await tc?.stop();
  });

  describe('POST /user/s3 and GET /user/s3 (keyvault)', () => {
    let key: { id: string; key: string };
    before(async () => {
      key = await gw.newKey('s3-owner');
    });

    it('verifies with a live upload and delete of verify_credentials.txt, then saves to a labelled Secret', async () => {
      const before = s3.events.length;
      const r = await gw.request('POST', '/user/s3', { key: key.key, body: s3Body({ folder_prefix: 'tenant/a', base_folder: 'media' }) });
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.deep.equal({
        message: 'S3 storage configured successfully', provider: 's3', container_or_bucket: 'dest', folder_prefix: 'tenant/a',
      });
      expect(s3.events.slice(before).map((e) => `${e.eventName} ${e.bucket}/${e.key}`)).to.deep.equal([
        'ObjectCreated:Put dest/tenant/a/verify_credentials.txt', 'ObjectRemoved:Delete dest/tenant/a/verify_credentials.txt',
      ]);
      const secret = await readSecret(`mj-dest-key-${key.id}-s3`);
      expect(secret.metadata?.labels).to.include({
        'mediajobs.io/owner-kind': 'api-key', 'mediajobs.io/owner-id': key.id, 'mediajobs.io/provider': 's3',
      });
      const doc = JSON.parse(Buffer.from(secret.data!['destination.json']!, 'base64').toString()) as Record<string, unknown>;
      expect(doc).to.deep.equal({ provider: 's3', ...s3Body({ folder_prefix: 'tenant/a', base_folder: 'media' }) });
      const row = (await gw.pool.query('SELECT * FROM storage_destinations WHERE owner_id = $1', [key.id])).rows[0] as Record<string, unknown>;
      expect(row).to.include({ owner_kind: 'api_key', source: 'keyvault', secret_name: `mj-dest-key-${key.id}-s3`, credentials_enc: null });
      expect(JSON.stringify(row)).to.not.include(cred.secretKey).and.not.include(cred.accessKey);
    });

    it('GET answers the keyvault fields: no endpoint, region or masked key, but last_modified', async () => {
      const t0 = Math.floor(Date.now() / 1000);
      const r = await gw.request('GET', '/user/s3', { key: key.key });
      expect(r.status).to.equal(200);
      const body = r.body as Record<string, unknown>;
      expect(body).to.have.all.keys('configured', 'provider', 'container_or_bucket', 'folder_prefix', 'base_folder', 'last_modified', 'source');
      expect(body).to.include({ configured: true, provider: 's3', container_or_bucket: 'dest', folder_prefix: 'tenant/a', base_folder: 'media', source: 'keyvault' });
      expect(body.last_modified).to.be.a('number').within(t0 - 60, t0 + 1);
    });

    it('GET without a configuration: 200 {configured: false}', async () => {
      const other = await gw.newKey('nothing-saved');
      const r = await gw.request('GET', '/user/s3', { key: other.key });
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ configured: false });
    });

    it('base_folder defaults to videos', async () => {
      const k = await gw.newKey('default-base');
      expect((await gw.request('POST', '/user/s3', { key: k.key, body: s3Body() })).status).to.equal(200);
      const r = await gw.request('GET', '/user/s3', { key: k.key });
      expect(r.body).to.include({ base_folder: 'videos' }).and.not.have.property('folder_prefix');
    });

    const failures: [string, () => Record<string, unknown>, string][] = [
      ['a missing field', () => s3Body({ bucket: undefined }), 'Credential validation failed: bucket_required'],
      ['a blank field', () => s3Body({ region: '  ' }), 'Credential validation failed: region_required'],
      ['a field of the wrong type', () => s3Body({ endpoint: 42 }), 'Credential validation failed: invalid_endpoint'],
      ['an endpoint that is not http(s)', () => s3Body({ endpoint: 'ftp://127.0.0.1:21' }), 'Credential validation failed: invalid_endpoint'],
      ['a link-local endpoint', () => s3Body({ endpoint: 'http://169.254.169.254' }), 'Credential validation failed: invalid_endpoint'],
      ['a folder_prefix that climbs out', () => s3Body({ folder_prefix: 'a/../b' }), 'Credential validation failed: invalid_folder_prefix'],
      ['a bucket that does not exist', () => s3Body({ bucket: 'missing' }), 'Credential validation failed: NoSuchBucket'],
      ['an access key the service does not know', () => s3Body({ access_key: 'NOT-REGISTERED' }), 'Credential validation failed: InvalidAccessKeyId'],
      ['a server that is not there', () => s3Body({ endpoint: 'http://127.0.0.1:1' }), 'Credential validation failed: unreachable'],
    ];
    for (const [what, body, message] of failures) {
      it(`${what}: 400 ${message}, nothing saved`, async () => {
        const k = await gw.newKey('bad');
        const r = await gw.request('POST', '/user/s3', { key: k.key, body: body() });
        expect(r.status).to.equal(400);
        expect(r.body).to.deep.equal({ error: message });
        expect((await gw.pool.query('SELECT 1 FROM storage_destinations WHERE owner_id = $1', [k.id])).rowCount).to.equal(0);
        expect(await secretGone(`mj-dest-key-${k.id}-s3`)).to.equal(true);
      });
    }

    it('a body that is not JSON is refused before any check', async () => {
      const r = await gw.request('POST', '/user/s3', { key: key.key, raw: 'endpoint=x', headers: { 'content-type': 'text/plain' } });
      expect(r.status).to.equal(415);
      const r2 = await gw.request('POST', '/user/s3', { key: key.key, body: ['not', 'an', 'object'] });
      expect(r2.body).to.deep.equal({ error: 'Request body must be a JSON object' });
    });

    it('DELETE removes the Secret and the row; GET then says configured false', async () => {
      const k = await gw.newKey('to-delete');
      expect((await gw.request('POST', '/user/s3', { key: k.key, body: s3Body() })).status).to.equal(200);
      const r = await gw.request('DELETE', '/user/s3', { key: k.key });
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ message: 'S3 storage configuration removed', provider: 's3', removed: true });
      expect(await secretGone(`mj-dest-key-${k.id}-s3`)).to.equal(true);
      expect((await gw.request('GET', '/user/s3', { key: k.key })).body).to.deep.equal({ configured: false });
      // Deleting again is not an error.
      expect((await gw.request('DELETE', '/user/s3', { key: k.key })).body).to.include({ removed: false });
    });
  });

  describe('authentication of the configuration endpoints', () => {
    const routes: [string, string][] = [
      ...['s3', 'blob', 'gcs', 'oss', 'drive'].flatMap((p): [string, string][] => [['POST', `/user/${p}`], ['GET', `/user/${p}`], ['DELETE', `/user/${p}`]]),
      ['POST', '/user/bucket'], ['DELETE', '/user/bucket'],
    ];
    for (const [method, path] of routes) {
      it(`${method} ${path}: 401 for a missing and for an invalid key`, async () => {
        const body = method === 'POST' ? { body: {} } : {};
        const missing = await gw.request(method, path, { key: null, ...body });
        expect([missing.status, missing.body]).to.deep.equal([401, { error: 'Missing x-api-key header' }]);
        const invalid = await gw.request(method, path, { key: 'mj_invalid-key', ...body });
        expect([invalid.status, invalid.body]).to.deep.equal([401, { error: 'Invalid API Key' }]);
      });
    }
  });

  describe('provider-specific messages (checked before any network call)', () => {
    const sa = (fields: Record<string, unknown>) => JSON.stringify({ type: 'service_account', client_email: 'sa@p.iam.example', ...fields });
    it("gcs: a service account without private_key: 400 Invalid service account JSON: missing 'private_key' field", async () => {
      for (const encoded of [sa({}), Buffer.from(sa({})).toString('base64'), JSON.stringify(sa({}))]) {
        const r = await gw.request('POST', '/user/gcs', { body: { project_id: 'p', bucket: 'b', service_account_json: encoded } });
        expect(r.status).to.equal(400);
        expect(r.body).to.deep.equal({ error: "Invalid service account JSON: missing 'private_key' field" });
      }
    });
    it('drive: a service account that is not JSON: 400 Invalid configuration: invalid service account JSON', async () => {
      for (const bad of ['not json', '{"private_key": 1}', sa({})]) {
        const r = await gw.request('POST', '/user/drive', { body: { service_account_json: bad } });
        expect(r.status).to.equal(400);
        expect(r.body).to.deep.equal({ error: 'Invalid configuration: invalid service account JSON' });
      }
    });
    it('gcs, oss, blob: missing fields are named', async () => {
      const cases: [string, Record<string, unknown>, string][] = [
        ['gcs', { bucket: 'b', service_account_json: sa({ private_key: 'x' }) }, 'Credential validation failed: project_id_required'],
        ['oss', { endpoint: 'oss-cn-hangzhou.aliyuncs.com', bucket: 'b', access_key_id: 'id' }, 'Credential validation failed: access_key_secret_required'],
        ['blob', { account_name: 'acct', account_key: 'k' }, 'Credential validation failed: container_required'],
        ['drive', { service_account_json: sa({ private_key: 'x' }), folder_id: 7 }, 'Invalid configuration: invalid_folder_id'],
      ];
      for (const [provider, body, message] of cases) {
        const r = await gw.request('POST', `/user/${provider}`, { body });
        expect([r.status, r.body], provider).to.deep.equal([400, { error: message }]);
      }
    });
  });

  describe('503 when the secret store is unavailable', () => {
    let dead: TestGateway;
    before(async () => {
      // A kubeconfig whose API server refuses connections.
      const kc = new k8s.KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: 'gone', server: 'http://127.0.0.1:1', skipTLSVerify: true }],
        users: [{ name: 'u' }], contexts: [{ name: 'c', cluster: 'gone', user: 'u' }], currentContext: 'c',
      });
      dead = await startTestGateway({ secretBox, storage: { vault: new KubeSecretVault(kc, 'default', 2_000), probeTimeoutMs: 5_000 } });
    });
    after(async () => {
      await dead?.stop();
    });

    it('POST /user/s3 verifies, then answers 503 naming S3 and saves nothing', async () => {
      const k = await dead.newKey('vault-down');
      const r = await dead.request('POST', '/user/s3', { key: k.key, body: s3Body() });
      expect(r.status).to.equal(503);
      expect(r.body).to.deep.equal({ error: 'S3 storage configuration is temporarily unavailable' });
      expect((await dead.pool.query('SELECT 1 FROM storage_destinations')).rowCount).to.equal(0);
    });

    for (const [provider, label] of [['s3', 'S3'], ['blob', 'Blob'], ['gcs', 'GCS'], ['oss', 'OSS'], ['drive', 'Drive']]) {
      it(`DELETE /user/${provider}: 503 ${label} storage configuration is temporarily unavailable`, async () => {
        const r = await dead.request('DELETE', `/user/${provider}`);
        expect([r.status, r.body]).to.deep.equal([503, { error: `${label} storage configuration is temporarily unavailable` }]);
      });
    }
  });

  describe('legacy source: vault disabled, and the deprecated /user/bucket', () => {
    let legacy: TestGateway;
    before(async () => {
      legacy = await startTestGateway({ secretBox, storage: { probeTimeoutMs: 5_000 } });
    });
    after(async () => {
      await legacy?.stop();
    });

    it('with the vault disabled POST /user/s3 seals the credentials into Postgres; GET shows the legacy fields', async () => {
      const k = await legacy.newKey('legacy');
      const r = await legacy.request('POST', '/user/s3', { key: k.key, body: s3Body({ base_folder: 'clips' }) });
      expect(r.status, r.text).to.equal(200);
      const row = (await legacy.pool.query('SELECT * FROM storage_destinations WHERE owner_id = $1', [k.id])).rows[0] as Record<string, string>;
      expect(row).to.include({ source: 'legacy', secret_name: null });
      // Sealed under the first key, its id in the ciphertext; any configured key opens it (rotation).
      expect(row.credentials_enc).to.match(/^v2\.k2\./);
      expect(JSON.parse(secretBox.open(row.credentials_enc!, sealedAt.destinationCredentials(row as { owner_kind: string; owner_id: string; provider: string })))).to.include({ secret_key: cred.secretKey, access_key: cred.accessKey });
      expect(JSON.stringify(row.config)).to.not.include(cred.secretKey);

      const got = await legacy.request('GET', '/user/s3', { key: k.key });
      expect(got.body).to.deep.equal({
        configured: true, provider: 's3', container_or_bucket: 'dest', base_folder: 'clips', endpoint: s3.endpoint, region: 'us-east-1',
        access_key_masked: `****${cred.accessKey.slice(-4)}`, source: 'legacy',
      });
    });

    it('access_key_masked: **** plus the last 4 characters; 4 or fewer become ****', () => {
      expect(maskAccessKey('AKIAABCDEFGH')).to.equal('****EFGH');
      expect(maskAccessKey('ABCDE')).to.equal('****BCDE');
      expect(maskAccessKey('ABCD')).to.equal('****');
      expect(maskAccessKey('')).to.equal('****');
    });

    it('POST /user/bucket verifies by listing (no object written) and saves a legacy destination without base_folder', async () => {
      const k = await gw.newKey('bucket');
      const writes = s3.events.length;
      const r = await gw.request('POST', '/user/bucket', { key: k.key, body: s3Body({ folder_prefix: 'ignored' }) });
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.deep.equal({ message: 'Custom bucket configured successfully' });
      expect(s3.events.length).to.equal(writes);
      const got = await gw.request('GET', '/user/s3', { key: k.key });
      expect(got.body).to.deep.equal({
        configured: true, provider: 's3', container_or_bucket: 'dest', endpoint: s3.endpoint, region: 'us-east-1',
        access_key_masked: `****${cred.accessKey.slice(-4)}`, source: 'legacy',
      });
    });

    it('when both sources exist keyvault wins; DELETE /user/bucket removes only the legacy one', async () => {
      const k = await gw.newKey('both');
      expect((await gw.request('POST', '/user/s3', { key: k.key, body: s3Body({ bucket: 'other' }) })).status).to.equal(200);
      expect((await gw.request('POST', '/user/bucket', { key: k.key, body: s3Body() })).status).to.equal(200);
      expect((await gw.request('GET', '/user/s3', { key: k.key })).body).to.include({ source: 'keyvault', container_or_bucket: 'other' });
      const del = await gw.request('DELETE', '/user/bucket', { key: k.key });
      expect(del.status).to.equal(200);
      expect(del.body).to.have.property('message').that.is.a('string');
      expect((await gw.request('GET', '/user/s3', { key: k.key })).body).to.include({ source: 'keyvault' });
      await gw.request('POST', '/user/bucket', { key: k.key, body: s3Body() });
      await gw.request('DELETE', '/user/s3', { key: k.key });
      expect((await gw.request('GET', '/user/s3', { key: k.key })).body).to.deep.equal({ configured: false });
    });

    const bucketFailures: [string, Record<string, unknown>, string][] = [
      ['a missing field', { secret_key: undefined }, 'Verification failed: secret_key_required'],
      ['a bucket that does not exist', { bucket: 'missing' }, 'Verification failed: NoSuchBucket'],
      ['an unknown access key', { access_key: 'NOT-REGISTERED' }, 'Verification failed: InvalidAccessKeyId'],
      ['a server that is not there', { endpoint: 'http://127.0.0.1:1' }, 'Verification failed: unreachable'],
    ];
    for (const [what, over, message] of bucketFailures) {
      it(`POST /user/bucket with ${what}: 400 ${message}`, async () => {
        const r = await gw.request('POST', '/user/bucket', { body: s3Body(over) });
        expect([r.status, r.body]).to.deep.equal([400, { error: message }]);
      });
    }
  });

  describe('organizations: ?owner=organization with an organization admin key', () => {
    let org: string;
    let admin: { id: string; key: string };
    let member: { id: string; key: string };
    let loner: { id: string; key: string };
    before(async () => {
      org = (await createOrganization(gw.pool, 'Acme')).id;
      admin = await createApiKey(gw.pool, { name: 'acme-admin', organizationId: org });
      member = await createApiKey(gw.pool, { name: 'acme-member', organizationId: org });
      loner = await gw.newKey('no-org');
      const out: string[] = [];
      await runAdmin(['set-org-admin', '--id', admin.id], gw.pool, (l) => out.push(l));
      expect(out).to.deep.equal([`api key ${admin.id} is now an organization admin`]);
      expect(await setOrgAdmin(gw.pool, loner.id, true)).to.equal('no_organization');
      let refused: Error | undefined;
      await runAdmin(['set-org-admin', '--id', loner.id], gw.pool, () => undefined).catch((e: Error) => (refused = e));
      expect(refused).to.be.instanceOf(UsageError);
    });

    it('set-org-admin --off withdraws it', async () => {
      const k = await createApiKey(gw.pool, { name: 'acme-temp', organizationId: org });
      await runAdmin(['set-org-admin', '--id', k.id], gw.pool, () => undefined);
      expect((await gw.request('GET', '/user/s3?owner=organization', { key: k.key })).status).to.equal(200);
      await runAdmin(['set-org-admin', '--id', k.id, '--off'], gw.pool, () => undefined);
      expect((await gw.request('GET', '/user/s3?owner=organization', { key: k.key })).status).to.equal(403);
    });

    it('a key without an organization: 400; a member that is not admin: 403', async () => {
      const r1 = await gw.request('POST', '/user/s3?owner=organization', { key: loner.key, body: s3Body() });
      expect([r1.status, r1.body]).to.deep.equal([400, { error: 'This API key belongs to no organization' }]);
      for (const [method, body] of [['POST', { body: s3Body() }], ['GET', {}], ['DELETE', {}]] as const) {
        const r = await gw.request(method, '/user/s3?owner=organization', { key: member.key, ...body });
        expect([r.status, r.body]).to.deep.equal([403, { error: "Only an organization admin key can manage the organization's storage destinations" }]);
      }
      const r3 = await gw.request('GET', '/user/s3?owner=team', { key: admin.key });
      expect([r3.status, r3.body]).to.deep.equal([400, { error: "Invalid query parameter 'owner': must be 'key' or 'organization'" }]);
    });

    it("the admin key saves the organization's destination into its own Secret; the key's own stays separate", async () => {
      const r = await gw.request('POST', '/user/s3?owner=organization', { key: admin.key, body: s3Body({ folder_prefix: 'acme' }) });
      expect(r.status, r.text).to.equal(200);
      const secret = await readSecret(`mj-dest-org-${org}-s3`);
      expect(secret.metadata?.labels).to.include({ 'mediajobs.io/owner-kind': 'organization', 'mediajobs.io/owner-id': org });
      expect((await gw.request('GET', '/user/s3?owner=organization', { key: admin.key })).body).to.include({ configured: true, folder_prefix: 'acme' });
      expect((await gw.request('GET', '/user/s3', { key: admin.key })).body).to.deep.equal({ configured: false });
    });

    it("every key of the organization delivers there (rule 9: the key's own destinations first)", async () => {
      const r = await gw.request('POST', '/jobs', { key: member.key, body: { url: SRC, storage_provider: 's3' } });
      expect(r.status, r.text).to.equal(201);
      const id = (r.body as { job_id: string }).job_id;
      expect((await mediaJob(id)).spec.destination).to.deep.equal({ type: 'saved', provider: 's3', secretName: `mj-dest-org-${org}-s3` });
      await gw.request('POST', '/user/s3', { key: member.key, body: s3Body({ bucket: 'other' }) });
      const r2 = await gw.request('POST', '/jobs', { key: member.key, body: { url: SRC, storage_provider: 's3' } });
      const id2 = (r2.body as { job_id: string }).job_id;
      expect((await mediaJob(id2)).spec.destination).to.deep.equal({ type: 'saved', provider: 's3', secretName: `mj-dest-key-${member.id}-s3` });
    });
  });

  describe('rule 9: which destination a job gets', () => {
    let org: string;
    let seq = 0;
    const save = async (owner: NewDestination['owner'], provider: NewDestination['provider'], extra: Partial<NewDestination> = {}) => {
      // Rows straight into the table: resolution is a Postgres query, and only s3 can pass a live probe here.
      const d = await saveDestination(gw.pool, {
        owner, provider, source: 'keyvault', config: { bucket: `b${++seq}` }, secretName: `mj-dest-${owner.kind === 'api_key' ? 'key' : 'org'}-${owner.id}-${provider}`,
        ...extra,
      });
      // Distinct save times, so "most recently saved" is unambiguous.
      await gw.pool.query("UPDATE storage_destinations SET updated_at = now() + make_interval(secs => $2) WHERE id = $1", [d.id, seq]);
      return d;
    };
    const destinationOf = async (key: string, body: Record<string, unknown> = {}) => {
      const r = await gw.request('POST', '/jobs', { key, body: { url: SRC, ...body } });
      if (r.status !== 201) return (r.body as { error: string }).error;
      const id = (r.body as { job_id: string }).job_id;
      const row = (await gw.pool.query('SELECT destination, destination_id FROM jobs WHERE id = $1', [id])).rows[0] as { destination: unknown; destination_id: string | null };
      const cr = await mediaJob(id);
      expect(cr.spec.destination).to.deep.equal(row.destination);
      return cr.spec.destination.type === 'managed' ? 'managed' : `${cr.spec.destination.secretName ?? `legacy:${row.destination_id}`}`;
    };
    before(async () => {
      org = (await createOrganization(gw.pool, 'Rule9')).id;
    });

    it('walks the table', async () => {
      const k = await createApiKey(gw.pool, { name: 'r9', organizationId: org });
      const key = { kind: 'api_key' as const, id: k.id };
      const orgOwner = { kind: 'organization' as const, id: org };
      const sn = (o: { kind: string; id: string }, p: string) => `mj-dest-${o.kind === 'api_key' ? 'key' : 'org'}-${o.id}-${p}`;

      expect(await destinationOf(k.key), 'nothing saved').to.equal('managed');
      expect(await destinationOf(k.key, { storage_provider: 'gcs' }), 'provider not saved').to.equal('storage_provider_not_configured');

      await save(orgOwner, 'gcs');
      expect(await destinationOf(k.key), "only the organization's").to.equal(sn(orgOwner, 'gcs'));
      expect(await destinationOf(k.key, { storage_provider: 'gcs' })).to.equal(sn(orgOwner, 'gcs'));

      await save(orgOwner, 'oss', { isDefault: true });
      await save(orgOwner, 'blob');
      expect(await destinationOf(k.key), "the organization's default beats its most recent").to.equal(sn(orgOwner, 'oss'));

      await save(key, 's3');
      expect(await destinationOf(k.key), "any of the key's beats the organization's default").to.equal(sn(key, 's3'));
      expect(await destinationOf(k.key, { storage_provider: 'gcs' }), 'by provider: falls through to the organization').to.equal(sn(orgOwner, 'gcs'));

      await save(key, 'blob');
      expect(await destinationOf(k.key), 'most recently saved').to.equal(sn(key, 'blob'));
      expect(await destinationOf(k.key, { storage_provider: 'blob' }), "the key's before the organization's").to.equal(sn(key, 'blob'));

      await save(key, 's3', { isDefault: true });
      expect(await destinationOf(k.key), 'marked default').to.equal(sn(key, 's3'));

      const legacy = await save(key, 'drive', { source: 'legacy', secretName: undefined, credentials: secretBox.sealable('{}'), isDefault: true });
      expect(await destinationOf(k.key), 'a legacy destination: no Secret, resolved by row').to.equal(`legacy:${legacy.id}`);
      await save(key, 'drive');
      expect(await destinationOf(k.key, { storage_provider: 'drive' }), 'keyvault wins over legacy').to.equal(sn(key, 'drive'));
      expect(await destinationOf(k.key, { storage_provider: 'oss' })).to.equal(sn(orgOwner, 'oss'));
    });
  });

  describe('inline storage on POST /jobs', () => {
    const inline = (over: Record<string, unknown> = {}) => ({ provider: 's3', ...s3Body({ bucket: 'inline' }), ...over });
    const post = (storage: unknown, extra: Record<string, unknown> = {}) => gw.request('POST', '/jobs', { body: { url: SRC, storage, ...extra } });

    const shape: [string, unknown, string][] = [
      ['no provider', { bucket: 'x' }, 'Invalid storage configuration: provider_required'],
      ['drive', { provider: 'drive', service_account_json: '{}' }, 'Invalid storage configuration: drive is available as a saved destination only (POST /user/drive)'],
      ['an unknown provider', { provider: 'ftp' }, "Invalid storage configuration: provider must be one of 's3', 'blob', 'gcs', 'oss'"],
      ['managed', { provider: 'managed' }, "Invalid storage configuration: provider must be one of 's3', 'blob', 'gcs', 'oss'"],
      ['a missing bucket', 'no-bucket', 'Invalid storage configuration: bucket_required'],
      ['a bad endpoint', 'bad-endpoint', 'Invalid storage configuration: invalid_endpoint'],
      ['gcs without project_id', { provider: 'gcs', bucket: 'b', service_account_json: '{}' }, 'Invalid storage configuration: project_id_required'],
      ['a bad service account', { provider: 'gcs', project_id: 'p', bucket: 'b', service_account_json: 'nope' }, 'Invalid storage configuration: invalid_service_account_json'],
    ];
    for (const [what, storage, message] of shape) {
      it(`step 1, ${what}: 400 ${message}, with no network call`, async () => {
        const before = s3.events.length;
        const body = storage === 'no-bucket' ? inline({ bucket: undefined }) : storage === 'bad-endpoint' ? inline({ endpoint: 'ftp://h' }) : storage;
        const r = await post(body);
        expect([r.status, r.body]).to.deep.equal([400, { error: message }]);
        expect(s3.events.length).to.equal(before);
      });
    }

    it('storage with storage_provider: 400 storage_and_storage_provider_are_exclusive', async () => {
      const r = await post(inline(), { storage_provider: 's3' });
      expect([r.status, r.body]).to.deep.equal([400, { error: 'storage_and_storage_provider_are_exclusive' }]);
    });

    it('step 3, credentials the backend refuses: 400 Storage credentials validation failed: <reason>', async () => {
      for (const [over, reason] of [[{ bucket: 'missing' }, 'NoSuchBucket'], [{ access_key: 'NOT-REGISTERED' }, 'InvalidAccessKeyId'],
        [{ endpoint: 'http://127.0.0.1:1' }, 'unreachable']] as const) {
        const r = await post(inline(over));
        expect([r.status, r.body]).to.deep.equal([400, { error: `Storage credentials validation failed: ${reason}` }]);
      }
    });

    it('accepted: the MediaJob names only {type, provider}; the credentials are sealed in the row', async () => {
      const r = await post(inline({ folder_prefix: 'in/line' }));
      expect(r.status, r.text).to.equal(201);
      const id = (r.body as { job_id: string }).job_id;
      const cr = await mediaJob(id);
      expect(cr.spec.destination).to.deep.equal({ type: 'inline', provider: 's3' });
      expect(JSON.stringify(cr)).to.not.include(cred.secretKey).and.not.include(cred.accessKey);
      const row = (await gw.pool.query('SELECT * FROM jobs WHERE id = $1', [id])).rows[0] as Record<string, unknown>;
      expect(JSON.parse(secretBox.open(row.storage_enc as string, sealedAt.jobStorage(id)))).to.include({ provider: 's3', secret_key: cred.secretKey, folder_prefix: 'in/line' });
      const { storage_enc: _sealed, ...plain } = row;
      expect(JSON.stringify(plain)).to.not.include(cred.secretKey).and.not.include(cred.accessKey);
    });

    it('the probe result is cached 5 minutes per credential set (probes counted on s3rver)', async () => {
      const storage = inline({ folder_prefix: `cache-${randomBytes(4).toString('hex')}` });
      const n0 = probes();
      expect((await post(storage)).status).to.equal(201);
      expect(probes()).to.equal(n0 + 1);
      for (let i = 0; i < 3; i++) expect((await post(storage)).status).to.equal(201);
      expect(probes(), 'within 5 minutes: no new probe').to.equal(n0 + 1);
      const other = newS3Key();
      secrets.push(other.secretKey);
      expect((await post({ ...storage, access_key: other.accessKey, secret_key: other.secretKey })).status).to.equal(201);
      expect(probes(), 'another credential set is probed').to.equal(n0 + 2);
      now += 5 * 60_000 - 1;
      expect((await post(storage)).status).to.equal(201);
      expect(probes()).to.equal(n0 + 2);
      now += 2;
      expect((await post(storage)).status).to.equal(201);
      expect(probes(), 'after 5 minutes it is probed again').to.equal(n0 + 3);
    });

    it('concurrent requests with one new credential set share one probe', async () => {
      const storage = inline({ folder_prefix: `burst-${randomBytes(4).toString('hex')}` });
      const n0 = probes();
      const rs = await Promise.all(Array.from({ length: 5 }, () => post(storage)));
      expect(rs.map((r) => r.status)).to.deep.equal([201, 201, 201, 201, 201]);
      expect(probes()).to.equal(n0 + 1);
    });
  });

  // Last (mocha runs a suite's own tests before its nested suites, so this is a suite too).
  describe('after all of the above', () => {
    it('no log line carried a credential', () => {
      const logs = gw.logs.text();
      expect(gw.logs.lines.length).to.be.greaterThan(50);
      for (const s of secrets) expect(logs).to.not.include(s);
    });
  });
});
