// The gateway's probes (issue 34, item 6): GET /readyz is 200 only when an
// authenticated request can be served now (Postgres answers, this build's
// migrations are applied) and whatever the deployment adds holds (local
// mode: its operator leads); otherwise 503 with `{error}` saying what is
// missing. GET /healthz stays a liveness check: 200 whatever Postgres does.
// Both need no key. Postgres here is a server of the test's own, stopped
// as an outage would stop it.
import { expect } from 'chai';
import { startPostgresServer, type PostgresServer } from '../../test/support/postgres-server.js';
import { startTestGateway, type TestGateway } from './support.js';

describe('api-gateway: /readyz says whether a request can be served, /healthz that the process lives', function () {
  this.timeout(60_000);
  let server: PostgresServer;
  let gw: TestGateway;
  let missing: string | undefined;

  before(async () => {
    server = await startPostgresServer();
    gw = await startTestGateway({ databaseAdminUrl: server.url, readiness: () => missing });
  });
  after(async () => {
    await gw?.stop().catch(() => undefined);
    await server?.remove();
  });
  afterEach(() => {
    missing = undefined;
  });

  const probe = async (path: string) => {
    const r = await gw.request('GET', path, { key: null });
    return { status: r.status, body: r.body, type: r.headers.get('content-type') };
  };
  const json = 'application/json; charset=utf-8';

  it('ready: 200 {status: ready}, and a request with a key is served', async () => {
    expect(await probe('/readyz')).to.deep.equal({ status: 200, body: { status: 'ready' }, type: json });
    expect(await probe('/healthz')).to.deep.equal({ status: 200, body: { status: 'ok' }, type: json });
    expect((await gw.request('GET', '/jobs')).status).to.equal(200);
  });

  it('what the deployment adds (local mode: its operator) is said in the 503', async () => {
    missing = 'Operator not leading';
    expect(await probe('/readyz')).to.deep.equal({ status: 503, body: { error: 'Operator not leading' }, type: json });
    expect((await probe('/healthz')).status).to.equal(200);
  });

  it('a migration this build knows not applied: 503 Database migrations not applied', async () => {
    const newest = (await gw.pool.query<{ version: string }>('SELECT max(version) AS version FROM schema_migrations')).rows[0]!.version;
    await gw.pool.query('DELETE FROM schema_migrations WHERE version = $1', [newest]);
    try {
      expect(await probe('/readyz')).to.deep.equal({ status: 503, body: { error: 'Database migrations not applied' }, type: json });
      expect((await probe('/healthz')).status).to.equal(200);
    } finally {
      await gw.pool.query('INSERT INTO schema_migrations (version) VALUES ($1)', [newest]);
    }
    expect((await probe('/readyz')).status).to.equal(200);
  });

  it('Postgres down: 503 Database unreachable while /healthz stays 200; ready again once it is back, without a restart', async () => {
    await server.stop();
    expect(await probe('/readyz')).to.deep.include({ status: 503, body: { error: 'Database unreachable' } });
    expect(await probe('/healthz')).to.deep.equal({ status: 200, body: { status: 'ok' }, type: json });
    // What /readyz foretold: a request with a key cannot be served now.
    expect((await gw.request('GET', '/jobs', { key: 'mj_a_key_no_cache_has_seen_yet_0123456789' })).status).to.equal(503);
    await server.start();
    expect(await probe('/readyz')).to.deep.equal({ status: 200, body: { status: 'ready' }, type: json });
  });
});
