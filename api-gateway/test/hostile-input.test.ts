// Hostile input on every route (issue 16, item 4): fast-check properties
// over bodies (wrong types, huge and negative numbers, deep nesting,
// `__proto__`/`constructor`/`prototype` keys, control characters and Unicode
// in filenames and folders), raw bytes (invalid UTF-8, wrong content types,
// lying lengths), path segments, query strings and headers, sent byte for
// byte to the gateway on real Postgres behind the production HTTP server.
// 10,000 cases a run in all. Every answer: no 5xx, every error a JSON
// {error: string} with one of the statuses the spec documents, and the
// gateway keeps serving. Nothing here leaves loopback: URLs are literal
// loopback or refused addresses, names resolve to a documentation address
// the outbound policy refuses, and yt-dlp is a program that fails.
// HOSTILE_SCALE=0.1 runs a tenth of the cases, HOSTILE_TRACE=1 prints each answer.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { Express } from 'express';
import fc from 'fast-check';
import { BatchSources } from '@mediajobs/lib/batches/index';
import { MediaInfoExtractor } from '@mediajobs/lib/media-info/index';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { STORAGE_PROVIDERS } from '@mediajobs/lib/mediajob/types';
import { createApiKey } from '../src/db/api-keys.js';
import { PROVIDER_FIELDS } from '../src/destinations/fields.js';
import { inProcessBudget } from '../src/rate-limit.js';
import { rawRequest, requestBytes, type RawAnswer } from './raw-http.js';
import { appRoutes, startTestGateway, type TestGateway } from './support.js';

/** The error statuses the spec documents (Errors; 429 also for a flood of unknown keys), plus the HTTP layer's own for malformed requests (408, 417, 431). */
const DOCUMENTED_ERRORS = new Set([400, 401, 403, 404, 408, 409, 413, 415, 417, 429, 431]);
/**
 * Routes whose valid input goes to yt-dlp, here a program that always fails:
 * their documented 502 for an extraction failure is the upstream's answer, not the input's.
 */
const EXTRACTION_ROUTES = new Set(['/metadata', '/is-short']);

/** Cases per property; 10,000 in all. */
const SCALE = Number(process.env.HOSTILE_SCALE ?? 1);
const RUNS = { bodies: 2_000 * SCALE, fields: 3_000 * SCALE, raw: 1_500 * SCALE, paths: 1_500 * SCALE, queries: 1_000 * SCALE, headers: 1_000 * SCALE } as const;

/** Addresses only: loopback (closed ports), refused ranges, and non-http schemes. Never a name that needs DNS. */
const SAFE_URLS = [
  'http://127.0.0.1:1/v.mp4', 'https://127.0.0.1:1/', 'http://[::1]:1/a', 'http://169.254.169.254/latest/meta-data/',
  'http://[fe80::1]/', 'http://0.0.0.0/', 'http://10.0.0.1/', 'http://192.168.1.1/x', 'file:///etc/passwd', 'ftp://127.0.0.1/',
  'javascript:alert(1)', 'data:text/plain,hi', `http://127.0.0.1:1/${'a'.repeat(5_000)}`, 'http://user:pass@127.0.0.1:1/',
  'http://127.0.0.1:99999/', 'http://2130706433/', 'http://0x7f000001/', 'http://127.1/', 'http://[::ffff:127.0.0.1]:1/',
  'http://[::ffff:169.254.169.254]/', 'http://127.0.0.1:1/%00', 'http://127.0.0.1:1/\u0000', 'http://127.0.0.1:1/ünï/😀',
  'http://127.0.0.1:1/?list=PL1&v=x', '//127.0.0.1/x', 'http:', 'http://', '127.0.0.1', 'https://hooks.slack.com.127.0.0.1.nip/',
];

const CHAT_PREFIX = 'http://127.0.0.1:1/hooks/';

