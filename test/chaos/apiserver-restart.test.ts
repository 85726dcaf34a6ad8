// The local cluster's API server restarted with its state kept while jobs
// download (issue 16 item 3, reduced; `make chaos` runs more): the
// operator's informers recover (jobs posted after the restart run too), and
// every job ends Completed once: runner Jobs exactly one per attempt, one
// terminal webhook under one webhook-id, storage and usage exact.
import { expect } from 'chai';
import { startChaos, type ChaosFixture } from './fixture.js';
import { breaches, runSummary } from './outside.js';
import { runApiServerRestart } from './apiserver-restart.js';

describe('fault suite: the API server restarted mid-run', function () {
  this.timeout(300_000);
  let f: ChaosFixture;
  before(async () => { f = await startChaos({ MATERIALIZE_SAFETY_SECONDS: '1' }); });
  after(() => f?.stop());

  // Slow (about 25 s): nine real jobs, the API server down for 3 s while they run; the operator's watches
  // reconnect and relist before the jobs after the restart move.
  it('finishes every job once, those posted after the restart included', async () => {
    const run = await runApiServerRestart(f, { before: 6, after: 3, downMs: 3_000, deadlineMs: 180_000 });
    expect(run.runningAtRestart, 'jobs downloading when the API server went').to.be.greaterThan(0);
    const found = breaches(run.seen, { status: 'Completed', created: 9 });
    expect(found, found.length ? runSummary(f.svc, run.seen) : undefined).to.deep.equal([]);
    expect(f.svc.operator.crashes, 'exits nobody asked for').to.deep.equal([]);
  });
});
