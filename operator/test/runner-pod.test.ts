// The runner pod as the operator builds it (job-builder.ts), run by the
// local kubelet, which (as root) runs it as its runAsUser and writes its
// Secret with the pod's fsGroup, as a real node does. The image stands for a
// shell script that checks what the runner needs: read its credentials,
// write its /tmp (HOME). A pod spec that gets the ids or modes wrong fails
// here as it would on a real node (every job storage_unreachable).
import { expect } from 'chai';
import * as k8s from '@kubernetes/client-node';
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import type { MediaJob } from '@mediajobs/lib/mediajob/types';
import { buildCredentialsSecret, buildRunnerJob, RUNNER_UID } from '../src/job-builder.js';
import { eventually, kubeConfigFor, startTestCluster, type TestCluster } from '../../local-cluster/test/support.js';

const NS = 'default';
const IMAGE = 'mediajobs/runner:permissions';
// What the runner does with the filesystem, in sh: its credentials file, then a file under HOME (/tmp).
const CHECK = 'id -u; cat "$MEDIAJOBS_CREDENTIALS_DIR/destination.json" && echo && touch "$HOME/work" && echo wrote';

const mj = (name: string): MediaJob => ({
  apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob',
  metadata: { name, namespace: NS, uid: `uid-${name}` },
  spec: {
    jobId: `0b7c0f5e-1111-4222-8333-9444455556${name.slice(-2)}`, owner: { apiKeyId: 'k' }, url: 'http://m/a.mp4', destination: { type: 'managed' },
    format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
    downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false,
    enableProgressWebhook: false,
  },
} as MediaJob);

describe('the runner pod on a kubelet that honours its securityContext', function () {
  this.timeout(30_000);
  let tc: TestCluster;
  let core: k8s.CoreV1Api;
  let batch: k8s.BatchV1Api;

  before(async function () {
    if (process.getuid?.() !== 0) this.skip(); // only a root kubelet switches users
    tc = await startTestCluster({ imageCommands: { [IMAGE]: ['sh', '-c', CHECK] } });
    core = kubeConfigFor(tc.cluster).makeApiClient(k8s.CoreV1Api);
    batch = kubeConfigFor(tc.cluster).makeApiClient(k8s.BatchV1Api);
  });
  after(async () => tc?.stop());

  /** Create the Secret and the Job (without owner: no MediaJob exists here); the pod's phase and log once it ended. */
  async function run(name: string, change: (job: V1Job) => void = () => {}): Promise<{ phase: string; log: string }> {
    const m = mj(name);
    const secret = buildCredentialsSecret(m, { provider: 'managed' });
    delete secret.metadata!.ownerReferences;
    await core.createNamespacedSecret({ namespace: NS, body: secret });
    const job = buildRunnerJob(m, { image: IMAGE, backoffLimit: 0, activeDeadlineSeconds: 60, ttlSecondsAfterFinished: 600 });
    delete job.metadata!.ownerReferences;
    change(job);
    await batch.createNamespacedJob({ namespace: NS, body: job });
    const pod: V1Pod = await eventually(async () => {
      const pods = await core.listNamespacedPod({ namespace: NS, labelSelector: `job-name=${job.metadata!.name}` });
      const p = pods.items[0];
      return p?.status?.phase === 'Succeeded' || p?.status?.phase === 'Failed' ? p : undefined;
    }, 20_000);
    return { phase: pod.status!.phase!, log: await core.readNamespacedPodLog({ name: pod.metadata!.name!, namespace: NS }) };
  }

  it('as built: runs as uid 1000, reads its credentials and writes its /tmp', async () => {
    expect(await run('ok-01')).to.deep.equal({ phase: 'Succeeded', log: `${RUNNER_UID}\n{"provider":"managed"}\nwrote\n` });
  });

  it('with the Secret 0400 and no fsGroup (the defect of issue 17): the credentials are unreadable and the pod fails', async () => {
    const r = await run('bad-02', (job) => {
      const spec = job.spec!.template.spec!;
      delete spec.securityContext!.fsGroup;
      spec.volumes!.find((v) => v.name === 'credentials')!.secret!.defaultMode = 0o400;
    });
    expect(r.phase).to.equal('Failed');
    expect(r.log).to.match(/^1000\n.*Permission denied/s);
  });
});
