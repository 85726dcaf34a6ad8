// Unknown API keys are rate-limited before they cost a query of their own
// (issue 16, item 4), and a flood of them never makes a valid key fail
// (issue 35, item 6): a burst of random keys from one address costs at most
// its lookup budget in queries of their own (counted around the real lookup
// on real Postgres); the rest wait for the lookup every client shares, one
// statement at a time, and get 429 when they turn out unknown; a working key
// among them, cached, known valid or never seen, is served. The address is
// the client's: behind a trusted proxy, the one its X-Forwarded-For names;
// from any other peer, the peer's, whatever X-Forwarded-For says.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { findApiKeysByHashes, hashApiKey } from '../src/db/api-keys.js';
import { ApiKeyCache, KeyLookupBudget, SharedKeyLookup, cachedKeyLookup, type KeyLookup } from '../src/auth.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { ConfigError } from '@mediajobs/lib/config';
import { loadGatewayConfig } from '../src/config.js';
import { startGateway } from '../src/server.js';
import { captureLogger, startTestGateway, type TestGateway } from './support.js';

/** Counts around the shared lookup on the real pool: statements, the keys they asked for, and how many ran at once. */
function countedShared(pool: () => TestGateway['pool']) {
  const counts = { statements: 0, keys: 0, running: 0, mostAtOnce: 0 };
  const shared = new SharedKeyLookup(async (hashes) => {
    counts.statements++;
    counts.keys += hashes.length;
    counts.mostAtOnce = Math.max(counts.mostAtOnce, ++counts.running);
    try {
      return await findApiKeysByHashes(pool(), hashes);
    } finally {
      counts.running--;
    }
  });
  return { shared, counts };
}

