// The runner reports each step at the figures of the shared stage table
// (lib/src/mediajob/progress-stages.ts): where a step starts, and progress
// inside it that never reaches the next step's start, nor 100 before Finished.
// It times each step it enters, and its final report, a failure's too,
// carries those seconds (phaseSeconds: the operator's
// mediajobs_runner_phase_seconds).
import { expect } from 'chai';
import { pino } from 'pino';
import { STEP_SPANS } from '@mediajobs/lib/mediajob/progress-stages';
import type { StatusReporter } from '../src/report.js';
import { classification } from '../src/classify.js';
import { terminationMessage } from '../src/report.js';
import { JobSteps } from '../src/steps.js';

function recorder(now?: () => number) {
  const reports: string[] = [];
  const reporter = {
    setStep: async (step: string, progress: number) => { reports.push(`${step} ${progress}`); },
    setProgress: (progress: number) => { reports.push(`${progress}`); },
  } as unknown as StatusReporter;
  return { reports, steps: new JobSteps(reporter, pino({ level: 'silent' }), now) };
}

describe('runner steps and the stage table', () => {
  it('enters each step at its start figure', () => {
    const { reports, steps } = recorder();
    steps.enter('Downloading');
    steps.enter('Muxing');
    steps.enter('Uploading');
    steps.enter('Finished');
    expect(reports).to.deep.equal([`Downloading ${STEP_SPANS.Downloading.start}`, `Muxing ${STEP_SPANS.Muxing.start}`, `Uploading ${STEP_SPANS.Uploading.start}`]);
    expect(steps.progress).to.equal(100);
  });

  it('reports progress within a step\'s span, never going back', () => {
    const { reports, steps } = recorder();
    steps.enter('Downloading');
    const download = steps.withinStep('Downloading');
    download(0.5);
    download(0.25);
    download(1);
    expect(reports).to.deep.equal(['Downloading 0', '16', '16', '33']);
    steps.enter('Uploading');
    steps.withinStep('Uploading')(1);
    expect(steps.progress).to.equal(99);
  });

  describe('the download in bytes (status.download)', () => {
    /** A reporter that keeps each patch's download figures. */
    function figures(now: () => number) {
      const seen: { step?: string; download?: unknown }[] = [];
      const reporter = {
        setStep: async (step: string, _p: number, extra: { download?: unknown } = {}) => { seen.push({ step, ...('download' in extra && { download: extra.download }) }); },
        setProgress: (_p: number, download?: unknown) => { if (download) seen.push({ download }); },
      } as unknown as StatusReporter;
      return { seen, steps: new JobSteps(reporter, pino({ level: 'silent' }), now) };
    }

    it('bytes at once, a speed once a second has passed, a time left with the total; bytes only once the step moves on', () => {
      let t = 0;
      const { seen, steps } = figures(() => t);
      steps.enter('Downloading');
      const read = steps.withinStep('Downloading');
      read(0.1, { downloaded: 100_000, total: 1_000_000 });
      t = 2000;
      read(0.3, { downloaded: 300_000, total: 1_000_000 });
      t = 2500;
      read(0.3, { downloaded: 250_000, total: 1_000_000 }); // a retried fragment: never fewer bytes than said
      steps.enter('Muxing');
      expect(seen).to.deep.equal([
        { step: 'Downloading' },
        { download: { downloadedBytes: 100_000, totalBytes: 1_000_000 } },
        { download: { downloadedBytes: 300_000, totalBytes: 1_000_000, speedBps: 100_000, etaSeconds: 7 } },
        { download: { downloadedBytes: 300_000, totalBytes: 1_000_000, speedBps: 80_000, etaSeconds: 9 } },
        { step: 'Muxing', download: { downloadedBytes: 300_000, totalBytes: 1_000_000 } },
      ]);
    });

    it('no total, no time left; nonsense is left out; other steps report no bytes; back at Downloading starts over', () => {
      let t = 0;
      const { seen, steps } = figures(() => t);
      steps.enter('Downloading');
      steps.withinStep('Downloading')(0, { downloaded: 10, total: Number.NaN });
      t = 1500;
      steps.withinStep('Downloading')(0, { downloaded: 1510 });
      steps.enter('Muxing');
      steps.withinStep('Muxing')(0.5, { downloaded: 5 });
      steps.enter('Downloading');
      expect(seen).to.deep.equal([
        { step: 'Downloading' },
        { download: { downloadedBytes: 10 } },
        { download: { downloadedBytes: 1510, speedBps: 1000 } },
        { step: 'Muxing', download: { downloadedBytes: 1510 } },
        { step: 'Downloading', download: null },
      ]);
    });

    it('a failure\'s report carries the tool\'s cause, cleaned; none without one', () => {
      const { steps } = recorder();
      steps.enter('Muxing');
      const stderr = '[mov,mp4,m4a,3gp,3g2,mj2 @ 0x55d0c1e2a9c0] moov atom not found\nhttps://h.example/v.mp4?sig=x: Invalid data found when processing input';
      expect(steps.fail(classification('processing_failed'), { tool: 'ffmpeg', stderr }).errorDetail).to.equal('[mov,mp4,m4a,3gp,3g2,mj2] moov atom not found');
      expect(steps.fail(classification('upload_failed'), { err: { message: 'PUT https://b.example/k?X-Amz-Signature=s failed: 503' } }).errorDetail)
        .to.equal('PUT <url> failed: 503');
      expect(steps.fail(classification('unavailable'), { why: 'no format selected' })).to.not.have.property('errorDetail');
    });

    it('a failure\'s cause names the job\'s source and no other host: a proxy\'s URL and address are masked', () => {
      const reporter = { setStep: async () => undefined, setProgress: () => undefined } as unknown as StatusReporter;
      const steps = new JobSteps(reporter, pino({ level: 'silent' }), undefined, 'http://127.0.0.1:8123/media/v.mp4?t=1');
      steps.enter('Downloading');
      const stderr = 'ERROR: Unable to download http://127.0.0.1:8123/media/v.mp4: HTTP Error 407 via http://egress-7.mediajobs-system.svc.cluster.local:3128 (10.42.0.17)';
      expect(steps.fail(classification('connection_error'), { tool: 'yt-dlp', stderr }).errorDetail)
        .to.equal('ERROR: Unable to download http://127.0.0.1:8123/media/v.mp4: HTTP Error 407 via <url> (<host>)');
    });
  });

  describe('phase seconds', () => {
    /** A clock the test moves: ms since the start. */
    function clock() {
      let t = 1000;
      return { now: () => t, pass: (ms: number) => (t += ms) };
    }

    it('times each step until the next one, in seconds to the millisecond; Finished stops the clock', () => {
      const c = clock();
      const { steps } = recorder(c.now);
      expect(steps.phaseSeconds(), 'before any step').to.deep.equal({});
      steps.enter('Downloading');
      c.pass(12_345.4);
      steps.enter('Muxing');
      c.pass(700);
      steps.enter('Uploading');
      c.pass(2_000.6);
      steps.enter('Finished');
      c.pass(60_000);
      expect(steps.phaseSeconds()).to.deep.equal({ download: 12.345, mux: 0.7, upload: 2.001 });
    });

    it('adds up a step entered again (a direct read that falls back to a download)', () => {
      const c = clock();
      const { steps } = recorder(c.now);
      steps.enter('Downloading');
      c.pass(1000);
      steps.enter('Muxing');
      c.pass(250);
      steps.enter('Downloading');
      c.pass(3000);
      steps.enter('Muxing');
      c.pass(500);
      steps.enter('Uploading');
      c.pass(100);
      steps.enter('Finished');
      expect(steps.phaseSeconds()).to.deep.equal({ download: 4, mux: 0.75, upload: 0.1 });
    });

    it('a failure reports the phases it went through, the current one up to the failure', () => {
      const c = clock();
      const { steps } = recorder(c.now);
      steps.enter('Downloading');
      c.pass(4000);
      steps.enter('Muxing');
      c.pass(1500);
      const report = steps.fail(classification('processing_failed'));
      expect(report).to.include({ outcome: 'failed', step: 'Muxing', category: 'processing_failed' });
      expect(report.phaseSeconds).to.deep.equal({ download: 4, mux: 1.5 });
      // A failure before anything else (the destination unusable): the download's few milliseconds.
      const early = recorder(c.now).steps;
      early.enter('Downloading');
      c.pass(3);
      expect(early.fail(classification('storage_unreachable')).phaseSeconds).to.deep.equal({ download: 0.003 });
    });

    it('the termination message keeps them, even when it must be cut down to its essentials', () => {
      const phaseSeconds = { download: 1.5, mux: 0.25, upload: 3 };
      expect(JSON.parse(terminationMessage({ outcome: 'failed', error: 'x', phaseSeconds })).phaseSeconds).to.deep.equal(phaseSeconds);
      const huge = { outcome: 'completed' as const, result: { storageKey: 'k'.repeat(5000) }, phaseSeconds };
      expect(JSON.parse(terminationMessage(huge))).to.deep.include({ outcome: 'completed', phaseSeconds });
    });
  });
});
