// The runner reports each step at the figures of the shared stage table
// (lib/src/mediajob/progress-stages.ts): where a step starts, and progress
// inside it that never reaches the next step's start, nor 100 before Finished.
import { expect } from 'chai';
import { pino } from 'pino';
import { STEP_SPANS } from '@mediajobs/lib/mediajob/progress-stages';
import type { StatusReporter } from '../src/report.js';
import { JobSteps } from '../src/steps.js';

function recorder() {
  const reports: string[] = [];
  const reporter = {
    setStep: async (step: string, progress: number) => { reports.push(`${step} ${progress}`); },
    setProgress: (progress: number) => { reports.push(`${progress}`); },
  } as unknown as StatusReporter;
  return { reports, steps: new JobSteps(reporter, pino({ level: 'silent' })) };
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
});
