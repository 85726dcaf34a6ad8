// Errors that say everything, and unknown fields named (issue 38 item 6), on
// the real gateway and Postgres. The contract's body, `{"error": ...}` with
// the spec's extra fields, stays what a client gets by default; a client
// that accepts application/problem+json gets the answer described whole:
// a stable `code` of the documented list, the `param` at fault and, for a
// request body, every problem found. A body field the API does not know is
// accepted, as the contract says, and named in the 201's `warnings`, with
// the field it most likely meant (the CRD's camelCase spellings above all).
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { JOB_REQUEST_FIELDS } from '@mediajobs/lib/job-options';
import { mediaJobSpecSchema } from '@mediajobs/lib/mediajob/types';
import { ApiError, MediaJobsClient } from '../../clients/typescript/src/index.js';
import { ERROR_CODES } from '../src/error-codes.js';
import { inProcessBudget } from '../src/rate-limit.js';
import { startTestGateway, type TestGateway } from './support.js';

const PROBLEM = { accept: 'application/problem+json' };
const ID = '0190a0a0-0000-7000-8000-000000000000';

/** A body with five problems: two fields of their own, then the rules between fields. */
const BAD_JOB = {
  url: 'ftp://example.com/a.mp4',
  video_quality: 99,
  filename: 'a/../b',
  clip_start: '00:10',
  clip_end: '00:05',
  storage: { provider: 's3' },
  storage_provider: 's3',
};

