// What a storage probe reads from a backend a user named is bounded in bytes
// and time (issue 16, item 4): a review's POST /user/s3 against a server
// streaming a 300 MB error body took the gateway from 190 to 552 MB. Here a
// hostile backend on loopback answers every request of the official SDKs
// (S3, OSS, Azure Blob, and POST /user/bucket's listing) with a huge or a
// never-ending body; the probe must answer `unreachable` at once or at its
// deadline, and the backend must see its connection closed having written
// little: the proof that the transfer was cut, not merely no longer awaited.
import { expect } from 'chai';
import { probeDestination, verifyBucketListing } from '../src/destinations/probe.js';
import { HostileBackend, MiB } from '../../test/support/hostile-backend.js';
import { probeBounds, probeFailure, startTestGateway, type TestGateway } from './support.js';

describe('api-gateway: a storage probe reads a bounded answer', function () {
  this.timeout(30_000);
  const backend = new HostileBackend();
  const documents = {
    s3: () => ({ provider: 's3', endpoint: backend.url, bucket: 'b', region: 'us-east-1', access_key: 'a', secret_key: 's' }),
    oss: () => ({ provider: 'oss', endpoint: backend.url, bucket: 'media', region: 'cn-hangzhou', access_key_id: 'LTAI0000', access_key_secret: 's' }),
    blob: () => ({ provider: 'blob', endpoint: `${backend.url}/acct0000`, account_name: 'acct0000', container: 'media', account_key: Buffer.alloc(64, 1).toString('base64') }),
  };

  before(async () => {
    await backend.start();
  });
  after(async () => {
    await backend.stop();
  });

  for (const [provider, document] of Object.entries(documents)) {
    describe(provider, () => {
      it('a 300 MB error body: unreachable at once; the backend wrote a few MB at most, and gateway memory did not take the body', async () => {
        backend.reset('huge');
        const rss = process.memoryUsage().rss;
        const err = await probeFailure(probeDestination(document(), probeBounds(10_000)));
        const answeredAfter = Date.now() - backend.firstRequestAt!;
        expect(err.message).to.equal('probe failed: unreachable');
        // From the backend's first request: loading the provider's SDK is no part of it (seconds on a loaded machine).
        expect(answeredAfter).to.be.below(4_000);
        expect(await backend.allClosed(backend.firstRequestAt!, 2_000)).to.be.below(4_000);
        // 64 KiB read; the rest of what the backend wrote sat in loopback socket buffers when the client hung up.
        expect(backend.written).to.be.below(16 * MiB);
        expect(process.memoryUsage().rss - rss).to.be.below(100 * MiB);
      });

      it('an error body without end, at 50 MB/s: cut at the byte bound, long before the deadline', async () => {
        backend.reset('flood');
        const err = await probeFailure(probeDestination(document(), probeBounds(10_000)));
        expect(err.message).to.equal('probe failed: unreachable');
        expect(Date.now() - backend.firstRequestAt!).to.be.below(4_000);
        await backend.allClosed(backend.firstRequestAt!, 2_000);
        expect(backend.written).to.be.below(16 * MiB);
      });

      it('a body trickling without end: the deadline ends the transfer, not only the wait', async () => {
        backend.reset('trickle', 403);
        const err = await probeFailure(probeDestination(document(), probeBounds(1_000)));
        expect(err.message).to.equal('probe failed: unreachable');
        const started = backend.firstRequestAt!;
        expect(Date.now() - started).to.be.within(900, 3_000);
        // Closed by the gateway at its deadline, not by the SDK's own timeouts (minutes) or the backend.
        expect(await backend.allClosed(started, 1_500)).to.be.within(900, 3_000);
      });
    });
  }

  describe('POST /user/bucket (the listing check)', () => {
    it('a 300 MB listing answer and an endless trickle: unreachable, connections closed, little written', async () => {
      const document = { provider: 's3', endpoint: backend.url, bucket: 'b', region: 'us-east-1', access_key: 'a', secret_key: 's' };
      backend.reset('huge', 200);
      const huge = await probeFailure(verifyBucketListing(document, probeBounds(10_000)));
      expect(huge.message).to.equal('probe failed: unreachable');
      expect(Date.now() - backend.firstRequestAt!).to.be.below(4_000);
      await backend.allClosed(backend.firstRequestAt!, 2_000);
      expect(backend.written).to.be.below(16 * MiB);

      backend.reset('trickle', 200);
      const slow = await probeFailure(verifyBucketListing(document, probeBounds(1_000)));
      expect(slow.message).to.equal('probe failed: unreachable');
      expect(await backend.allClosed(backend.firstRequestAt!, 1_500)).to.be.within(900, 3_000);
    });
  });

  describe('through the API', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startTestGateway({ storage: { probeTimeoutMs: 2_000 } });
    });
    after(async () => {
      await gw?.stop();
    });

    it('POST /user/s3 against a backend streaming a 300 MB error body: 400 Credential validation failed: unreachable, within the probe budget', async () => {
      backend.reset('huge');
      const rss = process.memoryUsage().rss;
      const r = await gw.request('POST', '/user/s3', {
        body: { endpoint: backend.url, bucket: 'media', region: 'us-east-1', access_key: 'AKIAHOSTILE', secret_key: 'secret' },
      });
      expect(r.status).to.equal(400);
      expect(r.body).to.deep.equal({ error: 'Credential validation failed: unreachable' });
      expect(Date.now() - backend.firstRequestAt!).to.be.below(2_000);
      await backend.allClosed(backend.firstRequestAt!, 2_000);
      expect(backend.written).to.be.below(16 * MiB);
      expect(process.memoryUsage().rss - rss).to.be.below(100 * MiB);
    });
  });
});
