// A disabled MediaPlatform's new jobs are refused by POST /jobs with 422
// `{"error":"Downloads from this platform are disabled"}` and nothing is
// written; POST /jobs/bulk, all or nothing, refuses a list holding one of
// its URLs with the same 422 naming the index, and writes none of the list;
// other hosts, and the platform once enabled again, are accepted.
// The gateway reads the platforms from a real local cluster through
// PlatformDirectory (lib/src/platforms/directory.ts), as startGateway does.
import { expect } from 'chai';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { applyCrds } from '../../scripts/apply-crds.js';
import { GROUP, VERSION } from '@mediajobs/lib/mediajob/types';
import { PlatformDirectory } from '@mediajobs/lib/platforms/directory';
import { startClusterWithCrd, startTestGateway, type TestCluster, type TestGateway } from './support.js';
import { eventually } from '../../local-cluster/test/support.js';

describe('POST /jobs and POST /jobs/bulk for a disabled MediaPlatform', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let gw: TestGateway;
  let directory: PlatformDirectory;

  before(async () => {
    tc = await startClusterWithCrd();
    await applyCrds(tc.kc, { files: ['mediaplatform.yaml'] });
    await tc.custom.createClusterCustomObject({
      group: GROUP, version: VERSION, plural: 'mediaplatforms',
      body: { apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaPlatform', metadata: { name: 'video' }, spec: { match: { hosts: ['www.video.example', '*.cdn.example'] }, disabled: true } },
    });
    directory = new PlatformDirectory(tc.custom, pino({ level: 'silent' }), 100);
    await directory.start();
    gw = await startTestGateway({ platforms: directory });
  });

  after(async () => {
    directory?.stop();
    await gw?.stop();
    await tc?.stop();
  });

  const rows = async () => Number((await gw.pool.query<{ n: string }>('SELECT count(*) AS n FROM jobs')).rows[0]!.n);

  it('answers 422 with the spec\'s error body and writes no job, for the platform\'s hosts only', async () => {
    for (const url of ['https://www.video.example/watch?v=1', 'https://WWW.VIDEO.EXAMPLE/x', 'https://a.cdn.example/v.mp4']) {
      const r = await gw.request('POST', '/jobs', { body: { url } });
      expect(r.status, url).to.equal(422);
      expect(r.body).to.deep.equal({ error: 'Downloads from this platform are disabled' });
    }
    expect(await rows()).to.equal(0);
    const other = await gw.request('POST', '/jobs', { body: { url: 'https://elsewhere.example/v.mp4' } });
    expect(other.status).to.equal(201);
    expect(await rows()).to.equal(1);
  });

  it('POST /jobs/bulk: a list with one of its URLs is refused whole with 422 naming the index; a list without is accepted', async () => {
    const before = await rows();
    const r = await gw.request('POST', '/jobs/bulk', { body: { urls: ['https://elsewhere.example/a.mp4', 'https://x.cdn.example/v.mp4', 'https://elsewhere.example/b.mp4'] } });
    expect(r.status).to.equal(422);
    expect(r.body).to.deep.equal({ error: 'urls[1]: Downloads from this platform are disabled' });
    expect(await rows(), 'nothing of the list written').to.equal(before);
    const ok = await gw.request('POST', '/jobs/bulk', { body: { urls: ['https://elsewhere.example/a.mp4', 'https://elsewhere.example/b.mp4'] } });
    expect(ok.status).to.equal(201);
    expect(await rows()).to.equal(before + 2);
  });

  it('accepts the platform\'s jobs again once it is enabled (the next list of the platforms)', async () => {
    await tc.custom.patchClusterCustomObject({ group: GROUP, version: VERSION, plural: 'mediaplatforms', name: 'video', body: { spec: { disabled: false } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    await eventually(() => !directory.disabledFor('https://www.video.example/watch?v=1'), 10_000);
    const r = await gw.request('POST', '/jobs', { body: { url: 'https://www.video.example/watch?v=1' } });
    expect(r.status).to.equal(201);
  });
});