describe('api-gateway: error codes, every problem of a body, unknown fields named', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let key: string;
  const codesSeen = new Set<string>();

  before(async () => {
    gw = await startTestGateway({ rateLimit: inProcessBudget(1000) });
    key = (await gw.newKey()).key;
  });
  after(async () => {
    await gw?.stop();
  });

  /** A request as a problem-details client sends it; the codes it answers are checked against the documented list at the end. */
  async function described(method: string, path: string, opts: { key?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> } = {}) {
    const r = await gw.request(method, path, { key, ...opts, headers: { ...PROBLEM, ...opts.headers } });
    const body = r.body as Record<string, unknown> & { code?: string; errors?: { code: string }[] };
    if (r.status >= 400) {
      expect(r.headers.get('content-type'), `${method} ${path}`).to.match(/^application\/problem\+json/);
      codesSeen.add(body.code!);
      for (const e of body.errors ?? []) codesSeen.add(e.code);
    }
    return { ...r, body };
  }

  describe('the contract\'s body by default', () => {
    it('a body with several problems: exactly {"error"} with the first problem, as JSON; */* and application/json alike', async () => {
      for (const headers of [{} as Record<string, string>, { accept: '*/*' }, { accept: 'application/json' }, { accept: 'application/problem+json;q=0, application/json' }]) {
        const r = await gw.request('POST', '/jobs', { key, body: BAD_JOB, headers });
        expect([r.status, r.body, r.headers.get('content-type')]).to.deep.equal([
          400, { error: "Invalid field 'url': must be an absolute http or https URL" }, 'application/json; charset=utf-8',
        ]);
      }
    });

    it('an unreadable body: exactly the contract\'s {"error"}, nothing added', async () => {
      const r = await gw.request('POST', '/jobs', { key, raw: '{"url":', headers: { 'content-type': 'application/json' } });
      expect([r.status, r.body]).to.deep.equal([400, { error: 'Invalid JSON body' }]);
    });
  });

  describe('problem details (Accept: application/problem+json)', () => {
    it('POST /jobs: every problem of the body in the order of the spec\'s table, the first as error, detail, code and param', async () => {
      const r = await described('POST', '/jobs', { body: BAD_JOB });
      const first = "Invalid field 'url': must be an absolute http or https URL";
      expect(r.status).to.equal(400);
      expect(r.body).to.deep.equal({
        title: 'Bad Request',
        status: 400,
        detail: first,
        error: first,
        code: 'invalid_field',
        param: 'url',
        errors: [
          { code: 'invalid_field', param: 'url', message: first },
          { code: 'invalid_field', param: 'video_quality', message: "Invalid field 'video_quality': must be an integer from 0 to 51" },
          { code: 'invalid_field', param: 'filename', message: "Invalid field 'filename': must not contain '..'" },
          { code: 'invalid_field', param: 'filename', message: "Invalid field 'filename': must not contain a forward slash or a backslash" },
          { code: 'invalid_field', param: 'clip_end', message: "Invalid field 'clip_end': must be greater than clip_start" },
          { code: 'conflicting_fields', param: 'storage_provider', message: 'storage_and_storage_provider_are_exclusive' },
        ],
      });
    });

    it('a missing url comes first, the other problems after it; a rule between fields of which one is bad is not judged', async () => {
      const r = await described('POST', '/jobs', { body: { format: 3, clip_start: 'soon', clip_end: '00:01' } });
      expect([r.body.code, r.body.param, r.body.error]).to.deep.equal(['missing_field', 'url', "Missing required field 'url'"]);
      expect(r.body.errors).to.deep.equal([
        { code: 'missing_field', param: 'url', message: "Missing required field 'url'" },
        { code: 'invalid_field', param: 'format', message: "Invalid field 'format': must be a string" },
        {
          code: 'invalid_field', param: 'clip_start',
          message: "Invalid field 'clip_start': must be a time as 'HH:MM:SS', 'MM:SS' or seconds (e.g. '01:02:03', '02:03' or '123')",
        },
      ]);
    });

    it('POST /jobs/bulk: each URL\'s problem under urls[<index>], a shared option\'s once; the first is the contract\'s answer', async () => {
      const body = { urls: ['https://example.com/a.mp4', 'ftp://example.com/b', 7, 'https://127.0.0.1/c'], video_quality: -1, paused: true };
      const plain = await gw.request('POST', '/jobs/bulk', { key, body });
      expect([plain.status, plain.body]).to.deep.equal([400, { error: 'urls[2]: must be a string' }]);
      const r = await described('POST', '/jobs/bulk', { body });
      expect([r.status, r.body.code, r.body.param]).to.deep.equal([400, 'invalid_field', 'urls[2]']);
      const quality = "Invalid field 'video_quality': must be an integer from 0 to 51";
      expect(r.body.errors).to.deep.equal([
        { code: 'invalid_field', param: 'urls[2]', message: 'urls[2]: must be a string' },
        { code: 'invalid_field', param: 'paused', message: "Invalid field 'paused': not accepted by POST /jobs/bulk (it applies to show batches only)" },
        { code: 'invalid_field', param: 'video_quality', message: quality },
        { code: 'invalid_field', param: 'urls[1]', message: "urls[1]: Invalid field 'url': must be an absolute http or https URL" },
      ]);
    });

    it('a body checked by its published schema (a batch rename) reports every entry at fault', async () => {
      const r = await described('PATCH', `/batch/${ID}/jobs`, { body: { renames: [{ job_id: 1, filename: 'a' }, { job_id: ID, filename: 7 }] } });
      expect([r.status, r.body.code, r.body.param]).to.deep.equal([400, 'invalid_field', 'renames[0].job_id']);
      expect(r.body.errors).to.deep.equal([
        { code: 'invalid_field', param: 'renames[0].job_id', message: "Invalid field 'renames[0].job_id': must be a string" },
        { code: 'invalid_field', param: 'renames[1].filename', message: "Invalid field 'renames[1].filename': must be a string" },
      ]);
    });

    it('answers that are not about a body: a code, and the parameter or header where one is at fault', async () => {
      const cases: [string, string, Parameters<typeof described>[2], number, string, string?][] = [
        ['GET', '/jobs', { key: null }, 401, 'missing_api_key'],
        ['GET', '/jobs', { key: 'mj_unknown' }, 401, 'invalid_api_key'],
        ['GET', `/jobs/${ID}`, {}, 404, 'job_not_found'],
        ['GET', '/jobs/nope/nothing', {}, 404, 'not_found'],
        ['GET', '/jobs?limit=0', {}, 400, 'invalid_query_parameter', 'limit'],
        ['POST', '/jobs', { raw: '{"url":', headers: { 'content-type': 'application/json' } }, 400, 'invalid_json'],
        ['POST', '/jobs', { raw: '[1]', headers: { 'content-type': 'application/json' } }, 400, 'body_not_object'],
        ['POST', '/jobs', { raw: '{}', headers: { 'content-type': 'text/plain' } }, 415, 'unsupported_content_type'],
        ['POST', '/jobs', { body: { url: 'https://example.com/a.mp4' }, headers: { 'idempotency-key': '"a\\' } }, 400, 'invalid_header', 'Idempotency-Key'],
        ['POST', `/jobs/${ID}/cancel`, {}, 404, 'job_not_found'],
        ['GET', `/batch/${ID}`, {}, 404, 'batch_not_found'],
        ['POST', '/is-short', { body: { url: 'https://example.com/watch?v=x' } }, 400, 'unsupported_url'],
      ];
      for (const [method, path, opts, status, code, param] of cases) {
        const r = await described(method, path, opts);
        expect([method, path, r.status, r.body.code, r.body.param], JSON.stringify(r.body)).to.deep.equal([method, path, status, code, param]);
        expect([r.body.status, r.body.detail]).to.deep.equal([status, r.body.error]);
      }
    });

    it('the SDK asks for them: its ApiError has the contract\'s error, the code, the param and every problem', async () => {
      const client = new MediaJobsClient({ baseUrl: gw.url, apiKey: key, retry: { retries: 0 } });
      const err = await client.createJob(BAD_JOB as never).catch((e: unknown) => e);
      expect(err).to.be.instanceOf(ApiError);
      const e = err as ApiError;
      expect([e.status, e.error, e.code, e.param]).to.deep.equal([400, "Invalid field 'url': must be an absolute http or https URL", 'invalid_field', 'url']);
      expect(e.errors.map((p) => p.param)).to.deep.equal(['url', 'video_quality', 'filename', 'filename', 'clip_end', 'storage_provider']);
      const missing = (await client.getJob(ID).catch((x: unknown) => x)) as ApiError;
      expect([missing.status, missing.code, missing.errors]).to.deep.equal([404, 'job_not_found', []]);
      const created = await client.createJob({ url: 'https://example.com/a.mp4', maxResolution: '720' } as never);
      expect(created).to.have.property('warnings').that.deep.equals([{
        code: 'unknown_field', param: 'maxResolution', did_you_mean: 'max_resolution',
        message: "Unknown field 'maxResolution' was ignored; did you mean 'max_resolution'?",
      }]);
    });

    it('an Idempotency-Key replays a refused body in the form each request asks for', async () => {
      const headers = { 'idempotency-key': `"replay-${Date.now()}"` };
      const first = await described('POST', '/jobs', { body: BAD_JOB, headers });
      const plain = await gw.request('POST', '/jobs', { key, body: BAD_JOB, headers });
      expect([plain.status, plain.body, plain.headers.get('idempotent-replayed')]).to.deep.equal([400, { error: first.body.error }, 'true']);
      const again = await described('POST', '/jobs', { body: BAD_JOB, headers });
      expect([again.body, again.headers.get('idempotent-replayed')]).to.deep.equal([first.body, 'true']);
    });

    it('the over-limit 429 is rate_limit_exceeded, its RateLimit r=0', async () => {
      const tight = await startTestGateway({ rateLimit: inProcessBudget(2) });
      try {
        const { key: k } = await tight.newKey();
        const answers = await Promise.all([1, 2, 3].map(() => tight.request('GET', '/jobs', { key: k, headers: PROBLEM })));
        const refused = answers.find((a) => a.status === 429)!;
        expect([(refused.body as { code: string }).code, refused.headers.get('ratelimit'), refused.headers.get('retry-after')])
          .to.deep.equal(['rate_limit_exceeded', '"default";r=0;t=1', '1']);
        codesSeen.add('rate_limit_exceeded');
      } finally {
        await tight.stop();
      }
    });

    it('every code answered above is in the documented list, and docs/errors.md lists exactly that list', () => {
      for (const code of codesSeen) expect(ERROR_CODES, code).to.have.property(code);
      const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
      const documented = [...doc.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
      expect(documented).to.have.members(Object.keys(ERROR_CODES));
    });
  });

  describe('unknown fields: accepted, and named in the 201\'s warnings', () => {
    /** The MediaJob spec's camelCase spelling of each POST /jobs field that has one (the CRD's), e.g. maxResolution → max_resolution. */
    const crdSpellings = Object.keys(mediaJobSpecSchema.shape)
      .map((camel) => [camel, camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] as const)
      .filter(([camel, snake]) => camel !== snake && JOB_REQUEST_FIELDS.includes(snake));

    it('each of the CRD\'s camelCase spellings is ignored (the job keeps its default) and named with the field it means', async () => {
      expect(crdSpellings.map(([c]) => c)).to.include.members(['maxResolution', 'videoCodec', 'audioOnly', 'clipStart', 'webhookUrl']);
      const body = { url: 'https://example.com/a.mp4', ...Object.fromEntries(crdSpellings.map(([camel]) => [camel, true])) };
      const r = await gw.request('POST', '/jobs', { key, body });
      expect(r.status).to.equal(201);
      const answer = r.body as { job_id: string; warnings: unknown[] };
      expect(answer.warnings).to.deep.equal(crdSpellings.map(([camel, snake]) => ({
        code: 'unknown_field', param: camel, message: `Unknown field '${camel}' was ignored; did you mean '${snake}'?`, did_you_mean: snake,
      })));
      const job = await gw.request('GET', `/jobs/${answer.job_id}`, { key });
      expect(job.status).to.equal(200);
      const { rows } = await gw.pool.query<{ options: { maxResolution: string } }>('SELECT options FROM jobs WHERE id = $1', [answer.job_id]);
      expect(rows[0]!.options.maxResolution).to.equal('best');
    });

    it('near misses by a small edit distance; a name near nothing is named without a guess; a body of known fields has no warnings', async () => {
      const r = await gw.request('POST', '/jobs', {
        key, body: { url: 'https://example.com/a.mp4', max_resolutoin: '720', fromat: 'mp3', 'Audio-Only': true, colour: 'red' },
      });
      expect(r.status).to.equal(201);
      expect((r.body as { warnings: { param: string; did_you_mean?: string }[] }).warnings.map((w) => [w.param, w.did_you_mean]))
        .to.deep.equal([['max_resolutoin', 'max_resolution'], ['fromat', 'format'], ['Audio-Only', 'audio_only'], ['colour', undefined]]);
      const clean = await gw.request('POST', '/jobs', { key, body: { url: 'https://example.com/a.mp4', max_resolution: '720' } });
      expect(Object.keys(clean.body as object)).to.deep.equal(['job_id']);
    });

    it('POST /jobs/bulk names them too; a keyed retry replays the warnings with the job ids', async () => {
      const headers = { 'idempotency-key': `"bulk-${Date.now()}"` };
      const body = { urls: ['https://example.com/a.mp4', 'https://example.com/b.mp4'], maxResolution: '720' };
      const r = await gw.request('POST', '/jobs/bulk', { key, body, headers });
      expect(r.status).to.equal(201);
      const answer = r.body as { job_ids: string[]; count: number; warnings: { param: string; did_you_mean: string }[] };
      expect([answer.count, answer.warnings.map((w) => [w.param, w.did_you_mean])]).to.deep.equal([2, [['maxResolution', 'max_resolution']]]);
      const replay = await gw.request('POST', '/jobs/bulk', { key, body, headers });
      expect([replay.status, replay.body, replay.headers.get('idempotent-replayed')]).to.deep.equal([201, answer, 'true']);
    });

    it('a body of thousands of unknown keys gets at most 20 warnings, long names cut at 100 characters', async () => {
      const body: Record<string, unknown> = { url: 'https://example.com/a.mp4', [`x${'y'.repeat(5000)}`]: 1 };
      for (let i = 0; i < 5000; i++) body[`k${i}`] = i;
      const r = await gw.request('POST', '/jobs', { key, body });
      expect(r.status).to.equal(201);
      const warnings = (r.body as { warnings: { param: string }[] }).warnings;
      expect(warnings).to.have.length(20);
      expect(warnings[0]!.param).to.equal(`x${'y'.repeat(99)}…`);
    });
  });
});
