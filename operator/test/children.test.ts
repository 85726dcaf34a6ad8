// A MediaJob's children (credentials Secret, runner Job) against a fake API
// server: what is missing is created, what this MediaJob controls is taken
// as its own, and an object of the same name that it does not control is
// never adopted: the MediaJob fails for good with a reason that says why.
import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { waitIfThrottled } from '@mediajobs/lib/kube-client';
import { pino } from 'pino';
import { PermanentError, TemporaryError } from '@mediajobs/lib/reconcile';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type Owned } from '@mediajobs/lib/mediajob/types';
import { NAME_TAKEN_REASON, RunnerChildren, isControlledBy, type ChildrenDeps } from '../src/children.js';
import { DestinationUnresolvable, STORAGE_UNREACHABLE_MESSAGE } from '../src/destinations.js';
import { credentialsSecretName, runnerIdentityName, runnerJobName } from '../src/job-builder.js';
import { makeKube } from '../src/kube.js';
import { startTestCluster, type TestCluster } from '../../local-cluster/test/support.js';

const UID = '11111111-2222-4333-8444-555555555555';

const mj: Owned<MediaJob> = {
  apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob',
  metadata: { name: 'clip', namespace: 'default', uid: UID },
  spec: {
    jobId: '0b7c0f5e-1111-4222-8333-944445555666', owner: { apiKeyId: 'k' }, url: 'http://m/a.mp4', format: 'mp4', videoCodec: 'copy',
    audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false, downloadSubtitles: false, downloadThumbnail: false,
    liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false, destination: { type: 'managed' },
  },
};

