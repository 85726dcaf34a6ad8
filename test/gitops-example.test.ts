// The worked GitOps example of docs/gitops.md, applied as a pipeline applies
// it: `kubectl apply -k` against the local cluster, whose CRD schemas check
// every field, and with server-side apply as Argo CD and Flux apply it. Its
// MediaJob and MediaBatch must be valid as written, and a second sync must
// change nothing.
import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { startTestCluster, type TestCluster } from '../local-cluster/test/support.js';

const root = (p: string) => fileURLToPath(new URL(`../${p}`, import.meta.url));

describe('the GitOps example (crds/examples/gitops)', function () {
  this.timeout(60_000);
  let tc: TestCluster;

  before(async () => {
    tc = await startTestCluster();
    await tc.kubectl(['apply', '-f', root('crds/')]);
    await tc.kubectl(['create', 'namespace', 'media']);
  });

  after(async () => {
    await tc?.stop();
  });

  it('applies as written, and a second sync changes nothing', async () => {
    const first = await tc.kubectl(['apply', '-k', root('crds/examples/gitops')]);
    expect(first.stdout).to.include('mediajob.mediajobs.io/keynote-2026-audio created');
    expect(first.stdout).to.include('mediabatch.mediajobs.io/the-weekly-show created');
    const again = await tc.kubectl(['apply', '-k', root('crds/examples/gitops')]);
    expect(again.stdout).to.include('mediajob.mediajobs.io/keynote-2026-audio unchanged');
    expect(again.stdout).to.include('mediabatch.mediajobs.io/the-weekly-show unchanged');
    const listed = await tc.kubectl(['get', 'mj,mb', '-n', 'media', '-o', 'name']);
    expect(listed.stdout.trim().split('\n').sort()).to.deep.equal(['mediabatch.mediajobs.io/the-weekly-show', 'mediajob.mediajobs.io/keynote-2026-audio']);
  });

  it('applies with server-side apply as Argo CD and Flux do, taking over from the client-side apply; another sync writes nothing', async () => {
    const ssa = () => tc.kubectl(['apply', '--server-side', '--field-manager=argocd-controller', '-k', root('crds/examples/gitops')]);
    const version = async () => (await tc.kubectl(['get', 'mj', 'keynote-2026-audio', '-n', 'media', '-o', 'jsonpath={.metadata.resourceVersion}'])).stdout;
    expect((await ssa()).stdout).to.include('mediajob.mediajobs.io/keynote-2026-audio serverside-applied');
    const before = await version();
    expect((await ssa()).stdout).to.include('mediabatch.mediajobs.io/the-weekly-show serverside-applied');
    expect(await version(), 'the same manifests, applied again, change nothing').to.equal(before);
    const fields = JSON.parse((await tc.kubectl(['get', 'mj', 'keynote-2026-audio', '-n', 'media', '-o', 'json', '--show-managed-fields'])).stdout) as {
      metadata: { managedFields: { manager: string; operation: string }[] };
    };
    expect(fields.metadata.managedFields.map((m) => `${m.manager}/${m.operation}`)).to.include('argocd-controller/Apply');
  });
});
