// Managed storage's per-API-key prefix (managedKeyPrefix) as the key layout,
// the runner's document and the upload grant's token carry it, and which
// grant operations a job's state lets through (grantAnswers).
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { SecretBox } from '../src/secret-box.js';
import { destinationKeyLayout, objectKey, parseDestination } from '../src/storage/index.js';
import { managedKeyPrefix } from '../src/storage/types.js';
import { GRANT_OPS, UploadGrantKeys, grantAnswers, type GrantJob, type GrantOp } from '../src/storage/upload-grants.js';

const KEY_ID = '6f1d2c3b-4a59-4687-9a1b-2c3d4e5f6a7b';
const JOB = '3f2b7c1e-9a4d-4e5f-8a6b-1c2d3e4f5a6b';
const NOW = 1_750_000_000_000;

describe('storage: managed keys per API key', () => {
  it('the prefix is `k` and the first 16 hex digits of a labelled SHA-256 of the key id: stable, and no id in a URL', () => {
    const digest = createHash('sha256').update(`mediajobs managed storage\n${KEY_ID}`).digest('hex');
    expect(managedKeyPrefix(KEY_ID)).to.equal(`k${digest.slice(0, 16)}`);
    expect(managedKeyPrefix(KEY_ID)).not.to.equal(managedKeyPrefix('7f1d2c3b-4a59-4687-9a1b-2c3d4e5f6a7b'));
  });

  it("a runner's managed document with the prefix puts every key under it; without one, the layout of before", () => {
    const prefix = managedKeyPrefix(KEY_ID);
    const layout = destinationKeyLayout(parseDestination({ provider: 'managed', folder_prefix: prefix }));
    expect(layout).to.deep.equal({ folderPrefix: prefix, baseFolder: 'videos' });
    expect(objectKey({ ...layout, folder: 'Show/S1', name: 'Épisode 1', suffix: 'abcdef12', ext: 'mp4' })).to.equal(`${prefix}/videos/Show/S1/Épisode 1-abcdef12.mp4`);
    expect(destinationKeyLayout(parseDestination({ provider: 'managed' }))).to.deep.equal({ baseFolder: 'videos' });
  });

  it('a managed document takes no prefix but one managedKeyPrefix makes', () => {
    for (const bad of ['other', '../k0123456789abcdef', 'k0123456789abcdef/x', 'K0123456789ABCDEF', '']) {
      expect(() => parseDestination({ provider: 'managed', folder_prefix: bad }), bad).to.throw().with.property('reason', 'invalid_folder_prefix');
    }
  });
});

describe('upload grant tokens with a key prefix', () => {
  const spec = SecretBox.generateSpec('k1');
  const keys = new UploadGrantKeys(spec);
  const prefix = managedKeyPrefix(KEY_ID);
  const inAnHour = NOW / 1000 + 3600;

  it('name the prefix after the key id, under the MAC; a token without one verifies as before', () => {
    const token = keys.mint(JOB, inAnHour, prefix);
    expect(token.split('.').slice(0, 4)).to.deep.equal([JOB, String(inAnHour), 'k1', prefix]);
    expect(keys.verify(token, NOW)).to.deep.equal({ ok: true, jobId: JOB, expiresAt: inAnHour, kid: 'k1', prefix });
    expect(keys.verify(keys.mint(JOB, inAnHour), NOW)).to.deep.equal({ ok: true, jobId: JOB, expiresAt: inAnHour, kid: 'k1' });
  });

  it('refuse a prefix changed, added or removed, and one of another shape', () => {
    const [job, expires, kid, , mac] = keys.mint(JOB, inAnHour, prefix).split('.') as [string, string, string, string, string];
    const other = managedKeyPrefix(randomBytes(8).toString('hex'));
    expect(keys.verify([job, expires, kid, other, mac].join('.'), NOW)).to.deep.equal({ ok: false, why: 'forged' });
    expect(keys.verify([job, expires, kid, mac].join('.'), NOW)).to.deep.equal({ ok: false, why: 'forged' });
    const [, , , plainMac] = keys.mint(JOB, inAnHour).split('.') as [string, string, string, string];
    expect(keys.verify([job, expires, kid, prefix, plainMac].join('.'), NOW)).to.deep.equal({ ok: false, why: 'forged' });
    expect(keys.verify([job, expires, kid, 'videos', mac].join('.'), NOW)).to.deep.equal({ ok: false, why: 'malformed' });
    expect(() => keys.mint(JOB, inAnHour, 'videos')).to.throw(/key prefix/);
  });
});

describe('grantAnswers: what a grant lets through, by its job', () => {
  const WINDOW = 600_000;
  const running: GrantJob = { status: 'Processing', finishedAt: null };
  const ended = (status: string, agoMs: number | null): GrantJob => ({ status, finishedAt: agoMs === null ? null : NOW - agoMs });
  const cleanup: GrantOp[] = ['abort', 'delete'];
  const table: Array<[string, GrantJob | undefined, GrantOp[]]> = [
    ['no row', undefined, []],
    ['Pending', { status: 'Pending', finishedAt: null }, [...GRANT_OPS]],
    ['Processing', running, [...GRANT_OPS]],
    ['Cancelled a minute ago', ended('Cancelled', 60_000), cleanup],
    ['CancelledByAdmin a minute ago', ended('CancelledByAdmin', 60_000), cleanup],
    ['Failed a minute ago', ended('Failed', 60_000), cleanup],
    ['Warning a minute ago', ended('Warning', 60_000), cleanup],
    ['Skipped a minute ago', ended('Skipped', 60_000), cleanup],
    ['Cancelled just inside the window', ended('Cancelled', WINDOW - 1), cleanup],
    ['Cancelled as the window closes', ended('Cancelled', WINDOW), []],
    ['Cancelled an hour ago', ended('Cancelled', 3_600_000), []],
    ['Cancelled, end unknown', ended('Cancelled', null), []],
    ['Completed a minute ago: the files are the user\'s', ended('Completed', 60_000), []],
  ];
  for (const [title, job, allowed] of table) {
    it(title, () => {
      expect(GRANT_OPS.filter((op) => grantAnswers(op, job, NOW, WINDOW))).to.deep.equal(allowed);
    });
  }
});
