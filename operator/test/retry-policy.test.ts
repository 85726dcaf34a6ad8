// The retry policy's table and rules (docs/adr/0018): every cause an
// attempt can fail of has its row, what the cluster did to a runner's pod
// is read as kube reports it, the waits double and stop at the cap, the
// settings are checked together, and deriveStatus turns a retried failure
// into a wait for the next attempt instead of the job's end.
import { expect } from 'chai';
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { ConfigError } from '@mediajobs/lib/config';
import { CONTENT_CATEGORIES, ERROR_CATEGORIES, LIMIT_CATEGORIES } from '@mediajobs/lib/mediajob/error-categories';
import type { MediaJob, MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import { loadOperatorConfig, retrySettings } from '../src/config.js';
import { buildRunnerJob, currentJobName, runnerJobName } from '../src/job-builder.js';
import {
  INFRASTRUCTURE_SIGNALS, OPERATOR_CAUSES, RETRY_POLICY, failureCause, failureSignal, retryDelaySeconds, type FailureCause, type RetrySettings,
} from '../src/retry-policy.js';
import { RETRY_SCHEDULED_REASON, WAIT_FOR_POD, deriveStatus, failedBeforeRunning, type Observed } from '../src/status.js';
import { mediaJobTransition } from '../src/transition-events.js';
import { cancelledStatus } from '../src/cancellation.js';

const SETTINGS: RetrySettings = { maxAttempts: 3, backoffSeconds: 30, platformBackoffSeconds: 900, maxBackoffSeconds: 3600 };

describe('retry policy: the table', () => {
  it('has exactly one row per cause: every runner category, every infrastructure signal, the operator\'s own', () => {
    expect(Object.keys(RETRY_POLICY)).to.have.members([...ERROR_CATEGORIES, ...INFRASTRUCTURE_SIGNALS, ...OPERATOR_CAUSES]);
  });

  it('retries transient technical failures and a runner the cluster took away, with the normal backoff', () => {
    for (const c of ['connection_error', 'download_failed', 'upload_failed', 'storage_unreachable', 'internal_error', 'evicted', 'oom_killed', 'node_lost'] as const) {
      expect(RETRY_POLICY[c], c).to.equal('backoff');
    }
  });

  it('retries bot detection and rate limiting later, with the platform\'s backoff', () => {
    expect(RETRY_POLICY.bot_detection).to.equal('platform');
    expect(RETRY_POLICY.rate_limited).to.equal('platform');
  });

  it('never retries content, DRM, limits, deterministic failures, timeouts, cancellations or validation', () => {
    const never: FailureCause[] = [
      ...CONTENT_CATEGORIES, ...LIMIT_CATEGORIES, 'processing_failed', 'output_unverified', 'invalid_spec', 'timeout', 'unknown', 'cancelled', 'invalid_owner', 'runner_name_taken',
    ];
    for (const c of never) expect(RETRY_POLICY[c], c).to.equal('no');
    expect(Object.entries(RETRY_POLICY).filter(([, k]) => k === 'no').map(([c]) => c)).to.have.members(never);
  });
});

describe('retry policy: waits', () => {
  it('doubles the first wait with each attempt, up to the cap, and stops at RETRY_MAX_ATTEMPTS', () => {
    expect(retryDelaySeconds('connection_error', 1, SETTINGS)).to.equal(30);
    expect(retryDelaySeconds('connection_error', 2, SETTINGS)).to.equal(60);
    expect(retryDelaySeconds('connection_error', 3, SETTINGS)).to.equal(undefined);
    expect(retryDelaySeconds('rate_limited', 1, SETTINGS)).to.equal(900);
    expect(retryDelaySeconds('bot_detection', 2, SETTINGS)).to.equal(1800);
    expect(retryDelaySeconds('rate_limited', 4, { ...SETTINGS, maxAttempts: 10 })).to.equal(3600);
    expect(retryDelaySeconds('private', 1, SETTINGS)).to.equal(undefined);
    expect(retryDelaySeconds('connection_error', 1, { ...SETTINGS, maxAttempts: 1 }), 'one attempt: never retried').to.equal(undefined);
  });

  it('reads its settings from the environment, checked together', () => {
    const base = { DATABASE_URL: 'postgres://x@127.0.0.1/db' };
    expect(retrySettings(loadOperatorConfig(base))).to.deep.equal({ maxAttempts: 3, backoffSeconds: 30, platformBackoffSeconds: 900, maxBackoffSeconds: 3600 });
    expect(retrySettings(loadOperatorConfig({ ...base, RETRY_MAX_ATTEMPTS: '5', RETRY_BACKOFF_SECONDS: '1', RETRY_PLATFORM_BACKOFF_SECONDS: '2', RETRY_MAX_BACKOFF_SECONDS: '4' })))
      .to.deep.equal({ maxAttempts: 5, backoffSeconds: 1, platformBackoffSeconds: 2, maxBackoffSeconds: 4 });
    expect(() => loadOperatorConfig({ ...base, RETRY_MAX_ATTEMPTS: '0' })).to.throw(ConfigError, /RETRY_MAX_ATTEMPTS/);
    expect(() => loadOperatorConfig({ ...base, RETRY_MAX_ATTEMPTS: '11' })).to.throw(ConfigError, /RETRY_MAX_ATTEMPTS/);
    expect(() => loadOperatorConfig({ ...base, RETRY_PLATFORM_BACKOFF_SECONDS: '7200' })).to.throw(ConfigError, /RETRY_MAX_BACKOFF_SECONDS/);
  });
});

const terminatedPod = (terminated: Record<string, unknown> | undefined, status: Record<string, unknown> = {}): V1Pod => ({
  metadata: { name: 'p' },
  status: {
    phase: 'Failed', ...status,
    containerStatuses: terminated ? [{ name: 'runner', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: terminated as never } }] : [],
  },
});

