// Postgres stopped and started again while jobs download (issue 16 item 3,
// reduced; `make chaos` runs more): while it is down the gateway answers
// JSON 503s with Retry-After, never 500; once it is back the gateway and the
// operator recover without a restart, and every job, those posted after
// included, ends Completed once: one runner Job, one terminal webhook under
// one webhook-id, storage and usage exact.
import { expect } from 'chai';
import { startPostgresServer, type PostgresServer } from '../support/postgres-server.js';
import { startChaos, type ChaosFixture } from './fixture.js';
import { breaches } from './outside.js';
import { runPostgresRestart } from './postgres-restart.js';

describe('fault suite: Postgres restarted mid-run', function () {
  this.timeout(300_000);
  let postgres: PostgresServer;
  let f: ChaosFixture;
  before(async () => {
    postgres = await startPostgresServer();
    f = await startChaos({ MATERIALIZE_SAFETY_SECONDS: '1' }, postgres.url);
  });
  after(async () => {
    await f?.stop();
    await postgres?.remove();
  });

  // Slow (about 45 s): nine real jobs, Postgres stopped for 3 s while they run and started again, then
  // every job awaited to its end; the retries' backoff after the outage is most of the time.
  it('answers 503 while it is down, then finishes every job once, those posted after included', async () => {
    const run = await runPostgresRestart(f, postgres, { before: 6, after: 3, downMs: 3_000, deadlineMs: 180_000 });
    expect(run.runningAtStop, 'jobs downloading when Postgres went').to.be.greaterThan(0);
    expect(Object.keys(run.outageAnswers), 'only 503s while it was down').to.deep.equal(['503']);
    expect(run.malformedOutageAnswers).to.deep.equal([]);
    expect(breaches(run.seen, { status: 'Completed', created: 9 })).to.deep.equal([]);
    expect(f.svc.operator.crashes, 'exits nobody asked for').to.deep.equal([]);
  });
});
