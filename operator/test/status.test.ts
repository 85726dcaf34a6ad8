// The status rules: what a MediaJob's status is for each state of its Job,
// pod and runner report, and which webhooks each transition announces.
import { expect } from 'chai';
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import type { MediaJob, MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import { WAIT_FOR_POD, deriveStatus, rowEndedStatus, statusChanged, type Observed } from '../src/status.js';
import { cancelledStatus } from '../src/cancellation.js';
import { orphanedFiles } from '../src/stored-files.js';
import { eventsFor, progressEvents } from '../src/webhook-events.js';
import { eventId } from '@mediajobs/lib/db/outbox';
import { buildRunnerJob, runnerJobName } from '../src/job-builder.js';
import { DEFAULT_RUNNER_RESOURCES, loadOperatorConfig } from '../src/config.js';
import { ConfigError } from '@mediajobs/lib/config';

const NOW = new Date('2026-11-21T10:00:00Z');

function derive(o: Observed, now: Date): MediaJobStatus {
  const s = deriveStatus(o, now);
  if (s === WAIT_FOR_POD) throw new Error('unexpected wait');
  return s;
}

function mj(status?: MediaJobStatus): MediaJob {
  return {
    apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob',
    metadata: { name: 'j1', namespace: 'default', uid: 'uid-1', generation: 1, creationTimestamp: '2026-11-21T09:59:00Z' },
    spec: {
      jobId: '0b7c0f5e-1111-4222-8333-944445555666', owner: { apiKeyId: 'k' }, url: 'http://m/a.mp4', destination: { type: 'managed' },
      format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
      downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false,
      enableProgressWebhook: false, webhookUrl: 'https://hooks.example/secret-path',
    },
    status,
  };
}

const job = (cond?: { type: string; reason?: string }): V1Job => ({
  metadata: { name: 'x' },
  status: cond ? { conditions: [{ type: cond.type, status: 'True', reason: cond.reason }], startTime: new Date('2026-11-21T09:59:10Z'), completionTime: cond.type === 'Complete' ? new Date('2026-11-21T09:59:40Z') : undefined } : {},
});

const pod = (phase: string, exitCode?: number, message?: string): V1Pod => ({
  metadata: { name: 'p' },
  status: {
    phase, startTime: new Date('2026-11-21T09:59:12Z'),
    containerStatuses: exitCode === undefined ? [] : [{ name: 'runner', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode, message } } }],
  },
});

