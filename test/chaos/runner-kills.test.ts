// A runner killed mid-download as a node would kill it (issue 16 item 3,
// reduced; `make chaos` counts more): its container's main process
// SIGKILLed without a word from the runner, and an OOM kill. Each is
// classified as ADR 0018 says (evicted, oom_killed), tried again, and the
// job ends Completed on attempt 2: runner Jobs for attempts 1 and 2, one
// job_completed and no job_failed, one file in storage, usage exact; and
// no secret of the run in any log. And one killed after it stored the
// media, before its report: the file it left is gone, and the retry stores
// under the same name.
import { expect } from 'chai';
import { startPagesServer, type PagesServer } from '../support/media-pages.js';
import { startChaos, type ChaosFixture } from './fixture.js';
import { breaches, look } from './outside.js';
import { CATEGORY, HeldSubtitles, runKillAfterUpload, runRunnerKill, type RunnerKill } from './runner-kills.js';

describe('fault suite: a runner killed mid-download', function () {
  this.timeout(300_000);
  let f: ChaosFixture;
  before(async () => { f = await startChaos(); });
  after(() => f?.stop());

  it('retries a runner SIGKILLed (evicted) and one OOM-killed (oom_killed): each completes on attempt 2, once', async () => {
    const kills: RunnerKill[] = ['sigkill', 'oom'];
    const runs = await Promise.all(kills.map((how) => runRunnerKill(f, how)));
    const seen = await look(f.svc, f.receiver, runs.map((r) => r.id));
    expect(seen.jobs.map((j) => j.attempts.map((a) => [a.attempt, a.outcome, a.category]))).to.deep.equal(kills.map((how) =>
      [[1, 'Failed', CATEGORY[how]], [2, 'Completed', undefined]]));
    expect(seen.jobs.map((j) => j.attempt)).to.deep.equal([2, 2]);
    expect(breaches(seen, { status: 'Completed', created: kills.length })).to.deep.equal([]);
  });

  it('no secret of the run is in any process\' log: the gateway, the operator, the runners killed and their retries', async () => {
    const scan = await f.scanLogs();
    // The gateway, the operator and the four runner pods (two attempts of two jobs), all at debug.
    expect(scan.sources).to.be.at.least(6);
    expect(scan.bytes).to.be.greaterThan(10_000);
    expect(scan.leaks).to.deep.equal([]);
  });
});

describe('fault suite: a runner killed between its upload and its report', function () {
  this.timeout(300_000);
  let f: ChaosFixture;
  let pages: PagesServer;
  const held = new HeldSubtitles();
  before(async () => { [f, pages] = await Promise.all([startChaos(), startPagesServer({ before: held.before })]); });
  after(async () => {
    await pages?.stop();
    await f?.stop();
  });

  it('deletes what a runner killed between its upload and its report stored: the retry stores under the same name, nothing else is left', async () => {
    const run = await runKillAfterUpload(f, pages.trackPageUrl, held, 'kept-after-kill');
    const seen = await look(f.svc, f.receiver, [run.id]);
    expect(seen.jobs.map((j) => j.attempts.map((a) => [a.attempt, a.outcome, a.category]))).to.deep.equal([[[1, 'Failed', 'oom_killed'], [2, 'Completed', undefined]]]);
    expect(run.storedByFirst).to.match(/\/videos\/kept-after-kill\.mp4$/);
    // Attempt 1's file was deleted before attempt 2 ran: the name was free again, no `-<suffix>` copy beside an orphan.
    expect(seen.jobs[0]!.s3Key).to.equal(run.storedByFirst);
    expect(seen.storedKeys).to.deep.equal([run.storedByFirst]);
    const mj = JSON.parse((await f.svc.cluster.kubectl(['get', 'mediajob', run.id, '-o', 'json'])).stdout) as { status: Record<string, unknown> };
    expect(mj.status.storedFiles, 'the finished attempt\'s record of stored files goes with it').to.equal(undefined);
    // Usage counts one file and one job, reservations released.
    expect(breaches(seen, { status: 'Completed', created: 1 })).to.deep.equal([]);
  });
});
