// Every file a runner stores names its job (MEDIAJOB_JOB_ID) in the
// object's metadata, which the operator reads back before it accepts the
// runner's report (docs/adr/0012, "Users' destinations"): the media through
// a stream or a staged file, and a sidecar uploaded beside it alike. The
// runner's own destination.json on a local disk and on s3rver.
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { LocalStorageProvider } from '@mediajobs/lib/storage/index';
import { S3StorageProvider } from '@mediajobs/lib/storage/s3';
import { startS3rver, type RunningS3rver } from '../../test/support/s3rver.js';
import { cancellable, resolveDestination, uploadJobFile } from '../src/destination.js';

const JOB = 'j0b1d2e3f4a5b6c7';

/** A credentials directory holding `doc` as destination.json. */
function credentials(doc: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'mj-creds-'));
  writeFileSync(join(dir, 'destination.json'), JSON.stringify(doc));
  return dir;
}

describe('runner: every stored file names its job in the object\'s metadata', function () {
  this.timeout(60_000);
  const dirs: string[] = [];
  let s3: RunningS3rver;
  before(async () => {
    s3 = await startS3rver({ buckets: ['user'] });
  });
  after(async () => {
    await s3.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('local managed storage: a staged media file and a sidecar both record the job', async () => {
    const store = mkdtempSync(join(tmpdir(), 'mj-store-'));
    const creds = credentials({ provider: 'managed', managed: { MANAGED_STORAGE: 'local', MANAGED_STORAGE_DIR: store } });
    dirs.push(store, creds);
    const dest = cancellable(await resolveDestination(creds, {}, { MEDIAJOB_JOB_ID: JOB }), new AbortController().signal);
    const media = await uploadJobFile(dest, {
      writeTo: async (file) => void writeSync(file.fd, 'muxed by ffmpeg'), ext: 'mp4', contentType: 'video/mp4', jobId: JOB,
    });
    expect(media.ok && media.result.key).to.equal(`videos/${JOB}.mp4`);
    await dest.provider.upload(`videos/${JOB}.en.vtt`, Readable.from([Buffer.from('WEBVTT\n')]), { contentType: 'text/vtt' });

    const store2 = new LocalStorageProvider({ dir: store, publicBaseUrl: 'http://127.0.0.1:1' });
    expect(await store2.stat(`videos/${JOB}.mp4`)).to.deep.equal({ size: 15, jobId: JOB });
    expect(await store2.stat(`videos/${JOB}.en.vtt`)).to.deep.equal({ size: 7, jobId: JOB });
  });

  it('a user\'s S3 bucket: the object carries x-amz-meta-mediajobs-job', async () => {
    const creds = credentials({
      provider: 's3', endpoint: s3.endpoint, bucket: 'user', region: 'us-east-1', access_key: s3.accessKeyId, secret_key: s3.secretAccessKey,
    });
    dirs.push(creds);
    const dest = cancellable(await resolveDestination(creds, {}, { MEDIAJOB_JOB_ID: JOB }), new AbortController().signal);
    const media = await uploadJobFile(dest, {
      open: () => Readable.from([Buffer.from('streamed mux')]), ext: 'mp4', contentType: 'video/mp4', jobId: JOB, filename: 'talk',
    });
    expect(media.ok && media.result.key).to.equal('videos/talk.mp4');
    const bucket = new S3StorageProvider({
      endpoint: s3.endpoint, bucket: 'user', region: 'us-east-1', accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, forcePathStyle: true,
    });
    expect(await bucket.headObject('videos/talk.mp4')).to.deep.equal({ metadata: { 'mediajobs-job': JOB }, size: 12 });
    bucket.destroy();
  });
});
