// The metrics' error category (lib/src/metrics.ts errorCategory) is read
// from the runner's fixed error phrase: every category's phrase, and a key
// limit's with its numbers after it, must name its own category.
import { expect } from 'chai';
import { errorCategory } from '@mediajobs/lib/metrics';
import { MESSAGES, type ErrorCategory } from '../src/classify.js';

describe('runner: error categories in the metrics', () => {
  it('reads every category back from its phrase', () => {
    for (const [category, phrase] of Object.entries(MESSAGES) as [ErrorCategory, string][]) {
      expect(errorCategory({ status: 'Failed', error: phrase }), phrase).to.equal(category);
      expect(errorCategory({ status: 'Warning', error: `${phrase} (limit 600 s, the media is 900 s)` })).to.equal(category);
    }
    expect(errorCategory({ status: 'Completed' })).to.equal('none');
    expect(errorCategory({ status: 'Failed', error: 'Processing timed out', reason: 'timeout' })).to.equal('timeout');
    // A spec's problems name its fields, not a phrase: the reason says it.
    expect(errorCategory({ status: 'Failed', error: 'spec.clipEnd: must be greater than clipStart', reason: 'invalid_spec' })).to.equal('invalid_spec');
    expect(errorCategory({ status: 'Failed', error: 'anything a hand-written status says' })).to.equal('other');
  });
});
