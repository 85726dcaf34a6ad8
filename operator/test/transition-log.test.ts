// The operator's one line per job transition: which status writes make a
// line, what each says (and never says: a credential, a query string), and
// that a transition written twice (a pass over a lagging cache) is said once.
import { expect } from 'chai';
import { createLogger } from '@mediajobs/lib/logger';
import type { MediaJob, MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import { Announced } from '../src/transition-events.js';
import { logTransition, sizeText, transitionLine } from '../src/transition-log.js';

const JOB_ID = '0b7c0f5e-1111-4222-8333-944445555666';

function mj(status?: MediaJobStatus, destination: MediaJob['spec']['destination'] = { type: 'managed' }): MediaJob {
  return {
    apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob',
    metadata: { name: 'j1', namespace: 'default', uid: 'uid-1', generation: 1 },
    spec: {
      jobId: JOB_ID, owner: { apiKeyId: 'k' }, url: 'https://user:pw@media.example/talk.mp4?token=abc', destination,
      format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
      downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false,
      enableProgressWebhook: false, webhookUrl: 'https://hooks.example/secret-path',
    },
    status,
  };
}

const pending: MediaJobStatus = { jobId: JOB_ID, status: 'Pending', step: 'Queued', progress: 0 };
const processing: MediaJobStatus = { ...pending, status: 'Processing', step: 'Downloading', startTime: '2026-11-21T09:59:10Z' };
const finished = { ...processing, finishTime: '2026-11-21T09:59:42.5Z', progress: 100 };

describe('transition log lines', () => {
  it('says accepted (the source without credentials or query), started, then completed with size, run time and where', () => {
    expect(transitionLine(mj(), undefined, pending)).to.deep.equal({
      level: 'info', msg: 'job accepted', once: 'log:accepted#1', fields: { jobId: JOB_ID, source: 'https://media.example/talk.mp4?…', format: 'mp4' },
    });
    expect(transitionLine(mj(pending), pending, processing)).to.include({ level: 'info', msg: 'job started', once: 'log:started#1' });
    const completed: MediaJobStatus = { ...finished, status: 'Completed', step: 'Finished', result: { storageKey: 'k/talk.mp4', fileSize: 12_400_000 } };
    expect(transitionLine(mj(processing), processing, completed)).to.deep.equal({
      level: 'info', msg: 'job completed', once: 'log:completed#1',
      fields: { jobId: JOB_ID, size: '12.4 MB', bytes: 12_400_000, duration: '32.5 s', where: 'managed:k/talk.mp4' },
    });
    const saved = mj(processing, { type: 'saved', provider: 's3', secretName: 'dest-1' });
    expect(transitionLine(saved, processing, completed)?.fields.where).to.equal('saved/s3:k/talk.mp4');
  });

  it('says a failure and a warning with their category and the first line of the cause, cleaned', () => {
    const failed: MediaJobStatus = {
      ...finished, status: 'Failed', errorType: 'error', category: 'source_unreachable',
      error: 'ERROR: unable to download https://u:p@media.example/v.mp4?Signature=s3cr3t: HTTP Error 403 via http://cdn.example/x (10.42.0.17)\nTraceback (most recent call last)',
    };
    // The same rule as the API's error_detail: the source's host, no other URL, no internal address.
    expect(transitionLine(mj(processing), processing, failed)).to.deep.equal({
      level: 'warn', msg: 'job failed', once: 'log:failed#1',
      fields: { jobId: JOB_ID, category: 'source_unreachable', cause: 'ERROR: unable to download https://media.example/v.mp4?…: HTTP Error 403 via <url> (<host>)', duration: '32.5 s' },
    });
    const warned: MediaJobStatus = { ...finished, status: 'Warning', errorType: 'warning', error: 'The media is not available' };
    expect(transitionLine(mj(processing), processing, warned)).to.deep.equal({
      level: 'warn', msg: 'job ended with a warning', once: 'log:warning#1',
      fields: { jobId: JOB_ID, category: 'media_unavailable', cause: 'The media is not available' },
    });
  });

  it('says a retry with the failed attempt, and the next attempt\'s start with its number', () => {
    const retry: MediaJobStatus = {
      ...pending, reason: 'retry_scheduled', attempt: 2, retryAt: '2026-11-21T10:00:10Z',
      attempts: [{ attempt: 1, jobName: 'j1-1', finishTime: '2026-11-21T10:00:00Z', outcome: 'Failed', category: 'evicted', error: 'The pod was evicted', retryAfterSeconds: 10 }],
    };
    expect(transitionLine(mj(processing), processing, retry)).to.deep.equal({
      level: 'warn', msg: 'job attempt failed; retrying', once: 'log:retrying#1',
      fields: { jobId: JOB_ID, attempt: 2, failedAttempt: 1, category: 'evicted', cause: 'The pod was evicted', retryInSeconds: 10 },
    });
    const second: MediaJobStatus = { ...retry, status: 'Processing', retryAt: undefined };
    expect(transitionLine(mj(retry), retry, second)).to.include({ msg: 'job started', once: 'log:started#2' });
  });

  it('says cancelled, skipped and restored; progress and an unchanged end say nothing', () => {
    expect(transitionLine(mj(processing), processing, { ...finished, status: 'CancelledByAdmin' })?.fields).to.include({ by: 'admin' });
    expect(transitionLine(mj(pending), pending, { ...pending, status: 'Cancelled' })).to.include({ msg: 'job cancelled', once: 'log:cancelled#1' });
    expect(transitionLine(mj(processing), processing, { ...finished, status: 'Skipped', reason: 'drm_protected' })?.fields).to.include({ reason: 'drm_protected' });
    const restored: MediaJobStatus = { ...finished, status: 'Completed', restoredTime: '2026-11-21T10:00:00Z' };
    expect(transitionLine(mj(), undefined, restored)).to.include({ msg: 'job restored from an earlier run of the same manifest' });
    expect(transitionLine(mj(processing), processing, { ...processing, progress: 40, step: 'Muxing' })).to.equal(undefined);
    const completed: MediaJobStatus = { ...finished, status: 'Completed', result: { storageKey: 'k' } };
    expect(transitionLine(mj(completed), completed, { ...completed, progress: 100 })).to.equal(undefined);
  });

  it('logs a transition written twice (the cache had not seen the first write) once, and a job seen anew again', () => {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('operator', 'info', {}, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
    const announced = new Announced();
    const failed: MediaJobStatus = { ...finished, status: 'Failed', category: 'invalid_spec', error: 'bad', reason: 'invalid_spec' };
    logTransition(log, announced, 'default/j1', mj(), pending);
    logTransition(log, announced, 'default/j1', mj(), pending);
    logTransition(log, announced, 'default/j1', mj(processing), failed);
    logTransition(log, announced, 'default/j1', mj(processing), failed);
    expect(lines.map((l) => [l.level, l.msg])).to.deep.equal([[30, 'job accepted'], [40, 'job failed']]);
    expect(JSON.stringify(lines)).to.not.match(/pw@|token=abc|secret-path/);
    announced.forget('default/j1');
    logTransition(log, announced, 'default/j1', mj(), pending);
    expect(lines).to.have.length(3);
  });

  it('sizes read as download tools show them', () => {
    expect([0, 999, 1000, 1_234_567, 5e9, 7.2e12].map(sizeText)).to.deep.equal(['0 B', '999 B', '1.0 kB', '1.2 MB', '5.0 GB', '7.2 TB']);
  });
});
