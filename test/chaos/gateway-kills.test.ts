// The gateway-kill fault scenario, reduced (gateway-kills.ts; `make chaos` runs it at full size).
import { expect } from 'chai';
import { runGatewayKills } from './gateway-kills.js';

describe('fault: the gateway killed during a burst of POSTs', function () {
  this.timeout(180_000);

  it('every request ends 201 with exactly one job per Idempotency-Key, replays name the same job, and the count is exact', async () => {
    const run = await runGatewayKills({ posts: 240, kills: 2, concurrency: 24 });
    expect(run.breaches).to.deep.equal([]);
    expect(run.lost, 'requests cut off by the kills').to.be.greaterThan(0);
    expect(run.replays, 'retries after a lost answer, and repeated asks, got the replay').to.be.greaterThan(0);
  });
});
