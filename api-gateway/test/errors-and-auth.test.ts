// The gateway's one error path and its one authentication wiring, as a
// client sees them: every route the app has needs a key (401 with the spec's
// messages) unless its URL is the credential; a malformed JSON body is a 400
// on every JSON endpoint; an unexpected failure is a 500 whose answer names
// nothing of it, while the log says what happened.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { UPLOAD_GRANT_PATH } from '@mediajobs/lib/storage/upload-grants';
import express, { type Express } from 'express';
import { ApiKeyCache } from '../src/auth.js';
import { HttpError, errorResponder, failsWith, notFound } from '../src/http-errors.js';
import { acceptJson, bodyObject } from '../src/json-body.js';
import { appRoutes, captureLogger, startTestGateway, type TestGateway } from './support.js';

type Json = Record<string, unknown>;

/** Routes whose URL is the credential (a signature), and the probes: no API key. */
const PUBLIC = new Set(['GET /healthz', 'GET /readyz', 'GET /openapi.json', 'GET /docs', 'GET /', 'GET /files/*key', 'GET /drive-files/*path', `POST ${UPLOAD_GRANT_PATH}/:op`]);

/** The spec's missing-key message: its own wording on POST /is-short. */
const missingMessage = (path: string) => (path === '/is-short' ? 'Missing API key' : 'Missing x-api-key header');

/** A concrete path for a route pattern. */
const concrete = (path: string) => path.replace(/:\w+/g, '0190a0a0-0000-7000-8000-000000000000').replace(/\*\w+/g, 'x');