/** GET /jobs from a loopback address of our choosing (127.0.0.2 stands for another machine), with an X-Forwarded-For if given. */
function getJobs(url: string, key: string, from = '127.0.0.1', forwardedFor?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/jobs`, {
      localAddress: from, agent: false, headers: { 'x-api-key': key, ...(forwardedFor !== undefined && { 'x-forwarded-for': forwardedFor }) },
    }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('api-gateway: unknown API keys cost no query past the lookup budget', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let lookups = 0;
  let clock = 1_000_000;
  const budget = new KeyLookupBudget(20, 10_000, () => clock);

  before(async () => {
    // The real lookup on the real pool, counted: the pool is created by startTestGateway, so the cache asks for it late.
    const real: { lookup?: KeyLookup } = {};
    const counted: KeyLookup = (hash) => {
      lookups++;
      return real.lookup!(hash);
    };
    // The cache on the same clock as the budget: a known bad key stays cached (1 s, UNKNOWN_KEY_TTL_MS) however slow the machine.
    gw = await startTestGateway({ keyCache: new ApiKeyCache(counted, 10_000, 10_000, () => clock), keyLookups: budget, sharedKeyLookup: shared.shared });
    real.lookup = cachedKeyLookup(gw.pool);
  });
  const shared = countedShared(() => gw.pool);

  after(async () => {
    await gw?.stop();
  });

  const randomKey = () => `mj_${randomBytes(24).toString('base64url')}`;

  it('500 random keys at once from one address: 20 lookups of their own, 20 401s, 480 429s with Retry-After after one shared statement at a time', async () => {
    clock += 5_000;
    const before = lookups;
    const sharedBefore = { ...shared.counts };
    const answers = await Promise.all(Array.from({ length: 500 }, () => gw.request('GET', '/jobs', { key: randomKey() })));
    expect(lookups - before).to.equal(20);
    expect(shared.counts.keys - sharedBefore.keys).to.equal(480);
    expect(shared.counts.statements - sharedBefore.statements).to.be.within(1, 480);
    expect(shared.counts.mostAtOnce).to.equal(1);
    const invalid = answers.filter((a) => a.status === 401);
    const limited = answers.filter((a) => a.status === 429);
    expect([invalid.length, limited.length]).to.deep.equal([20, 480]);
    for (const a of invalid) expect(a.body).to.deep.equal({ error: 'Invalid API Key' });
    for (const a of limited) {
      expect(a.body).to.deep.equal({ error: 'rate_limit_exceeded' });
      expect(a.headers.get('retry-after')).to.equal('1');
    }
  });

  it('during a flood, cached keys are answered as before, with no lookup: a working key 200, a known bad key 401', async () => {
    clock += 5_000;
    const good = await gw.newKey('working');
    const bad = randomKey();
    expect((await gw.request('GET', '/jobs', { key: good.key })).status).to.equal(200);
    expect((await gw.request('GET', '/jobs', { key: bad })).status).to.equal(401);
    await Promise.all(Array.from({ length: 100 }, () => gw.request('GET', '/jobs', { key: randomKey() })));
    const before = lookups;
    for (let i = 0; i < 50; i++) {
      expect((await gw.request('GET', '/jobs', { key: good.key })).status).to.equal(200);
      expect(await gw.request('GET', '/jobs', { key: bad })).to.include({ status: 401 });
    }
    expect(lookups - before).to.equal(0);
  });

  it('a working key never seen here, sent among a flood from its own address, is served: found by the shared lookup, never 429', async () => {
    clock += 5_000;
    const fresh = await gw.newKey('fresh');
    const flood = Array.from({ length: 300 }, (_, i) => gw.request('GET', '/jobs', { key: i % 50 === 25 ? fresh.key : randomKey() }));
    const answers = await Promise.all(flood);
    answers.forEach((a, i) => {
      if (i % 50 === 25) expect(a.status, `the working key, request ${i}`).to.equal(200);
      else expect(a.status).to.be.oneOf([401, 429]);
    });
    expect(answers.filter((a) => a.status === 429)).to.have.length.greaterThan(200);
    // And alone, after the flood, in the same spent second.
    expect((await gw.request('GET', '/jobs', { key: (await gw.newKey('fresher')).key })).status).to.equal(200);
  });

  it('a key known valid, gone from the cache (its TTL, or pushed out), is looked up whatever the budget', async () => {
    clock += 5_000;
    const known = await gw.newKey('known');
    expect((await gw.request('GET', '/jobs', { key: known.key })).status).to.equal(200);
    clock += 60_000; // past the 10 s TTL: the cache no longer has it
    await Promise.all(Array.from({ length: 100 }, () => gw.request('GET', '/jobs', { key: randomKey() })));
    const [before, sharedBefore] = [lookups, shared.counts.keys];
    expect((await gw.request('GET', '/jobs', { key: known.key })).status).to.equal(200);
    expect([lookups - before, shared.counts.keys - sharedBefore], 'a lookup of its own, not the shared one').to.deep.equal([1, 0]);
    // Revoked since: answered 401 and no longer known valid.
    await gw.pool.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [known.id]);
    clock += 60_000;
    expect((await gw.request('GET', '/jobs', { key: known.key })).status).to.equal(401);
    expect(gw.keyCache.knownValid(hashApiKey(known.key))).to.equal(false);
  });

  it('the shared lookup: the oldest keys first, a batch per statement, a key already waiting shares its place, a full queue refuses without a lookup', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const statements: string[][] = [];
    const working = { id: 'k', name: 'k', organizationId: null, revoked: false, storageLimitBytes: null, maxResolution: null, maxDurationSeconds: null, maxFilesizeBytes: null };
    const queue = new SharedKeyLookup(async (hashes) => {
      statements.push(hashes);
      await held;
      return new Map(hashes.filter((h) => h === 'working').map((h) => [h, working]));
    }, 3, 2);
    const first = queue.lookup('a')!; // runs at once, alone
    const waiting = ['b', 'working', 'c'].map((h) => queue.lookup(h)!);
    expect(queue.waiting).to.equal(3);
    expect(queue.lookup('d'), 'a fourth distinct key while three wait').to.equal(undefined);
    const again = queue.lookup('working')!;
    release();
    expect(await Promise.all([first, ...waiting, again])).to.deep.equal([undefined, undefined, working, undefined, working]);
    expect(statements).to.deep.equal([['a'], ['b', 'working'], ['c']]);
  });

  it('a failed statement fails every key waiting on it, as a failed lookup of its own does', async () => {
    const failing = new SharedKeyLookup(async () => {
      throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    });
    const answers = await Promise.allSettled([failing.lookup('x')!, failing.lookup('y')!]);
    expect(answers.map((a) => a.status === 'rejected' && (a.reason as { code?: string }).code)).to.deep.equal(['ECONNREFUSED', 'ECONNREFUSED']);
    expect(failing.waiting).to.equal(0);
  });

  it('the budget only counts lookups: a missing key is a 401 and costs none', async () => {
    clock += 5_000;
    const before = lookups;
    for (let i = 0; i < 100; i++) expect((await gw.request('GET', '/jobs', { key: null })).status).to.equal(401);
    expect(lookups - before).to.equal(0);
  });
});

describe('api-gateway: the client address of the key lookup budget (TRUSTED_PROXY_CIDRS)', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let clock = 1_000_000;
  const shared = countedShared(() => gw.pool);
  const randomKey = () => `mj_${randomBytes(24).toString('base64url')}`;

  before(async () => {
    // 127.0.0.2 is the ingress (a trusted proxy); 127.0.0.1 a client connecting directly.
    const real: { lookup?: KeyLookup } = {};
    gw = await startTestGateway({
      keyCache: new ApiKeyCache((hash) => real.lookup!(hash), 10_000, 10_000, () => clock),
      keyLookups: new KeyLookupBudget(20, 10_000, () => clock), sharedKeyLookup: shared.shared, trustedProxies: ['127.0.0.2/32'],
    });
    real.lookup = cachedKeyLookup(gw.pool);
  });
  after(async () => {
    await gw?.stop();
  });

  /** How many of `n` random keys from `from` with `forwardedFor` were 401 (looked up on their own) and 429 (past the budget). */
  async function flood(n: number, from: string, forwardedFor?: (i: number) => string): Promise<{ 401: number; 429: number }> {
    const statuses = await Promise.all(Array.from({ length: n }, (_, i) => getJobs(gw.url, randomKey(), from, forwardedFor?.(i))));
    return { 401: statuses.filter((s) => s === 401).length, 429: statuses.filter((s) => s === 429).length };
  }

  it('behind the trusted proxy, each client its X-Forwarded-For names has a budget of its own', async () => {
    clock += 5_000;
    // One client floods through the ingress: its own budget, then 429s.
    expect(await flood(60, '127.0.0.2', () => '203.0.113.7')).to.deep.equal({ 401: 20, 429: 40 });
    // Another client behind the same ingress still has all of its own: an unknown key is a 401, a new working key a 200.
    expect(await getJobs(gw.url, randomKey(), '127.0.0.2', '198.51.100.9')).to.equal(401);
    const sharedBefore = shared.counts.keys;
    expect(await getJobs(gw.url, (await gw.newKey('behind-ingress')).key, '127.0.0.2', '198.51.100.9')).to.equal(200);
    expect(shared.counts.keys - sharedBefore, 'looked up on its own budget').to.equal(0);
    // The rightmost address not trusted is the client: what a client wrote to the left of it is not.
    expect(await flood(30, '127.0.0.2', (i) => `10.9.${i}.1, 203.0.113.8`)).to.deep.equal({ 401: 20, 429: 10 });
    // The flooding client itself: a new working key of its own is served too.
    expect(await getJobs(gw.url, (await gw.newKey('flooder')).key, '127.0.0.2', '203.0.113.7')).to.equal(200);
  });

  it('as the gateway runs (startGateway): TRUSTED_PROXY_CIDRS from the environment decides whose budget a request spends', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mj-proxies-'));
    const running = await startGateway(loadGatewayConfig({
      DATABASE_URL: gw.db.url, SECRET_KEYS: SecretBox.generateSpec('g'), PORT: '0', HOST: '127.0.0.1', MANAGED_STORAGE_DIR: dir,
      FILE_URL_SECRET: randomBytes(16).toString('hex'), TRUSTED_PROXY_CIDRS: '127.0.0.2/32', AUTH_LOOKUPS_PER_ADDRESS_PER_SECOND: '5',
    }), { logger: captureLogger().logger });
    try {
      // In one burst: 30 keys of one client and 5 of another, both through the proxy; each has a budget of 5.
      const statuses = await Promise.all(Array.from({ length: 35 }, (_, i) => getJobs(running.url, randomKey(), '127.0.0.2', i < 30 ? '203.0.113.7' : '198.51.100.9')));
      expect(statuses.slice(30), 'the second client\'s keys, on its own budget').to.deep.equal([401, 401, 401, 401, 401]);
      expect(statuses.slice(0, 30).filter((s) => s === 429), 'the first client, past its budget').to.have.length.greaterThan(0);
    } finally {
      await running.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('from a peer that is not a trusted proxy, X-Forwarded-For is ignored: every request is the peer\'s', async () => {
    clock += 5_000;
    // Each request names another client; all count against 127.0.0.1.
    expect(await flood(50, '127.0.0.1', (i) => `198.51.100.${i}`)).to.deep.equal({ 401: 20, 429: 30 });
    expect(await getJobs(gw.url, randomKey(), '127.0.0.1', '192.0.2.200')).to.equal(429);
    // Still, a working key at that address is served.
    expect(await getJobs(gw.url, (await gw.newKey('direct')).key, '127.0.0.1', '192.0.2.201')).to.equal(200);
    // The proxy's own clients are untouched by that flood.
    expect(await getJobs(gw.url, randomKey(), '127.0.0.2', '192.0.2.202')).to.equal(401);
  });
});

describe('api-gateway: TRUSTED_PROXY_CIDRS', () => {
  const base = { DATABASE_URL: 'postgres://x@127.0.0.1/db', SECRET_KEYS: 'k:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=' };
  const problem = (value: string): string => {
    try {
      loadGatewayConfig({ ...base, TRUSTED_PROXY_CIDRS: value });
    } catch (err) {
      expect(err).to.be.instanceOf(ConfigError);
      return (err as Error).message;
    }
    throw new Error(`${value} was accepted`);
  };

  it('is comma-separated networks, a bare address one host; unset: no proxy is trusted', () => {
    expect(loadGatewayConfig(base).TRUSTED_PROXY_CIDRS).to.deep.equal([]);
    expect(loadGatewayConfig({ ...base, TRUSTED_PROXY_CIDRS: ' 10.42.0.0/16, fd00:42::/64,192.0.2.10 ' }).TRUSTED_PROXY_CIDRS)
      .to.deep.equal(['10.42.0.0/16', 'fd00:42::/64', '192.0.2.10/32']);
  });

  it('refuses what is not a network, and a network of every address, naming the variable and the entry, never the value', () => {
    const bad = problem('10.0.0.0/8,secret-host.internal');
    expect(bad).to.include('TRUSTED_PROXY_CIDRS: entry 2 is not an IPv4 or IPv6 network').and.not.include('secret-host');
    expect(problem('10.0.0.0/33')).to.include('TRUSTED_PROXY_CIDRS: entry 1 is not');
    expect(problem('10.1.0.0/16,0.0.0.0/0')).to.include('TRUSTED_PROXY_CIDRS: entry 2 trusts every address');
    expect(problem('::/0')).to.include('TRUSTED_PROXY_CIDRS: entry 1 trusts every address');
  });
});
