// Which job endings notify the chat at which level, in which colour, and
// what the message may say (spec: POST /user/chat, notification rules).
import { expect } from 'chai';
import { CHAT_COLORS, chatNotification, sanitisedCategory, type EndedJob, type NotifyLevel } from '../src/chat/notification.js';
import type { JobStatus } from '../src/mediajob/types.js';

const job = (status: JobStatus, patch: Partial<EndedJob> = {}): EndedJob => ({
  id: '0190a0b0-0000-7000-8000-000000000001', status, url: 'https://www.youtube.com/watch?v=abcdefghijk', ...patch,
});

describe('lib: chat notifications', () => {
  const failed = job('Failed', { errorType: 'error', error: 'The platform rate-limited the download' });
  const warned = job('Warning', { errorType: 'warning', error: 'Video is private' });

  const table: [NotifyLevel, EndedJob, string | undefined][] = [
    ['all', failed, CHAT_COLORS.error],
    ['errors_only', failed, CHAT_COLORS.error],
    ['warnings_only', failed, undefined],
    ['all', warned, CHAT_COLORS.warning],
    ['warnings_only', warned, CHAT_COLORS.warning],
    ['errors_only', warned, undefined],
  ];
  for (const [level, ended, color] of table) {
    it(`${ended.status} at level ${level}: ${color ? `notifies in ${color}` : 'nothing'}`, () => {
      expect(chatNotification(ended, level)?.attachments[0].color).to.equal(color);
    });
  }

  for (const status of ['Completed', 'Pending', 'Processing', 'Skipped', 'Cancelled', 'CancelledByAdmin'] as const) {
    it(`${status}: never notifies, at any level`, () => {
      for (const level of ['all', 'errors_only', 'warnings_only'] as const) {
        expect(chatNotification(job(status, { error: 'x' }), level)).to.equal(undefined);
      }
    });
  }

  it('the message: the job id, the category and the source URL, as the chat service\'s incoming-webhook JSON', () => {
    const m = chatNotification(failed, 'all')!;
    expect(m.text).to.equal(`Media job failed: ${failed.id}`);
    expect(m.attachments).to.have.length(1);
    expect(m.attachments[0].fields).to.deep.equal([
      { title: 'Job', value: failed.id, short: true },
      { title: 'Category', value: 'The platform rate-limited the download', short: true },
      { title: 'Source', value: failed.url, short: false },
    ]);
    expect(JSON.parse(JSON.stringify(m))).to.deep.equal(m);
  });

  it('a Failed job marked as a content warning is orange, at the warning levels', () => {
    const m = chatNotification(job('Failed', { errorType: 'warning', error: 'Video is age-restricted' }), 'warnings_only');
    expect(m?.attachments[0].color).to.equal(CHAT_COLORS.warning);
  });

  describe('the category carries no infrastructure detail', () => {
    const cases: [string, string][] = [
      ['upload to http://minio.internal:9000/bucket/key?X-Amz-Signature=abc failed', 'upload to <url> failed'],
      ['connect ECONNREFUSED 10.0.4.17:5432', 'connect ECONNREFUSED <address>'],
      ['cannot reach [fd00::12]:443', 'cannot reach <address>'],
      ['node 2001:db8:0:1:2:3:4:5 down', 'node <address> down'],
      ['clip 00:00:02 to 12:30:45', 'clip 00:00:02 to 12:30:45'],
    ];
    for (const [error, shown] of cases) {
      it(JSON.stringify(error), () => expect(sanitisedCategory(error, 'error')).to.equal(shown));
    }
    it('bounded, and a fallback when there is nothing to show', () => {
      expect(sanitisedCategory('x'.repeat(500), 'error')).to.have.length(160);
      expect(sanitisedCategory(null, 'error')).to.equal('Technical error');
      expect(sanitisedCategory('   ', 'warning')).to.equal('Content unavailable');
    });
  });
});
