// Unknown API keys are rate-limited before they cost a database query
// (issue 16, item 4): a burst of random keys from one address costs at most
// its lookup budget in queries (counted around the real lookup on real
// Postgres), the rest are 429 without one; keys already cached, a working
// one or a bad one, are answered as before during the burst.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { ApiKeyCache, KeyLookupBudget, cachedKeyLookup, type KeyLookup } from '../src/auth.js';
import { startTestGateway, type TestGateway } from './support.js';

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
    gw = await startTestGateway({ keyCache: new ApiKeyCache(counted, 10_000, 10_000, () => clock), keyLookups: budget });
    real.lookup = cachedKeyLookup(gw.pool);
  });

  after(async () => {
    await gw?.stop();
  });

  const randomKey = () => `mj_${randomBytes(24).toString('base64url')}`;

  it('500 random keys at once from one address: 20 lookups, 20 401s, 480 429s with Retry-After', async () => {
    clock += 5_000;
    const before = lookups;
    const answers = await Promise.all(Array.from({ length: 500 }, () => gw.request('GET', '/jobs', { key: randomKey() })));
    expect(lookups - before).to.equal(20);
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

  it('the next second, a new working key is looked up and served', async () => {
    clock += 5_000;
    await Promise.all(Array.from({ length: 100 }, () => gw.request('GET', '/jobs', { key: randomKey() })));
    const fresh = await gw.newKey('fresh');
    expect((await gw.request('GET', '/jobs', { key: fresh.key })).status).to.equal(429);
    clock += 1_000;
    expect((await gw.request('GET', '/jobs', { key: fresh.key })).status).to.equal(200);
  });

  it('the budget only counts lookups: a missing key is a 401 and costs none', async () => {
    clock += 5_000;
    const before = lookups;
    for (let i = 0; i < 100; i++) expect((await gw.request('GET', '/jobs', { key: null })).status).to.equal(401);
    expect(lookups - before).to.equal(0);
  });
});
