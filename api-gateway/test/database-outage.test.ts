// Postgres stopped and started again under a running gateway (issue 16: "the
// gateway answers 503 JSON with Retry-After, never 500, while it is down and
// recovers without a restart; no job lost"). The gateway runs on a Postgres
// server of the test's own (postgres-server.ts), stopped as a restart would
// stop it: its sessions are ended, new connections refused.
import { expect } from 'chai';
import pg from 'pg';
import { startPostgresServer, type PostgresServer } from '../../test/support/postgres-server.js';
import { eventually } from '../../local-cluster/test/support.js';
import { startTestGateway, type TestGateway } from './support.js';

describe('api-gateway: Postgres down and back', function () {
  this.timeout(60_000);
  let server: PostgresServer;
  let gw: TestGateway;
  let key: string;

  before(async () => {
    server = await startPostgresServer();
    gw = await startTestGateway({ databaseAdminUrl: server.url });
    key = (await gw.newKey('outage')).key;
  });

  after(async () => {
    await gw?.stop().catch(() => undefined);
    await server?.remove();
  });

  const post = (k = key) => gw.request('POST', '/jobs', { key: k, body: { url: 'https://media.example/watch?v=outage' } });

  it('answers 503 JSON with Retry-After while it is down, never 500, and serves again once it is back, with nothing lost', async () => {
    const before = await post();
    expect(before.status).to.equal(201);
    const accepted = (before.body as { job_id: string }).job_id;
    const unseenKey = (await gw.newKey('never used before the outage')).key;

    // One request caught mid-statement by the shutdown: its insert waits on a table lock when the server goes.
    const locker = new pg.Client({ connectionString: gw.db.url });
    locker.on('error', () => undefined); // ended by the shutdown
    await locker.connect();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE job_counters IN EXCLUSIVE MODE');
    const caught = post();
    // Waiting for the lock (a statement waits during its parse, so pg_stat_activity's state and query still show the last one).
    await eventually(async () => (await locker.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rowCount === 1, 10_000);

    await server.stop();
    // The shutdown ends the lock holder and the waiting insert at once; which goes first is the server's race. The
    // insert either dies with its session (503, nothing written) or gets the lock first and commits (201, kept).
    const inFlight = await caught;
    expect(inFlight.status, 'POST /jobs, in flight at the shutdown').to.be.oneOf([201, 503]);
    const answers = {
      ...(inFlight.status === 503 && { 'POST /jobs, in flight at the shutdown': inFlight }),
      'POST /jobs': await post(),
      'GET /jobs': await gw.request('GET', '/jobs', { key }),
      'GET /jobs/{id}': await gw.request('GET', `/jobs/${accepted}`, { key }),
      'GET /usage': await gw.request('GET', '/usage', { key }),
      // Not in the key cache: its lookup needs the database, and an unreachable one is not an invalid key.
      'POST /jobs, a key not cached': await post(unseenKey),
    };
    for (const [what, a] of Object.entries(answers)) {
      expect(a.status, what).to.equal(503);
      expect(a.headers.get('retry-after'), what).to.equal('2');
      expect(a.headers.get('content-type'), what).to.match(/^application\/json/);
      expect(a.body, what).to.have.all.keys('error');
    }
    // The spec's words where it has them; the generic one elsewhere.
    expect(answers['GET /jobs'].body).to.deep.equal({ error: 'Database query failed' });
    expect(answers['POST /jobs'].body).to.deep.equal({ error: 'Failed to create job' });
    expect(answers['POST /jobs, a key not cached'].body).to.deep.equal({ error: 'Service temporarily unavailable, please retry' });
    const ready = await gw.request('GET', '/readyz', { key: null });
    expect(ready.status).to.equal(503);

    await server.start();
    // The pool makes new connections on demand: no restart of the gateway.
    const after = await post();
    expect(after.status).to.equal(201);
    expect((await post(unseenKey)).status).to.equal(201);
    const list = await gw.request('GET', '/jobs', { key });
    expect(list.status).to.equal(200);
    const ids = (list.body as { jobs: { id: string }[] }).jobs.map((j) => j.id);
    const committedInFlight = inFlight.status === 201 ? [(inFlight.body as { job_id: string }).job_id] : [];
    expect(ids).to.include.members([accepted, (after.body as { job_id: string }).job_id, ...committedInFlight]);
    expect(ids, 'nothing accepted while it was down; the in-flight one only if it answered 201').to.have.length(2 + committedInFlight.length);
  });
});