describe('retry policy: what the cluster did to a runner', () => {
  it('reads OOMKilled, an eviction, a disruption and a lost node as kube reports them', () => {
    expect(failureSignal(terminatedPod({ exitCode: 137, reason: 'OOMKilled' }), 137)).to.equal('oom_killed');
    expect(failureSignal(terminatedPod({ exitCode: 143, reason: 'Error' }, { reason: 'Evicted' }), 143)).to.equal('evicted');
    const disrupted = (reason: string) => terminatedPod({ exitCode: 143, reason: 'Error' }, { conditions: [{ type: 'DisruptionTarget', status: 'True', reason }] });
    expect(failureSignal(disrupted('EvictionByEvictionAPI'), 143)).to.equal('evicted');
    expect(failureSignal(disrupted('PreemptionByScheduler'), 143)).to.equal('evicted');
    expect(failureSignal(disrupted('DeletionByTaintManager'), 143)).to.equal('node_lost');
    expect(failureSignal(disrupted('DeletionByPodGC'), undefined)).to.equal('node_lost');
    expect(failureSignal(undefined, undefined), 'no pod left').to.equal('node_lost');
    expect(failureSignal(terminatedPod({ exitCode: 137, reason: 'ContainerStatusUnknown' }), 137)).to.equal('node_lost');
    expect(failureSignal(terminatedPod(undefined), undefined), 'no exit code ever reported').to.equal('node_lost');
    expect(failureSignal(terminatedPod({ exitCode: 143, reason: 'Error' }), 143), 'stopped by a signal without a report').to.equal('evicted');
    expect(failureSignal(terminatedPod({ exitCode: 1, reason: 'Error' }), 1), 'ended on its own').to.equal(undefined);
  });

  it('takes a deadline first, then the runner\'s category, then the pod; unknown otherwise', () => {
    const oom = terminatedPod({ exitCode: 137, reason: 'OOMKilled' });
    expect(failureCause({ deadlineExceeded: true, category: 'connection_error', reported: true, pod: oom, exitCode: 137 })).to.equal('timeout');
    expect(failureCause({ deadlineExceeded: false, category: 'rate_limited', reported: true, pod: oom, exitCode: 10 })).to.equal('rate_limited');
    expect(failureCause({ deadlineExceeded: false, reported: false, pod: oom, exitCode: 137 })).to.equal('oom_killed');
    expect(failureCause({ deadlineExceeded: false, reported: true, pod: oom, exitCode: 10 }), 'a report without a category').to.equal('unknown');
    expect(failureCause({ deadlineExceeded: false, category: 'a_future_category', reported: true, exitCode: 10 })).to.equal('unknown');
  });
});

// ---- deriveStatus with attempts ------------------------------------------------

const NOW = new Date('2026-11-21T10:00:00Z');

function mj(status?: MediaJobStatus): MediaJob {
  return {
    apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob',
    metadata: { name: 'j1', namespace: 'default', uid: 'uid-1', generation: 1, creationTimestamp: '2026-11-21T09:59:00Z' },
    spec: {
      jobId: '0b7c0f5e-1111-4222-8333-944445555666', owner: { apiKeyId: 'k' }, url: 'http://m/a.mp4', destination: { type: 'managed' },
      format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
      downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
    },
    status,
  };
}

