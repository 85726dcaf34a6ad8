// A runner killed mid-download as a node would kill it (issue 16 item 3,
// reduced; `make chaos` counts more): its container's main process
// SIGKILLed without a word from the runner, and an OOM kill. Each is
// classified as ADR 0018 says (evicted, oom_killed), tried again, and the
// job ends Completed on attempt 2: runner Jobs for attempts 1 and 2, one
// job_completed and no job_failed, one file in storage, usage exact.
import { expect } from 'chai';
import { startMediaServer, type MediaServer } from '../support/media.js';
import { startReceiver, startService, type Receiver } from '../e2e/support.js';
import { breaches, look, type ChaosService } from './outside.js';
import { CATEGORY, runRunnerKill, type RunnerKill } from './runner-kills.js';

describe('fault suite: a runner killed mid-download', function () {
  this.timeout(300_000);
  let svc: ChaosService;
  let media: MediaServer;
  let receiver: Receiver;

  before(async () => {
    media = await startMediaServer();
    receiver = await startReceiver();
    svc = await startService({ operatorProcess: true });
  });

  after(async () => {
    await svc?.stop();
    await receiver?.stop();
    await media?.stop();
  });

  it('retries a runner SIGKILLed (evicted) and one OOM-killed (oom_killed): each completes on attempt 2, once', async () => {
    const kills: RunnerKill[] = ['sigkill', 'oom'];
    const runs = await Promise.all(kills.map((how) => runRunnerKill(svc, media, receiver, how)));
    const seen = await look(svc, receiver, runs.map((r) => r.id));
    expect(seen.jobs.map((j) => j.attempts.map((a) => [a.attempt, a.outcome, a.category]))).to.deep.equal(kills.map((how) =>
      [[1, 'Failed', CATEGORY[how]], [2, 'Completed', undefined]]));
    expect(seen.jobs.map((j) => j.attempt)).to.deep.equal([2, 2]);
    expect(breaches(seen, { status: 'Completed', created: kills.length })).to.deep.equal([]);
  });
});
