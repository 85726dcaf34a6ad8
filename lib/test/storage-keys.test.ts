// Object key layout, name sanitisation, key validation and destination
// parsing: the parts of the storage layer that make no I/O.
import { expect } from 'chai';
import { inspect } from 'node:util';
import {
  StorageError,
  assertValidKey,
  createProvider,
  destinationKeyLayout,
  objectKey,
  parseDestination,
  sanitizeSegment,
  type ObjectKeyInput,
} from '../src/storage/index.js';
import { caught, thrown } from './storage-support.js';

const JOB = '3f2b8c1e-7d4a-4e9b-9a51-0c6d2e8f1a7b';

describe('storage: objectKey layout', () => {
  const table: Array<[string, ObjectKeyInput, string]> = [
    ['job id when no filename', { fallback: JOB, ext: 'mp4' }, `videos/${JOB}.mp4`],
    ['filename', { name: 'My Video', fallback: JOB, ext: 'mp4' }, 'videos/My Video.mp4'],
    ['folder', { name: 'ep1', folder: 'Show/Season 1', ext: 'mkv' }, 'videos/Show/Season 1/ep1.mkv'],
    ['folder_prefix and base_folder', { folderPrefix: 'tenant-a', baseFolder: 'media', name: 'x', ext: 'mp3' }, 'tenant-a/media/x.mp3'],
    ['multi-segment prefix, slashes trimmed', { folderPrefix: '/a/b/', name: 'x', ext: 'mp4' }, 'a/b/videos/x.mp4'],
    ['empty base_folder falls back to videos', { baseFolder: '', name: 'x', ext: 'mp4' }, 'videos/x.mp4'],
    ['null fields are absent', { folderPrefix: null, baseFolder: null, folder: null, name: null, fallback: JOB, ext: 'webm' }, `videos/${JOB}.webm`],
    ['collision suffix', { name: 'My Video', suffix: JOB.slice(0, 8), ext: 'mp4' }, 'videos/My Video-3f2b8c1e.mp4'],
    ['extension normalised', { name: 'x', ext: '.MP4' }, 'videos/x.mp4'],
    ['folder with doubled and trailing slashes', { folder: 'a//b/', name: 'x', ext: 'mp4' }, 'videos/a/b/x.mp4'],
    ['backslash separates folder segments', { folder: 'a\\b', name: 'x', ext: 'mp4' }, 'videos/a/b/x.mp4'],
    ['filename with nothing but unsafe characters uses the job id', { name: '???', fallback: JOB, ext: 'mp4' }, `videos/${JOB}.mp4`],
    ['such a filename without fallback keeps what is left', { name: '???', ext: 'mp4' }, 'videos/_.mp4'],
    ['filename of dots only uses the job id', { name: '...', fallback: JOB, ext: 'mp4' }, `videos/${JOB}.mp4`],
  ];
  for (const [title, input, expected] of table) {
    it(title, () => expect(objectKey(input)).to.equal(expected));
  }

  it('refuses . and .. segments in folder, prefix and base folder', () => {
    for (const input of [
      { folder: 'a/../b', name: 'x', ext: 'mp4' },
      { folderPrefix: '..', name: 'x', ext: 'mp4' },
      { baseFolder: './v', name: 'x', ext: 'mp4' },
    ]) {
      expect(thrown(() => objectKey(input)).code).to.equal('invalid_config');
    }
  });

  it('refuses a bad extension, an empty name without fallback, and over-long keys', () => {
    expect(thrown(() => objectKey({ name: 'x', ext: 'mp4/../x' })).reason).to.equal('invalid_extension');
    expect(thrown(() => objectKey({ name: 'x', ext: '' })).reason).to.equal('invalid_extension');
    expect(thrown(() => objectKey({ name: '', ext: 'mp4' })).reason).to.equal('invalid_filename');
    const deep = Array.from({ length: 10 }, () => 'f'.repeat(200)).join('/');
    expect(thrown(() => objectKey({ folder: deep, name: 'x', ext: 'mp4' })).reason).to.equal('key_too_long');
  });

  it('every key objectKey makes passes assertValidKey', () => {
    for (const [, input] of table) assertValidKey(objectKey(input));
    assertValidKey(objectKey({ name: '.hidden', folder: '.git/..x', ext: 'mp4' }));
  });
});