describe('api-gateway: one error path, one authentication', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let dir: string;
  let routes: [string, string][];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mj-errors-'));
    // Every optional router on, so the route table is complete.
    gw = await startTestGateway({
      files: { dir, secret: 'test-file-url-secret-0123456789' },
      storage: { driveDownloadSecret: 'test-file-url-secret-0123456789' },
      // Its token is the credential (ADR 0012); a broker that answers nothing is enough to mount the route.
      uploadGrants: { handle: () => Promise.resolve(undefined) },
    });
    routes = appRoutes(gw.server.listeners('request')[0] as Express);
  });

  after(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('authentication', () => {
    it("the route table is the API's (the walk found every router)", () => {
      const names = routes.map(([m, p]) => `${m} ${p}`);
      expect(names).to.include.members([
        'POST /jobs', 'GET /jobs', 'GET /jobs/:id', 'POST /jobs/bulk', 'POST /metadata', 'POST /is-short',
        'GET /batch/:id', 'PATCH /batch/:id/jobs', 'POST /batch/:id/start', 'POST /batch/:id/cancel',
        'POST /jobs/:id/cancel', 'GET /jobs/:id/webhooks', 'POST /jobs/:id/webhooks/:eventId/redeliver',
        'POST /user/webhook-secret', 'GET /user/webhook-secret', 'POST /user/chat', 'GET /user/chat', 'DELETE /user/chat',
        'POST /user/s3', 'GET /user/drive', 'DELETE /user/oss', 'POST /user/bucket', 'DELETE /user/bucket', 'GET /usage',
        ...PUBLIC,
      ]);
    });

    it('every route but the signed downloads and probes: 401 without a key and with an invalid one, with the spec\'s messages', async () => {
      const refused: string[] = [];
      for (const [method, path] of routes) {
        if (PUBLIC.has(`${method} ${path}`)) continue;
        const url = concrete(path);
        const body = method === 'POST' ? { body: { url: 'https://example.com/v' } } : {};
        for (const [key, error] of [[null, missingMessage(path)], ['', missingMessage(path)], ['mj_not-a-real-key', 'Invalid API Key']] as const) {
          const r = await gw.request(method, url, { key, ...body });
          expect([r.status, r.body], `${method} ${url} with key ${JSON.stringify(key)}`).to.deep.equal([401, { error }]);
        }
        refused.push(`${method} ${path}`);
      }
      // 4 jobs routes (bulk included) and 3 of job control (cancel, the delivery log, redelivery), 4 batch routes,
      // 3 per provider and 2 for /user/bucket, 2 for /user/webhook-secret, 3 for /user/chat, /metadata and /is-short, /usage.
      expect(refused).to.have.length(4 + 3 + 4 + 5 * 3 + 2 + 2 + 3 + 2 + 1);
    });

    it('the signed downloads and probes answer without a key', async () => {
      expect((await gw.request('GET', '/healthz', { key: null })).status).to.equal(200);
      expect((await gw.request('GET', '/readyz', { key: null })).status).to.equal(200);
      expect((await gw.request('GET', '/files/videos/a.mp4', { key: null })).body).to.deep.equal({ error: 'Missing download URL signature' });
      expect((await gw.request('GET', '/drive-files/x/y', { key: null })).body).to.deep.equal({ error: 'Invalid download URL signature' });
    });

    it('under an authenticated path, an unknown route needs a key too (401 without, 404 with)', async () => {
      for (const [method, path] of [['PUT', '/user/s3'], ['GET', '/user/nope'], ['GET', '/jobs/a/b'], ['GET', '/metadata']]) {
        expect((await gw.request(method!, path!, { key: null })).status, `${method} ${path}`).to.equal(401);
        const r = await gw.request(method!, path!);
        expect([r.status, r.body], `${method} ${path}`).to.deep.equal([404, { error: 'Not found' }]);
      }
    });
  });

  describe('request bodies', () => {
    it('a malformed JSON body: 400 Invalid JSON body on every JSON endpoint, after authentication', async () => {
      const posts = routes.filter(([m, p]) => m === 'POST' && !PUBLIC.has(`${m} ${p}`)).map(([, p]) => p);
      expect(posts).to.include.members(['/jobs', '/user/s3', '/user/bucket', '/metadata', '/is-short']);
      for (const path of posts) {
        const r = await gw.request('POST', path, { raw: '{"url": "https://example.com/v",', headers: { 'content-type': 'application/json' } });
        expect([r.status, r.body], path).to.deep.equal([400, { error: 'Invalid JSON body' }]);
      }
    });

    it('half a surrogate pair escaped in a string or a key (no text column stores it): 400 Invalid JSON body, never a 500', async () => {
      const lone = String.raw`\ud800`;
      for (const raw of [
        `{"url":"http://127.0.0.1:1/v.mp4","filename":"${lone}","folder":"a/b"}`,
        `{"url":"http://127.0.0.1:1/v.mp4","options":{"${lone}x":1}}`,
        `{"url":"http://127.0.0.1:1/v.mp4","folder":["a",["${lone}"]]}`,
      ]) {
        const r = await gw.request('POST', '/jobs', { raw, headers: { 'content-type': 'application/json' } });
        expect([r.status, r.body], raw).to.deep.equal([400, { error: 'Invalid JSON body' }]);
      }
      // A pair escaped as two halves is one code point, and fine.
      const pair = await gw.request('POST', '/jobs', { raw: String.raw`{"url":"http://127.0.0.1:1/v.mp4","filename":"clip \ud83c\udfac"}`, headers: { 'content-type': 'application/json' } });
      expect(pair.status).to.equal(201);
    });
  });

  describe('an unexpected failure', () => {
    it('in a handler: 500 Internal server error, nothing of the failure in the answer, its fields in the log', async () => {
      // A key of an organization, looked up without Postgres; the handler's own query then fails.
      const org = '0190a0a0-0000-7000-8000-0000000000aa';
      const keyCache = new ApiKeyCache(async () => ({
        id: '0190a0a0-0000-7000-8000-0000000000bb', name: 'org key', organizationId: org, revoked: false,
        storageLimitBytes: null, maxResolution: null, maxDurationSeconds: null, maxFilesizeBytes: null,
      }));
      const g2 = await startTestGateway({ keyCache });
      try {
        await g2.pool.query('DROP TABLE api_keys CASCADE');
        const r = await g2.request('GET', '/user/s3?owner=organization', { key: 'anything' });
        expect([r.status, r.body]).to.deep.equal([500, { error: 'Internal server error' }]);
        expect(r.text).not.to.include('api_keys').and.not.to.include('relation');
        const failed = g2.logs.lines.map((l) => JSON.parse(l) as Json).find((l) => l.msg === 'request failed');
        expect(failed).to.deep.include({ method: 'GET', path: '/user/s3', status: 500 });
        // pg's error: undefined_table, and its message for operators.
        expect(failed!.err).to.include({ code: '42P01' });
        expect((failed!.err as Json).message).to.include('api_keys');
      } finally {
        await g2.stop();
      }
    });
  });
});

