// breaches(), the fault suite's one judgement: silent on a clean run, and
// each rule named when broken, so a scenario that passes has really
// checked what it claims.
import { expect } from 'chai';
import { breaches, type JobSeen, type Seen } from './outside.js';

const job = (id: string, over: Partial<JobSeen> = {}): JobSeen => ({
  id, status: 'Completed', s3Key: `p/${id}.mp4`, fileSize: 1000, attempt: 1, attempts: [{ attempt: 1, outcome: 'Completed' }],
  runnerJobs: [{ name: id, attempt: 1, pods: 1 }], terminalDeliveries: [`evt-${id}`], terminalTypes: ['job_completed'], ...over,
});
const clean = (): Seen => ({
  jobs: [job('a'), job('b')],
  storedKeys: ['p/a.mp4', 'p/b.mp4'],
  usage: { usage_count: 2, storage_usage_gb: 2000 / 2 ** 30, storage_reserved_gb: 0 },
});
const judge = (change: (s: Seen) => void) => {
  const s = clean();
  change(s);
  return breaches(s, { status: 'Completed', created: 2 });
};

describe('fault suite: breaches()', () => {
  it('finds nothing in a clean run, redeliveries under one webhook-id included', () => {
    expect(judge((s) => { s.jobs[0]!.terminalDeliveries = ['evt-a', 'evt-a']; })).to.deep.equal([]);
  });

  const cases: [string, (s: Seen) => void, RegExp][] = [
    ['a job ending otherwise', (s) => { s.jobs[0]!.status = 'Failed'; }, /^a: ended Failed, not Completed$/],
    ['an attempt run in two Jobs', (s) => { s.jobs[0]!.runnerJobs.push({ name: 'a-again', attempt: 1, pods: 1 }); }, /^a: runner Jobs for attempts \[1,1\], attempt 1 needs \[1\]$/],
    ['a missing Job for an attempt', (s) => { s.jobs[0]!.attempt = 2; }, /^a: runner Jobs for attempts \[1\], attempt 2 needs \[1,2\]$/],
    ['a Job with two pods', (s) => { s.jobs[0]!.runnerJobs[0]!.pods = 2; }, /^a: runner Job a has 2 pods$/],
    ['an attempt recorded twice', (s) => { s.jobs[0]!.attempts.push({ attempt: 1, outcome: 'Completed' }); }, /^a: status.attempts records an attempt twice/],
    ['no MediaJob', (s) => { s.jobs[0]!.attempt = undefined; }, /^a: no MediaJob$/],
    ['a lost terminal webhook', (s) => { s.jobs[0]!.terminalDeliveries = []; }, /^a: terminal webhook never delivered$/],
    ['two webhook-ids for one event', (s) => { s.jobs[0]!.terminalDeliveries = ['x', 'y']; }, /^a: terminal webhook delivered under 2 webhook-ids$/],
    ['two terminal events', (s) => { s.jobs[0]!.terminalTypes = ['job_completed', 'job_failed']; }, /^a: terminal webhooks of job_completed and job_failed$/],
    ['a file nobody delivered', (s) => { s.storedKeys.push('p/extra.mp4'); }, /^storage: 1 file\(s\) no job delivered \(p\/extra.mp4\), 0 delivered key\(s\) missing$/],
    ['a delivered file missing', (s) => { s.storedKeys.pop(); }, /^storage: 0 file\(s\) no job delivered, 1 delivered key\(s\) missing$/],
    ['a job counted twice', (s) => { s.usage.usage_count = 3; }, /^usage: usage_count 3, 2 jobs created$/],
    ['bytes counted twice', (s) => { s.usage.storage_usage_gb = 3000 / 2 ** 30; }, /^usage: storage_usage_gb is 3000 bytes, the delivered files 2000$/],
    ['a reservation left', (s) => { s.usage.storage_reserved_gb = 0.5; }, /^usage: storage_reserved_gb 0.5 with every job ended$/],
  ];
  for (const [what, change, message] of cases) {
    it(`names ${what}`, () => {
      const found = judge(change);
      expect(found, JSON.stringify(found)).to.have.length(1);
      expect(found[0]).to.match(message);
    });
  }

  it('takes any of several statuses where a scenario allows them, and names the one outside them', () => {
    const s = clean();
    s.jobs[0]!.status = 'Failed';
    expect(breaches(s, { status: ['Completed', 'Failed'], created: 2 })).to.deep.equal([]);
    s.jobs[1]!.status = 'Warning';
    expect(breaches(s, { status: ['Completed', 'Failed'], created: 2 })).to.deep.equal(['b: ended Warning, not Completed or Failed']);
  });
});