describe('MediaJob status derivation', () => {
  it('waits as Pending/Queued while not admitted', () => {
    const s = derive({ mj: mj(), admitted: false, jobName: 'mj-x' }, NOW);
    expect(s).to.include({ status: 'Pending', step: 'Queued', progress: 0 });
    expect(s.jobName).to.equal(undefined);
    expect(s.conditions!.find((c) => c.type === 'Admitted')).to.include({ status: 'False', reason: 'WaitingForCapacity', observedGeneration: 1 });
  });

  it('is Processing once the runner pod runs or has reported a step', () => {
    expect(derive({ mj: mj(), job: job(), pod: pod('Running'), admitted: true, jobName: 'mj-x' }, NOW).status).to.equal('Processing');
    expect(derive({ mj: mj({ step: 'Muxing', progress: 40 }), job: job(), admitted: true, jobName: 'mj-x' }, NOW))
      .to.include({ status: 'Processing', step: 'Muxing', progress: 40 });
  });

  it('is Completed with the result when the Job completes, taking the result from the termination message if the status lacks it', () => {
    const report = JSON.stringify({ outcome: 'completed', result: { storageKey: 'videos/a.mp4', fileSize: 10 } });
    const s = derive({ mj: mj({ status: 'Processing', step: 'Uploading' }), job: job({ type: 'Complete' }), pod: pod('Succeeded', 0, report), admitted: true, jobName: 'mj-x' }, NOW);
    expect(s).to.include({ status: 'Completed', step: 'Finished', progress: 100, finishTime: '2026-11-21T09:59:40Z' });
    expect(s.result).to.deep.equal({ storageKey: 'videos/a.mp4', fileSize: 10 });
    expect(s.conditions!.find((c) => c.type === 'Succeeded')).to.include({ status: 'True' });
  });

  it('maps runner exit codes: 10 Failed (error), 11 Warning (warning), 12 Skipped', () => {
    const failed = derive({ mj: mj(), job: job({ type: 'Failed', reason: 'BackoffLimitExceeded' }), pod: pod('Failed', 10, JSON.stringify({ error: 'Connection error while downloading the media', reason: 'connection_error' })), admitted: true, jobName: 'x' }, NOW);
    expect(failed).to.include({ status: 'Failed', errorType: 'error', error: 'Connection error while downloading the media', reason: 'connection_error' });
    const warning = derive({ mj: mj(), job: job({ type: 'Failed' }), pod: pod('Failed', 11, JSON.stringify({ error: 'Video is private' })), admitted: true, jobName: 'x' }, NOW);
    expect(warning).to.include({ status: 'Warning', errorType: 'warning', error: 'Video is private' });
    const skipped = derive({ mj: mj(), job: job({ type: 'Failed' }), pod: pod('Failed', 12, JSON.stringify({ reason: 'drm_protected' })), admitted: true, jobName: 'x' }, NOW);
    expect(skipped).to.include({ status: 'Skipped', reason: 'drm_protected' });
  });

  it('reports a deadline as a timeout, and a crash without a report as a processing failure', () => {
    expect(derive({ mj: mj(), job: job({ type: 'Failed', reason: 'DeadlineExceeded' }), pod: pod('Failed', 137), admitted: true, jobName: 'x' }, NOW))
      .to.include({ status: 'Failed', error: 'Processing timed out', reason: 'timeout' });
    expect(derive({ mj: mj(), job: job({ type: 'Failed' }), pod: pod('Failed', 1, 'Traceback: /tmp/x at 10.0.0.1'), admitted: true, jobName: 'x' }, NOW))
      .to.include({ status: 'Failed', error: 'Processing failed' });
  });

  it('waits for the pod\'s exit code when the Job\'s verdict arrives first, then falls back to the runner\'s report', () => {
    const failedJob = job({ type: 'Failed' });
    failedJob.status!.conditions![0]!.lastTransitionTime = new Date(NOW.getTime() - 2000);
    const o = { mj: mj({ status: 'Processing', errorType: 'warning', error: 'Video is private' }), job: failedJob, pod: pod('Running'), admitted: true, jobName: 'x' };
    expect(deriveStatus(o, NOW)).to.equal(WAIT_FOR_POD);
    expect(derive(o, new Date(NOW.getTime() + 20_000))).to.include({ status: 'Warning', errorType: 'warning', error: 'Video is private' });
  });

  it('does not judge a finished Job by a pod cache that stopped following the API server, nor for a while after it follows again', () => {
    // The runner finished and reported while the API server was away: the Job's verdict is old, the cached pod still runs.
    const done = job({ type: 'Complete' });
    const o = { mj: mj({ status: 'Processing', step: 'Downloading' }), job: done, pod: pod('Running'), admitted: true, jobName: 'x' };
    expect(deriveStatus({ ...o, podsFollowingSince: 'down' }, NOW), 'cache down').to.equal(WAIT_FOR_POD);
    expect(deriveStatus({ ...o, pod: undefined, podsFollowingSince: 'down' }, NOW), 'cache down, no pod in it').to.equal(WAIT_FOR_POD);
    expect(deriveStatus({ ...o, podsFollowingSince: NOW.getTime() - 2000 }, NOW), 'relisted just now').to.equal(WAIT_FOR_POD);
    const report = JSON.stringify({ outcome: 'completed', result: { storageKey: 'videos/a.mp4', fileSize: 10 } });
    expect(derive({ ...o, pod: pod('Succeeded', 0, report), podsFollowingSince: NOW.getTime() - 2000 }, NOW), 'the relisted pod')
      .to.include({ status: 'Completed' });
    // Following for longer than the grace and the pod still shows no exit code: concluded without it.
    expect(derive({ ...o, podsFollowingSince: NOW.getTime() - 20_000 }, NOW), 'following for long')
      .to.include({ status: 'Failed', error: 'Processing failed: no result was reported' });
    expect(derive({ ...o, pod: undefined, podsFollowingSince: NOW.getTime() - 20_000 }, NOW), 'no pod, cache following')
      .to.include({ status: 'Failed' });
  });

  it('ends an attempt by leaving out the files it stored: those the result names stay the job\'s, the rest nobody\'s', () => {
    const stored = { 'videos/a.mp4': 10, 'videos/a.en.vtt': 2, 'videos/a.jpg': 3 };
    const running = mj({ status: 'Processing', step: 'Uploading', storedFiles: stored });
    const o = { mj: running, admitted: true, jobName: 'x', retry: { maxAttempts: 3, backoffSeconds: 1, platformBackoffSeconds: 60, maxBackoffSeconds: 8 } };
    // While it runs, a status write keeps them: nothing is anybody's to delete.
    const processing = derive({ ...o, job: job(), pod: pod('Running') }, NOW);
    expect(processing.storedFiles).to.deep.equal(stored);
    expect(orphanedFiles(running.status, processing)).to.deep.equal([]);
    // Completed naming the media and the subtitles: the thumbnail it stored and did not report is nobody's.
    const report = JSON.stringify({ outcome: 'completed', result: { storageKey: 'videos/a.mp4', fileSize: 10, subtitleKey: 'videos/a.en.vtt' } });
    const completed = derive({ ...o, job: job({ type: 'Complete' }), pod: pod('Succeeded', 0, report) }, NOW);
    expect(completed).to.include({ status: 'Completed' }).and.not.have.property('storedFiles');
    expect(orphanedFiles(running.status, completed)).to.deep.equal(['videos/a.jpg']);
    // Killed by the node after storing (137, no report): waits for its next attempt, and all it stored is nobody's.
    const killed = derive({ ...o, job: job({ type: 'Failed' }), pod: pod('Failed', 137) }, NOW);
    expect(killed).to.include({ status: 'Pending', reason: 'retry_scheduled', attempt: 2 }).and.not.have.property('storedFiles');
    expect(orphanedFiles(running.status, killed)).to.deep.equal(Object.keys(stored));
    // Failed for good, and cancelled: the same.
    const failed = derive({ ...o, retry: undefined, job: job({ type: 'Failed' }), pod: pod('Failed', 10, JSON.stringify({ error: 'Upload failed' })) }, NOW);
    expect(failed).to.include({ status: 'Failed' }).and.not.have.property('storedFiles');
    expect(orphanedFiles(running.status, failed)).to.deep.equal(Object.keys(stored));
    const cancelled = cancelledStatus(running, 'Cancelled', NOW);
    expect(cancelled).not.to.have.property('storedFiles');
    expect(orphanedFiles(running.status, cancelled)).to.deep.equal(Object.keys(stored));
    // A file stored after the cancellation was written (a late patch) makes the cancelled status change again.
    expect(cancelledStatus(mj({ ...cancelled, storedFiles: { 'videos/late.mp4': 1 } }), 'Cancelled', NOW)).not.to.have.property('storedFiles');
  });

  it('takes a row\'s outcome when the row ended first: what it delivered stays, the rest of what was stored is nobody\'s', () => {
    const stored = { 'videos/a.mp4': 10, 'videos/a.jpg': 3 };
    const attempts = [{ attempt: 1, jobName: 'j1-runner', outcome: 'Failed' as const, category: 'oom_killed' }];
    const running = mj({
      status: 'Pending', step: 'Queued', progress: 0, jobName: 'j1-runner', startTime: '2026-11-21T09:59:12Z', attempt: 2, attempts,
      retryAt: '2026-11-21T10:00:08Z', reason: 'retry_scheduled', storedFiles: stored,
    });
    const rec = {
      id: 'row-1', status: 'Completed' as const, step: 'Finished', error: null, error_type: null, reason: null, s3_key: 'videos/a.mp4', file_size: '10',
      actual_quality: '240p', title: 'A', description: null, release_date: null, subtitle_key: null, thumbnail_key: null,
      started_at: new Date('2026-11-21T09:59:30Z'), finished_at: new Date('2026-11-21T09:59:50Z'),
    };
    const s = rowEndedStatus(running, rec, NOW);
    expect(s).to.include({ status: 'Completed', step: 'Finished', progress: 100, jobName: 'j1-runner', startTime: '2026-11-21T09:59:12Z', finishTime: '2026-11-21T09:59:50Z' });
    expect(s.result).to.deep.equal({ storageKey: 'videos/a.mp4', fileSize: 10, actualQuality: '240p', title: 'A' });
    expect(s.attempts).to.deep.equal(attempts);
    for (const gone of ['retryAt', 'reason', 'storedFiles', 'restoredTime']) expect(s).not.to.have.property(gone);
    expect(s.conditions!.map((c) => [c.type, c.status, c.reason])).to.deep.equal([
      ['Admitted', 'True', 'JobCreated'], ['Running', 'False', 'Finished'], ['Succeeded', 'True', 'Completed'],
    ]);
    expect(orphanedFiles(running.status, s)).to.deep.equal(['videos/a.jpg']);
    // A row that ended Failed delivered nothing: all that was stored is nobody's.
    const failed = rowEndedStatus(running, { ...rec, status: 'Failed', step: 'Downloading', s3_key: null, error: 'Processing failed', error_type: 'error' }, NOW);
    expect(failed).to.include({ status: 'Failed', error: 'Processing failed', errorType: 'error' }).and.not.have.property('result');
    expect(orphanedFiles(running.status, failed)).to.deep.equal(Object.keys(stored));
  });

  it('never moves a terminal status', () => {
    const done: MediaJobStatus = { status: 'Completed', step: 'Finished', progress: 100 };
    expect(derive({ mj: mj(done), job: job({ type: 'Failed' }), admitted: true, jobName: 'x' }, NOW)).to.equal(done);
  });

  it('treats a change of condition times alone as no change', () => {
    const a = derive({ mj: mj(), admitted: false, jobName: 'x' }, NOW);
    const b = derive({ mj: mj(), admitted: false, jobName: 'x' }, new Date(NOW.getTime() + 5000));
    expect(statusChanged(a, b)).to.equal(false);
    expect(statusChanged(a, { ...b, step: 'Downloading' })).to.equal(true);
  });
});

