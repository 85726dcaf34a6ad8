// The request rate limit as a client sees it (the spec's Limits; issue 14
// item 5): a real redis-server of this machine on a loopback port, stopped,
// frozen and started again mid-test, and the real gateway. The limit is 10
// per second so that a burst is small. A budget's window opens with its first
// request and lasts a second; every burst here is sent at once and answered
// in a few milliseconds, so it falls inside one window.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { ConfigError } from '@mediajobs/lib/config';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { startRedisServer, type RedisServer } from '../../test/support/redis.js';
import { scrape } from '../../test/support/metrics.js';
import { createApp } from '../src/app.js';
import { loadGatewayConfig } from '../src/config.js';
import { createApiKey, createOrganization } from '../src/db/api-keys.js';
import {
  RATE_COUNTER_UNAVAILABLE, RATE_LIMITED, REDIS_COMMAND_TIMEOUT_MS, inProcessBudget, redisBudget, type RateBudget,
} from '../src/rate-limit.js';
import { startGateway } from '../src/server.js';
import { captureLogger, startTestGateway, type TestGateway } from './support.js';

const LIMIT = 10;
const ID = '0190a0a0-0000-7000-8000-000000000000';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Answer {
  status: number;
  body: unknown;
  retryAfter: string | null;
}

/** One authenticated request, as a client sends it. */
async function send(base: string, key: string, method = 'GET', path = '/jobs', body?: unknown): Promise<Answer> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { 'x-api-key': key, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, retryAfter: res.headers.get('retry-after') };
}

/** `n` GET /jobs at once. */
const burst = (base: string, key: string, n: number) => Promise.all(Array.from({ length: n }, () => send(base, key)));
const served = (answers: Answer[]) => answers.filter((a) => a.status !== 429).length;

/** Every refusal is the spec's: 429, exactly `{"error":"rate_limit_exceeded"}`, `Retry-After: 1`. */
function expectRefusals(answers: Answer[], count: number): void {
  const refused = answers.filter((a) => a.status === 429);
  expect(refused).to.have.length(count);
  for (const a of refused) expect(a).to.deep.equal({ status: 429, body: { error: RATE_LIMITED }, retryAfter: '1' });
}

/** What a client reads of one answer: its status and the two RateLimit fields (draft-ietf-httpapi-ratelimit-headers). */
interface Fields {
  status: number;
  policy: string | null;
  limit: string | null;
}

/** GET /jobs with fetch. */
async function fieldsByFetch(base: string, key: string): Promise<Fields> {
  const res = await fetch(`${base}/jobs`, { headers: { 'x-api-key': key } });
  await res.arrayBuffer();
  return { status: res.status, policy: res.headers.get('ratelimit-policy'), limit: res.headers.get('ratelimit') };
}

/** GET /jobs with curl, its header block parsed as written on the wire. */
async function fieldsByCurl(base: string, key: string): Promise<Fields> {
  const { stdout } = await promisify(execFile)('curl', ['-sS', '-o', '/dev/null', '-D', '-', '-H', `x-api-key: ${key}`, `${base}/jobs`]);
  const lines = stdout.split('\r\n');
  const header = (name: string) => lines.find((l) => l.toLowerCase().startsWith(`${name}:`))?.slice(name.length + 1).trim() ?? null;
  return { status: Number(/^HTTP\/[\d.]+ (\d{3})/.exec(lines[0]!)![1]), policy: header('ratelimit-policy'), limit: header('ratelimit') };
}

/** The draft's Service Limit Item as this gateway writes it: `"default";r=<remaining>;t=<seconds>`. */
function serviceLimit(value: string | null): { r: number; t: number } {
  const m = /^"default";r=(\d+);t=(\d+)$/.exec(value ?? '');
  expect(m, `RateLimit: ${value}`).to.not.equal(null);
  return { r: Number(m![1]), t: Number(m![2]) };
}

/**
 * LIMIT + 1 requests one after another in one window, read by `read`: the
 * remaining count goes down by one per request to 0 and the request past
 * the limit is the 429 with r=0. The window is a second long; should one end
 * mid-sequence on a loaded machine (a remaining count that goes back up),
 * the sequence is sent again with a new key.
 */
async function expectCountdown(base: string, newKey: () => Promise<string>, read: (base: string, key: string) => Promise<Fields>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const key = await newKey();
    const seen: Fields[] = [];
    for (let i = 0; i <= LIMIT; i++) seen.push(await read(base, key));
    const rs = seen.map((f) => serviceLimit(f.limit).r);
    if (rs.some((r, i) => i > 0 && r > rs[i - 1]!) && attempt < 3) continue;
    expect(seen.map((f) => f.status)).to.deep.equal([...Array(LIMIT).fill(200), 429]);
    expect(rs).to.deep.equal([...Array.from({ length: LIMIT }, (_, i) => LIMIT - 1 - i), 0]);
    for (const f of seen) {
      expect(f.policy).to.equal(`"default";q=${LIMIT};w=1`);
      expect(serviceLimit(f.limit).t).to.be.within(0, 1);
    }
    return;
  }
}