const nastyStrings = fc.constantFrom(
  '', ' ', '\t', '\u0000', '\u0000abc', '..', '../../etc/passwd', '/abs', '\\x', 'a/b', 'a\\b', '%00', '%2e%2e', '\r\n', 'x\r\nSet-Cookie: a=b',
  '\u202e', '\ufeff', '\ud800', '\udfff', 'a\ud800b', '😀'.repeat(300), 'x'.repeat(300), 'y'.repeat(70_000), '__proto__', 'constructor', 'prototype',
  'NaN', '-1', '1e309', 'true', 'null', '{}', '[]', '00:00:00', '99:99:99', '-00:01', '1e3', '0x10', 'mp4', 'h264', 'best', 's3', 'all',
  '$(rm -rf /)', '`id`', "'; DROP TABLE jobs; --", '<script>', 'CON', 'nul.txt', '.', '.hidden', 'a'.repeat(256), 'ü'.repeat(201),
);
const controlString = fc.string({ unit: fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c)), maxLength: 20 });
const hostileString = fc.oneof(
  fc.string({ maxLength: 40 }), fc.string({ unit: 'grapheme', maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 40 }),
  controlString, nastyStrings,
);
const hostileNumber = fc.oneof(
  fc.integer(), fc.double(), fc.integer({ min: -100, max: 300 }),
  fc.constantFrom(-1, 0, -0, 1e308, -1e308, 2 ** 53 + 2, -(2 ** 63), 5e-324, 0.5, 51, 52, -51, 100, 101, 255, 256, 1e21, 4294967296),
);
const leaf = fc.oneof(hostileString, hostileNumber, fc.boolean(), fc.constant(null));
const hostileKey = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', ''));
/** Own `__proto__` keys survive: Object.fromEntries defines properties, it does not assign them. */
const { value: hostileValue } = fc.letrec<{ value: unknown; array: unknown[]; object: Record<string, unknown> }>((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 5 }),
  object: fc.array(fc.tuple(hostileKey, tie('value')), { maxLength: 6 }).map((e) => Object.fromEntries(e)),
}));

const orHostile = <T>(a: fc.Arbitrary<T>) => fc.oneof({ weight: 3, arbitrary: a }, { weight: 2, arbitrary: hostileValue });
const safeUrl = orHostile(fc.constantFrom(...SAFE_URLS));
/** A storage endpoint never names a host to resolve: a loopback or refused address, or not a string at all. */
const safeEndpoint = fc.oneof(fc.constantFrom(...SAFE_URLS, 'http://127.0.0.1:1', 'https://[::1]:1'), hostileNumber, fc.constant(null), fc.array(leaf));
/** Field values, per field name, that reach further than random values alone. */
const FIELD_VALUES: Record<string, fc.Arbitrary<unknown>> = {
  url: safeUrl,
  webhook_url: orHostile(fc.oneof(fc.constantFrom(...SAFE_URLS), hostileString.map((s) => CHAT_PREFIX + s))),
  endpoint: safeEndpoint,
  format: orHostile(fc.constantFrom('mp4', 'mkv', 'webm', 'mov', 'm4a', 'mp3', 'ogg', 'opus', 'MP4', 'exe')),
  video_codec: orHostile(fc.constantFrom('copy', 'h264', 'h265', 'vp9')),
  audio_codec: orHostile(fc.constantFrom('copy', 'aac', 'opus', 'mp3')),
  video_quality: orHostile(hostileNumber),
  max_duration: orHostile(hostileNumber),
  max_resolution: orHostile(fc.constantFrom('best', 'lowest', '2160', '144', '0', '-1', '99999999999999999999')),
  clip_start: orHostile(fc.constantFrom('00:00:01', '1:2:3', '59:59', '-5', '1e9', '10', '00:00:00.5')),
  clip_end: orHostile(fc.constantFrom('00:00:02', '00:00:00', '0', '99999999999999999999', '5')),
  storage_provider: orHostile(fc.constantFrom(...STORAGE_PROVIDERS, 'managed', 'S3', '')),
  notify_level: orHostile(fc.constantFrom('all', 'errors_only', 'warnings_only', 'ALL')),
  filename: hostileString,
  folder: hostileString,
  service_account_json: orHostile(fc.oneof(
    hostileValue.map((v) => JSON.stringify(v) ?? 'null'),
    fc.constant(JSON.stringify({ type: 'service_account', client_email: 'a@b', private_key: '-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n', token_uri: 'http://127.0.0.1:1/token' })),
  )),
};
const JOB_FIELDS = [
  'url', 'format', 'video_codec', 'audio_codec', 'audio_bitrate', 'video_quality', 'quality_preset', 'max_resolution', 'filename', 'folder',
  'webhook_url', 'audio_only', 'download_subtitles', 'download_thumbnail', 'clip_start', 'clip_end', 'live_recording', 'live_from_start',
  'max_duration', 'wait_for_video', 'enable_progress_webhook', 'storage', 'storage_provider', 'paused',
];
const providerFields = (p: keyof typeof PROVIDER_FIELDS) => {
  const f = PROVIDER_FIELDS[p];
  return [...f.required, ...f.optional, ...(f.flags ?? []), 'default'];
};

