// The runner's uploads to a user's own storage pass the outbound-address
// policy as each connection opens (runner-image/src/destination.ts): the
// gateway checked the endpoint as written, but a name can resolve elsewhere
// by the time the runner uploads. Names are resolved by the policy's own
// resolver here, to loopback (where s3rver listens) or to the cloud
// metadata address, which is then never contacted.
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { OutboundPolicy, type Resolver } from '@mediajobs/lib/outbound';
import { isStorageError } from '@mediajobs/lib/storage/index';
import { S3RVER_ACCESS_KEY, S3RVER_SECRET_KEY, startS3rver, type RunningS3rver } from '../../test/support/s3rver.js';
import { resolveDestination } from '../src/destination.js';

const resolvingTo = (address: string): OutboundPolicy => {
  const resolve: Resolver = async () => [{ address, family: 4 }];
  return new OutboundPolicy({ allowed: ['127.0.0.0/8'], resolve });
};

describe('runner: uploads to a user\'s storage pass the outbound-address policy as they connect', function () {
  this.timeout(30_000);
  let s3: RunningS3rver;
  const dirs: string[] = [];

  /** Upload one small file to an s3 destination at `endpoint` under `policy`; the StorageError code, or 'ok'. */
  async function upload(endpoint: string, policy: OutboundPolicy): Promise<string> {
    const dir = mkdtempSync(join(tmpdir(), 'mj-creds-'));
    dirs.push(dir);
    const doc = { provider: 's3', endpoint, bucket: 'media', region: 'us-east-1', access_key: S3RVER_ACCESS_KEY, secret_key: S3RVER_SECRET_KEY };
    writeFileSync(join(dir, 'destination.json'), JSON.stringify(doc));
    const { provider } = await resolveDestination(dir, {}, {}, policy);
    try {
      await provider.upload('videos/a.mp4', Readable.from([Buffer.from('muxed by ffmpeg')]));
      return 'ok';
    } catch (err) {
      if (!isStorageError(err)) throw err;
      return err.code;
    }
  }

  before(async () => {
    s3 = await startS3rver({ buckets: ['media'] });
  });
  after(async () => {
    await s3?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('a name the policy resolves to an allowed address: uploaded there', async () => {
    const before = s3.events.length;
    expect(await upload(`http://storage.allowed.test:${s3.port}`, resolvingTo('127.0.0.1'))).to.equal('ok');
    expect(s3.events.slice(before).map((e) => e.key)).to.deep.equal(['videos/a.mp4']);
  });

  it('a name that resolves to the cloud metadata address: unreachable, nothing sent anywhere', async () => {
    const before = s3.events.length;
    expect(await upload(`http://storage.rebind.test:${s3.port}`, resolvingTo('169.254.169.254'))).to.equal('unreachable');
    expect(s3.events.length).to.equal(before);
  });

  it('an IP literal the policy refuses (loopback, with no allowance): unreachable, s3rver sees nothing', async () => {
    const before = s3.events.length;
    expect(await upload(s3.endpoint, new OutboundPolicy())).to.equal('unreachable');
    expect(s3.events.length).to.equal(before);
  });
});