const apiError = (code: number, reason: string) => new k8s.ApiException(code, reason, JSON.stringify({ kind: 'Status', reason, code }), {});
const ownedBy = (uid: string, controller = true) => [{ apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', name: 'clip', uid, controller }];

/** An API server holding Secrets and Jobs by name, recording what was asked of it. */
function fakeApi(existing: { secrets?: k8s.V1Secret[]; jobs?: k8s.V1Job[]; roles?: k8s.V1Role[] } = {}) {
  const secrets = new Map((existing.secrets ?? []).map((s) => [s.metadata!.name!, s]));
  const jobs = new Map((existing.jobs ?? []).map((j) => [j.metadata!.name!, j]));
  const serviceAccounts = new Map<string, k8s.V1ServiceAccount>();
  const roles = new Map((existing.roles ?? []).map((r) => [r.metadata!.name!, r]));
  const roleBindings = new Map<string, k8s.V1RoleBinding>();
  const calls: string[] = [];
  const create = <T extends k8s.KubernetesObject>(store: Map<string, T>, kind: string) => async ({ body }: { body: T }) => {
    calls.push(`create ${kind}`);
    if (store.has(body.metadata!.name!)) throw apiError(409, 'AlreadyExists');
    const made = { ...body, metadata: { ...body.metadata, uid: `uid-${kind}` } };
    store.set(body.metadata!.name!, made);
    return made;
  };
  const read = <T>(store: Map<string, T>, kind: string) => async ({ name }: { name: string }) => {
    calls.push(`read ${kind}`);
    const o = store.get(name);
    if (!o) throw apiError(404, 'NotFound');
    return o;
  };
  const core = {
    createNamespacedServiceAccount: create(serviceAccounts, 'ServiceAccount'),
    readNamespacedServiceAccount: read(serviceAccounts, 'ServiceAccount'),
    createNamespacedSecret: create(secrets, 'Secret'),
    readNamespacedSecret: read(secrets, 'Secret'),
    deleteNamespacedSecret: async ({ name, body }: { name: string; body?: k8s.V1DeleteOptions }) => {
      calls.push(`delete Secret uid=${body?.preconditions?.uid}`);
      secrets.delete(name);
    },
  } as unknown as k8s.CoreV1Api;
  const batch = { createNamespacedJob: create(jobs, 'Job'), readNamespacedJob: read(jobs, 'Job') } as unknown as k8s.BatchV1Api;
  const rbac = {
    createNamespacedRole: create(roles, 'Role'), readNamespacedRole: read(roles, 'Role'),
    createNamespacedRoleBinding: create(roleBindings, 'RoleBinding'), readNamespacedRoleBinding: read(roleBindings, 'RoleBinding'),
  } as unknown as k8s.RbacAuthorizationV1Api;
  return { secrets, jobs, serviceAccounts, roles, roleBindings, calls, kube: { core, batch, rbac } };
}

function children(
  api: ReturnType<typeof fakeApi>, document: ChildrenDeps['destinations']['document'] = async () => ({ provider: 'managed' }),
  cfg: Partial<ChildrenDeps['cfg']> = {},
) {
  return new RunnerChildren({
    kube: api.kube,
    cfg: {
      RUNNER_ENV: {}, RUNNER_IMAGE: 'mediajobs/runner:test', JOB_BACKOFF_LIMIT: 0, JOB_ACTIVE_DEADLINE_SECONDS: 60, JOB_TTL_SECONDS_AFTER_FINISHED: 60,
      RUNNER_SERVICE_ACCOUNT: undefined, RUNNER_RESOURCES: undefined, ...cfg,
    } as unknown as ChildrenDeps['cfg'],
    destinations: { document, runnerEnv: () => ({}) },
    log: pino({ level: 'silent' }),
  });
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

describe('runner children of a MediaJob', () => {
  it('creates the runner\'s identity, the credentials Secret and then the Job, all controlled by the MediaJob', async () => {
    const api = fakeApi();
    const job = await children(api).ensure(mj);
    expect(api.calls).to.deep.equal(['create ServiceAccount', 'create Role', 'create RoleBinding', 'create Secret', 'create Job']);
    expect(job.metadata!.name).to.equal(runnerJobName(mj));
    expect(isControlledBy(job, mj)).to.equal(true);
    expect(isControlledBy(api.secrets.get(credentialsSecretName(mj))!, mj)).to.equal(true);
    // The runner runs as its own account, which may read and patch this MediaJob's status and nothing else.
    const name = runnerIdentityName(mj);
    expect(job.spec!.template.spec!.serviceAccountName).to.equal(name);
    expect(api.roles.get(name)!.rules).to.deep.equal([
      { apiGroups: ['mediajobs.io'], resources: ['mediajobs/status'], resourceNames: ['clip'], verbs: ['get', 'patch'] },
    ]);
    expect(api.roleBindings.get(name)).to.deep.include({
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name }, subjects: [{ kind: 'ServiceAccount', name, namespace: 'default' }],
    });
    for (const o of [api.serviceAccounts.get(name)!, api.roles.get(name)!, api.roleBindings.get(name)!]) expect(isControlledBy(o, mj)).to.equal(true);
  });

  it('fails for good when the runner Role\'s name is taken by a Role this MediaJob does not control (it could grant anything)', async () => {
    const api = fakeApi({ roles: [{ metadata: { name: runnerIdentityName(mj), namespace: 'default' }, rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }] }] });
    const err = await rejection(children(api).ensure(mj));
    expect(err).to.be.instanceOf(PermanentError).and.include({ reason: NAME_TAKEN_REASON });
    expect(api.calls).to.not.include('create Job');
  });

  it('uses RUNNER_SERVICE_ACCOUNT, when set, instead of an identity per job', async () => {
    const api = fakeApi();
    const job = await children(api, undefined, { RUNNER_SERVICE_ACCOUNT: 'shared-runner' }).ensure(mj);
    expect(api.calls).to.deep.equal(['create Secret', 'create Job']);
    expect(job.spec!.template.spec!.serviceAccountName).to.equal('shared-runner');
  });

  it('takes over a Job and Secret it made in an earlier pass (AlreadyExists, controlled by this MediaJob)', async () => {
    const mine = { metadata: { name: runnerJobName(mj), namespace: 'default', ownerReferences: ownedBy(UID) }, spec: { template: {} } };
    const api = fakeApi({
      secrets: [{ metadata: { name: credentialsSecretName(mj), namespace: 'default', ownerReferences: ownedBy(UID) } }],
      jobs: [mine],
    });
    const job = await children(api).ensure(mj);
    expect(job).to.equal(mine);
    expect(api.calls).to.deep.equal(['create ServiceAccount', 'create Role', 'create RoleBinding', 'create Secret', 'read Secret', 'create Job', 'read Job']);
  });

  it('stands for the Job cache with the Job it created until the cache shows it: a pass woken before then sends no create again', async () => {
    const api = fakeApi();
    const runner = children(api);
    expect(runner.created(mj), 'nothing created yet').to.equal(undefined);
    const job = await runner.ensure(mj);
    expect(runner.created(mj)).to.equal(job);
    // The next attempt has a Job of its own: the first attempt's is not it.
    expect(runner.created({ ...mj, status: { status: 'Pending', attempt: 2 } } as MediaJob)).to.equal(undefined);
    runner.owned(job, mj);
    expect(runner.created(mj), 'the cache has it now').to.equal(undefined);
    expect(api.calls.filter((c) => c === 'create Job')).to.have.length(1);
  });

  it('stands for no Job the informer saw deleted, though the cache never showed it: the next pass sees it gone', async () => {
    const api = fakeApi();
    const runner = children(api);
    const job = await runner.ensure(mj);
    // Another MediaJob's Job of the same name, and another name under this owner: neither is the one made.
    runner.jobDeleted({ metadata: { name: job.metadata!.name!, ownerReferences: ownedBy('another-uid') } });
    runner.jobDeleted({ metadata: { name: 'another-job', ownerReferences: ownedBy(UID) } });
    expect(runner.created(mj), 'other Jobs\' deletes leave the stand-in').to.equal(job);
    runner.jobDeleted({ metadata: { name: job.metadata!.name!, namespace: 'default', ownerReferences: ownedBy(UID) } });
    expect(runner.created(mj), 'its own delete ends it at once, not after 30 s').to.equal(undefined);
  });

  it('fails for good, without adopting it, when the Job name is taken by a Job this MediaJob does not control', async () => {
    for (const ownerReferences of [undefined, ownedBy('another-uid'), ownedBy(UID, false)]) {
      const api = fakeApi({ jobs: [{ metadata: { name: runnerJobName(mj), namespace: 'default', ownerReferences }, spec: { template: {} } }] });
      const err = await rejection(children(api).ensure(mj));
      expect(err, JSON.stringify(ownerReferences)).to.be.instanceOf(PermanentError);
      expect(err).to.include({ reason: NAME_TAKEN_REASON, message: `A Job named ${runnerJobName(mj)} already exists and is not controlled by this MediaJob` });
    }
  });

  it('refuses a cached Job it does not control as well', () => {
    const c = children(fakeApi());
    const foreign = { metadata: { name: runnerJobName(mj), ownerReferences: ownedBy('another-uid') } };
    expect(() => c.owned(foreign, mj)).to.throw(PermanentError).with.property('reason', NAME_TAKEN_REASON);
    const mine = { metadata: { name: runnerJobName(mj), ownerReferences: ownedBy(UID) } };
    expect(c.owned(mine, mj)).to.equal(mine);
  });

  it('never mounts a Secret of someone else\'s: the MediaJob fails and no Job is created', async () => {
    const api = fakeApi({ secrets: [{ metadata: { name: credentialsSecretName(mj), namespace: 'default' }, data: { 'destination.json': 'e30=' } }] });
    const err = await rejection(children(api).ensure(mj));
    expect(err).to.be.instanceOf(PermanentError).and.include({ reason: NAME_TAKEN_REASON });
    expect(api.calls).to.not.include('create Job');
  });

  it('an unresolvable destination is a permanent storage_unreachable failure; other errors stay temporary', async () => {
    const api = fakeApi();
    const err = await rejection(children(api, async () => { throw new DestinationUnresolvable('secret_not_found'); }).ensure(mj));
    expect(err).to.be.instanceOf(PermanentError).and.include({ reason: 'storage_unreachable', message: STORAGE_UNREACHABLE_MESSAGE });
    expect((err as PermanentError).cause).to.be.instanceOf(DestinationUnresolvable);
    expect(api.calls).to.deep.equal([]);
    const flaky = await rejection(children(api, async () => { throw apiError(500, 'InternalError'); }).ensure(mj));
    expect(flaky).to.not.be.instanceOf(PermanentError);
  });

  it('a Job in the way that is gone when read means: try the pass again', async () => {
    const api = fakeApi();
    api.kube.batch.createNamespacedJob = (async () => { throw apiError(409, 'AlreadyExists'); }) as never;
    const err = await rejection(children(api).ensure(mj));
    expect(err).to.be.instanceOf(TemporaryError);
  });

  it('removes only its own credentials Secret when the job finishes, by uid', async () => {
    const api = fakeApi({ secrets: [{ metadata: { name: credentialsSecretName(mj), uid: 'secret-uid', ownerReferences: ownedBy(UID) } }] });
    await children(api).removeCredentials(mj);
    expect(api.calls).to.deep.equal(['read Secret', 'delete Secret uid=secret-uid']);
    await children(api).removeCredentials(mj);
    expect(api.calls.slice(2)).to.deep.equal(['read Secret']);

    const foreign = fakeApi({ secrets: [{ metadata: { name: credentialsSecretName(mj), uid: 'x', ownerReferences: ownedBy('another-uid') } }] });
    await children(foreign).removeCredentials(mj);
    expect(foreign.calls).to.deep.equal(['read Secret']);
    expect(foreign.secrets.size).to.equal(1);
  });
});