function objectOf(fields: readonly string[], extra: Record<string, fc.Arbitrary<unknown>> = {}): fc.Arbitrary<Record<string, unknown>> {
  const arbs = Object.fromEntries(fields.map((f) => [f, extra[f] ?? FIELD_VALUES[f] ?? hostileValue]));
  return fc.record(arbs, { requiredKeys: [] }).chain((o) => fc.array(fc.tuple(hostileKey, hostileValue), { maxLength: 3 })
    .map((more) => Object.fromEntries([...Object.entries(o), ...more])));
}

/** Inline `storage`: a provider (or not one) and that provider's fields, the endpoint always safe (set last). */
const inlineStorage = fc.constantFrom(...STORAGE_PROVIDERS).chain((p) => fc.tuple(
  orHostile(fc.constant(p)), objectOf(providerFields(p)), safeEndpoint,
)).map(([provider, fields, endpoint]) => ({ ...fields, provider, endpoint }));

/** The body fields each body-taking route reads; a route not named here gets arbitrary JSON. */
function fieldsBody(method: string, path: string): fc.Arbitrary<unknown> {
  const job = { storage: orHostile(inlineStorage) };
  if (method === 'POST' && path === '/jobs') return objectOf(JOB_FIELDS, job);
  if (method === 'POST' && path === '/jobs/bulk') {
    return objectOf([...JOB_FIELDS, 'urls'], { ...job, urls: orHostile(fc.array(safeUrl, { maxLength: 120 })) });
  }
  if (method === 'PATCH') {
    return objectOf(['renames'], { renames: orHostile(fc.array(objectOf(['job_id', 'filename']), { maxLength: 10 })) });
  }
  if (path === '/metadata' || path === '/is-short') return objectOf(['url']);
  if (path === '/user/chat') return objectOf(['webhook_url', 'notify_level']);
  if (path === '/user/bucket') return objectOf(['endpoint', 'bucket', 'region', 'access_key', 'secret_key']).map((b) => ({ ...b, endpoint: 'http://127.0.0.1:1' }));
  const provider = /^\/user\/(\w+)$/.exec(path)?.[1];
  if (provider && provider in PROVIDER_FIELDS) {
    const p = provider as keyof typeof PROVIDER_FIELDS;
    // Blob's default endpoint is a public name: every blob body names a safe one.
    return fc.tuple(objectOf(providerFields(p)), safeEndpoint).map(([b, endpoint]) => ({ ...b, endpoint }));
  }
  return hostileValue;
}

const S3_DOC = { provider: 's3', endpoint: 'http://127.0.0.1:1', bucket: 'b', region: 'us-east-1', access_key: 'AKIA0000', secret_key: 'secret' };
/** Bodies each route takes, so that one to three hostile fields over them reach past the first check. */
const VALID_BODIES: Record<string, Record<string, unknown>> = {
  'POST /jobs': { url: 'http://127.0.0.1:1/v.mp4', filename: 'name', folder: 'a/b', format: 'mp4', video_quality: 23 },
  'POST /jobs/bulk': { urls: ['http://127.0.0.1:1/a.mp4', 'http://127.0.0.1:1/b.mp4'], format: 'mp3' },
  'PATCH /batch/:id/jobs': { renames: [{ job_id: '0190a0a0-0000-7000-8000-000000000001', filename: 'x' }] },
  'POST /metadata': { url: 'http://127.0.0.1:1/v.mp4' },
  'POST /user/chat': { webhook_url: `${CHAT_PREFIX}T0/B0/x`, notify_level: 'all' },
  'POST /user/s3': S3_DOC,
  'POST /user/bucket': S3_DOC,
  'POST /user/oss': { endpoint: 'http://127.0.0.1:1', bucket: 'b', access_key_id: 'id', access_key_secret: 'secret' },
  'POST /user/blob': { endpoint: 'http://127.0.0.1:1/devstoreaccount1', account_name: 'devstoreaccount1', container: 'c', account_key: 'a2V5' },
};

