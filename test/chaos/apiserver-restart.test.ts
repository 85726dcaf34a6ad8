// The local cluster's API server restarted with its state kept while jobs
// download (issue 16 item 3, reduced; `make chaos` runs more): the
// operator's informers recover (jobs posted after the restart run too), and
// every job ends Completed once: runner Jobs exactly one per attempt, one
// terminal webhook under one webhook-id, storage and usage exact.
import { expect } from 'chai';
import { startMediaServer, type MediaServer } from '../support/media.js';
import { startReceiver, startService, type Receiver } from '../e2e/support.js';
import { breaches, type ChaosService } from './outside.js';
import { runApiServerRestart } from './apiserver-restart.js';

describe('fault suite: the API server restarted mid-run', function () {
  this.timeout(300_000);
  let svc: ChaosService;
  let media: MediaServer;
  let receiver: Receiver;

  before(async () => {
    media = await startMediaServer();
    receiver = await startReceiver();
    svc = await startService({ operatorProcess: true, operatorEnv: { MATERIALIZE_SAFETY_SECONDS: '1' } });
  });

  after(async () => {
    await svc?.stop();
    await receiver?.stop();
    await media?.stop();
  });

  it('finishes every job once, those posted after the restart included', async () => {
    const run = await runApiServerRestart(svc, media, receiver, { before: 6, after: 3, downMs: 3_000, deadlineMs: 180_000 });
    expect(run.runningAtRestart, 'jobs downloading when the API server went').to.be.greaterThan(0);
    expect(breaches(run.seen, { status: 'Completed', created: 9 })).to.deep.equal([]);
    expect(svc.operator.crashes, 'exits nobody asked for').to.deep.equal([]);
  });
});
