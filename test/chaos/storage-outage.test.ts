// Managed storage (S3) stopped while runners upload, and back after a few
// seconds (issue 16 item 3, reduced; `make chaos` runs more jobs): every job
// retried per ADR 0018 or failed storage_unreachable, nothing delivered
// elsewhere, no multipart upload left behind, files and usage exact, and no
// secret in any log.
import { expect } from 'chai';
import { runStorageOutage, startStorageChaos, type StorageChaos } from './storage-outage.js';

describe('fault suite: managed storage stopped mid-upload', function () {
  this.timeout(300_000);
  let c: StorageChaos;
  before(async () => { c = await startStorageChaos(2); });
  after(() => c?.stop());

  // Slow (about 25 s): two uploads cut by a 2 s outage of managed storage, retried after the backoff, each
  // job's runner started again from its download.
  it('retries each upload the outage cut, leaves no multipart upload, and stores only what Completed jobs delivered', async () => {
    const run = await runStorageOutage(c, { jobs: 2, downMs: 2_000, deadlineMs: 180_000 });
    expect(run.uploadsAtStop, 'uploads in flight when it stopped').to.equal(2);
    expect(run.breaches).to.deep.equal([]);
    expect(run.uploadsLeft).to.equal(0);
    // A 2 s outage is shorter than the retries' patience (RETRY_BACKOFF_SECONDS 1 s here): both complete on a later attempt.
    expect(run.outcomes).to.deep.equal({ Completed: 2 });
    const scan = await c.f.scanLogs();
    expect(scan.leaks).to.deep.equal([]);
  });
});