const failedJob = (reason = 'BackoffLimitExceeded'): V1Job => ({
  metadata: { name: 'x' },
  status: {
    startTime: new Date('2026-11-21T09:59:10Z'),
    conditions: [{ type: 'Failed', status: 'True', reason, lastTransitionTime: new Date('2026-11-21T09:59:40Z') }],
  },
});
const completeJob: V1Job = {
  metadata: { name: 'x' },
  status: { startTime: new Date('2026-11-21T09:59:10Z'), completionTime: new Date('2026-11-21T09:59:40Z'), conditions: [{ type: 'Complete', status: 'True' }] },
};
const exited = (exitCode: number, report?: object): V1Pod => terminatedPod({ exitCode, reason: 'Error', ...(report && { message: JSON.stringify(report) }) });
const connectionError = { outcome: 'failed', error: 'Connection error while downloading the media', errorType: 'error', category: 'connection_error' };

function derive(o: Omit<Observed, 'retry'>, now = NOW): MediaJobStatus {
  const s = deriveStatus({ ...o, retry: SETTINGS }, now);
  if (s === WAIT_FOR_POD) throw new Error('unexpected wait');
  return s;
}

describe('MediaJob status with retries', () => {
  const running: MediaJobStatus = { status: 'Processing', step: 'Downloading', progress: 20, startTime: '2026-11-21T09:59:12Z', expectedBytes: 5000 };

  it('turns a retried failure into a wait: Pending, Queued, reason retry_scheduled, the attempt recorded, the runner\'s report cleared', () => {
    const m = mj({ ...running, ...connectionError, reason: 'connection_error' } as MediaJobStatus);
    const s = derive({ mj: m, job: failedJob(), pod: exited(10, connectionError), admitted: true, jobName: runnerJobName(m) });
    expect(s).to.include({
      status: 'Pending', step: 'Queued', progress: 0, reason: RETRY_SCHEDULED_REASON, attempt: 2, retryAt: '2026-11-21T10:00:10Z',
      startTime: '2026-11-21T09:59:12Z', expectedBytes: 5000, jobName: runnerJobName(m),
    });
    for (const gone of ['error', 'errorType', 'category', 'result', 'finishTime']) expect(s, gone).to.not.have.property(gone);
    expect(s.attempts).to.deep.equal([{
      attempt: 1, jobName: runnerJobName(m), startTime: '2026-11-21T09:59:10Z', finishTime: '2026-11-21T09:59:40Z', outcome: 'Failed',
      category: 'connection_error', reason: 'connection_error', error: 'Connection error while downloading the media', retryAfterSeconds: 30,
    }]);
    expect(s.conditions!.find((c) => c.type === 'Admitted')).to.include({
      status: 'False', reason: 'WaitingToRetry', message: 'Attempt 1 failed (connection_error): attempt 2 starts at 2026-11-21T10:00:10Z',
    });
    expect(s.conditions!.find((c) => c.type === 'Succeeded'), 'not finished').to.equal(undefined);
    expect(mediaJobTransition(m.status, s)).to.deep.equal([
      { type: 'Warning', reason: 'Retrying', message: 'Attempt 1 failed (connection_error): attempt 2 in 30 s' },
    ]);
    expect(mediaJobTransition(s, s), 'announced once').to.deep.equal([]);
  });

  it('keeps each attempt\'s phase seconds in its record: from the termination message, else the status; bad numbers left out', () => {
    const phases = { download: 12.5 };
    // A retried failure: the attempt keeps them, the top of the status does not (the next attempt reports its own).
    const m = mj({ ...running, ...connectionError, phaseSeconds: { download: 99 } } as MediaJobStatus);
    const waiting = derive({ mj: m, job: failedJob(), pod: exited(10, { ...connectionError, phaseSeconds: phases }), admitted: true, jobName: runnerJobName(m) });
    expect(waiting.attempts!.at(-1)!.phaseSeconds, 'the pod\'s own report first').to.deep.equal(phases);
    expect(waiting).to.not.have.property('phaseSeconds');
    // A completion whose termination message has none: the runner's status patch has them.
    const all = { download: 3, mux: 0.25, upload: 1.5 };
    const done = derive({ mj: mj({ ...running, step: 'Uploading', phaseSeconds: all, result: { storageKey: 'k' } }), job: completeJob, pod: exited(0), admitted: true, jobName: 'x' });
    expect(done.status).to.equal('Completed');
    expect(done.attempts!.map((a) => a.phaseSeconds)).to.deep.equal([all]);
    // A termination message is nobody's checked input: what the CRD would refuse is dropped, not written.
    const odd = { download: -1, mux: 'slow', upload: 2, extra: 5 };
    const failed = derive({ mj: mj(running), job: failedJob(), pod: exited(10, { outcome: 'failed', error: 'x', category: 'processing_failed', phaseSeconds: odd }), admitted: true, jobName: 'x' });
    expect(failed.attempts!.map((a) => a.phaseSeconds)).to.deep.equal([{ upload: 2 }]);
    const none = derive({ mj: mj(running), job: failedJob(), pod: exited(10, { outcome: 'failed', error: 'x', category: 'processing_failed', phaseSeconds: { mux: null } }), admitted: true, jobName: 'x' });
    expect(none.attempts![0]).to.not.have.property('phaseSeconds');
  });

  it('waits the platform backoff after rate limiting, doubled on the next attempt', () => {
    const limited = { ...connectionError, error: 'The platform rate-limited the download', category: 'rate_limited' };
    const m = mj({ ...running, attempt: 2, attempts: [{ attempt: 1, jobName: 'a', outcome: 'Failed', category: 'rate_limited', retryAfterSeconds: 900 }] });
    const s = derive({ mj: m, job: failedJob(), pod: exited(10, limited), admitted: true, jobName: currentJobName(m) });
    expect(s).to.include({ status: 'Pending', attempt: 3, retryAt: '2026-11-21T10:29:40Z' });
    expect(s.attempts!.map((a) => [a.attempt, a.jobName, a.category, a.retryAfterSeconds])).to.deep.equal([
      [1, 'a', 'rate_limited', 900], [2, runnerJobName(m, 2), 'rate_limited', 1800],
    ]);
  });

  it('ends the job on the last attempt\'s failure, with every attempt recorded', () => {
    const m = mj({ ...running, attempt: 3, attempts: [
      { attempt: 1, jobName: 'a1', outcome: 'Failed', category: 'connection_error', retryAfterSeconds: 30 },
      { attempt: 2, jobName: 'a2', outcome: 'Failed', category: 'connection_error', retryAfterSeconds: 60 },
    ] });
    const s = derive({ mj: m, job: failedJob(), pod: exited(10, connectionError), admitted: true, jobName: currentJobName(m) });
    expect(s).to.include({ status: 'Failed', attempt: 3, error: 'Connection error while downloading the media', finishTime: '2026-11-21T09:59:40Z' });
    expect(s.retryAt).to.equal(undefined);
    expect(s.attempts!.map((a) => [a.attempt, a.outcome, a.retryAfterSeconds])).to.deep.equal([[1, 'Failed', 30], [2, 'Failed', 60], [3, 'Failed', undefined]]);
    expect(s.conditions!.find((c) => c.type === 'Succeeded')).to.include({ status: 'False', reason: 'Failed' });
  });

  it('never retries a timeout, a content warning, or a failure without a category; records each as the one attempt', () => {
    const timedOut = derive({ mj: mj(running), job: failedJob('DeadlineExceeded'), pod: terminatedPod({ exitCode: 143, reason: 'Error' }), admitted: true, jobName: 'x' });
    expect(timedOut).to.include({ status: 'Failed', reason: 'timeout' });
    expect(timedOut.attempts!.map((a) => [a.outcome, a.category])).to.deep.equal([['Failed', 'timeout']]);
    const warned = derive({ mj: mj(running), job: failedJob(), pod: exited(11, { outcome: 'warning', error: 'Video is private', errorType: 'warning', category: 'private' }), admitted: true, jobName: 'x' });
    expect(warned.status).to.equal('Warning');
    expect(warned.attempts!.map((a) => [a.outcome, a.category])).to.deep.equal([['Warning', 'private']]);
    const old = derive({ mj: mj(running), job: failedJob(), pod: exited(10, { outcome: 'failed', error: 'Connection error while downloading the media' }), admitted: true, jobName: 'x' });
    expect(old.status).to.equal('Failed');
    expect(old.attempts!.map((a) => a.category)).to.deep.equal(['unknown']);
  });

  it('takes no log line for a report: a runner killed after one line of log (FallbackToLogsOnError) is retried as the kill says', () => {
    // What the kubelet puts in the termination message of a killed runner that wrote no report: its last log lines, here one pino line, which parses as JSON.
    const message = JSON.stringify({ level: 30, time: 1764150000000, pid: 7, hostname: 'runner-pod', name: 'runner', msg: 'downloading' });
    for (const [reason, exitCode, category] of [['OOMKilled', 137, 'oom_killed'], ['Error', 137, 'evicted']] as const) {
      const s = derive({ mj: mj(running), job: failedJob(), pod: terminatedPod({ exitCode, reason, message }), admitted: true, jobName: 'x' });
      expect(s.attempts![0], reason).to.include({ category, retryAfterSeconds: 30 });
      expect(s).to.include({ status: 'Pending', reason: RETRY_SCHEDULED_REASON });
    }
  });

  it('retries a runner the cluster took away: OOM-killed, evicted, its node lost', () => {
    expect(derive({ mj: mj(running), job: failedJob(), pod: terminatedPod({ exitCode: 137, reason: 'OOMKilled' }), admitted: true, jobName: 'x' }).attempts![0])
      .to.include({ category: 'oom_killed', retryAfterSeconds: 30 });
    expect(derive({ mj: mj(running), job: failedJob(), pod: terminatedPod({ exitCode: 143, reason: 'Error' }, { reason: 'Evicted' }), admitted: true, jobName: 'x' }).attempts![0])
      .to.include({ category: 'evicted' });
    expect(derive({ mj: mj(running), job: failedJob(), admitted: true, jobName: 'x' }).attempts![0]).to.include({ category: 'node_lost' });
  });

  it('records the completed attempt; the next attempt\'s admission ends the wait', () => {
    const waiting: MediaJobStatus = {
      status: 'Pending', step: 'Queued', progress: 0, reason: RETRY_SCHEDULED_REASON, attempt: 2, retryAt: '2026-11-21T10:00:10Z', jobName: 'a1',
      attempts: [{ attempt: 1, jobName: 'a1', outcome: 'Failed', category: 'connection_error', retryAfterSeconds: 30 }],
    };
    const m = mj(waiting);
    const due = derive({ mj: m, admitted: false, jobName: currentJobName(m) }, new Date('2026-11-21T10:00:11Z'));
    expect(due).to.include({ status: 'Pending', attempt: 2 });
    expect(due.retryAt).to.equal(undefined);
    expect(due.reason, 'waits for a slot like any job').to.equal(undefined);
    const started = derive({ mj: m, job: { metadata: { name: 'y' }, status: {} }, admitted: true, jobName: currentJobName(m) }, new Date('2026-11-21T10:00:11Z'));
    expect(started).to.include({ status: 'Pending', jobName: runnerJobName(m, 2) });
    expect(started.retryAt).to.equal(undefined);
    expect(started.conditions!.find((c) => c.type === 'Admitted')).to.include({ status: 'True', reason: 'JobCreated' });
    const done = derive({
      mj: mj({ ...started, status: 'Processing', step: 'Uploading', result: { storageKey: 'videos/a.mp4', fileSize: 3 } }),
      job: completeJob, pod: exited(0), admitted: true, jobName: runnerJobName(m, 2),
    });
    expect(done).to.include({ status: 'Completed', attempt: 2 });
    expect(done.attempts!.map((a) => [a.attempt, a.jobName, a.outcome])).to.deep.equal([[1, 'a1', 'Failed'], [2, runnerJobName(m, 2), 'Completed']]);
  });

  it('leaves no wait in a cancelled or permanently failed status', () => {
    const waiting = mj({ status: 'Pending', attempt: 2, retryAt: '2026-11-21T10:00:10Z', reason: RETRY_SCHEDULED_REASON });
    expect(cancelledStatus(waiting, 'Cancelled', NOW)).to.not.have.property('retryAt');
    expect(failedBeforeRunning(waiting, { jobId: 'j', reason: 'storage_unreachable', error: 'e' }, NOW)).to.not.have.property('retryAt');
  });
});

describe('runner Jobs of attempts', () => {
  it('names each attempt\'s Job apart, keeps the first attempt\'s name, and tells the runner its attempt', () => {
    const m = mj({ attempt: 3 });
    expect(runnerJobName(m, 1)).to.equal(runnerJobName(m));
    expect(runnerJobName(m, 2)).to.equal(`${runnerJobName(m)}-a2`);
    expect(currentJobName(m)).to.equal(`${runnerJobName(m)}-a3`);
    expect(currentJobName(mj())).to.equal(runnerJobName(m));
    const job = buildRunnerJob(m, { image: 'i', backoffLimit: 0, activeDeadlineSeconds: 60, ttlSecondsAfterFinished: 0 }, 3);
    expect(job.metadata!.name).to.equal(`${runnerJobName(m)}-a3`);
    expect(job.metadata!.labels).to.include({ 'mediajobs.io/attempt': '3', 'mediajobs.io/mediajob': 'j1' });
    expect(job.spec!.template.spec!.containers[0]!.env!.find((e) => e.name === 'MEDIAJOB_ATTEMPT')!.value).to.equal('3');
    expect(runnerJobName(mj(), 10).length).to.be.at.most(63);
  });
});