/** A route's valid body with one to three of its fields made hostile (a storage endpoint stays safe). */
function nearlyValidBody(method: string, path: string): fc.Arbitrary<unknown> {
  const valid = VALID_BODIES[`${method} ${path}`];
  if (!valid) return fieldsBody(method, path);
  const names = [...new Set([...Object.keys(valid), ...(path.startsWith('/jobs') ? JOB_FIELDS : [])])];
  return fc.array(fc.constantFrom(...names), { minLength: 1, maxLength: 3 }).chain((picked) => objectOf(picked, { storage: inlineStorage })
    .map((hostile) => ({ ...valid, ...hostile, ...(valid.endpoint !== undefined && { endpoint: valid.endpoint }) })));
}

/** A hostile path segment, as sent: percent-encoded text, or raw bytes the parser may refuse. */
const hostileSegment = fc.oneof(
  hostileString.map((s) => encodeURIComponent(s.replace(/[\ud800-\udfff]/g, 'x'))),
  fc.constantFrom(
    '%', '%zz', '%00', '%2e%2e', '..', '.', '%c0%ae', '%ff%fe', '%ed%a0%80', '0190a0a0-0000-7000-8000-000000000000', '0190A0A0-0000-7000-8000-00000000000Z',
    '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff', `${'a'.repeat(4_000)}`, '%2f..%2f', 'a%2Fb', '%20', '~', '*', ':id',
  ),
  fc.uint8Array({ minLength: 1, maxLength: 12 }).map((b) => Buffer.from(b).toString('latin1')),
);

/** Raw bodies: bytes JSON.stringify cannot make. */
const rawBody = fc.oneof(
  fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
  fc.constantFrom(
    '{"url": 1e400}', '{"video_quality": 123456789012345678901234567890}', '{"video_quality": -1e400}', '{"url":"\\ud800"}',
    '{"__proto__": {"polluted": true}, "url": "http://127.0.0.1:1/v.mp4"}', '{"constructor": {"prototype": {"polluted": true}}}',
    '{"a":1,"a":2,"url":"x","url":{}}', '{', '}', '[', '"', '"just a string"', '42', 'null', 'true', '', ' ', '\ufeff{}', '{"url":"x"}garbage',
    '{"url":"x"', '[{}]', '{"renames":[{"job_id":null}]}', '\u0000', '{"\u0000":"\u0000"}', '{"url":"\\u0000"}',
  ).map((s) => Buffer.from(s)),
  // Invalid UTF-8 inside JSON strings: lone continuation bytes, overlong forms, a truncated sequence, a UTF-16 surrogate.
  fc.constantFrom([0x80], [0xc0, 0xae], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xff], [0xe2, 0x82])
    .map((bad) => Buffer.concat([Buffer.from('{"url":"http://127.0.0.1:1/'), Buffer.from(bad), Buffer.from('","filename":"'), Buffer.from(bad), Buffer.from('"}')])),
);
const contentType = fc.oneof(
  fc.constantFrom(
    'application/json', 'application/json; charset=utf-8', 'application/json; charset=latin1', 'application/json; charset=utf-16',
    'application/json; charset=UTF-8; x=y', 'application/json;;', 'APPLICATION/JSON', 'text/plain', 'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x', 'application/vnd.api+json', 'application/*', '*/*', '', 'application/json\u0000', 'json',
  ),
  fc.string({ maxLength: 30 }),
);
const encoding = fc.option(fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'x-unknown', 'gzip, gzip'), { nil: undefined });