describe('webhook events of a transition', () => {
  const row = { id: 'job-1', api_key_id: 'k', url: 'http://m/a.mp4', status: 'Pending', webhook_url_enc: 'sealed', options: {}, cr_namespace: 'default', cr_name: 'job-1' };

  it('announces processing, then completion with the documented fields', () => {
    expect(eventsFor('Pending', { status: 'Processing' }, row, mj(), {}).map((e) => e.type)).to.deep.equal(['job_processing']);
    const [e] = eventsFor('Processing', { status: 'Completed', result: { storageKey: 'videos/a.mp4', fileSize: 3, title: 'T' } }, row, mj(), { s3Url: 'http://dl/a' });
    expect(e!.payload).to.deep.equal({
      type: 'job_completed', job_id: 'job-1', url: 'http://m/a.mp4', status: 'completed', key: 'videos/a.mp4', s3_url: 'http://dl/a',
      folder: null, title: 'T', description: null, release_date: null, subtitle_key: null, thumbnail_key: null,
    });
  });

  it('sends job_processing before a terminal event when the job never showed Processing', () => {
    expect(eventsFor('Pending', { status: 'Failed', error: 'x' }, row, mj(), {}).map((e) => e.type)).to.deep.equal(['job_processing', 'job_failed']);
  });

  it('sends no job_failed for a content warning, but job_warning (ADR 0029), with the cause cleaned again', () => {
    expect(eventsFor('Processing', { status: 'Warning', errorType: 'warning', error: 'Video is private' }, row, mj(), {})).to.deep.equal([{
      type: 'job_warning', payload: { type: 'job_warning', job_id: row.id, url: row.url, status: 'warning', error: 'Video is private' },
    }]);
    const [e] = eventsFor('Processing', {
      status: 'Warning', errorType: 'warning', error: 'Video is private',
      errorDetail: 'ERROR: http://m/a.mp4?token=t is private at /var/x via https://h.example/v?token=t and 10.42.0.17:3128',
    }, row, mj(), {});
    // The source (row.url's host) is named; another host's URL and a proxy's address are not (no infrastructure detail).
    expect(e!.payload.error_detail).to.equal('ERROR: http://m/a.mp4?… is private at <path> via <url> and <host>');
    const [f] = eventsFor('Processing', { status: 'Failed', error: 'x', errorDetail: 'ERROR: 407 from egress.mediajobs-system.svc (fd00::17)' }, row, mj(), {});
    expect(f!.payload.error_detail).to.equal('ERROR: 407 from <host> (<host>)');
  });

  it('progress events carry the download\'s figures: all of them at the current step, the final bytes at earlier ones', () => {
    const download = { downloadedBytes: 400, totalBytes: 1000, speedBps: 100, etaSeconds: 6 };
    const reading = progressEvents({ status: 'Processing', step: 'Downloading', progress: 10, download }, row);
    expect(reading.map((e) => e.payload)).to.deep.equal([{
      type: 'progress', job_id: row.id, url: row.url, stage: 'downloading', progress_percent: 0,
      downloaded_bytes: 400, total_bytes: 1000, speed_bps: 100, eta_seconds: 6,
    }]);
    const muxing = progressEvents({ status: 'Processing', step: 'Muxing', progress: 40, download: { downloadedBytes: 1000, totalBytes: 1000 } }, row);
    expect(muxing.map((e) => [e.payload.stage, e.payload.downloaded_bytes, e.payload.speed_bps])).to.deep.equal([
      ['downloading', 1000, undefined], ['download_complete', 1000, undefined], ['muxing', 1000, undefined],
    ]);
    const unknown = progressEvents({ status: 'Processing', step: 'Downloading', progress: 0, download: { downloadedBytes: -1 } }, row);
    expect(unknown[0]!.payload).to.not.have.any.keys('downloaded_bytes', 'total_bytes', 'speed_bps', 'eta_seconds');
  });

  it('adds subtitle_url and thumbnail_url only when their keys exist', () => {
    const [e] = eventsFor('Processing', { status: 'Completed', result: { storageKey: 'a', fileSize: 1, subtitleKey: 's.vtt' } }, row, mj(), { subtitleUrl: 'http://s' });
    expect(e!.payload).to.include({ subtitle_key: 's.vtt', subtitle_url: 'http://s' });
    expect(e!.payload).to.not.have.property('thumbnail_url');
  });

  it('gives each job and event type one stable UUID', () => {
    expect(eventId('job-1', 'job_completed')).to.equal(eventId('job-1', 'job_completed'));
    expect(eventId('job-1', 'job_completed')).to.not.equal(eventId('job-1', 'job_failed'));
    expect(eventId('job-1', 'job_completed')).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});

describe('runner Job', () => {
  it('has a deterministic name within 63 characters and no webhook address in the pod', () => {
    const m = mj();
    expect(runnerJobName(m)).to.equal(runnerJobName(mj()));
    expect(runnerJobName(m)).to.match(/^mj-0b7c0f5e-[0-9a-f]{10}$/);
    const job = buildRunnerJob(m, { image: 'mediajobs/runner:dev', backoffLimit: 0, activeDeadlineSeconds: 60, ttlSecondsAfterFinished: 0 });
    expect(JSON.stringify(job)).to.not.include('secret-path');
    expect(job.metadata!.ownerReferences![0]).to.include({ kind: 'MediaJob', uid: 'uid-1', controller: true });
    const env = job.spec!.template.spec!.containers[0]!.env!;
    expect(env.find((e) => e.name === 'MEDIAJOB_JOB_ID')!.value).to.equal('0b7c0f5e-1111-4222-8333-944445555666');
  });

  it('runs hardened as the image\'s user, who can read the credentials and write only the work volume', () => {
    const settings = { image: 'mediajobs/runner:dev', backoffLimit: 0, activeDeadlineSeconds: 60, ttlSecondsAfterFinished: 0 };
    const pod = buildRunnerJob(mj(), { ...settings, resources: { limits: { 'ephemeral-storage': '8Gi' } } }).spec!.template.spec!;
    const c = pod.containers[0]!;
    expect(pod.securityContext).to.deep.equal({
      runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(c.securityContext).to.deep.equal({
      allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] }, runAsNonRoot: true,
    });
    // The Secret's files are root:<fsGroup> on a kubelet: the group bit is what lets uid 1000 read them.
    const credentials = pod.volumes!.find((v) => v.name === 'credentials')!.secret!;
    expect(credentials.defaultMode! & 0o040, 'group-readable').to.equal(0o040);
    expect(credentials.defaultMode! & 0o007, 'nothing for others').to.equal(0);
    // The only writable place, sized by the ephemeral-storage limit, and HOME for yt-dlp's cache.
    expect(pod.volumes!.find((v) => v.name === 'work')!.emptyDir).to.deep.equal({ sizeLimit: '8Gi' });
    expect(c.volumeMounts!.find((m) => m.name === 'work')!.mountPath).to.equal('/tmp');
    expect(c.env!.find((e) => e.name === 'HOME')!.value).to.equal('/tmp');
    expect(buildRunnerJob(mj(), settings).spec!.template.spec!.volumes!.find((v) => v.name === 'work')!.emptyDir).to.deep.equal({ sizeLimit: '20Gi' });
  });

  it('gets no Service environment variables: the namespace\'s Services (the gateway, its metrics) are not listed to the runner', () => {
    const settings = { image: 'mediajobs/runner:dev', backoffLimit: 0, activeDeadlineSeconds: 60, ttlSecondsAfterFinished: 0 };
    expect(buildRunnerJob(mj(), settings).spec!.template.spec!.enableServiceLinks).to.equal(false);
  });
});

describe('operator settings for runner pods', () => {
  const base = { DATABASE_URL: 'postgres://x@127.0.0.1/db' };

  it('RUNNER_RESOURCES and RUNNER_ENV are JSON read at start; a bad value names its variable and not its content', () => {
    const cfg = loadOperatorConfig({ ...base, RUNNER_RESOURCES: '{"requests":{"cpu":"500m","memory":"1Gi"},"limits":{"cpu":"4"}}', RUNNER_ENV: '{"HTTPS_PROXY":"http://proxy:3128"}' });
    expect(cfg.RUNNER_RESOURCES).to.deep.equal({ requests: { cpu: '500m', memory: '1Gi' }, limits: { cpu: '4' } });
    expect(cfg.RUNNER_ENV).to.deep.equal({ HTTPS_PROXY: 'http://proxy:3128' });
    expect(loadOperatorConfig(base).RUNNER_RESOURCES).to.deep.equal(DEFAULT_RUNNER_RESOURCES);
    const bad = (env: Record<string, string>) => {
      try {
        loadOperatorConfig({ ...base, ...env });
      } catch (err) {
        expect(err).to.be.instanceOf(ConfigError);
        return (err as Error).message;
      }
      return expect.fail('expected a ConfigError');
    };
    expect(bad({ RUNNER_RESOURCES: '{requests: secret-ish' })).to.match(/RUNNER_RESOURCES: must be JSON/).and.not.include('secret-ish');
    expect(bad({ RUNNER_RESOURCES: '{"limits":{"memory":"lots"}}' })).to.match(/RUNNER_RESOURCES\.limits\.memory: must be a Kubernetes quantity/);
    expect(bad({ RUNNER_RESOURCES: '{"limits":{"gpu":"1"}}' })).to.include('RUNNER_RESOURCES');
    expect(bad({ RUNNER_ENV: '{"A":1}' })).to.include('RUNNER_ENV.A');
    expect(bad({ RUNNER_ENV: '["A=1"]' })).to.include('RUNNER_ENV');
  });
});
