// The OpenAPI document (src/openapi/, issue 17 item 3), held to the code so
// it cannot drift or lie: Redocly's recommended rules pass; its paths and
// methods equal the app's routes, both ways; real answers of the real
// gateway on real Postgres validate against the document's own response
// schemas (ajv, JSON Schema 2020-12), and every error answered carries a
// message the document lists for that status; /openapi.json and /docs are
// served without a key, the page's assets from this origin only.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { Express } from 'express';
import { syncStatus } from '@mediajobs/lib/db/jobs';
import { createLogger } from '@mediajobs/lib/logger';
import { MediaInfoExtractor } from '@mediajobs/lib/media-info/index';
import { SecretBox } from '@mediajobs/lib/secret-box';
import pg from 'pg';
import { INFO_SHORT } from '../../lib/test/media-info-fixtures.js';
import { createApp } from '../src/app.js';
import { GatewayMetrics } from '../src/metrics.js';
import { newRegistry } from '@mediajobs/lib/metrics';
import { UNDOCUMENTED_ROUTES, openApiDocument } from '../src/openapi/document.js';
import { appRoutes, startTestGateway, type TestGateway } from './support.js';

type Json = Record<string, unknown>;
const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

/** Express path syntax to OpenAPI's: `:id` and the wildcard `*key` become `{id}`, `{key}`. */
const openApiPath = (path: string) => path.replace(/[:*](\w+)/g, '{$1}');

/** The app's routes as `METHOD /openapi/{path}`. */
function routesOf(app: Express): string[] {
  const out = appRoutes(app).filter(([m]) => METHODS.includes(m.toLowerCase())).map(([m, p]) => `${m} ${openApiPath(p)}`);
  return [...new Set(out)].sort();
}

function documentedRoutes(doc: Json): string[] {
  const out: string[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
    for (const m of Object.keys(item)) if (METHODS.includes(m)) out.push(`${m.toUpperCase()} ${path}`);
  }
  return out.sort();
}

/** JSON pointer escaping of one token. */
const esc = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

