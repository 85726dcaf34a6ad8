// The progress table runner and operator share: stages sit where the steps
// start and end, and which stages a runner's step and progress have reached.
import { expect } from 'chai';
import { COMPLETED_PERCENT, PROGRESS_STAGES, STEP_SPANS, stagesReachedAt } from '../src/mediajob/progress-stages.js';

describe('progress stages', () => {
  it('are the spec\'s stages and percents, each at its step\'s start or end', () => {
    expect(PROGRESS_STAGES.map((s) => `${s.stage}:${s.percent}`)).to.deep.equal([
      'downloading:0', 'download_complete:33', 'muxing:33', 'mux_complete:66', 'uploading:66',
    ]);
    for (const s of PROGRESS_STAGES) expect(s.percent, s.stage).to.equal(STEP_SPANS[s.step][s.at]);
  });

  it('steps follow each other without gaps, and only a delivered job shows 100', () => {
    expect(STEP_SPANS.Downloading.end).to.equal(STEP_SPANS.Muxing.start);
    expect(STEP_SPANS.Muxing.end).to.equal(STEP_SPANS.Uploading.start);
    expect(STEP_SPANS.Uploading.end).to.be.below(COMPLETED_PERCENT);
  });

  it('a step\'s start stage is reached on entering it, its end stage at the end of its span or in any later step', () => {
    const reached = (step: Parameters<typeof stagesReachedAt>[0], progress?: number) =>
      PROGRESS_STAGES.slice(0, stagesReachedAt(step, progress)).map((s) => s.stage);
    expect(reached(undefined)).to.deep.equal([]);
    expect(reached('Queued', 0)).to.deep.equal([]);
    expect(reached('Downloading', 32)).to.deep.equal(['downloading']);
    expect(reached('Downloading', 33)).to.deep.equal(['downloading', 'download_complete']);
    expect(reached('Muxing')).to.deep.equal(['downloading', 'download_complete', 'muxing']);
    expect(reached('Muxing', 66)).to.have.length(4);
    expect(reached('Uploading', 66)).to.have.length(5);
    expect(reached('Finished', 100)).to.have.length(5);
  });
});
