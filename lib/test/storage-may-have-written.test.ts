// mayHaveWritten: the keys a job's runner may have written, by the rule the
// runner names them with (objectKey, the taken-key suffix, sidecars). What a
// runner reports is checked against it before the operator deletes, signs
// or records a key (issue 35 item 1).
import { expect } from 'chai';
import { managedKeyPrefix, mayHaveWritten, objectKey, type KeyAuthor } from '../src/storage/types.js';

const JOB = '3f2b8c1e-7d4a-4e9b-9a51-0c6d2e8f1a7b';
const OTHER = '9a0d7c55-1b2e-4f3a-8c4d-5e6f7a8b9c0d';
const P = managedKeyPrefix('key-1');
const managed = (over: Partial<KeyAuthor> = {}): KeyAuthor => ({ jobId: JOB, filename: 'talk', layout: { folderPrefix: P, baseFolder: 'videos' }, ...over });

describe('storage: mayHaveWritten', () => {
  const table: Array<[string, KeyAuthor, string, boolean]> = [
    ['its first key', managed(), `${P}/videos/talk.mp4`, true],
    ['another container', managed(), `${P}/videos/talk.webm`, true],
    ['the taken-key suffix', managed(), `${P}/videos/talk-3f2b8c1e.mp4`, true],
    ['the time-stamped taken key of a retry', managed(), `${P}/videos/talk-3f2b8c1e-m3k9x2a1.mp4`, true],
    ['a subtitle beside it', managed(), `${P}/videos/talk.en.vtt`, true],
    ['a thumbnail beside it', managed(), `${P}/videos/talk.jpg`, true],
    ['a taken sidecar', managed(), `${P}/videos/talk-3f2b8c1e.en-US.vtt`, true],
    ['a taken sidecar of a taken media key', managed(), `${P}/videos/talk-3f2b8c1e-3f2b8c1e.webp`, true],
    ['no filename: the job id', managed({ filename: undefined }), `${P}/videos/${JOB}.mp4`, true],
    ['a folder', managed({ folder: 'a/b' }), `${P}/videos/a/b/talk.mp4`, true],
    ['a sanitised filename', managed({ filename: 'my: talk?' }), `${P}/videos/${objectKey({ name: 'my: talk?', ext: 'mp4' }).slice('videos/'.length)}`, true],
    ['a user destination, layout unknown', { jobId: JOB, filename: 'talk' }, 'backups/media/talk-3f2b8c1e.mp4', true],
    ['a user destination, layout known', { jobId: JOB, filename: 'talk', layout: { folderPrefix: 'backups', baseFolder: 'media' } }, 'backups/media/talk.mp4', true],

    ['another job\'s suffix', managed(), `${P}/videos/talk-9a0d7c55.mp4`, false],
    ['another job\'s id as the name', managed({ filename: undefined }), `${P}/videos/${OTHER}.mp4`, false],
    ['the right suffix, another job\'s name', managed(), `${P}/videos/other-3f2b8c1e.mp4`, false],
    ['the right suffix, a name that starts alike', managed(), `${P}/videos/talks-3f2b8c1e.mp4`, false],
    ['a longer name that starts alike', managed(), `${P}/videos/talk-show.mp4`, false],
    ['a dotted name that starts alike', managed(), `${P}/videos/talk.final.mp4`, false],
    ['another key\'s prefix', managed(), `${managedKeyPrefix('key-2')}/videos/talk.mp4`, false],
    ['no prefix', managed(), 'videos/talk.mp4', false],
    ['another folder', managed(), `${P}/videos/x/talk.mp4`, false],
    ['another base folder', managed(), `${P}/music/talk.mp4`, false],
    ['climbing out', managed(), `${P}/videos/../../${managedKeyPrefix('key-2')}/videos/talk.mp4`, false],
    ['climbing out, the own name at the end', managed(), `${P}/videos/x/../talk.mp4`, false],
    ['a dot segment', managed(), `${P}/./videos/talk.mp4`, false],
    ['absolute', managed(), `/${P}/videos/talk.mp4`, false],
    ['absolute, layout unknown', { jobId: JOB, filename: 'talk' }, '/etc/talk.mp4', false],
    ['climbing out, layout unknown', { jobId: JOB, filename: 'talk' }, '../other/talk.mp4', false],
    ['URL-encoded slash', managed(), `${P}%2Fvideos%2Ftalk.mp4`, false],
    ['URL-encoded climb', managed(), `${P}/videos/%2e%2e/talk.mp4`, false],
    ['URL-encoded name', managed(), `${P}/videos/%74alk.mp4`, false],
    ['a backslash', managed(), `${P}\\videos\\talk.mp4`, false],
    ['a NUL', managed(), `${P}/videos/talk.mp4\u0000.jpg`, false],
    ['a trailing newline', managed(), `${P}/videos/talk.mp4\n`, false],
    ['a language tag before a video extension', managed(), `${P}/videos/talk.en.mp4`, false],
    ['no extension', managed(), `${P}/videos/talk`, false],
    ['empty', managed(), '', false],
    ['a prefix only', managed(), `${P}/`, false],
    ['a regex in the filename is text', managed({ filename: 'a.*' }), `${P}/videos/abc.mp4`, false],
  ];
  for (const [what, job, key, expected] of table) {
    it(`${expected ? 'yes' : 'no'}: ${what}`, () => expect(mayHaveWritten(job, key), key).to.equal(expected));
  }

  it('no to a key that is not a string, or a job without an id', () => {
    expect(mayHaveWritten(managed(), 42 as unknown as string)).to.equal(false);
    expect(mayHaveWritten(managed({ jobId: '' }), `${P}/videos/talk.mp4`)).to.equal(false);
  });
});
