// The CEL rules of the project's CRDs (crds/*.yaml, from
// lib/src/mediajob/crd-source.ts) as a manifest author meets them on the
// local cluster: a clip that ends before it starts and an inline drive
// destination are refused, and an admitted MediaJob keeps its spec (only
// spec.cancel and the status may still change).
import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { apiError, kubeConfigFor, startTestCluster, type TestCluster } from '../local-cluster/test/support.js';

const root = (p: string) => fileURLToPath(new URL(`../${p}`, import.meta.url));
const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const OWNER = { apiKeyId: '0b6f1a52-3c1e-4f55-9a7e-2d7c41f0a001' };

function mediaJob(name: string, spec: Record<string, unknown>): string {
  return JSON.stringify({
    apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob',
    metadata: { name, namespace: 'media' },
    spec: { url: 'https://media.example/talk', owner: OWNER, ...spec },
  });
}

describe('the CRDs\' CEL rules', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let custom: CustomObjectsApi;
  const ref = (name: string) => ({ group: 'mediajobs.io', version: 'v1alpha1', namespace: 'media', plural: 'mediajobs', name });

  before(async () => {
    tc = await startTestCluster();
    await tc.kubectl(['apply', '-f', root('crds/')]);
    await tc.kubectl(['create', 'namespace', 'media']);
    custom = kubeConfigFor(tc.cluster).makeApiClient(CustomObjectsApi);
  });
  after(async () => tc?.stop());

  it('refuses a clipEnd that is not after clipStart (or after 0 without one), as POST /jobs does', async () => {
    const early = await tc.kubectl(['apply', '-f', '-'], { input: mediaJob('clip-early', { clipStart: '1:30', clipEnd: '90' }), allowFail: true });
    expect(early.code).to.equal(1);
    expect(early.stderr).to.equal('The MediaJob "clip-early" is invalid: spec.clipEnd: Invalid value: "object": clipEnd must be greater than clipStart\n');
    const zero = await tc.kubectl(['apply', '-f', '-'], { input: mediaJob('clip-zero', { clipEnd: '00:00' }), allowFail: true });
    expect(zero.stderr).to.equal('The MediaJob "clip-zero" is invalid: spec.clipEnd: Invalid value: "object": clipEnd must be greater than 0\n');
    const ok = await tc.kubectl(['apply', '-f', '-'], { input: mediaJob('clip-ok', { clipStart: '0:01:30', clipEnd: '90.5' }) });
    expect(ok.stdout).to.equal('mediajob.mediajobs.io/clip-ok created\n');
  });

  it('refuses an inline drive destination', async () => {
    const out = await tc.kubectl(['apply', '-f', '-'], {
      input: mediaJob('drive-inline', { destination: { type: 'inline', provider: 'drive', secretName: 'creds' } }), allowFail: true,
    });
    expect(out.stderr).to.equal('The MediaJob "drive-inline" is invalid: spec.destination.provider: Invalid value: "object": '
      + 'drive is available as a saved destination only, never inline\n');
  });

  it('keeps an admitted job\'s spec: a changed manifest is refused, cancel and status writes pass', async () => {
    await tc.kubectl(['apply', '-f', '-'], { input: mediaJob('talk', { format: 'm4a', audioOnly: true }) });
    // Not admitted yet: an edit is stored (and, as docs/gitops.md says, not acted on).
    const early = await tc.kubectl(['apply', '-f', '-'], { input: mediaJob('talk', { format: 'mp3', audioOnly: true }) });
    expect(early.stdout).to.equal('mediajob.mediajobs.io/talk configured\n');

    // What the operator writes when it creates the runner Job.
    await custom.patchNamespacedCustomObjectStatus({ ...ref('talk'), body: { status: { status: 'Processing', jobName: 'talk-runner-1' } } }, MERGE);
    const changed = await tc.kubectl(['apply', '-f', '-'], { input: mediaJob('talk', { format: 'opus', audioOnly: true }), allowFail: true });
    expect(changed.code).to.equal(1);
    expect(changed.stderr).to.equal('The MediaJob "talk" is invalid: spec: Invalid value: "object": the spec of an admitted MediaJob '
      + '(status.jobName is set) cannot change, except spec.cancel: apply a changed request as a new MediaJob\n');
    const viaPatch = await apiError(custom.patchNamespacedCustomObject({ ...ref('talk'), body: { spec: { filename: 'other' } } }, MERGE));
    expect(viaPatch.code).to.equal(422);
    expect(viaPatch.status.details?.causes).to.deep.equal([{
      reason: 'FieldValueInvalid', field: 'spec',
      message: 'Invalid value: "object": the spec of an admitted MediaJob (status.jobName is set) cannot change, except spec.cancel: '
        + 'apply a changed request as a new MediaJob',
    }]);

    const status = await custom.patchNamespacedCustomObjectStatus({ ...ref('talk'), body: { status: { progress: 50 } } }, MERGE) as Record<string, Record<string, unknown>>;
    expect(status.status).to.include({ progress: 50, jobName: 'talk-runner-1' });
    const cancel = await tc.kubectl(['apply', '-f', '-'], { input: mediaJob('talk', { format: 'mp3', audioOnly: true, cancel: true }) });
    expect(cancel.stdout).to.equal('mediajob.mediajobs.io/talk configured\n');
    const stored = await custom.getNamespacedCustomObject(ref('talk')) as Record<string, Record<string, unknown>>;
    expect(stored.spec).to.include({ format: 'mp3', cancel: true });
  });
});