describe('storage: name sanitisation', () => {
  const table: Array<[string, string, string]> = [
    ['keeps letters of any script', 'Ünïcödé 日本語 видео', 'Ünïcödé 日本語 видео'],
    ['keeps ordinary punctuation', "Rock & Roll (Live) - It's 100!", "Rock & Roll (Live) - It's 100!"],
    ['replaces Windows-forbidden characters', 'a<b>c:d"e|f?g*h', 'a_b_c_d_e_f_g_h'],
    ['replaces a run of unsafe characters once', 'a<>:|b', 'a_b'],
    ['replaces slashes and backslashes', 'a/b\\c', 'a_b_c'],
    ['replaces characters S3 advises against', 'a#b%c{d}e^f`g[h]i~j', 'a_b_c_d_e_f_g_h_i_j'],
    ['keeps existing double underscores', 'my__file', 'my__file'],
    ['turns whitespace runs, tabs and newlines into one space', 'a \t\n  b', 'a b'],
    ['replaces control characters', 'a\u0000b\u0007c\u007fd', 'a_b_c_d'],
    ['drops zero-width and bidi characters', 'a\u200bb\u202ec\ufeff', 'abc'],
    ['strips leading dots (no hidden files, no ..)', '..secret', 'secret'],
    ['strips trailing dots and spaces (Windows drops them)', 'name. . ', 'name'],
    ['trims spaces', '   name   ', 'name'],
    ['escapes Windows device names', 'CON', '_CON'],
    ['escapes Windows device names with an extension', 'lpt1.tar', '_lpt1.tar'],
    ['leaves longer names alone', 'console', 'console'],
    ['normalises to NFC', 'e\u0301', '\u00e9'],
    ['empty stays empty', '   ', ''],
  ];
  for (const [title, input, expected] of table) {
    it(title, () => expect(sanitizeSegment(input)).to.equal(expected));
  }

  it('truncates long names on a character boundary within the byte budget', () => {
    const name = sanitizeSegment('é'.repeat(300), 200);
    expect(Buffer.byteLength(name)).to.be.at.most(200);
    expect(name).to.equal('é'.repeat(100));
    const key = objectKey({ name: '語'.repeat(255), suffix: 'abcdef12', ext: 'mp4' });
    const file = key.split('/').pop() as string;
    expect(Buffer.byteLength(file)).to.be.at.most(255);
    expect(file.endsWith('-abcdef12.mp4')).to.equal(true);
  });
});

describe('storage: destinations', () => {
  const s3 = {
    provider: 's3',
    endpoint: 'https://s3.example.test',
    bucket: 'b',
    region: 'auto',
    access_key: 'AK',
    secret_key: 'SK-very-secret',
  };

  it('parses an s3 destination and its key layout', () => {
    const dest = parseDestination({ ...s3, folder_prefix: 'p', base_folder: 'media', extra: 'ignored' });
    expect(dest).to.deep.equal({ ...s3, folder_prefix: 'p', base_folder: 'media' });
    expect(destinationKeyLayout(dest)).to.deep.equal({ folderPrefix: 'p', baseFolder: 'media' });
    expect(destinationKeyLayout(parseDestination(s3))).to.deep.equal({ baseFolder: 'videos' });
    expect(destinationKeyLayout(parseDestination({ provider: 'managed' }))).to.deep.equal({ baseFolder: 'videos' });
  });

  it('names the missing or invalid field, never a value', () => {
    const missing = thrown(() => parseDestination({ ...s3, bucket: undefined }));
    expect(missing.code).to.equal('invalid_config');
    expect(missing.reason).to.equal('bucket_required');
    const invalid = thrown(() => parseDestination({ ...s3, secret_key: 42 }));
    expect(invalid.reason).to.equal('invalid_secret_key');
    expect(invalid.message).not.to.include('42');
    const empty = thrown(() => parseDestination({ ...s3, endpoint: ' ' }));
    expect(empty.reason).to.equal('invalid_endpoint');
  });

  it('refuses unknown providers, and known ones without their fields', async () => {
    for (const provider of ['s3', 'blob', 'gcs', 'oss', 'drive']) {
      const err = await caught(createProvider({ provider }));
      expect(err.code).to.equal('invalid_config');
      expect(err.reason, provider).to.match(/_required$/);
    }
    expect((await caught(createProvider({ provider: 'ftp' }))).reason).to.equal('unknown_provider');
    expect((await caught(createProvider({ provider: 'constructor' }))).reason).to.equal('unknown_provider');
    expect((await caught(createProvider(null))).reason).to.equal('unknown_provider');
    expect((await caught(createProvider('s3'))).reason).to.equal('unknown_provider');
  });

  it('createProvider makes no network call and keeps the secret out of errors', async () => {
    const p = await createProvider(s3);
    expect(p.name).to.equal('s3');
    const err = await caught(createProvider({ ...s3, endpoint: 'ftp://x' }));
    expect(err.reason).to.equal('invalid_endpoint');
    expect(JSON.stringify(err) + err.message).not.to.include('SK-very-secret');
  });

  it('a StorageError from another copy of the storage layer is still a StorageError', async () => {
    // A second, separately evaluated copy of types.ts, as when providers are loaded by import() into a CommonJS graph.
    const url = new URL('../src/storage/types.ts?second-copy', import.meta.url).href;
    const copy = (await import(url)) as typeof import('../src/storage/types.js');
    expect(copy.StorageError).not.to.equal(StorageError);
    const err = new copy.StorageError('auth', 'AccessDenied', 's3: credentials rejected (AccessDenied)');
    expect(err).to.be.instanceOf(StorageError);
    expect(new StorageError('auth', 'AccessDenied', 'x')).to.be.instanceOf(copy.StorageError);
    expect(new Error('x')).not.to.be.instanceOf(StorageError);
    expect({ code: 'auth', reason: 'AccessDenied' }).not.to.be.instanceOf(StorageError);
    expect(inspect(err)).not.to.include('mediajobs.storage');
  });
});