describe('api-gateway: hostile input on every route (fast-check)', function () {
  this.timeout(600_000);
  let gw: TestGateway;
  let dir: string;
  let key: string;
  /** A marketplace key: its requests name an end user in x-marketplace-user (marketplace.ts). */
  let marketplaceKey: string;
  let routes: [string, string][];
  let prototypeBefore: string[];
  let cases = 0;
  /** Answers by status, for the summary line: what the cases reached. */
  const byStatus = new Map<number, number>();
  let started = 0;

  before(async () => {
    started = Date.now();
    dir = mkdtempSync(join(tmpdir(), 'mj-hostile-'));
    // Any name resolves to a documentation address the policy refuses: nothing is looked up or contacted.
    const outbound = new OutboundPolicy({ allowed: ['127.0.0.0/8', '::1/128'], resolve: async () => [{ address: '192.0.2.1', family: 4 }] });
    const mediaInfo = { command: ['false'], lightTimeoutMs: 2_000, fullTimeoutMs: 2_000 };
    gw = await startTestGateway({
      rateLimit: inProcessBudget(1_000_000),
      // A request that never completes (a chunked body without its end) is answered 408 within this.
      serverTimeouts: { headersTimeoutMs: 2_000, requestTimeoutMs: 2_000 },
      outbound,
      mediaInfo: new MediaInfoExtractor(mediaInfo),
      batchSources: new BatchSources({ lookupEndpoint: 'http://127.0.0.1:1/lookup', maxEntries: 500, policy: outbound, mediaInfo }),
      chatWebhookPrefix: CHAT_PREFIX,
      files: { dir, secret: 'test-file-url-secret-0123456789' },
      uploadGrants: { handle: () => Promise.resolve(undefined) },
      storage: {
        probeTimeoutMs: 500, // every probe fails (closed ports): a short budget keeps the run short
        driveDownloadSecret: 'test-file-url-secret-0123456789',
        providerSettings: {
          gcs: { apiEndpoint: 'http://127.0.0.1:1', tokenUri: 'http://127.0.0.1:1/token' },
          drive: { rootUrl: 'http://127.0.0.1:1/', tokenUri: 'http://127.0.0.1:1/token' },
        },
      },
    });
    key = (await gw.newKey('hostile')).key;
    marketplaceKey = (await createApiKey(gw.pool, { name: 'hostile-marketplace', kind: 'marketplace' })).key;
    routes = appRoutes(gw.server.listeners('request')[0] as Express);
    prototypeBefore = Object.getOwnPropertyNames(Object.prototype).sort();
  });

  after(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
    const statuses = [...byStatus].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`).join(', ');
    console.log(`      ${cases} hostile requests in ${((Date.now() - started) / 1000).toFixed(1)} s (${statuses})`);
  });

  afterEach(async () => {
    // Still serving, authenticated routes and Postgres included, and nothing was written onto Object.prototype.
    const health = await rawRequest(gw.url, requestBytes('GET', '/healthz'));
    expect(health.status).to.equal(200);
    const list = await rawRequest(gw.url, requestBytes('GET', '/jobs?limit=1', [['x-api-key', key]]));
    expect(list.status, list.body).to.equal(200);
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).to.deep.equal(prototypeBefore);
    expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
  });

  /** Send and check one case: no 5xx, and an error is a documented status with a JSON {error: string}. */
  async function send(bytes: Buffer): Promise<RawAnswer> {
    cases++;
    const a = await rawRequest(gw.url, bytes);
    byStatus.set(a.status, (byStatus.get(a.status) ?? 0) + 1);
    if (process.env.HOSTILE_TRACE) console.log(a.status, bytes.subarray(0, bytes.indexOf('\r\n')).toString('latin1').slice(0, 80), a.body.slice(0, 120));
    const what = `${bytes.subarray(0, 300).toString('latin1')}\n→ ${a.status} ${a.body.slice(0, 300)}`;
    const [method = '', target = ''] = bytes.subarray(0, bytes.indexOf('\r\n')).toString('latin1').split(' ');
    if (a.status === 502 && EXTRACTION_ROUTES.has(target.split('?')[0]!)) {
      expect(JSON.parse(a.body), what).to.have.property('error').that.is.a('string');
      return a;
    }
    expect(a.status, what).to.be.within(200, 499);
    // A HEAD answer has no body, unless the request was too malformed for the server to know it was a HEAD.
    if (a.status >= 400 && method === 'HEAD' && a.body === '') {
      expect(a.headers['content-type'], what).to.match(/^application\/json/);
    } else if (a.status >= 400) {
      expect(DOCUMENTED_ERRORS.has(a.status), what).to.equal(true);
      expect(a.headers['content-type'], what).to.match(/^application\/json/);
      const body = JSON.parse(a.body) as { error?: unknown };
      expect(body, what).to.be.an('object');
      expect(body.error, what).to.be.a('string').and.not.equal('');
    }
    return a;
  }

  const authed = (extra: [string, string | Buffer][] = []): [string, string | Buffer][] => [['x-api-key', key], ...extra];
  const concrete = (path: string, segment = '0190a0a0-0000-7000-8000-000000000000') => path.replace(/:\w+/g, segment).replace(/\*\w+/g, segment);
  const route = () => fc.constantFrom(...routes);
  const bodyRoutes = () => fc.constantFrom(...routes.filter(([m]) => m !== 'GET'));

  describe('every body-taking route, at the extremes', () => {
    it('a body over its limit: 413 {"error":"Request body too large"}, nothing read past the limit', async () => {
      const big = Buffer.from(JSON.stringify({ url: 'http://127.0.0.1:1/v.mp4', pad: 'x'.repeat(2 * 1024 * 1024) }));
      for (const [method, path] of routes.filter(([m]) => m === 'POST' || m === 'PATCH')) {
        const a = await send(requestBytes(method, concrete(path), authed([['content-type', 'application/json']]), big));
        // The upload-grant route adds its own `code` and `reason` (ADR 0012) to the same error.
        expect([`${method} ${path}`, a.status, (JSON.parse(a.body) as { error: unknown }).error]).to.deep.equal([`${method} ${path}`, 413, 'Request body too large']);
      }
    });
    it('JSON nested 10,000 levels deep (arrays, objects, both): a 4xx, the parser and the validators survive', async () => {
      const depth = 10_000;
      const nested = [
        `${'['.repeat(depth)}${']'.repeat(depth)}`,
        `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`,
        `{"url":"http://127.0.0.1:1/v.mp4","storage":${'{"a":['.repeat(depth / 2)}${']}'.repeat(depth / 2)}}`,
        `{"renames":${'['.repeat(depth)}${']'.repeat(depth)}}`,
      ];
      for (const [method, path] of routes.filter(([m]) => m === 'POST' || m === 'PATCH')) {
        for (const body of nested) {
          const a = await send(requestBytes(method, concrete(path), authed([['content-type', 'application/json']]), Buffer.from(body)));
          expect(a.status, `${method} ${path}`).to.be.within(200, 499);
        }
      }
    });
  });

  describe('cases the properties found, kept as examples', () => {
    it('a NUL in a /metadata URL is no process argument: the URL as parsed goes to yt-dlp (was a 500)', async () => {
      for (const url of ['http://127.0.0.1:1/\u0000', 'http://127.0.0.1:1/a\u0000b']) {
        const a = await send(requestBytes('POST', '/metadata', authed([['content-type', 'application/json']]), Buffer.from(JSON.stringify({ url }))));
        expect(a.status).to.equal(502); // the failing yt-dlp ran; the documented extraction failure
      }
    });
    it('an Expect other than 100-continue: 417 with a JSON error (was an empty body)', async () => {
      const a = await send(requestBytes('GET', '/healthz', [['expect', '']]));
      expect(a.status).to.equal(417);
      expect(JSON.parse(a.body)).to.deep.equal({ error: 'Unsupported Expect header' });
    });
    it('malformed HTTP: the status Node chose (431 for oversized headers), with a JSON error', async () => {
      const big = await send(requestBytes('GET', '/healthz', [['x-big', 'x'.repeat(20_000)]]));
      expect(big.status).to.equal(431);
      const bad = await send(requestBytes('GET', '/\u0000'));
      expect([bad.status, JSON.parse(bad.body)]).to.deep.equal([400, { error: 'Bad request' }]);
    });
  });

  it(`arbitrary JSON bodies on every route (${RUNS.bodies} cases)`, async () => {
    await fc.assert(fc.asyncProperty(bodyRoutes(), hostileValue, async ([method, path], body) => {
      await send(requestBytes(method, concrete(path), authed([['content-type', 'application/json']]), Buffer.from(JSON.stringify(body) ?? 'null')));
    }), { numRuns: RUNS.bodies });
  });

  it(`each route's own fields with hostile values (${RUNS.fields} cases)`, async () => {
    const arb = bodyRoutes().chain(([method, path]) => fc.tuple(
      fc.constant(method), fc.constant(path), fc.oneof(fieldsBody(method, path), nearlyValidBody(method, path)),
    ));
    await fc.assert(fc.asyncProperty(arb, async ([method, path, body]) => {
      await send(requestBytes(method, concrete(path), authed([['content-type', 'application/json']]), Buffer.from(JSON.stringify(body) ?? 'null')));
    }), { numRuns: RUNS.fields });
  });

  it(`raw bodies: invalid UTF-8, broken JSON, any content type and encoding (${RUNS.raw} cases)`, async () => {
    await fc.assert(fc.asyncProperty(bodyRoutes(), rawBody, contentType, encoding, async ([method, path], body, type, enc) => {
      const headers = authed([['content-type', type], ...(enc ? [['content-encoding', enc] as [string, string]] : [])]);
      await send(requestBytes(method, concrete(path), headers, body));
    }), { numRuns: RUNS.raw });
  });

  it(`path segments: ids and keys of every kind, any route (${RUNS.paths} cases)`, async () => {
    const anyPath = fc.oneof(
      fc.tuple(route(), hostileSegment).map(([[method, path], seg]) => [method, concrete(path, seg)] as const),
      fc.tuple(fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD', 'TRACE', 'FOO'), fc.array(hostileSegment, { minLength: 1, maxLength: 4 }))
        .map(([method, segs]) => [method, `/${segs.join('/')}`] as const),
      fc.tuple(route(), hostileSegment).map(([[method, path], seg]) => [method, `${concrete(path)}/${seg}`] as const),
    );
    await fc.assert(fc.asyncProperty(anyPath, fc.boolean(), async ([method, path], withKey) => {
      await send(requestBytes(method, Buffer.from(path, 'latin1'), withKey ? authed() : []));
    }), { numRuns: RUNS.paths });
  });

  it(`query strings on every GET route (${RUNS.queries} cases)`, async () => {
    const param = fc.tuple(
      fc.oneof(fc.constantFrom('limit', 'offset', 'status', 'owner', 'limit[]', 'status[$ne]', 'limit[a][b]', '__proto__', 'constructor[prototype][x]'), fc.string({ maxLength: 8 })),
      fc.oneof(
        fc.constantFrom('-1', '0', '1e309', '100', '101', '99999999999999999999', 'NaN', '1.5', '0x10', ' 5', 'pending', 'PENDING', 'organization', 'key', ''),
        hostileString,
      ),
    ).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v.replace(/[\ud800-\udfff]/g, 'x'))}`);
    const query = fc.oneof(
      fc.array(param, { maxLength: 6 }).map((ps) => ps.join('&')),
      fc.constantFrom('%', '%zz=1', 'limit=%ff', 'a'.repeat(8_000), '&&&', '=', 'limit=1&limit=2&limit=3', 'limit'),
    );
    await fc.assert(fc.asyncProperty(fc.constantFrom(...routes.filter(([m]) => m === 'GET')), query, async ([method, path], q) => {
      await send(requestBytes(method, `${concrete(path)}?${q}`, authed()));
    }), { numRuns: RUNS.queries });
  });

  it(`headers: keys, end users, idempotency keys, lengths, bytes of every kind (${RUNS.headers} cases)`, async () => {
    const headerValue = fc.oneof(
      hostileString.map((s) => Buffer.from(s.replace(/[\r\n]/g, ''))),
      fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b)),
      fc.constantFrom('', ' ', 'x'.repeat(20_000), key, `${key} `, `${key},${key}`, '0', '-1', '99999999999999999999').map((s) => Buffer.from(s)),
    );
    const headerName = fc.constantFrom(
      'x-api-key', 'x-marketplace-user', 'idempotency-key', 'content-length', 'content-type', 'transfer-encoding', 'x-request-id', 'expect',
      'content-encoding', 'host', 'x-forwarded-for', 'accept', 'range', 'if-none-match', 'X-API-KEY', 'x api key', '',
    );
    const keyHeader = fc.constantFrom<[string, string][]>([], [['x-api-key', key]], [['x-api-key', marketplaceKey]]);
    const arb = fc.tuple(route(), fc.array(fc.tuple(headerName, headerValue), { maxLength: 4 }), keyHeader, fc.option(hostileValue, { nil: undefined }));
    await fc.assert(fc.asyncProperty(arb, async ([[method, path], headers, keyHeaders, body]) => {
      const all: [string, Buffer | string][] = [...keyHeaders, ['content-type', 'application/json'], ...headers];
      // A Content-Length larger than the body sent waits for bytes that never come: the request timeout answers it (its own test).
      const lying = headers.some(([k, v]) => k === 'content-length' && !(Number(v.toString('latin1')) <= Buffer.byteLength(JSON.stringify(body) ?? '')));
      if (lying) return;
      await send(requestBytes(method, concrete(path), all, body === undefined ? undefined : Buffer.from(JSON.stringify(body) ?? 'null')));
    }), { numRuns: RUNS.headers });
  });
});
