// Marketplace users (issue 14 item 6, ADR 0015) as a marketplace sees them:
// a provider account's key made with the admin CLI, end users named by the
// x-marketplace-user header, inline storage probed against s3rver and saved
// to a real Kubernetes Secret (the keyvault source, on the local cluster),
// real Postgres, and the real gateway.
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import * as k8s from '@kubernetes/client-node';
import { ConfigError } from '@mediajobs/lib/config';
import type { MediaJob } from '@mediajobs/lib/mediajob/types';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { runAdmin } from '../src/admin.js';
import { loadGatewayConfig } from '../src/config.js';
import { createOrganization } from '../src/db/api-keys.js';
import { KubeSecretVault } from '../src/destinations/vault.js';
import { MARKETPLACE_STORAGE_REQUIRED, MARKETPLACE_USER_REVOKED } from '../src/marketplace.js';
import { RATE_LIMITED, inProcessBudget } from '../src/rate-limit.js';
import { NOT_DIRECT_KEY } from '../src/routes/bulk.js';
import { startGateway } from '../src/server.js';
import { startS3rver, type RunningS3rver } from '../../test/support/s3rver.js';
import { captureLogger, materialize, startClusterWithCrd, startTestGateway, type TestCluster, type TestGateway } from './support.js';

const SRC = 'https://media.example/watch?v=market';
const HEADER = 'x-marketplace-user';
/** End user ids as a marketplace may send them: one is personal data, and neither may reach a log line. */
const ALICE = 'alice@example.com';
const BOB = 'bob 42';

/** The admin CLI's create-key, as an operator of the service types it; returns its --json answer. */
async function adminKey(pool: TestGateway['pool'], ...argv: string[]): Promise<{ id: string; key: string; kind: string }> {
  const out: string[] = [];
  await runAdmin(['create-key', ...argv, '--json'], pool, (l) => out.push(l));
  return JSON.parse(out[0]!) as { id: string; key: string; kind: string };
}

