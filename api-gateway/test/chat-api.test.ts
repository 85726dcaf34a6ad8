// POST, GET and DELETE /user/chat through the gateway on real Postgres: the
// spec's checks and messages, the address stored sealed and never answered
// back, a second POST replacing the first, and 503 when the store fails.
import { expect } from 'chai';
import { DEFAULT_OUTBOUND_POLICY } from '@mediajobs/lib/outbound';
import { startTestGateway, type TestGateway } from './support.js';

const PREFIX = 'https://hooks.slack.com/services/';
const HOOK = `${PREFIX}T000/B000/secret-token-1`;

describe('api-gateway: /user/chat', function () {
  this.timeout(60_000);
  let gw: TestGateway;

  before(async () => {
    // Production's outbound policy and the default prefix: nothing is contacted when a setting is saved.
    gw = await startTestGateway({ outbound: DEFAULT_OUTBOUND_POLICY });
  });
  after(async () => gw?.stop());

  const save = (body: unknown, key?: string) => gw.request('POST', '/user/chat', { body, ...(key && { key }) });
  const stored = async (keyId: string) => (await gw.pool.query('SELECT webhook_url_enc, notify_level FROM chat_settings WHERE api_key_id = $1', [keyId])).rows;

  it('saves the address sealed with the default level all, and never answers it back', async () => {
    const k = await gw.newKey('chat');
    const r = await save({ webhook_url: HOOK }, k.key);
    expect([r.status, r.body]).to.deep.equal([200, { message: 'Chat notifications configured', configured: true, notify_level: 'all' }]);
    const rows = await stored(k.id);
    expect(rows).to.have.length(1);
    expect(rows[0].webhook_url_enc).to.be.a('string').and.not.include('secret-token-1');
    const shown = await gw.request('GET', '/user/chat', { key: k.key });
    expect(shown.status).to.equal(200);
    expect(shown.body).to.deep.include({ configured: true, notify_level: 'all', webhook_url_prefix: PREFIX });
    expect(shown.text).not.to.include('secret-token-1');
    expect(gw.logs.text()).not.to.include('secret-token-1');
  });

  it('a second POST replaces the address and the level', async () => {
    const k = await gw.newKey('chat2');
    await save({ webhook_url: HOOK, notify_level: 'errors_only' }, k.key);
    const before = (await stored(k.id))[0].webhook_url_enc;
    const r = await save({ webhook_url: `${PREFIX}T1/B1/other`, notify_level: 'warnings_only' }, k.key);
    expect(r.body).to.deep.include({ configured: true, notify_level: 'warnings_only' });
    const rows = await stored(k.id);
    expect(rows).to.have.length(1);
    expect(rows[0].notify_level).to.equal('warnings_only');
    expect(rows[0].webhook_url_enc).not.to.equal(before);
  });

  const refusals: [string, unknown, string][] = [
    ['another prefix', { webhook_url: 'https://example.com/hooks/x' }, `Invalid webhook_url. Must start with '${PREFIX}'`],
    ['the prefix alone', { webhook_url: PREFIX }, `Invalid webhook_url. Must start with '${PREFIX}'`],
    ['the prefix over plain http', { webhook_url: 'http://hooks.slack.com/services/T/B/x' }, `Invalid webhook_url. Must start with '${PREFIX}'`],
    ['the prefix inside another host', { webhook_url: 'https://hooks.slack.com.evil.test/services/T/B/x' }, `Invalid webhook_url. Must start with '${PREFIX}'`],
    ['no webhook_url', { notify_level: 'all' }, "Missing required field 'webhook_url'"],
    ['a webhook_url that is not a string', { webhook_url: 42 }, "Invalid field 'webhook_url': must be a string"],
    ['an unknown level', { webhook_url: HOOK, notify_level: 'loud' }, "Invalid notify_level. Must be 'all', 'errors_only', or 'warnings_only'"],
    ['a level that is not a string', { webhook_url: HOOK, notify_level: 1 }, "Invalid notify_level. Must be 'all', 'errors_only', or 'warnings_only'"],
  ];
  for (const [what, body, message] of refusals) {
    it(`${what}: 400 ${message}, nothing saved`, async () => {
      const k = await gw.newKey('bad');
      const r = await save(body, k.key);
      expect([r.status, r.body]).to.deep.equal([400, { error: message }]);
      expect(await stored(k.id)).to.deep.equal([]);
    });
  }

  it('without a key or with a bad one: 401 with the spec\'s messages', async () => {
    expect((await gw.request('POST', '/user/chat', { key: null, body: { webhook_url: HOOK } })).body).to.deep.equal({ error: 'Missing x-api-key header' });
    expect((await gw.request('GET', '/user/chat', { key: 'not-a-key' })).body).to.deep.equal({ error: 'Invalid API Key' });
  });

  it('GET before any setting: configured false; DELETE removes it, and is harmless twice', async () => {
    const k = await gw.newKey('del');
    expect((await gw.request('GET', '/user/chat', { key: k.key })).body).to.deep.equal({ configured: false });
    await save({ webhook_url: HOOK }, k.key);
    const del = await gw.request('DELETE', '/user/chat', { key: k.key });
    expect([del.status, del.body]).to.deep.equal([200, { message: 'Chat notifications removed', configured: false }]);
    expect(await stored(k.id)).to.deep.equal([]);
    const again = await gw.request('DELETE', '/user/chat', { key: k.key });
    expect([again.status, again.body]).to.deep.equal([200, { message: 'No chat notifications were configured', configured: false }]);
  });

  it('each key has its own setting', async () => {
    const [a, b] = [await gw.newKey('a'), await gw.newKey('b')];
    await save({ webhook_url: HOOK, notify_level: 'errors_only' }, a.key);
    expect((await gw.request('GET', '/user/chat', { key: b.key })).body).to.deep.equal({ configured: false });
  });

  it('the store failing: 503 Chat webhook configuration is temporarily unavailable, and the gateway goes on', async () => {
    const k = await gw.newKey('down');
    await gw.pool.query('ALTER TABLE chat_settings RENAME TO chat_settings_away');
    try {
      for (const [method, body] of [['POST', { webhook_url: HOOK }], ['GET', undefined], ['DELETE', undefined]] as const) {
        const r = await gw.request(method, '/user/chat', { key: k.key, ...(body && { body }) });
        expect([r.status, r.body], method).to.deep.equal([503, { error: 'Chat webhook configuration is temporarily unavailable' }]);
      }
    } finally {
      await gw.pool.query('ALTER TABLE chat_settings_away RENAME TO chat_settings');
    }
    expect((await save({ webhook_url: HOOK }, k.key)).status).to.equal(200);
  });
});

describe('api-gateway: /user/chat with a self-hosted prefix (CHAT_WEBHOOK_PREFIX)', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ outbound: DEFAULT_OUTBOUND_POLICY, chatWebhookPrefix: 'http://10.1.2.3:8080/hooks/' });
  });
  after(async () => gw?.stop());

  it('takes that prefix, and still holds the address to the outbound policy', async () => {
    const r = await gw.request('POST', '/user/chat', { body: { webhook_url: 'http://10.1.2.3:8080/hooks/abc' } });
    expect([r.status, r.body]).to.deep.equal([400, { error: "Invalid field 'webhook_url': local and link-local addresses are not allowed" }]);
    const other = await gw.request('POST', '/user/chat', { body: { webhook_url: HOOK } });
    expect(other.body).to.deep.equal({ error: "Invalid webhook_url. Must start with 'http://10.1.2.3:8080/hooks/'" });
  });
});
