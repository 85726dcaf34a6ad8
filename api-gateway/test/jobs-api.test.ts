// The gateway's REST API on real Postgres, with the MediaJobs the operator
// builds from its rows created on a real local cluster: authentication
// messages, POST /jobs validation and its effects (row, counter, custom
// resource), GET /jobs paging and filters, GET /jobs/{id}, bad input never
// answered with a 500, and log redaction.
import { expect } from 'chai';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { sealedAt } from '@mediajobs/lib/db/sealed-columns';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob } from '@mediajobs/lib/mediajob/types';
import { ApiKeyCache } from '../src/auth.js';
import { createApiKey, createOrganization, revokeApiKey } from '../src/db/api-keys.js';
import { ORGANIZATION_LABEL } from '@mediajobs/lib/mediajob/build';
import { materialize, startClusterWithCrd, startTestGateway, type TestCluster, type TestGateway } from './support.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const SRC = 'https://media.example/watch?v=abc';

interface JobRow {
  id: string; api_key_id: string; url: string; status: string; step: string; progress: number;
  options: Record<string, unknown>; webhook_url_enc: string | null; cr_namespace: string; cr_name: string;
}

describe('api-gateway: REST API', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let gw: TestGateway;
  let key: { id: string; key: string };
  const secretBox = new SecretBox(SecretBox.generateSpec('test'));

  before(async () => {
    tc = await startClusterWithCrd();
    gw = await startTestGateway({ secretBox });
    key = await gw.newKey('main');
  });

  after(async () => {
    await gw?.stop();
    await tc?.stop();
  });

  const post = (body: unknown, k: string | null = key.key) => gw.request('POST', '/jobs', { key: k, body });
  const row = async (id: string) => (await gw.pool.query<JobRow>('SELECT * FROM jobs WHERE id = $1', [id])).rows[0];
  const total = async (apiKeyId: string) =>
    Number((await gw.pool.query('SELECT COALESCE(SUM(count), 0) AS n FROM job_counters WHERE api_key_id = $1', [apiKeyId])).rows[0].n);
  const jobCount = async () => Number((await gw.pool.query('SELECT count(*) AS n FROM jobs')).rows[0].n);
  /** Create on the cluster, as the operator's materializer does, the MediaJobs built from the rows accepted since the last call. */
  const materializeOnCluster = async () => {
    for (const mj of (await materialize(gw.pool)).jobs) {
      await tc.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: mj.metadata.namespace!, plural: MEDIAJOB_PLURAL, body: mj });
    }
  };
  /** The MediaJob of a job as the API server stored it (so its CRD accepted it). */
  const getCr = async (name: string) => {
    await materializeOnCluster();
    return (await tc.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name })) as MediaJob;
  };

  describe('authentication', () => {
    const routes: [string, string][] = [['POST', '/jobs'], ['GET', '/jobs'], ['GET', '/jobs/0190a0a0-0000-7000-8000-000000000000']];
    for (const [method, path] of routes) {
      it(`${method} ${path} without x-api-key: 401 Missing x-api-key header`, async () => {
        const r = await gw.request(method, path, { key: null, ...(method === 'POST' && { body: { url: SRC } }) });
        expect(r.status).to.equal(401);
        expect(r.body).to.deep.equal({ error: 'Missing x-api-key header' });
      });
      it(`${method} ${path} with an unknown key: 401 Invalid API Key`, async () => {
        const r = await gw.request(method, path, { key: 'mj_not-a-real-key', ...(method === 'POST' && { body: { url: SRC } }) });
        expect(r.status).to.equal(401);
        expect(r.body).to.deep.equal({ error: 'Invalid API Key' });
      });
    }
    it('an empty header counts as missing', async () => {
      const r = await gw.request('GET', '/jobs', { key: '' });
      expect(r.body).to.deep.equal({ error: 'Missing x-api-key header' });
    });
    it('authentication comes before body checks', async () => {
      const r = await gw.request('POST', '/jobs', { key: null, raw: '{bad json', headers: { 'content-type': 'application/json' } });
      expect(r.status).to.equal(401);
    });
    it('a revoked key is refused once its cache entry expires', async () => {
      const k = await gw.newKey('to-revoke');
      expect((await gw.request('GET', '/jobs', { key: k.key })).status).to.equal(200);
      await revokeApiKey(gw.pool, k.id);
      // Still cached: the documented revocation delay.
      expect((await gw.request('GET', '/jobs', { key: k.key })).status).to.equal(200);
      gw.keyCache.clear();
      const r = await gw.request('GET', '/jobs', { key: k.key });
      expect(r.status).to.equal(401);
      expect(r.body).to.deep.equal({ error: 'Invalid API Key' });
    });
    it('health endpoints need no key', async () => {
      expect((await gw.request('GET', '/healthz', { key: null })).body).to.deep.equal({ status: 'ok' });
      expect((await gw.request('GET', '/readyz', { key: null })).body).to.deep.equal({ status: 'ready' });
    });
  });

  describe('POST /jobs: success', () => {
    it('answers 201 {job_id}, writes a Pending row and the counter; the MediaJob built from the row is accepted by the CRD', async () => {
      const before = await total(key.id);
      const r = await post({ url: SRC, format: 'webm', video_codec: 'h264', audio_codec: 'aac', filename: 'clip', folder: 'shows/a', clip_start: '00:10', clip_end: '01:00', extra_field: 1 });
      expect(r.status).to.equal(201);
      const { job_id: id } = r.body as { job_id: string };
      // The unknown field is accepted, as the contract says, and named (issue 38 item 6).
      expect(r.body).to.deep.equal({ job_id: id, warnings: [{ code: 'unknown_field', param: 'extra_field', message: "Unknown field 'extra_field' was ignored" }] });
      expect(id).to.match(UUID);
      expect(r.headers.get('location')).to.equal(`/jobs/${id}`);

      const j = (await row(id))!;
      expect(j).to.include({ api_key_id: key.id, url: SRC, status: 'Pending', step: 'Queued', progress: 0, webhook_url_enc: null, cr_namespace: 'default', cr_name: id });
      const expectedOptions = {
        url: SRC, format: 'webm', videoCodec: 'vp9', audioCodec: 'opus', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best',
        filename: 'clip', folder: 'shows/a', audioOnly: false, downloadSubtitles: false, downloadThumbnail: false, clipStart: '00:10', clipEnd: '01:00',
        liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
      };
      expect(j.options).to.deep.equal(expectedOptions);
      expect(await total(key.id)).to.equal(before + 1);

      const cr = await getCr(id);
      expect(cr.metadata.name).to.equal(id);
      expect(cr.metadata.labels).to.deep.include({ 'mediajobs.io/api-key-id': key.id });
      expect(cr.spec).to.deep.include({ ...expectedOptions, jobId: id, owner: { apiKeyId: key.id }, destination: { type: 'managed' } });
      expect(cr.spec).not.to.have.property('webhookUrl');
    });

    it('seals webhook_url in Postgres and keeps it out of the MediaJob', async () => {
      const hook = 'https://hooks.example/receive?token=s3cr3t-hook-token';
      const r = await post({ url: SRC, webhook_url: hook });
      expect(r.status).to.equal(201);
      const id = (r.body as { job_id: string }).job_id;
      const j = (await row(id))!;
      expect(j.webhook_url_enc).to.be.a('string').and.not.include('s3cr3t');
      expect(secretBox.open(j.webhook_url_enc!, sealedAt.jobWebhook(id))).to.equal(hook);
      expect(j.options).not.to.have.property('webhookUrl');
      expect(JSON.stringify(await getCr(id))).not.to.include('hooks.example');
    });

    it('applies defaults, the silent mp4 fallback and the quality preset', async () => {
      const cases: [Record<string, unknown>, Record<string, unknown>][] = [
        [{}, { format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best' }],
        [{ audio_only: true }, { format: 'm4a', audioOnly: true }],
        [{ format: 'avi' }, { format: 'mp4' }],
        [{ quality_preset: 'highest', video_quality: 40 }, { videoQuality: 18, qualityPreset: 'highest' }],
        [{ format: 'mp3', audio_bitrate: '320k' }, { format: 'mp3', audioCodec: 'mp3', audioBitrate: '320k' }],
        [{ format: 'ogg', audio_codec: 'aac' }, { audioCodec: 'opus' }],
      ];
      for (const [body, expected] of cases) {
        const r = await post({ url: SRC, ...body });
        expect(r.status, JSON.stringify(body)).to.equal(201);
        const id = (r.body as { job_id: string }).job_id;
        expect((await row(id))!.options, JSON.stringify(body)).to.deep.include(expected);
        expect((await getCr(id)).spec, JSON.stringify(body)).to.deep.include(expected);
      }
    });

    it('answers 201 with no Kubernetes contact at all: the Pending row is the acceptance, its MediaJob still to create', async () => {
      // This gateway has no cluster anywhere in reach; the row alone is what the operator materializes.
      const g2 = await startTestGateway();
      try {
        const r = await g2.request('POST', '/jobs', { body: { url: SRC, webhook_url: 'https://hooks.example/w?token=zzz-secret' } });
        expect(r.status).to.equal(201);
        const id = (r.body as { job_id: string }).job_id;
        const j = (await g2.pool.query('SELECT status, cr_name, cr_created_at FROM jobs WHERE id = $1', [id])).rows[0];
        expect(j).to.deep.equal({ status: 'Pending', cr_name: id, cr_created_at: null });
        const { jobs, batches } = await materialize(g2.pool);
        expect(batches).to.deep.equal([]);
        expect(jobs.map((mj) => mj.metadata.name)).to.deep.equal([id]);
        expect(JSON.stringify(jobs)).not.to.include('zzz-secret');
        expect((await materialize(g2.pool)).jobs).to.deep.equal([]);
        expect(g2.logs.lines.map((l) => (JSON.parse(l) as { level: number }).level).filter((level) => level >= 40)).to.deep.equal([]);
        expect(g2.logs.text()).not.to.include('zzz-secret');
      } finally {
        await g2.stop();
      }
    });
  });

  describe('POST /jobs: the owner on the MediaJob', () => {
    it('a key of an organization: its MediaJob carries the organization label fair admission caps by; a key without one: no label', async () => {
      const org = await createOrganization(gw.pool, 'labelled');
      const orgKey = await createApiKey(gw.pool, { name: 'org key', organizationId: org.id });
      const mine = await gw.request('POST', '/jobs', { key: orgKey.key, body: { url: `${SRC}&org=1` } });
      expect(mine.status).to.equal(201);
      const cr = await getCr((mine.body as { job_id: string }).job_id);
      expect(cr.metadata.labels).to.deep.include({ 'mediajobs.io/api-key-id': orgKey.id, [ORGANIZATION_LABEL]: org.id });
      const loose = await post({ url: `${SRC}&org=0` });
      expect((await getCr((loose.body as { job_id: string }).job_id)).metadata.labels).to.not.have.property(ORGANIZATION_LABEL);
    });
  });

  describe('POST /jobs: validation', () => {
    // One refused value per field (the full tables are in lib/test/job-options.test.ts);
    // here: the HTTP answer, and that nothing was stored or created.
    const cases: [Record<string, unknown>, string][] = [
      [{ url: undefined }, "Missing required field 'url'"],
      [{ url: 42 }, "Invalid field 'url': must be a string"],
      [{ url: 'file:///etc/passwd' }, "Invalid field 'url': must be an absolute http or https URL"],
      [{ format: 1 }, "Invalid field 'format': must be a string"],
      [{ video_codec: 'av1' }, "Invalid field 'video_codec': must be one of 'copy', 'h264', 'h265', 'vp9'"],
      [{ audio_codec: 'flac' }, "Invalid field 'audio_codec': must be one of 'copy', 'aac', 'opus', 'mp3'"],
      [{ audio_bitrate: '96k' }, "Invalid field 'audio_bitrate': must be one of '64k', '128k', '192k', '256k', '320k'"],
      [{ video_quality: 52 }, "Invalid field 'video_quality': must be an integer from 0 to 51"],
      [{ quality_preset: 'max' }, "Invalid field 'quality_preset': must be one of 'highest', 'high', 'medium', 'low', 'lowest'"],
      [{ max_resolution: '4320' }, "Invalid field 'max_resolution': must be one of 'best', 'lowest', '2160', '1440', '1080', '720', '480', '360', '240', '144'"],
      [{ filename: 'a'.repeat(256) }, "Invalid field 'filename': must be at most 255 characters"],
      [{ filename: '../etc' }, "Invalid field 'filename': must not contain '..'"],
      [{ filename: 'a/b' }, "Invalid field 'filename': must not contain a forward slash or a backslash"],
      [{ filename: 'a\\b' }, "Invalid field 'filename': must not contain a forward slash or a backslash"],
      [{ filename: 'a\u0000b' }, "Invalid field 'filename': must not contain a null byte"],
      [{ folder: 'a'.repeat(201) }, "Invalid field 'folder': must be at most 200 characters"],
      [{ folder: 'a/../b' }, "Invalid field 'folder': must not contain '..'"],
      [{ folder: '/abs' }, "Invalid field 'folder': must not start with a forward slash or a backslash"],
      [{ folder: '\\abs' }, "Invalid field 'folder': must not start with a forward slash or a backslash"],
      [{ folder: '   ' }, "Invalid field 'folder': must not be empty or whitespace-only"],
      [{ webhook_url: 'nope' }, "Invalid field 'webhook_url': must be an absolute http or https URL"],
      [{ audio_only: 'yes' }, "Invalid field 'audio_only': must be a boolean (true or false)"],
      [{ download_subtitles: 1 }, "Invalid field 'download_subtitles': must be a boolean (true or false)"],
      [{ download_thumbnail: 'false' }, "Invalid field 'download_thumbnail': must be a boolean (true or false)"],
      [{ clip_start: '1:2:3:4' }, "Invalid field 'clip_start': must be a time as 'HH:MM:SS', 'MM:SS' or seconds (e.g. '01:02:03', '02:03' or '123')"],
      [{ clip_end: 'end' }, "Invalid field 'clip_end': must be a time as 'HH:MM:SS', 'MM:SS' or seconds (e.g. '01:02:03', '02:03' or '123')"],
      [{ clip_start: '00:01:00', clip_end: '00:00:30' }, "Invalid field 'clip_end': must be greater than clip_start"],
      [{ clip_start: '30', clip_end: '30' }, "Invalid field 'clip_end': must be greater than clip_start"],
      [{ live_recording: null, live_from_start: 'no' }, "Invalid field 'live_from_start': must be a boolean (true or false)"],
      [{ max_duration: -5 }, "Invalid field 'max_duration': must be an integer number of seconds from 1 to 2147483647"],
      [{ wait_for_video: [] }, "Invalid field 'wait_for_video': must be a boolean (true or false)"],
      [{ enable_progress_webhook: {} }, "Invalid field 'enable_progress_webhook': must be a boolean (true or false)"],
      [{ storage: 'x' }, "Invalid field 'storage': must be an object"],
      [{ storage_provider: 'dropbox' }, "Invalid field 'storage_provider': must be one of 's3', 'blob', 'gcs', 'oss', 'drive'"],
      [{ paused: 'true' }, "Invalid field 'paused': must be a boolean (true or false)"],
      [{ storage: { provider: 's3' }, storage_provider: 's3' }, 'storage_and_storage_provider_are_exclusive'],
      [{ storage_provider: 's3' }, 'storage_provider_not_configured'],
      [{ storage: { provider: 's3', bucket: 'b' } }, 'Invalid storage configuration: endpoint_required'],
      // The outbound-address policy (lib/src/outbound.ts); the test gateway allows only loopback.
      [{ url: 'http://169.254.169.254/latest/meta-data/' }, "Invalid field 'url': local and link-local addresses are not allowed"],
      [{ url: 'http://[::ffff:a9fe:a9fe]/' }, "Invalid field 'url': local and link-local addresses are not allowed"],
      [{ url: 'https://10.1.2.3/internal.mp4' }, "Invalid field 'url': local and link-local addresses are not allowed"],
      [{ url: 'https://user:pass@media.example/v.mp4' }, "Invalid field 'url': must not contain user credentials"],
      // Postgres stores no NUL in text or jsonb: this was a 500 (found by hostile-input.test.ts).
      [{ url: 'https://media.example/v\u0000.mp4' }, "Invalid field 'url': must not contain control characters"],
      [{ url: 'https://media.example/a\nb' }, "Invalid field 'url': must not contain control characters"],
      [{ webhook_url: 'http://169.254.169.254/latest/meta-data/' }, "Invalid field 'webhook_url': local and link-local addresses are not allowed"],
      [{ webhook_url: 'http://[fe80::1]/hook' }, "Invalid field 'webhook_url': local and link-local addresses are not allowed"],
      [{ webhook_url: 'https://me:secret@hooks.example.com/x' }, "Invalid field 'webhook_url': must not contain user credentials"],
      [{ storage: { provider: 's3', endpoint: 'http://10.0.0.5:9000', bucket: 'b', region: 'us-east-1', access_key: 'a', secret_key: 's' } }, 'Invalid storage configuration: invalid_endpoint'],
    ];
    for (const [body, message] of cases) {
      it(`${JSON.stringify(body).slice(0, 80)} → 400 ${message}`, async () => {
        const jobsBefore = await jobCount();
        const r = await post({ url: SRC, ...body });
        expect(r.status).to.equal(400);
        expect(r.body).to.deep.equal({ error: message });
        expect(await jobCount()).to.equal(jobsBefore);
      });
    }

    const bodyErrors: [string, { raw: string; headers?: Record<string, string> }, number, string][] = [
      ['malformed JSON', { raw: '{"url": ', headers: { 'content-type': 'application/json' } }, 400, 'Invalid JSON body'],
      ['a JSON string at top level', { raw: '"https://x"', headers: { 'content-type': 'application/json' } }, 400, 'Invalid JSON body'],
      ['a JSON array', { raw: '[1]', headers: { 'content-type': 'application/json' } }, 400, 'Request body must be a JSON object'],
      ['an empty body', { raw: '', headers: { 'content-type': 'application/json' } }, 400, "Missing required field 'url'"],
      ['text/plain', { raw: `{"url":"${SRC}"}`, headers: { 'content-type': 'text/plain' } }, 415, 'Content-Type must be application/json'],
      ['form encoding', { raw: `url=${SRC}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 415, 'Content-Type must be application/json'],
      ['no content type', { raw: `{"url":"${SRC}"}` }, 415, 'Content-Type must be application/json'],
      ['an unsupported charset', { raw: `{"url":"${SRC}"}`, headers: { 'content-type': 'application/json; charset=latin-9' } }, 415, 'Unsupported charset; send UTF-8 JSON'],
      ['a body over 1 MiB', { raw: JSON.stringify({ url: SRC, pad: 'x'.repeat(1024 * 1024) }), headers: { 'content-type': 'application/json' } }, 413, 'Request body too large'],
    ];
    for (const [name, opts, status, message] of bodyErrors) {
      it(`${name} → ${status}`, async () => {
        const r = await gw.request('POST', '/jobs', { key: key.key, ...opts });
        expect(r.status).to.equal(status);
        expect(r.body).to.deep.equal({ error: message });
      });
    }
    it('accepts application/json with a charset parameter', async () => {
      const r = await gw.request('POST', '/jobs', { key: key.key, raw: JSON.stringify({ url: SRC }), headers: { 'content-type': 'application/json; charset=utf-8' } });
      expect(r.status).to.equal(201);
    });
  });

  describe('GET /jobs', () => {
    let k: { id: string; key: string };
    const ids: string[] = [];
    before(async () => {
      k = await gw.newKey('lister');
      // 25 jobs, created one after another (newest last).
      for (let i = 0; i < 25; i++) {
        const r = await post({ url: `${SRC}&n=${i}` }, k.key);
        ids.push((r.body as { job_id: string }).job_id);
      }
      // A few reach other states, as the operator would write them.
      await gw.pool.query(
        `UPDATE jobs SET status = 'Completed', step = 'Finished', s3_key = 'videos/' || id || '.mp4', file_size = 1234,
                finished_at = now() WHERE id = ANY($1::uuid[])`,
        [[ids[0], ids[3], ids[7]]],
      );
      await gw.pool.query(`UPDATE jobs SET status = 'Failed', error = 'Connection error', error_type = 'error' WHERE id = $1`, [ids[10]]);
    });
    const list = async (q: string, kk = k.key) => gw.request('GET', `/jobs${q}`, { key: kk });
    type Page = { jobs: Record<string, unknown>[]; total: number; limit: number; offset: number };

    it('lists newest first, 20 by default, with total, limit and offset', async () => {
      const r = await list('');
      expect(r.status).to.equal(200);
      const page = r.body as Page;
      expect(page.total).to.equal(25);
      expect(page.limit).to.equal(20);
      expect(page.offset).to.equal(0);
      expect(page.jobs.map((j) => j.id)).to.deep.equal([...ids].reverse().slice(0, 20));
    });
    it('each job carries exactly the Job table fields', async () => {
      const page = (await list('?limit=100')).body as Page;
      const done = page.jobs.find((j) => j.id === ids[3])!;
      expect(Object.keys(done).sort()).to.deep.equal(['created_at', 'error', 'error_type', 'file_size', 'finished_at', 'id', 's3_key', 'status', 'step', 'url'].sort());
      expect(done).to.include({ status: 'Completed', step: 'Finished', s3_key: `videos/${ids[3]}.mp4`, file_size: 1234, error: null, error_type: null, url: `${SRC}&n=3` });
      expect(done.created_at).to.be.a('number').within(Date.now() - 120_000, Date.now() + 1000);
      expect(done.finished_at).to.be.a('number');
      const pending = page.jobs.find((j) => j.id === ids[1])!;
      expect(pending).to.include({ status: 'Pending', step: 'Queued', s3_key: null, finished_at: null, file_size: null });
    });
    it('pages with limit and offset', async () => {
      const p1 = (await list('?limit=10&offset=0')).body as Page;
      const p2 = (await list('?limit=10&offset=10')).body as Page;
      const p3 = (await list('?limit=10&offset=20')).body as Page;
      expect([...p1.jobs, ...p2.jobs, ...p3.jobs].map((j) => j.id)).to.deep.equal([...ids].reverse());
      expect(p3.jobs).to.have.length(5);
      expect((await list('?offset=1000')).body).to.deep.include({ jobs: [], total: 25, offset: 1000 });
    });
    it('filters by status; total still counts every job of the key', async () => {
      const completed = (await list('?status=completed')).body as Page;
      expect(completed.jobs.map((j) => j.id)).to.deep.equal([ids[7], ids[3], ids[0]]);
      expect(completed.total).to.equal(25);
      const failed = (await list('?status=failed')).body as Page;
      expect(failed.jobs.map((j) => j.id)).to.deep.equal([ids[10]]);
      expect(failed.jobs[0]).to.include({ error: 'Connection error', error_type: 'error' });
      expect(((await list('?status=pending&limit=100')).body as Page).jobs).to.have.length(21);
      expect(((await list('?status=warning')).body as Page).jobs).to.have.length(0);
      expect(((await list('?status=processing')).body as Page).jobs).to.have.length(0);
    });
    it("never shows another key's jobs", async () => {
      const other = await gw.newKey('other');
      expect((await list('', other.key)).body).to.deep.equal({ jobs: [], total: 0, limit: 20, offset: 0 });
    });
    const bad: [string, string][] = [
      ['?limit=0', "Invalid query parameter 'limit': must be an integer from 1 to 100"],
      ['?limit=101', "Invalid query parameter 'limit': must be an integer from 1 to 100"],
      ['?limit=abc', "Invalid query parameter 'limit': must be an integer from 1 to 100"],
      ['?limit=-1', "Invalid query parameter 'limit': must be an integer from 1 to 100"],
      ['?limit=1.5', "Invalid query parameter 'limit': must be an integer from 1 to 100"],
      ['?limit=', "Invalid query parameter 'limit': must be an integer from 1 to 100"],
      ['?limit=1&limit=2', "Invalid query parameter 'limit': must be given once"],
      ['?offset=-3', "Invalid query parameter 'offset': must be an integer from 0 to 9007199254740991"],
      ['?offset=x', "Invalid query parameter 'offset': must be an integer from 0 to 9007199254740991"],
      ['?offset=99999999999999999999', "Invalid query parameter 'offset': must be an integer from 0 to 9007199254740991"],
      ['?status=done', "Invalid query parameter 'status': must be one of 'pending', 'processing', 'completed', 'failed', 'warning'"],
      ['?status=skipped', "Invalid query parameter 'status': must be one of 'pending', 'processing', 'completed', 'failed', 'warning'"],
      ['?status=pending&status=failed', "Invalid query parameter 'status': must be given once"],
    ];
    for (const [q, message] of bad) {
      it(`${q} → 400`, async () => {
        const r = await list(q);
        expect(r.status).to.equal(400);
        expect(r.body).to.deep.equal({ error: message });
      });
    }
    it('limit=100 and the status filter in capitals are accepted', async () => {
      expect((await list('?limit=100')).status).to.equal(200);
      expect((await list('?status=Completed')).status).to.equal(200);
    });
  });

  describe('GET /jobs/{id}', () => {
    it('returns the job with s3_url, actual_quality, file_size and the rest', async () => {
      const id = ((await post({ url: SRC })).body as { job_id: string }).job_id;
      const pending = (await gw.request('GET', `/jobs/${id}`, { key: key.key })).body as Record<string, unknown>;
      expect(pending).to.include({ id, url: SRC, status: 'Pending', step: 'Queued', s3_key: null, s3_url: null, file_size: null, actual_quality: null, finished_at: null });
      expect(pending).not.to.have.property('subtitle_url');
      expect(pending).not.to.have.property('thumbnail_url');

      await gw.pool.query(
        `UPDATE jobs SET status = 'Completed', step = 'Finished', progress = 100, s3_key = 'videos/a.mp4', file_size = 5000000000,
                actual_quality = '1080p', title = 'A title', description = 'D', release_date = '2024-01-02T00:00:00Z',
                subtitle_key = 'videos/a.en.vtt', finished_at = now() WHERE id = $1`,
        [id],
      );
      const r = await gw.request('GET', `/jobs/${id}`, { key: key.key });
      expect(r.status).to.equal(200);
      expect(r.body).to.include({
        id, status: 'Completed', step: 'Finished', s3_key: 'videos/a.mp4', s3_url: 'https://storage.example/videos/a.mp4?signed=1',
        file_size: 5_000_000_000, actual_quality: '1080p', title: 'A title', description: 'D', release_date: '2024-01-02T00:00:00Z',
        subtitle_key: 'videos/a.en.vtt', subtitle_url: 'https://storage.example/videos/a.en.vtt?signed=1', progress: 100,
      });
      expect(r.body).not.to.have.property('thumbnail_url');
      expect((r.body as { finished_at: number }).finished_at).to.be.a('number');
      // Upper-case ids name the same job.
      expect((await gw.request('GET', `/jobs/${id.toUpperCase()}`, { key: key.key })).status).to.equal(200);
    });
    it('s3_url is null when signing fails', async () => {
      const g2 = await startTestGateway({ presign: () => Promise.reject(new Error('signer down')) });
      try {
        const id = ((await g2.request('POST', '/jobs', { body: { url: SRC } })).body as { job_id: string }).job_id;
        await g2.pool.query(`UPDATE jobs SET s3_key = 'videos/x.mp4', thumbnail_key = 'videos/x.jpg' WHERE id = $1`, [id]);
        const r = await g2.request('GET', `/jobs/${id}`);
        expect(r.status).to.equal(200);
        expect(r.body).to.include({ s3_key: 'videos/x.mp4', s3_url: null, thumbnail_key: 'videos/x.jpg', thumbnail_url: null });
      } finally {
        await g2.stop();
      }
    });
    it("another key's job, an unknown id and a malformed id are all 404 Job not found", async () => {
      const id = ((await post({ url: SRC })).body as { job_id: string }).job_id;
      const other = await gw.newKey('snoop');
      for (const [path, k] of [[`/jobs/${id}`, other.key], ['/jobs/0190a0a0-0000-7000-8000-000000000000', key.key], ['/jobs/not-a-uuid', key.key], ["/jobs/1'%20OR%201=1", key.key]] as const) {
        const r = await gw.request('GET', path, { key: k });
        expect(r.status, path).to.equal(404);
        expect(r.body, path).to.deep.equal({ error: 'Job not found' });
      }
      // A path that cannot even be percent-decoded is a malformed request, not an id.
      const r = await gw.request('GET', '/jobs/%E0%A4%A', { key: key.key });
      expect(r.status).to.equal(400);
      expect(r.body).to.deep.equal({ error: 'Bad request' });
    });
  });

  describe('errors', () => {
    it('unknown routes and methods are JSON 404', async () => {
      for (const [m, p] of [['GET', '/nope'], ['DELETE', '/jobs'], ['PUT', '/jobs/x'], ['POST', '/'], ['GET', '/console/nope.js'], ['POST', '/healthz'], ['GET', '/jobs/a/b']]) {
        const r = await gw.request(m!, p!, { key: key.key });
        expect(r.status, `${m} ${p}`).to.equal(404);
        expect(r.body, `${m} ${p}`).to.deep.equal({ error: 'Not found' });
      }
    });
    it('a database failure on GET /jobs is 500 Database query failed, without details', async () => {
      const cache = new ApiKeyCache(async () => ({ id: key.id, name: 'test', organizationId: null, revoked: false, storageLimitBytes: null, maxResolution: null, maxDurationSeconds: null, maxFilesizeBytes: null }));
      const g2 = await startTestGateway({ keyCache: cache });
      await g2.pool.query('DROP TABLE job_counters');
      try {
        const r = await g2.request('GET', '/jobs', { key: 'anything' });
        expect(r.status).to.equal(500);
        expect(r.body).to.deep.equal({ error: 'Database query failed' });
        const r2 = await g2.request('GET', '/readyz', { key: null });
        expect(r2.status).to.equal(200);
        await g2.pool.query('DROP TABLE schema_migrations');
        const r3 = await g2.request('GET', '/readyz', { key: null });
        expect(r3.status).to.equal(503);
        expect(r3.body).to.deep.equal({ error: 'Database unreachable' });
      } finally {
        await g2.stop();
      }
    });
  });

  describe('bad input never gets a 500', () => {
    // A small deterministic fuzz: random JSON values in every field, random
    // query strings and paths.
    let seed = 12345;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const strings = ['', ' ', 'mp4', 'webm', 'h264', 'aac', '192k', '..', '/', '\\', '\u0000', 'a'.repeat(300), '00:01', '1:99', '720', 'best',
      'https://x.example/v', 'javascript:alert(1)', '𝔘𝔫𝔦', '%00', '{}', 'null', '1e309', "'; DROP TABLE jobs; --"];
    const value = (depth = 0): unknown => {
      const r = rand();
      if (r < 0.15) return null;
      if (r < 0.3) return rand() < 0.5;
      if (r < 0.5) return pick([0, -1, 1, 23, 51, 52, 1.5, 1e21, -0, 2 ** 53, Number.MAX_SAFE_INTEGER]);
      if (r < 0.8 || depth > 2) return pick(strings);
      if (r < 0.9) return [value(depth + 1), value(depth + 1)];
      return { provider: value(depth + 1), a: value(depth + 1) };
    };
    const FIELDS = ['url', 'format', 'video_codec', 'audio_codec', 'audio_bitrate', 'video_quality', 'quality_preset', 'max_resolution', 'filename',
      'folder', 'webhook_url', 'audio_only', 'download_subtitles', 'download_thumbnail', 'clip_start', 'clip_end', 'live_recording',
      'live_from_start', 'max_duration', 'wait_for_video', 'enable_progress_webhook', 'storage', 'storage_provider', 'paused', '__proto__', 'constructor'];

    it('300 random POST /jobs bodies get 201 or a 400 naming a field', async () => {
      for (let i = 0; i < 300; i++) {
        const body: Record<string, unknown> = rand() < 0.7 ? { url: SRC } : {};
        for (const f of FIELDS) if (rand() < 0.25) body[f] = value();
        const r = await post(body);
        expect([201, 400], JSON.stringify(body)).to.include(r.status);
        if (r.status === 400) {
          const error = (r.body as { error: string }).error;
          expect(error, JSON.stringify(body)).to.be.a('string');
          expect(error).to.match(/^(Invalid field '\w+': |Missing required field 'url'|storage_|Invalid storage configuration: )/);
        }
      }
    });
    it('random raw bodies, query strings and paths get 4xx JSON, never 5xx', async () => {
      const raws = ['{', '}', '{"url":}', '\u0000', '{"url":"' + SRC + '"}garbage', '[[[[[[[[[[', 'true', '1', '{"a":' + '['.repeat(2000) + ']'.repeat(2000) + '}', '\ud800'];
      for (const raw of raws) {
        const r = await gw.request('POST', '/jobs', { key: key.key, raw, headers: { 'content-type': 'application/json' } });
        expect(r.status, raw.slice(0, 40)).to.be.within(400, 499);
        expect(r.body).to.have.property('error');
      }
      const queries = ['?limit=%', '?limit[]=1', '?status[a]=b', '?offset=1e3', '?limit=%00', '?' + 'a=1&'.repeat(2000), '?status=%F0%9F%98%80', '?limit=100&offset=9007199254740991'];
      for (const q of queries) {
        const r = await gw.request('GET', `/jobs${q}`, { key: key.key });
        expect(r.status, q).to.be.oneOf([200, 400]);
      }
      const paths = ['/jobs/%', '/jobs/%ZZ', '/jobs/..%2f..%2fetc', '/files/', '/files/%', '/%', '/jobs/' + 'a'.repeat(5000)];
      for (const p of paths) {
        const r = await gw.request('GET', p, { key: key.key });
        expect(r.status, p).to.be.within(400, 499);
        expect(r.body, p).to.have.property('error');
      }
    });
  });

  describe('log redaction', () => {
    it('request logs never carry the API key, webhook URLs or download signatures', async () => {
      gw.logs.lines.length = 0;
      const hook = 'https://hooks.example/h?token=LEAK-CANARY-4711';
      await post({ url: SRC, webhook_url: hook });
      await post({ url: SRC, webhook_url: 'not a url LEAK-CANARY-4712' });
      await gw.request('GET', '/jobs?sig=LEAK-CANARY-4713', { key: key.key });
      await gw.request('GET', '/jobs', { key: 'mj_LEAK-CANARY-4714' });
      const text = gw.logs.text();
      expect(gw.logs.lines.length).to.be.at.least(4);
      for (const secret of [key.key, 'LEAK-CANARY', 'hooks.example']) expect(text).not.to.include(secret);
      const entries = gw.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(entries.filter((e) => e.msg === 'request').map((e) => `${e.method} ${e.path} ${e.status}`)).to.include.members([
        'POST /jobs 201', 'POST /jobs 400', 'GET /jobs 200', 'GET /jobs 401',
      ]);
    });
    it("lib's redaction also covers a header or webhook field logged by mistake", () => {
      gw.logs.lines.length = 0;
      gw.logs.logger.info({ req: { headers: { 'x-api-key': key.key } }, webhook_url: 'https://LEAK-CANARY', job: { webhookUrl: 'https://LEAK-CANARY' } }, 'oops');
      expect(gw.logs.text()).not.to.include(key.key).and.not.to.include('LEAK-CANARY');
    });
  });

  describe('the MediaJob as kubectl sees it', () => {
    it('is listed with the jobId label selector', async () => {
      const k = await gw.newKey('selector');
      const id = ((await post({ url: SRC }, k.key)).body as { job_id: string }).job_id;
      await materializeOnCluster();
      const list = (await tc.custom.listNamespacedCustomObject({
        group: 'mediajobs.io', version: 'v1alpha1', namespace: 'default', plural: 'mediajobs', labelSelector: `mediajobs.io/api-key-id=${k.id}`,
      })) as { items: MediaJob[] };
      expect(list.items.map((i) => i.metadata.name)).to.deep.equal([id]);
    });
  });
});