describe('api-gateway: the error middleware', () => {
  let server: Server;
  let url: string;
  const logs = captureLogger();

  before(async () => {
    const app = express();
    app.get('/sync', () => {
      throw new Error('LEAK-CANARY sync detail');
    });
    app.get('/async', async () => {
      await Promise.resolve();
      throw new Error('LEAK-CANARY async detail');
    });
    app.get('/worded', failsWith('Database query failed'), async () => {
      throw new Error('LEAK-CANARY syntax error at or near "SELEC"');
    });
    app.get('/unreachable', failsWith('Database query failed'), async () => {
      throw Object.assign(new Error('LEAK-CANARY connection refused'), { code: 'ECONNREFUSED' });
    });
    app.get('/unreachable-mid-query', async () => {
      throw new Error('Connection terminated unexpectedly');
    });
    app.get('/decided', () => {
      throw new HttpError(403, 'Storage quota exceeded', { limit_gb: '1024', used_gb: '1024.5' });
    });
    app.get('/decided-with-cause', () => {
      throw new HttpError(503, 'S3 storage configuration is temporarily unavailable', {}, { cause: new Error('LEAK-CANARY vault down') });
    });
    app.get('/param/:id', (req, res) => {
      res.json({ id: req.params.id });
    });
    app.post('/body', ...acceptJson(64), (req, res) => {
      res.json(bodyObject(req));
    });
    app.use(notFound);
    app.use(errorResponder(logs.logger));
    server = createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const call = async (method: string, path: string, init: RequestInit = {}) => {
    const r = await fetch(`${url}${path}`, { method, ...init });
    const text = await r.text();
    return { status: r.status, text, body: JSON.parse(text) as unknown, retryAfter: r.headers.get('retry-after') };
  };
  const json = (raw: string, type = 'application/json') => ({ body: raw, headers: { 'content-type': type } });

  const cases: [string, string, RequestInit, number, Json][] = [
    ['a thrown error', '/sync', {}, 500, { error: 'Internal server error' }],
    ['a rejected async handler', '/async', {}, 500, { error: 'Internal server error' }],
    ["the route's own words for a failure (failsWith)", '/worded', {}, 500, { error: 'Database query failed' }],
    ['a dependency refusing connections, in the route\'s words (retry: 503)', '/unreachable', {}, 503, { error: 'Database query failed' }],
    ['a connection lost mid-query (retry: 503)', '/unreachable-mid-query', {}, 503, { error: 'Service temporarily unavailable, please retry' }],
    ['an HttpError with the spec\'s extra fields', '/decided', {}, 403, { error: 'Storage quota exceeded', limit_gb: '1024', used_gb: '1024.5' }],
    ['an HttpError with a cause', '/decided-with-cause', {}, 503, { error: 'S3 storage configuration is temporarily unavailable' }],
    ['malformed JSON', '/body', { method: 'POST', ...json('{"a":') }, 400, { error: 'Invalid JSON body' }],
    ['a body that is not an object', '/body', { method: 'POST', ...json('[1]') }, 400, { error: 'Request body must be a JSON object' }],
    ['a body over the limit', '/body', { method: 'POST', ...json(JSON.stringify({ a: 'x'.repeat(100) })) }, 413, { error: 'Request body too large' }],
    ['a body that is not JSON', '/body', { method: 'POST', ...json('a=1', 'application/x-www-form-urlencoded') }, 415, { error: 'Content-Type must be application/json' }],
    ['an unknown path', '/nope', {}, 404, { error: 'Not found' }],
    ['an undecodable path parameter', '/param/%E0%A4%A', {}, 400, { error: 'Bad request' }],
  ];
  for (const [what, path, init, status, body] of cases) {
    it(`${what}: ${status} ${JSON.stringify(body)}`, async () => {
      const r = await call(String(init.method ?? 'GET'), path, init);
      expect([r.status, r.body]).to.deep.equal([status, body]);
      expect(r.retryAfter, 'Retry-After on the 503 of an unreachable dependency only').to.equal(path.startsWith('/unreachable') ? '2' : null);
      expect(r.text).not.to.include('LEAK-CANARY');
    });
  }

  it('logs each unexpected failure and each cause once, with errFields, and nothing for decided answers', () => {
    const failed = logs.lines.map((l) => JSON.parse(l) as Json).filter((l) => l.msg === 'request failed');
    expect(failed.map((l) => [l.path, l.status, (l.err as Json).message])).to.deep.equal([
      ['/sync', 500, 'LEAK-CANARY sync detail'],
      ['/async', 500, 'LEAK-CANARY async detail'],
      ['/worded', 500, 'LEAK-CANARY syntax error at or near "SELEC"'],
      ['/unreachable', 503, 'LEAK-CANARY connection refused'],
      ['/unreachable-mid-query', 503, 'Connection terminated unexpectedly'],
      ['/decided-with-cause', 503, 'LEAK-CANARY vault down'],
    ]);
    expect(failed[3]!.err).to.include({ name: 'Error', code: 'ECONNREFUSED' });
  });
});
