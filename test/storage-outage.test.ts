// The storage service goes away in the middle of a multipart upload (a
// restart, a failover) and comes back (issue 16 item 3): the upload fails as
// `unreachable`, which the retry policy retries (docs/adr/0018), nothing is
// stored under the key, and the multipart upload it had begun is aborted
// once the service answers again, not left behind to be billed. Real parts:
// lib's S3 provider (what a runner uses for an S3 destination, and what the
// gateway's upload grants drive for managed storage) against s3rver, behind
// the front that gives s3rver the AbortMultipartUpload it lacks and that can
// close its port as an outage does.
import { expect } from 'chai';
import { S3StorageProvider } from '@mediajobs/lib/storage/s3';
import { isStorageError } from '@mediajobs/lib/storage/types';
import { eventually } from '../local-cluster/test/support.js';
import { endlessBody } from './support/endless-body.js';
import { startS3rver, type RunningS3rver } from './support/s3rver.js';
import { s3rverWithAbort, type S3rverWithAbort } from './support/s3rver-abort.js';

const BUCKET = 'media';
const MiB = 1024 * 1024;


describe('storage stopped mid-upload', function () {
  this.timeout(90_000);
  let s3: RunningS3rver;
  let front: S3rverWithAbort;
  let provider: S3StorageProvider;

  before(async () => {
    s3 = await startS3rver({ buckets: [BUCKET] });
    front = await s3rverWithAbort(s3);
    provider = new S3StorageProvider({
      name: 's3', endpoint: front.endpoint, bucket: BUCKET, region: 'us-east-1',
      accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, forcePathStyle: true, partSize: 5 * MiB, queueSize: 1,
    });
  });
  after(async () => {
    provider?.destroy();
    await front?.close();
    await s3?.stop();
  });

  it('fails as unreachable, stores nothing, and aborts its multipart upload once the service is back', async () => {
    const upload = provider.upload('videos/talk.mkv', endlessBody(3, 3), { contentType: 'video/x-matroska' }).then(
      () => expect.fail('an upload through an outage cannot succeed'),
      (err: unknown) => err,
    );
    await eventually(async () => (await front.pendingUploads(BUCKET)).some((u) => u.parts > 0), 20_000, 20);
    await front.pause();
    // Down long enough for the part's own retries to give up and the abort to meet a closed port.
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await front.pendingUploads(BUCKET), 'begun, not yet aborted').to.have.length(1);
    await front.resume();
    const err = await upload;
    expect(isStorageError(err) && err.code, String(err)).to.equal('unreachable');
    expect(await front.pendingUploads(BUCKET), 'no multipart upload left behind').to.deep.equal([]);
    expect(await provider.headObject('videos/talk.mkv'), 'nothing stored').to.equal(undefined);
  });
});
