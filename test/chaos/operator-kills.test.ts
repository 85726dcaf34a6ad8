// The operator SIGKILLed and started again while jobs run (issue 16 item 3,
// reduced; `make chaos` runs 200 jobs with a kill every 5 s): every job
// ends Completed once, each attempt in one runner Job with one pod, every
// job_completed reaches the webhook under one webhook-id, managed storage
// holds exactly the delivered files, and GET /usage counts exactly.
import { expect } from 'chai';
import { startChaos, type ChaosFixture } from './fixture.js';
import { breaches } from './outside.js';
import { runOperatorKills } from './operator-kills.js';

describe('fault suite: the operator SIGKILLed while jobs run', function () {
  this.timeout(300_000);
  let f: ChaosFixture;
  before(async () => { f = await startChaos({ MATERIALIZE_SAFETY_SECONDS: '1' }); });
  after(() => f?.stop());

  // Slow (about 30 s): twelve jobs while the operator is SIGKILLed every 4 s, up to four times; each restart
  // waits for its Lease and relists before jobs move again.
  it('ends every job Completed once, with one runner Job per attempt, its webhook under one id and exact usage', async () => {
    const run = await runOperatorKills(f, { jobs: 12, killEveryMs: 4_000, maxKills: 4, deadlineMs: 180_000 });
    expect(run.kills, 'operator kills').to.be.greaterThan(0);
    expect(breaches(run.seen, { status: 'Completed', created: 12 })).to.deep.equal([]);
    expect(f.svc.operator.crashes, 'exits nobody asked for').to.deep.equal([]);
  });
});