describe('api-gateway: the OpenAPI document', function () {
  this.timeout(60_000);
  const doc = openApiDocument();

  it('passes `redocly lint` (recommended rules, redocly.yaml) with no error and no warning', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'openapi-'));
    try {
      const file = join(dir, 'openapi.json');
      await writeFile(file, JSON.stringify(doc));
      const r = await run('npx', ['redocly', 'lint', file, '--config', join(ROOT, 'redocly.yaml'), '--format=json'], { cwd: ROOT, maxBuffer: 32 << 20 })
        .catch((err: { stdout?: string; stderr?: string }) => err);
      const report = JSON.parse(r.stdout ?? '{}') as { totals?: { errors: number; warnings: number }; problems?: { ruleId: string; message: string }[] };
      expect(report.problems?.map((p) => `${p.ruleId}: ${p.message}`) ?? [r.stderr]).to.deep.equal([]);
      expect(report.totals).to.deep.include({ errors: 0, warnings: 0 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('is OpenAPI 3.1 with the x-api-key scheme, the webhooks and every documented route\'s path parameters', () => {
    expect(doc.openapi).to.equal('3.1.0');
    const components = doc.components as Json;
    expect(components.securitySchemes).to.deep.equal({
      apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'The API key; server-side use only.' },
    });
    expect(Object.keys(doc.webhooks as Json)).to.have.members([
      'job_processing', 'job_completed', 'job_failed', 'job_warning', 'job_skipped', 'job_cancelled', 'progress', 'batch_completed',
    ]);
  });

  it("lists exactly the app's routes: none missing, none that does not exist", () => {
    // Every optional part mounted, so every route is there; nothing here is contacted.
    const app = createApp({
      pool: new pg.Pool({ max: 1 }),
      logger: createLogger('test', 'silent'),
      secretBox: new SecretBox(SecretBox.generateSpec('test')),
      namespace: 'default',
      presign: async (key) => key,
      files: { dir: tmpdir(), secret: 'x' },
      uploadGrants: { handle: async () => undefined },
      storage: { driveDownloadSecret: 'x' },
      metrics: new GatewayMetrics(newRegistry()),
    });
    const undocumented = UNDOCUMENTED_ROUTES.map((r) => `${r.method.toUpperCase()} ${r.path}`);
    const routes = routesOf(app);
    expect(routes).to.include.members(undocumented);
    expect(documentedRoutes(doc)).to.deep.equal(routes.filter((r) => !undocumented.includes(r)));
  });
});

describe('api-gateway: real answers against the OpenAPI document', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let dir: string;
  const doc = openApiDocument();
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema({ ...doc, $id: 'https://mediajobs.invalid/openapi.json' });
  const checked = new Set<string>();

  /** The response the document gives this status, or undefined. */
  function documented(method: string, path: string, status: number): Json | undefined {
    const op = (doc.paths as Record<string, Record<string, Json>>)[path]?.[method.toLowerCase()];
    expect(op, `${method} ${path} is documented`).to.not.equal(undefined);
    return (op!.responses as Record<string, Json>)[String(status)];
  }

  /**
   * An answer the document must describe: its status is listed, its body
   * valid against the listed schema, and an error's message one of the
   * listed ones (`<...>` in a listed message stands for any text).
   */
  async function check(method: string, path: string, actualPath: string, opts: Parameters<TestGateway['request']>[2] = {}) {
    const r = await gw.request(method, actualPath, opts);
    const response = documented(method, path, r.status);
    expect(response, `${method} ${path} documents status ${r.status} (${r.text})`).to.not.equal(undefined);
    const pointer = `#/paths/${esc(path)}/${method.toLowerCase()}/responses/${r.status}/content/application~1json/schema`;
    const validate = ajv.compile({ $ref: `https://mediajobs.invalid/openapi.json${pointer}` });
    expect(validate(r.body), `${method} ${path} ${r.status}: ${ajv.errorsText(validate.errors)}\n${r.text}`).to.equal(true);
    if (r.status >= 400) {
      const examples = Object.values(((response!.content as Json)['application/json'] as Json).examples as Record<string, { value: { error: string } }>);
      const listed = examples.map((e) => e.value.error);
      const message = (r.body as { error: string }).error;
      const matches = listed.some((m) => new RegExp(`^${m.split(/<[^>]*>/).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.+')}$`).test(message));
      expect(matches, `${method} ${path} ${r.status}: '${message}' is not among ${JSON.stringify(listed)}`).to.equal(true);
    }
    checked.add(`${method} ${path} ${r.status}`);
    return r;
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'openapi-info-'));
    const script = join(dir, 'info.mjs');
    await writeFile(script, `process.stdout.write(${JSON.stringify(JSON.stringify(INFO_SHORT))});\n`);
    gw = await startTestGateway({ mediaInfo: new MediaInfoExtractor({ command: [process.execPath, script] }) });
  });
  after(async () => {
    await gw?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('jobs: create, list, read, cancel, bulk, and their refusals', async () => {
    const created = await check('POST', '/jobs', '/jobs', { body: { url: 'https://media.example/watch?v=openapi-1', webhook_url: 'https://hooks.example/x' } });
    expect(created.status).to.equal(201);
    const id = (created.body as { job_id: string }).job_id;
    await check('POST', '/jobs', '/jobs', { body: { url: 'ftp://nope' } });
    await check('POST', '/jobs', '/jobs', { body: { video_quality: 3 } });
    await check('POST', '/jobs', '/jobs', { raw: '{', headers: { 'content-type': 'application/json' } });
    await check('POST', '/jobs', '/jobs', { raw: 'url=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    await check('POST', '/jobs', '/jobs', { key: null, body: { url: 'https://media.example/a' } });
    await check('POST', '/jobs', '/jobs', { key: 'not-a-key', body: { url: 'https://media.example/a' } });

    await check('GET', '/jobs', '/jobs');
    await check('GET', '/jobs', '/jobs?limit=500');
    await check('GET', '/jobs/{id}', `/jobs/${id}`);
    await check('GET', '/jobs/{id}', '/jobs/not-a-job');
    await syncStatus(gw.pool, id, {
      status: 'Completed', step: 'Finished', progress: 100,
      result: { storageKey: 'videos/a.mp4', fileSize: 10, uploadedBytes: 10, subtitleKey: 'videos/a.en.vtt' },
    }, () => []);
    const done = await check('GET', '/jobs/{id}', `/jobs/${id}`);
    expect(done.body).to.deep.include({ status: 'Completed', subtitle_key: 'videos/a.en.vtt' });
    await check('POST', '/jobs/{id}/cancel', `/jobs/${id}/cancel`);

    const other = (await gw.request('POST', '/jobs', { body: { url: 'https://media.example/watch?v=openapi-2' } })).body as { job_id: string };
    expect((await check('POST', '/jobs/{id}/cancel', `/jobs/${other.job_id}/cancel`)).status).to.equal(200);

    expect((await check('POST', '/jobs/bulk', '/jobs/bulk', { body: { urls: ['https://media.example/b1', 'https://media.example/b2'], format: 'mp3' } })).status).to.equal(201);
    await check('POST', '/jobs/bulk', '/jobs/bulk', { body: { urls: [] } });
    await check('POST', '/jobs/bulk', '/jobs/bulk', { body: { urls: ['https://media.example/b'], url: 'https://media.example/c' } });
  });

  it('query parameters: what each documented one refuses is a documented 400 naming it, what it allows is accepted', async () => {
    const paths = doc.paths as Record<string, Record<string, { parameters?: { name: string; in: string; schema: Json; $ref?: string }[]; security?: unknown[] }>>;
    let tried = 0;
    for (const [path, ops] of Object.entries(paths)) {
      const get = ops.get;
      if (!get || get.security || path.includes('{')) continue; // the signed download URLs answer 403, not 400
      for (const p of (get.parameters ?? []).filter((x) => x.in === 'query')) {
        const { type, minimum, maximum, enum: values } = p.schema as { type: string; minimum?: number; maximum?: number; enum?: string[] };
        const bad = values ? ['no-such-value'] : type === 'integer' ? [String((minimum ?? 0) - 1), 'x', ...(maximum === undefined ? [] : [String(maximum + 1)])] : [];
        const good = values ? [values[0]!, values[0]!.toUpperCase()] : type === 'integer' ? [String(minimum ?? 0)] : [];
        for (const v of [...bad, `${good[0]}&${p.name}=${good[0]}`]) {
          const r = await check('GET', path, `${path}?${p.name}=${v}`);
          expect(r.status, `${path}?${p.name}=${v}`).to.equal(400);
          expect((r.body as { error: string }).error).to.match(new RegExp(`^Invalid query parameter '${p.name}': `));
          tried++;
        }
        for (const v of good) expect((await check('GET', path, `${path}?${p.name}=${v}`)).status, `${path}?${p.name}=${v}`).to.be.below(400);
      }
    }
    expect(tried).to.be.at.least(9);
  });

  it('webhooks: the signing secret and a job\'s delivery log', async () => {
    const key = (await gw.newKey('hooks')).key;
    await check('GET', '/user/webhook-secret', '/user/webhook-secret', { key });
    expect((await check('POST', '/user/webhook-secret', '/user/webhook-secret', { key })).status).to.equal(201);
    expect((await check('POST', '/user/webhook-secret', '/user/webhook-secret', { key })).status).to.equal(200);
    await check('GET', '/user/webhook-secret', '/user/webhook-secret', { key });
    const id = ((await gw.request('POST', '/jobs', { key, body: { url: 'https://media.example/h', webhook_url: 'https://hooks.example/h' } })).body as { job_id: string }).job_id;
    await gw.request('POST', `/jobs/${id}/cancel`, { key });
    const log = await check('GET', '/jobs/{id}/webhooks', `/jobs/${id}/webhooks`, { key });
    const events = (log.body as { events: { event_id: string }[] }).events;
    expect(events).to.have.length.greaterThan(0);
    await check('POST', '/jobs/{id}/webhooks/{eventId}/redeliver', `/jobs/${id}/webhooks/${events[0]!.event_id}/redeliver`, { key });
    await check('POST', '/jobs/{id}/webhooks/{eventId}/redeliver', `/jobs/${id}/webhooks/00000000-0000-7000-8000-000000000000/redeliver`, { key });
  });

  it('batches, usage, chat and storage settings', async () => {
    const none = '00000000-0000-7000-8000-000000000000';
    await check('GET', '/batch/{id}', `/batch/${none}`);
    await check('PATCH', '/batch/{id}/jobs', `/batch/${none}/jobs`, { body: { renames: [] } });
    await check('POST', '/batch/{id}/start', `/batch/${none}/start`);
    await check('POST', '/batch/{id}/cancel', `/batch/${none}/cancel`);
    await check('GET', '/usage', '/usage');

    await check('GET', '/user/chat', '/user/chat');
    await check('POST', '/user/chat', '/user/chat', { body: { webhook_url: 'https://nope.example/x' } });
    await check('DELETE', '/user/chat', '/user/chat');
    for (const p of ['s3', 'blob', 'gcs', 'oss', 'drive']) {
      await check('GET', `/user/${p}`, `/user/${p}`);
      await check('POST', `/user/${p}`, `/user/${p}`, { body: {} });
      await check('DELETE', `/user/${p}`, `/user/${p}`);
    }
    await check('GET', '/user/s3', '/user/s3?owner=everyone');
    await check('POST', '/user/bucket', '/user/bucket', { body: { bucket: 'b' } });
    await check('DELETE', '/user/bucket', '/user/bucket');
  });

  it('media info: metadata and is-short', async () => {
    expect((await check('POST', '/metadata', '/metadata', { body: { url: 'https://www.youtube.com/watch?v=BGQWPY4IigY' } })).status).to.equal(200);
    await check('POST', '/metadata', '/metadata', { body: {} });
    expect((await check('POST', '/is-short', '/is-short', { body: { url: 'https://youtu.be/BGQWPY4IigY' } })).status).to.equal(200);
    await check('POST', '/is-short', '/is-short', { body: { url: 'https://media.example/video' } });
    await check('POST', '/is-short', '/is-short', { key: null, body: { url: 'https://youtu.be/BGQWPY4IigY' } });
  });

  it('service: health, readiness, and this description and its page, without a key', async () => {
    await check('GET', '/healthz', '/healthz', { key: null });
    await check('GET', '/readyz', '/readyz', { key: null });
    const spec = await gw.request('GET', '/openapi.json', { key: null });
    expect(spec.status).to.equal(200);
    expect(spec.headers.get('content-type')).to.match(/^application\/json/);
    expect(spec.body).to.deep.equal(JSON.parse(JSON.stringify(doc)));

    const page = await gw.request('GET', '/docs', { key: null });
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-type')).to.match(/^text\/html/);
    const refs = [...page.text.matchAll(/(?:src|href)="([^"]*)"/g)].map((m) => m[1]!);
    expect(refs).to.have.length.greaterThan(1);
    const loaded: string[] = [];
    for (const ref of refs) {
      expect(ref, 'no external asset').to.not.match(/^(https?:)?\/\//);
      const asset = await fetch(new URL(ref, `${gw.url}/docs`));
      expect(asset.status, ref).to.equal(200);
      loaded.push(await asset.text());
    }
    // The initializer is a file of its own (no inline script), and it loads this document.
    expect(loaded.join('\n')).to.include("url: '/openapi.json'");
    // The package's own index page (an example API) is not served; an unknown asset is the usual 404.
    expect((await gw.request('GET', '/docs/assets/', { key: null })).status).to.equal(404);
    expect((await gw.request('GET', '/docs/assets/index.html', { key: null })).status).to.equal(404);
    expect((await gw.request('GET', '/docs/assets/nope.js', { key: null })).body).to.deep.equal({ error: 'Not found' });
    // The key prefixes are as before: /docs is open, /jobs is not.
    expect((await gw.request('GET', '/jobs', { key: null })).status).to.equal(401);
  });

  it('every documented success status of the main endpoints was seen above', () => {
    for (const seen of ['POST /jobs 201', 'GET /jobs 200', 'GET /jobs/{id} 200', 'POST /jobs/bulk 201', 'GET /usage 200', 'POST /is-short 200', 'POST /metadata 200']) {
      expect(checked, seen).to.include(seen);
    }
  });
});