describe('runner children of a MediaJob against a throttling API server (the local cluster)', () => {
  let tc: TestCluster;
  before(async () => {
    tc = await startTestCluster();
    await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url)), '-f', fileURLToPath(new URL('../../crds/mediabatch.yaml', import.meta.url))]);
  });
  after(async () => {
    await tc?.stop();
  });

  it('creates after a 429 only what the pass before did not, once the API server\'s Retry-After is waited', async () => {
    const kube = makeKube(tc.cluster.kubeconfigPath);
    // A MediaJob that exists, so that the garbage collector keeps what it owns.
    const { metadata } = await kube.custom.createNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL,
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaJob', metadata: { name: 'throttled' }, spec: { url: mj.spec.url, owner: { apiKeyId: '33333333-4444-4555-8666-777777777777' } } },
    }) as MediaJob;
    const owned: Owned<MediaJob> = { ...mj, metadata };
    const runner = new RunnerChildren({
      kube,
      cfg: {
        RUNNER_ENV: {}, RUNNER_IMAGE: 'mediajobs/runner:test', JOB_BACKOFF_LIMIT: 0, JOB_ACTIVE_DEADLINE_SECONDS: 60, JOB_TTL_SECONDS_AFTER_FINISHED: 60,
        RUNNER_SERVICE_ACCOUNT: undefined, RUNNER_RESOURCES: undefined,
      } as unknown as ChildrenDeps['cfg'],
      destinations: { document: async () => ({ provider: 'managed' }), runnerEnv: () => ({}) },
      log: pino({ level: 'silent' }),
    });
    // A bucket of two writes: two of the four creates made at once go through, two are told 429.
    tc.cluster.throttleWrites(2);
    const err = await rejection(runner.ensure(owned));
    const wait = waitIfThrottled(err);
    expect(wait, 'a 429 waits what the API server said').to.be.instanceOf(TemporaryError).and.include({ delayMs: 1000 });
    tc.cluster.throttleWrites(undefined);
    tc.cluster.resetRequestCounts();

    const job = await runner.ensure(owned);
    expect(isControlledBy(job, owned)).to.equal(true);
    const counts = tc.cluster.requestCounts();
    const identityAndSecret = ['serviceaccounts', 'roles.rbac.authorization.k8s.io', 'rolebindings.rbac.authorization.k8s.io', 'secrets']
      .reduce((n, r) => n + (counts[`create ${r}`] ?? 0), 0);
    // The two made before are neither created again (a write spent on AlreadyExists) nor read back.
    expect(identityAndSecret, JSON.stringify(counts)).to.equal(2);
    expect(counts['create jobs.batch']).to.equal(1);
    expect(Object.keys(counts).filter((k) => k.startsWith('get ')), 'nothing read back').to.deep.equal([]);
    const name = runnerIdentityName(owned);
    const core = kube.core;
    for (const read of [() => core.readNamespacedServiceAccount({ name, namespace: 'default' }), () => kube.rbac.readNamespacedRole({ name, namespace: 'default' }),
      () => kube.rbac.readNamespacedRoleBinding({ name, namespace: 'default' }), () => core.readNamespacedSecret({ name: credentialsSecretName(owned), namespace: 'default' })]) {
      expect(isControlledBy(await read(), owned)).to.equal(true);
    }
  });
});
