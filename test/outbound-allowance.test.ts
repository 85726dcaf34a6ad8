// OUTBOUND_ALLOW_PRIVATE in every part that contacts addresses for users:
// the gateway's and the operator's settings, and the runner pod the operator
// builds, whose egress proxy reads the policy back from the pod's
// environment. Decisions only: nothing is contacted.
import { expect } from 'chai';
import type * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { buildMediaJob } from '@mediajobs/lib/mediajob/build';
import type { MediaJobOptions } from '@mediajobs/lib/mediajob/types';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { loadGatewayConfig } from '../api-gateway/src/config.js';
import { RunnerChildren } from '../operator/src/children.js';
import { loadOperatorConfig } from '../operator/src/config.js';
import { loadRunnerEnv } from '../runner-image/src/config.js';

const OPTIONS: MediaJobOptions = {
  url: 'https://media.example/v.mp4', format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best',
  audioOnly: false, downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false,
  enableProgressWebhook: false,
};

/** Where each part's policy sends a job: [URL, contacted]. */
const PROBES: [string, boolean][] = [
  ['http://127.0.0.1:9000/', true],
  ['http://192.168.1.20/v.mp4', true],
  ['http://[fd12::7]/', true],
  ['http://169.254.169.254/latest/meta-data/', false],
  ['http://100.100.100.200/', false],
];

const decisions = (allowed: readonly string[]) => {
  const policy = new OutboundPolicy({ allowed });
  return PROBES.map(([url]) => policy.checkUrl(url).ok);
};
const OPEN = PROBES.map(([, ok]) => ok);
const CLOSED = PROBES.map(() => false);

/** The environment of the runner pod the operator creates with these settings, as the runner reads it. */
async function runnerEnvOf(operatorEnv: Record<string, string>): Promise<NodeJS.ProcessEnv> {
  let job: k8s.V1Job | undefined;
  const made = async ({ body }: { body: k8s.KubernetesObject }) => body;
  const kube = {
    core: { createNamespacedSecret: made, createNamespacedServiceAccount: made },
    batch: { createNamespacedJob: async ({ body }: { body: k8s.V1Job }) => (job = body) },
    // The runner's own identity (docs/adr/0021), made before its Job.
    rbac: { createNamespacedRole: made, createNamespacedRoleBinding: made },
  } as unknown as ConstructorParameters<typeof RunnerChildren>[0]['kube'];
  const children = new RunnerChildren({
    kube,
    cfg: loadOperatorConfig({ DATABASE_URL: 'postgres://x@127.0.0.1/db', ...operatorEnv }),
    destinations: { document: async () => ({ provider: 'managed' }), runnerEnv: () => ({}) },
    log: pino({ level: 'silent' }),
  });
  const mj = buildMediaJob({ jobId: '0b7c0f5e-1111-4222-8333-944445555666', apiKeyId: 'k', namespace: 'default', options: OPTIONS });
  mj.metadata.uid = 'uid-1';
  await children.ensure(mj);
  // Later entries win, as in a pod.
  return Object.fromEntries(job!.spec!.template.spec!.containers[0]!.env!.map((e) => [e.name, e.value]));
}

describe('OUTBOUND_ALLOW_PRIVATE across the parts', () => {
  it('opens loopback and private ranges for the gateway, never link-local or metadata', () => {
    const gateway = (env: Record<string, string>) => loadGatewayConfig({ DATABASE_URL: 'postgres://x@127.0.0.1/db', SECRET_KEYS: 'k', ...env });
    expect(decisions(gateway({ OUTBOUND_ALLOW_PRIVATE: 'true' }).OUTBOUND_ALLOWED_CIDRS)).to.deep.equal(OPEN);
    expect(decisions(gateway({}).OUTBOUND_ALLOWED_CIDRS)).to.deep.equal(CLOSED);
  });

  it('gives runner pods the operator\'s policy, and a RUNNER_ENV entry cannot switch it on', async () => {
    expect(decisions(loadOperatorConfig({ DATABASE_URL: 'postgres://x@127.0.0.1/db', OUTBOUND_ALLOW_PRIVATE: 'true' }).OUTBOUND_ALLOWED_CIDRS))
      .to.deep.equal(OPEN);
    const on = loadRunnerEnv({ ...await runnerEnvOf({ OUTBOUND_ALLOW_PRIVATE: 'true' }), MEDIAJOB_SPEC: '{}' });
    expect(decisions(on.OUTBOUND_ALLOWED_CIDRS)).to.deep.equal(OPEN);
    const off = loadRunnerEnv({ ...await runnerEnvOf({ RUNNER_ENV: '{"OUTBOUND_ALLOW_PRIVATE":"true"}' }), MEDIAJOB_SPEC: '{}' });
    expect(off.OUTBOUND_ALLOW_PRIVATE).to.equal(false);
    expect(decisions(off.OUTBOUND_ALLOWED_CIDRS)).to.deep.equal(CLOSED);
  });

  it('combines with OUTBOUND_ALLOWED_CIDRS in the runner as in the operator', async () => {
    const env = await runnerEnvOf({ OUTBOUND_ALLOWED_CIDRS: '192.168.1.0/24' });
    expect(decisions(loadRunnerEnv({ ...env, MEDIAJOB_SPEC: '{}' }).OUTBOUND_ALLOWED_CIDRS)).to.deep.equal([false, true, false, false, false]);
  });
});