/** Polls until `base` serves `key` again; the time it took. */
async function servedAgain(base: string, key: string, withinMs: number): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    const a = await send(base, key);
    if (a.status === 200) return Date.now() - t0;
    expect(a.status).to.equal(503);
    if (Date.now() - t0 > withinMs) throw new Error(`still ${a.status} after ${withinMs} ms`);
    await sleep(50);
  }
}

describe('api-gateway: rate limit', function () {
  this.timeout(30_000);
  let redis: RedisServer;
  let budget: RateBudget;
  let gw: TestGateway;
  const extra: { close(): unknown }[] = [];

  before(async () => {
    redis = await startRedisServer();
    budget = redisBudget(redis.url, LIMIT, captureLogger().logger);
    gw = await startTestGateway({ rateLimit: budget });
  });
  after(async () => {
    for (const x of extra.reverse()) await x.close();
    budget?.close();
    await gw?.stop();
    await redis?.stop();
  });

  /** A key of a new organization, or of `orgId`'s; `null`: a legacy key without one. */
  async function keyOf(orgId?: string | null): Promise<string> {
    const organizationId = orgId === undefined ? (await createOrganization(gw.pool, 'org')).id : orgId;
    return (await createApiKey(gw.pool, { name: 'k', ...(organizationId !== null && { organizationId }) })).key;
  }

  it('refuses a burst over the limit with 429 rate_limit_exceeded and Retry-After: 1, while another organization is served', async () => {
    const [a, b] = [await keyOf(), await keyOf()];
    const answers = await burst(gw.url, a, LIMIT + 3);
    expect(served(answers)).to.equal(LIMIT);
    expect(answers.filter((x) => x.status === 200).every((x) => x.retryAfter === null)).to.equal(true);
    expectRefusals(answers, 3);
    const other = await burst(gw.url, b, LIMIT);
    expect(other.map((x) => x.status)).to.deep.equal(Array(LIMIT).fill(200));
  });

  it('says where the budget stands in RateLimit and RateLimit-Policy (fetch and curl): r counts down to 0, and the 429 has r=0', async () => {
    await expectCountdown(gw.url, () => keyOf(), fieldsByFetch);
    await expectCountdown(gw.url, () => keyOf(), fieldsByCurl);
    // Answers of every kind past authentication carry them: a 404 too; a request refused before counting (no key) does not.
    const key = await keyOf();
    const missing = await fetch(`${gw.url}/jobs/${ID}`, { headers: { 'x-api-key': key } });
    expect([missing.status, missing.headers.get('ratelimit-policy'), serviceLimit(missing.headers.get('ratelimit')).r])
      .to.deep.equal([404, `"default";q=${LIMIT};w=1`, LIMIT - 1]);
    const anonymous = await fetch(`${gw.url}/jobs`);
    expect([anonymous.status, anonymous.headers.get('ratelimit'), anonymous.headers.get('ratelimit-policy')]).to.deep.equal([401, null, null]);
  });

  it('counts every endpoint against one budget and refuses on every endpoint once it is spent', async () => {
    const key = await keyOf();
    const endpoints: [string, string, unknown?][] = [
      ['GET', '/jobs'], ['POST', '/jobs', {}], ['GET', `/jobs/${ID}`], ['POST', '/jobs/bulk', {}], ['GET', `/batch/${ID}`],
      ['GET', '/user/s3'], ['GET', '/user/chat'], ['POST', '/metadata', {}], ['POST', '/is-short', {}], ['GET', '/usage'],
    ];
    expect(endpoints).to.have.length(LIMIT);
    const first = await Promise.all(endpoints.map(([m, p, body]) => send(gw.url, key, m, p, body)));
    expect(first.filter((x) => x.status === 429)).to.deep.equal([]);
    const again = await Promise.all(endpoints.map(([m, p, body]) => send(gw.url, key, m, p, body)));
    expectRefusals(again, LIMIT);
  });

  it('gives all keys of one organization one budget', async () => {
    const org = (await createOrganization(gw.pool, 'shared')).id;
    const [k1, k2] = [await keyOf(org), await keyOf(org)];
    const answers = await Promise.all([burst(gw.url, k1, LIMIT / 2), burst(gw.url, k2, LIMIT / 2)]);
    expect(answers.flat().map((x) => x.status)).to.deep.equal(Array(LIMIT).fill(200));
    expectRefusals([await send(gw.url, k1), await send(gw.url, k2)], 2);
  });

  it('gives a key without an organization a budget of its own', async () => {
    const [legacy, otherLegacy] = [await keyOf(null), await keyOf(null)];
    const answers = await burst(gw.url, legacy, LIMIT + 1);
    expect(served(answers)).to.equal(LIMIT);
    expectRefusals(answers, 1);
    expect(served(await burst(gw.url, otherLegacy, LIMIT))).to.equal(LIMIT);
  });

  it('does not extend the window for refused requests: a client that keeps sending is served once the second is over', async () => {
    const key = await keyOf();
    const log: { sent: number; answered: number; status: number }[] = [];
    const t0 = Date.now();
    while (Date.now() - t0 < 2600) {
      const sent = Date.now();
      const { status } = await send(gw.url, key);
      log.push({ sent, answered: Date.now(), status });
      await sleep(10);
    }
    expect(log.slice(0, LIMIT).map((r) => r.status)).to.deep.equal(Array(LIMIT).fill(200));
    const firstRefused = log.findIndex((r) => r.status === 429);
    expect(firstRefused).to.equal(LIMIT);
    // The window opened after the first request was sent: whatever was answered
    // before a second had passed since then was counted in it, and refused.
    const inFirstWindow = log.slice(LIMIT).filter((r) => r.answered < log[0]!.sent + 1000);
    expect(inFirstWindow.length).to.be.greaterThan(5);
    expect(inFirstWindow.every((r) => r.status === 429)).to.equal(true);
    // Refusals went on all the while; an extended window would have served nothing more.
    const servedAfter = log.slice(firstRefused).filter((r) => r.status === 200);
    expect(servedAfter.length).to.be.at.least(LIMIT);
  });

  it('shares one budget between two gateway replicas on one Redis', async () => {
    const replicaBudget = redisBudget(redis.url, LIMIT);
    const replica = await startReplica(gw, replicaBudget);
    extra.push(replica, replicaBudget);
    const key = await keyOf();
    const answers = await Promise.all([burst(gw.url, key, LIMIT / 2 + 2), burst(replica.url, key, LIMIT / 2 + 2)]);
    expect(served(answers.flat())).to.equal(LIMIT);
    expectRefusals(answers.flat(), 4);
    expectRefusals([await send(gw.url, key), await send(replica.url, key)], 2);
  });

  describe('when Redis is unavailable', () => {
    let own: RedisServer;
    let ownBudget: RateBudget;
    let logs: ReturnType<typeof captureLogger>;
    let og: TestGateway;

    before(async () => {
      own = await startRedisServer();
      logs = captureLogger();
      ownBudget = redisBudget(own.url, LIMIT, logs.logger);
      og = await startTestGateway({ rateLimit: ownBudget });
    });
    after(async () => {
      ownBudget?.close();
      await og?.stop();
      await own?.stop();
    });

    it('answers 503 with Retry-After at once while it is stopped, never unlimited, and serves again once it is back', async () => {
      const { key } = await og.newKey();
      expect((await send(og.url, key)).status).to.equal(200);
      await own.stop();
      for (let i = 0; i < LIMIT + 5; i++) {
        const t = Date.now();
        const a = await send(og.url, key);
        expect(a).to.deep.equal({ status: 503, body: { error: RATE_COUNTER_UNAVAILABLE }, retryAfter: '1' });
        expect(Date.now() - t).to.be.below(REDIS_COMMAND_TIMEOUT_MS);
      }
      // Nothing was counted: no RateLimit field claims a remaining count.
      expect((await fieldsByFetch(og.url, key)).limit).to.equal(null);
      expect(logs.text().match(/rate limit counter unreachable/g)).to.have.length(1);
      await own.start();
      await servedAgain(og.url, key, 5000);
      expect(logs.text()).to.include('rate limit counter reachable again');
      // An empty Redis after the restart: a fresh window, and the limit holds again.
      const answers = await burst(og.url, key, LIMIT + 2);
      expect(served(answers)).to.be.at.most(LIMIT);
      expectRefusals(answers, LIMIT + 2 - served(answers));
    });

    it('answers 503 within the command timeout when Redis hangs, and serves again once it answers', async () => {
      const { key } = await og.newKey();
      expect((await send(og.url, key)).status).to.equal(200);
      own.pause();
      try {
        const t = Date.now();
        const answers = await Promise.all([send(og.url, key), send(og.url, key)]);
        for (const a of answers) expect(a).to.deep.equal({ status: 503, body: { error: RATE_COUNTER_UNAVAILABLE }, retryAfter: '1' });
        expect(Date.now() - t).to.be.below(REDIS_COMMAND_TIMEOUT_MS + 500);
      } finally {
        own.resume();
      }
      await servedAgain(og.url, key, 5000);
    });
  });

  it('without Redis, counts in the gateway process', async () => {
    const local = await startTestGateway({ rateLimit: inProcessBudget(LIMIT) });
    try {
      const { key } = await local.newKey();
      const answers = await burst(local.url, key, LIMIT + 2);
      expect(served(answers)).to.equal(LIMIT);
      expectRefusals(answers, 2);
      await expectCountdown(local.url, async () => (await local.newKey()).key, fieldsByFetch);
    } finally {
      await local.stop();
    }
  });

  describe('settings', () => {
    const env = (dir: string, more: Record<string, string>) => ({
      DATABASE_URL: gw.db.url, SECRET_KEYS: SecretBox.generateSpec('t'), FILE_URL_SECRET: 'file-url-secret-0123456789',
      MANAGED_STORAGE_DIR: dir, PORT: '0', HOST: '127.0.0.1', METRICS_PORT: '0', METRICS_HOST: '127.0.0.1', RATE_LIMIT_PER_SECOND: String(LIMIT), ...more,
    });

    for (const [counter, redisUrl, says] of [
      ['Redis', () => redis.url, 'rate limit counted in Redis, shared by every gateway replica'],
      ['this process', () => undefined, 'rate limit counted in this process (REDIS_URL unset): right for one gateway only'],
    ] as const) {
      it(`RATE_LIMIT_PER_SECOND and ${counter} as REDIS_URL says, named at start; checks and refusals in /metrics (METRICS_PORT)`, async () => {
        const dir = mkdtempSync(join(tmpdir(), 'mj-rate-'));
        const logs = captureLogger();
        const url = redisUrl();
        const g = await startGateway(loadGatewayConfig(env(dir, url ? { REDIS_URL: url } : {})), { logger: logs.logger });
        try {
          expect(logs.lines.filter((l) => l.includes('rate limit counted'))).to.have.length(1);
          expect(logs.text()).to.include(says);
          const { key } = await createApiKey(g.pool, { name: 'cfg' });
          // One request first: the new gateway's pool connections and key cache are warm, so the burst
          // that follows is answered within the window this one opened, even on a loaded machine.
          expect(served([await send(g.url, key)])).to.equal(1);
          const answers = await burst(g.url, key, LIMIT);
          expect(served(answers)).to.equal(LIMIT - 1);
          expectRefusals(answers, 1);
          const m = await scrape(`${g.metricsUrl!}/metrics`);
          expect((await fetch(`${g.url}/metrics`)).status, 'not on the API port').to.equal(404);
          expect(logs.text()).to.include(`"metrics":"${g.metricsUrl!}/metrics"`);
          const kind = url ? 'redis' : 'in-process';
          expect(m.value('mediajobs_rate_limit_check_duration_seconds_count', { counter: kind })).to.equal(LIMIT + 1);
          expect(m.value('mediajobs_rate_limit_rejections_total', { counter: kind, verdict: 'limited' })).to.equal(1);
          expect(m.value('mediajobs_http_requests_total', { route: '/jobs/*', status: '429' })).to.equal(1);
        } finally {
          await g.close();
          rmSync(dir, { recursive: true, force: true });
        }
      });
    }

    it('defaults to 1,000 per second and refuses a REDIS_URL that is not redis:// without echoing it', () => {
      const defaults = loadGatewayConfig({ DATABASE_URL: 'postgres://x/y', SECRET_KEYS: 'a:b' });
      expect([defaults.RATE_LIMIT_PER_SECOND, defaults.REDIS_URL]).to.deep.equal([1000, undefined]);
      const bad = 'http://user:hunter2@cache.example:6379';
      expect(() => loadGatewayConfig({ DATABASE_URL: 'postgres://x/y', SECRET_KEYS: 'a:b', REDIS_URL: bad }))
        .to.throw(ConfigError, /REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL/).that.satisfies((e: Error) => !e.message.includes('hunter2'));
      expect(() => loadGatewayConfig({ DATABASE_URL: 'postgres://x/y', SECRET_KEYS: 'a:b', RATE_LIMIT_PER_SECOND: '0' })).to.throw(ConfigError, /RATE_LIMIT_PER_SECOND/);
    });
  });
});

/** A second gateway app on `gw`'s database with its own rate counter: another replica. */
async function startReplica(gw: TestGateway, rateLimit: RateBudget): Promise<{ url: string; close(): Promise<void> }> {
  const app = createApp({
    pool: gw.pool, logger: captureLogger().logger, secretBox: new SecretBox(SecretBox.generateSpec('replica')),
    namespace: 'default', presign: async (key) => `https://storage.example/${key}`, rateLimit,
  });
  const server: Server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