describe('api-gateway: marketplace users', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let s3: RunningS3rver;
  let gw: TestGateway;
  let market: { id: string; key: string; kind: string };

  const storage = (over: Record<string, unknown> = {}) => ({
    provider: 's3', endpoint: s3.endpoint, bucket: 'market', region: 'us-east-1', access_key: s3.accessKeyId, secret_key: s3.secretAccessKey, ...over,
  });
  /** A request through the marketplace: the provider's key, and the end user when given. */
  const as = (user: string | null, method: string, path: string, body?: unknown, key = market.key) =>
    gw.request(method, path, { key, ...(body !== undefined && { body }), headers: user === null ? {} : { [HEADER]: user } });
  const endUserId = async (user: string, parent = market.id) =>
    ((await gw.pool.query('SELECT id FROM api_keys WHERE parent_id = $1 AND marketplace_user = $2', [parent, user])).rows[0] as { id: string } | undefined)?.id;
  /** Every MediaJob the operator has built from this suite's rows, by job id. */
  const built = new Map<string, MediaJob>();
  /** The MediaJobs the operator builds from the rows accepted since the last call. */
  const newMediaJobs = async () => {
    const { jobs } = await materialize(gw.pool);
    for (const mj of jobs) built.set(mj.metadata.name!, mj);
    return jobs;
  };
  const specOf = async (jobId: string) => {
    await newMediaJobs();
    const mj = built.get(jobId);
    expect(mj, `the MediaJob of ${jobId}`).to.not.equal(undefined);
    return mj!;
  };

  before(async () => {
    tc = await startClusterWithCrd();
    s3 = await startS3rver({ buckets: ['market'] });
    gw = await startTestGateway({ storage: { vault: new KubeSecretVault(tc.kc, 'default'), probeTimeoutMs: 5_000 } });
    market = await adminKey(gw.pool, '--name', 'market', '--marketplace');
  });

  after(async () => {
    await gw?.stop();
    await s3?.stop();
    await tc?.stop();
  });

  it('the admin CLI makes a marketplace key and list-keys shows its kind and end users', async () => {
    expect(market).to.include({ kind: 'marketplace' });
    const direct = await adminKey(gw.pool, '--name', 'plain');
    expect(direct).to.include({ kind: 'direct' });
    expect((await as(ALICE, 'GET', '/jobs')).status).to.equal(200);
    const out: string[] = [];
    await runAdmin(['list-keys'], gw.pool, (l) => out.push(l));
    expect(out[0]!.split('\t')).to.include('KIND');
    expect(out.find((l) => l.startsWith(market.id))!.split('\t')).to.include('marketplace(1 users)');
    expect(out.find((l) => l.startsWith(direct.id))!.split('\t')).to.include('direct');
    expect(out.join('\n'), 'end users are not keys: not listed, their ids never printed').not.to.include(ALICE).and.not.include((await endUserId(ALICE))!);
  });

  describe('jobs and storage', () => {
    let firstJob: string;

    it("first job with inline storage: 201, owned by the end user, probed, and the storage saved as the end user's", async () => {
      const r = await as(ALICE, 'POST', '/jobs', { url: SRC, storage: storage() });
      expect(r.status, r.text).to.equal(201);
      firstJob = (r.body as { job_id: string }).job_id;
      const alice = (await endUserId(ALICE))!;
      const mj = await specOf(firstJob);
      expect(mj.spec.owner).to.deep.equal({ apiKeyId: alice });
      expect(mj.spec.destination).to.deep.equal({ type: 'inline', provider: 's3' });
      expect(s3.events.some((e) => e.key.endsWith('verify_credentials.txt')), 'the inline path probed it').to.equal(true);

      // Saved in the vault, labelled as the end user's; GET /user/s3 shows it to that end user only.
      const secret = await tc.kc.makeApiClient(k8s.CoreV1Api).readNamespacedSecret({ name: `mj-dest-key-${alice}-s3`, namespace: 'default' });
      expect(secret.metadata?.labels).to.include({ 'mediajobs.io/owner-kind': 'api-key', 'mediajobs.io/owner-id': alice });
      const shown = await as(ALICE, 'GET', '/user/s3');
      expect(shown.body).to.deep.include({ configured: true, provider: 's3', container_or_bucket: 'market', source: 'keyvault' });
      expect((await as(BOB, 'GET', '/user/s3')).body).to.deep.include({ configured: false });
    });

    it('a later job without storage: 201, delivered to the saved destination', async () => {
      const r = await as(ALICE, 'POST', '/jobs', { url: SRC });
      expect(r.status, r.text).to.equal(201);
      const alice = (await endUserId(ALICE))!;
      expect((await specOf((r.body as { job_id: string }).job_id)).spec.destination).to.deep.equal({
        type: 'saved', provider: 's3', secretName: `mj-dest-key-${alice}-s3`,
      });
    });

    it('another end user of the same key sees none of those jobs and has its own usage', async () => {
      const list = await as(BOB, 'GET', '/jobs');
      expect([list.status, list.body]).to.deep.equal([200, { jobs: [], total: 0, limit: 20, offset: 0 }]);
      const one = await as(BOB, 'GET', `/jobs/${firstJob}`);
      expect([one.status, one.body]).to.deep.equal([404, { error: 'Job not found' }]);
      expect((await as(ALICE, 'GET', `/jobs/${firstJob}`)).status).to.equal(200);
      expect(((await as(ALICE, 'GET', '/jobs')).body as { total: number }).total).to.equal(2);

      // Two jobs in progress, 512 MiB reserved each; the name is the provider's integration.
      expect((await as(ALICE, 'GET', '/usage')).body).to.deep.equal({
        client_name: 'market', usage_count: 2, storage_usage_gb: 0, storage_reserved_gb: 1, storage_effective_usage_gb: 1,
      });
      expect((await as(BOB, 'GET', '/usage')).body).to.deep.equal({
        client_name: 'market', usage_count: 0, storage_usage_gb: 0, storage_reserved_gb: 0, storage_effective_usage_gb: 0,
      });
    });

    it("an end user's first job without storage: 400, nothing created", async () => {
      await newMediaJobs();
      const r = await as(BOB, 'POST', '/jobs', { url: SRC });
      expect([r.status, r.body]).to.deep.equal([400, { error: MARKETPLACE_STORAGE_REQUIRED }]);
      const r2 = await as(BOB, 'POST', '/jobs', { url: SRC, storage_provider: 's3' });
      expect([r2.status, r2.body]).to.deep.equal([400, { error: 'storage_provider_not_configured' }]);
      expect(await newMediaJobs()).to.deep.equal([]);
      expect(((await as(BOB, 'GET', '/jobs')).body as { total: number }).total).to.equal(0);
    });

    it("never the account organization's saved destination, nor managed storage", async () => {
      const org = await createOrganization(gw.pool, 'provider-org');
      const orgMarket = await adminKey(gw.pool, '--name', 'org-market', '--org', org.id, '--marketplace');
      const admin = await adminKey(gw.pool, '--name', 'org-admin', '--org', org.id);
      await runAdmin(['set-org-admin', '--id', admin.id], gw.pool, () => undefined);
      const saved = await gw.request('POST', '/user/s3?owner=organization', { key: admin.key, body: { ...storage(), provider: undefined } });
      expect(saved.status, saved.text).to.equal(200);
      const r = await as('carol', 'POST', '/jobs', { url: SRC }, orgMarket.key);
      expect([r.status, r.body]).to.deep.equal([400, { error: MARKETPLACE_STORAGE_REQUIRED }]);
      const ok = await as('carol', 'POST', '/jobs', { url: SRC, storage: storage() }, orgMarket.key);
      expect(ok.status, ok.text).to.equal(201);
      // The account's organization still groups its jobs for admission.
      expect((await specOf((ok.body as { job_id: string }).job_id)).metadata.labels).to.include({ 'mediajobs.io/organization-id': org.id });
    });

    it('POST /jobs/bulk: 403, direct keys only', async () => {
      const r = await as(ALICE, 'POST', '/jobs/bulk', { urls: [SRC] });
      expect([r.status, r.body]).to.deep.equal([403, { error: NOT_DIRECT_KEY }]);
    });

    it('the end user ids reach no log line', () => {
      expect(gw.logs.text()).not.to.include(ALICE).and.not.include(BOB).and.not.include('carol');
    });
  });

  describe('the header', () => {
    it('missing or empty: 400 naming it', async () => {
      const missing = `Missing ${HEADER} header: requests with a marketplace API key must name their end user`;
      for (const user of [null, '']) {
        const r = await as(user, 'GET', '/jobs');
        expect([r.status, r.body]).to.deep.equal([400, { error: missing }]);
      }
      const post = await as(null, 'POST', '/jobs', { url: SRC, storage: storage() });
      expect([post.status, post.body]).to.deep.equal([400, { error: missing }]);
    });

    it('longer than 256 characters or not printable ASCII: 400, without echoing it', async () => {
      for (const user of ['x'.repeat(257), 'tab\there']) {
        const r = await as(user, 'GET', '/jobs');
        expect([r.status, r.body]).to.deep.equal([400, { error: `Invalid ${HEADER} header: must be 1 to 256 printable ASCII characters` }]);
      }
      expect((await as('x'.repeat(256), 'GET', '/jobs')).status).to.equal(200);
    });

    it('sent twice: 400', async () => {
      const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpRequest(`${gw.url}/jobs`, { headers: { 'x-api-key': market.key, [HEADER]: [ALICE, BOB] } }, (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        req.on('error', reject);
        req.end();
      });
      expect([answer.status, JSON.parse(answer.body)]).to.deep.equal([400, { error: `Invalid ${HEADER} header: send it once` }]);
    });

    it('a direct key sending it is unaffected: its own jobs, its own rule 9', async () => {
      const direct = await gw.newKey('direct-with-header');
      const r = await as(ALICE, 'POST', '/jobs', { url: SRC }, direct.key);
      expect(r.status, r.text).to.equal(201);
      const mj = await specOf((r.body as { job_id: string }).job_id);
      expect(mj.spec.owner).to.deep.equal({ apiKeyId: direct.id });
      expect(mj.spec.destination).to.deep.equal({ type: 'managed' });
      expect(((await as(ALICE, 'GET', '/jobs', undefined, direct.key)).body as { total: number }).total).to.equal(1);
      expect(await endUserId(ALICE, direct.id)).to.equal(undefined);
    });
  });

  it("two end users share the provider account's rate budget; another account is unaffected", async () => {
    const LIMIT = 6;
    const budget = inProcessBudget(LIMIT);
    const limited = await startTestGateway({ rateLimit: budget });
    try {
      const key = await adminKey(limited.pool, '--name', 'rated', '--marketplace');
      const other = await adminKey(limited.pool, '--name', 'other', '--marketplace');
      const get = (k: string, user: string) => limited.request('GET', '/jobs', { key: k, headers: { [HEADER]: user } });
      // Every request of the burst is answered within one one-second window.
      const answers = await Promise.all([...Array.from({ length: 4 }, () => get(key.key, 'u1')), ...Array.from({ length: 4 }, () => get(key.key, 'u2'))]);
      expect(answers.filter((a) => a.status === 200)).to.have.length(LIMIT);
      const refused = answers.filter((a) => a.status === 429);
      expect(refused.map((a) => [a.body, a.headers.get('retry-after')])).to.deep.equal([[{ error: RATE_LIMITED }, '1'], [{ error: RATE_LIMITED }, '1']]);
      expect((await get(key.key, 'someone-new')).status, 'a new end user gives no new allowance').to.equal(429);
      expect((await get(other.key, 'u1')).status).to.equal(200);
    } finally {
      budget.close();
      await limited.stop();
    }
  });

  describe('settings', () => {
    it('MARKETPLACE_USER_HEADER names the header; a revoked end user gets 403', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'mj-market-'));
      const g = await startGateway(loadGatewayConfig({
        DATABASE_URL: gw.db.url, SECRET_KEYS: SecretBox.generateSpec('t'), FILE_URL_SECRET: 'file-url-secret-0123456789',
        MANAGED_STORAGE_DIR: dir, PORT: '0', HOST: '127.0.0.1', STORAGE_VAULT: 'disabled', AUTH_CACHE_TTL_MS: '0',
        MARKETPLACE_USER_HEADER: 'X-RapidAPI-User',
      }), { logger: captureLogger().logger });
      try {
        const get = (headers: Record<string, string>) => fetch(`${g.url}/jobs`, { headers: { 'x-api-key': market.key, ...headers } });
        const wrong = await get({ [HEADER]: 'dave' });
        expect([wrong.status, await wrong.json()]).to.deep.equal([400, {
          error: 'Missing x-rapidapi-user header: requests with a marketplace API key must name their end user',
        }]);
        expect((await get({ 'x-rapidapi-user': 'dave' })).status).to.equal(200);
        const dave = (await endUserId('dave'))!;
        await runAdmin(['revoke-key', '--id', dave], gw.pool, () => undefined);
        const revoked = await get({ 'x-rapidapi-user': 'dave' });
        expect([revoked.status, await revoked.json()]).to.deep.equal([403, { error: MARKETPLACE_USER_REVOKED }]);
        expect((await get({ 'x-rapidapi-user': 'erin' })).status, 'the key and its other end users still work').to.equal(200);
      } finally {
        await g.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('refuses a MARKETPLACE_USER_HEADER that is not a header name', () => {
      const base = { DATABASE_URL: 'postgres://x/y', SECRET_KEYS: 'a:b' };
      expect(loadGatewayConfig(base).MARKETPLACE_USER_HEADER).to.equal(HEADER);
      for (const bad of ['x user', 'x-api-key']) {
        expect(() => loadGatewayConfig({ ...base, MARKETPLACE_USER_HEADER: bad })).to.throw(ConfigError, /MARKETPLACE_USER_HEADER/);
      }
    });
  });
});
