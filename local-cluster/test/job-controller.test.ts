// Jobs end to end on the in-process API server: defaulting and validation,
// the Job controller, the local kubelet running real processes, and the TTL
// controller.
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApiServer } from '../src/apiserver.js';
import { EVENTS, JOBS, PODS, SECRETS } from '../src/builtin-types.js';
import { defaultJob, validateJob } from '../src/controllers/job-defaults.js';
import { JobController, TtlController } from '../src/controllers/job-controller.js';
import { Kubelet, type KubeletOptions } from '../src/controllers/kubelet.js';
import type { Condition, Job, Pod } from '../src/controllers/pod-types.js';
import { StatusError } from '../src/errors.js';
import type { KubeObject } from '../src/types.js';

const NS = 'default';

function jobManifest(name: string, command: string[], spec: Record<string, unknown> = {}, podSpec: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: 'batch/v1', kind: 'Job', metadata: { name },
    spec: {
      ...spec,
      template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'busybox:1.36', command }], ...podSpec } },
    },
  };
}

async function waitFor<T>(what: string, fn: () => T | undefined | false, timeoutMs = 10_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const cond = (job: Job | undefined, type: string): Condition | undefined => job?.status?.conditions?.find((c) => c.type === type && c.status === 'True');

describe('Job defaults and validation', () => {
  const base = () => {
    const j = jobManifest('demo', ['sh', '-c', 'echo hi']);
    j.metadata.uid = '11111111-2222-3333-4444-555555555555';
    return j as Job;
  };

  it('defaults the spec, selector and template like kube-apiserver', () => {
    const j = base();
    defaultJob(j);
    const uid = j.metadata.uid!;
    const labels = { 'batch.kubernetes.io/controller-uid': uid, 'batch.kubernetes.io/job-name': 'demo', 'controller-uid': uid, 'job-name': 'demo' };
    expect(j.metadata.labels).to.deep.equal(labels);
    expect(j.spec).to.deep.include({
      parallelism: 1, completions: 1, backoffLimit: 6, completionMode: 'NonIndexed', suspend: false,
      podReplacementPolicy: 'TerminatingOrFailed', selector: { matchLabels: { 'batch.kubernetes.io/controller-uid': uid } },
    });
    expect(j.spec).not.to.have.property('manualSelector');
    expect(j.spec!.template!.metadata!.labels).to.deep.equal(labels);
    expect(j.spec!.template!.spec).to.deep.include({
      restartPolicy: 'Never', dnsPolicy: 'ClusterFirst', schedulerName: 'default-scheduler', securityContext: {}, terminationGracePeriodSeconds: 30,
    });
    expect(j.spec!.template!.spec!.containers![0]).to.deep.include({
      terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File', imagePullPolicy: 'IfNotPresent', resources: {},
    });
    expect(validateJob(j)).to.deep.equal([]);
    const latest = jobManifest('x', ['true']) as Job;
    latest.spec!.template!.spec!.containers![0]!.image = 'busybox';
    latest.metadata.uid = 'u';
    defaultJob(latest);
    expect(latest.spec!.template!.spec!.containers![0]!.imagePullPolicy).to.equal('Always');
  });

  it('rejects what kube-apiserver rejects, with its messages', () => {
    const long = jobManifest('a'.repeat(64), ['true']);
    long.metadata.uid = 'u';
    defaultJob(long);
    expect(validateJob(long).map((c) => `${c.field}: ${c.message}`)).to.deep.equal([
      `spec.template.labels: Invalid value: "${'a'.repeat(64)}": must be no more than 63 characters`,
    ]);

    const always = base();
    delete (always.spec!.template!.spec as Record<string, unknown>).restartPolicy;
    defaultJob(always);
    expect(validateJob(always)).to.deep.equal([{
      reason: 'FieldValueNotSupported', field: 'spec.template.spec.restartPolicy', message: 'Unsupported value: "Always": supported values: "OnFailure", "Never"',
    }]);

    const noImage = base();
    delete noImage.spec!.template!.spec!.containers![0]!.image;
    delete noImage.spec!.template!.spec!.containers![0]!.name;
    defaultJob(noImage);
    expect(validateJob(noImage).map((c) => c.field)).to.deep.equal(['spec.template.spec.containers[0].name', 'spec.template.spec.containers[0].image']);

    const neg = base();
    neg.spec!.backoffLimit = -1;
    defaultJob(neg);
    expect(validateJob(neg)[0]!.message).to.equal('Invalid value: -1: must be greater than or equal to 0');
  });

  it('keeps the selector and template immutable', () => {
    const old = base();
    defaultJob(old);
    old.status = { startTime: '2024-01-01T00:00:00Z' };
    const next = structuredClone(old);
    next.spec!.template!.spec!.containers![0]!.command = ['sh', '-c', 'echo changed'];
    next.spec!.selector = { matchLabels: { ...next.spec!.selector!.matchLabels, extra: 'x' } };
    defaultJob(next, old);
    const causes = validateJob(next, old);
    expect(causes.map((c) => c.field)).to.include.members(['spec.selector', 'spec.template']);
    const sel = causes.find((c) => c.field === 'spec.selector' && c.message.endsWith('field is immutable'))!;
    expect(sel.message).to.equal(`Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"batch.kubernetes.io/controller-uid":"${old.metadata.uid}", "extra":"x"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable`);
    expect(causes.find((c) => c.field === 'spec.template')!.message).to.match(/^Invalid value: core\.PodTemplateSpec\{.*\}: field is immutable$/);
    // A spec change elsewhere (parallelism) is fine.
    const scaled = structuredClone(old);
    scaled.spec!.parallelism = 3;
    expect(validateJob(scaled, old)).to.deep.equal([]);
  });
});

describe('Job controller and local kubelet', function () {
  this.timeout(30_000);
  let api: ApiServer;
  let kubelet: Kubelet;
  let jobs: JobController;
  let ttl: TtlController;
  let workDir: string;

  function startCluster(kubeletOpts: Partial<KubeletOptions> = {}): void {
    api = new ApiServer();
    api.bootstrap();
    workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'job-controller-test-'));
    kubelet = new Kubelet(api, { workDir, restartBackoffBaseMs: 50, retryBaseMs: 50, retryMaxMs: 200, stopGraceMs: 500, ...kubeletOpts });
    jobs = new JobController(api, { backoffBaseMs: 20, backoffMaxMs: 200 });
    ttl = new TtlController(api);
    jobs.start();
    ttl.start();
    kubelet.start();
  }

  afterEach(async () => {
    jobs?.stop();
    ttl?.stop();
    await kubelet?.stop();
    api?.gc.stop();
    if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
  });

  const getJob = (name: string) => api.get(JOBS, NS, name) as Job | undefined;
  const podsOf = (job: Job) => (api.list(PODS, { namespace: NS }) as Pod[]).filter((p) => p.metadata.ownerReferences?.[0]?.uid === job.metadata.uid);
  const events = (name: string) => api.list(EVENTS, { namespace: NS }).filter((e) => (e.involvedObject as { name: string }).name === name);

  it('runs a Job to Complete, with the status, pod and events of a real cluster', async () => {
    startCluster();
    const created = api.create(JOBS, NS, jobManifest('demo', ['sh', '-c', 'echo hi'])) as Job;
    const job = await waitFor('Complete', () => cond(getJob('demo'), 'Complete') && getJob('demo'));
    expect(job.status).to.include({ succeeded: 1, ready: 0, terminating: 0 });
    expect(job.status).not.to.have.property('active');
    expect(job.status!.uncountedTerminatedPods).to.deep.equal({});
    expect(job.status!.startTime).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(job.status!.completionTime).to.equal(cond(job, 'Complete')!.lastTransitionTime);
    expect(job.status!.conditions!.map((c) => [c.type, c.status, c.reason, c.message])).to.deep.equal([
      ['SuccessCriteriaMet', 'True', 'CompletionsReached', 'Reached expected number of succeeded pods'],
      ['Complete', 'True', 'CompletionsReached', 'Reached expected number of succeeded pods'],
    ]);
    expect(cond(job, 'Complete')).to.have.keys('type', 'status', 'reason', 'message', 'lastProbeTime', 'lastTransitionTime');

    const [pod] = podsOf(created);
    expect(pod).to.not.equal(undefined);
    expect(pod!.metadata.name).to.match(/^demo-[a-z0-9]{5}$/);
    expect(pod!.metadata.ownerReferences).to.deep.equal([{ apiVersion: 'batch/v1', kind: 'Job', name: 'demo', uid: created.metadata.uid, controller: true, blockOwnerDeletion: true }]);
    expect(pod!.metadata.labels).to.include({ 'batch.kubernetes.io/job-name': 'demo', 'job-name': 'demo', 'controller-uid': created.metadata.uid });
    expect(pod!.metadata.finalizers ?? []).not.to.include('batch.kubernetes.io/job-tracking');
    expect(pod!.status!.phase).to.equal('Succeeded');
    const term = pod!.status!.containerStatuses![0]!.state.terminated!;
    expect(term).to.include({ exitCode: 0, reason: 'Completed' });
    expect(term.containerID).to.match(/^local:\/\/\d+$/);
    expect(pod!.status!.hostIP).to.equal('127.0.0.1');
    expect(pod!.status!.conditions!.map((c) => `${c.type}=${c.status}${c.reason ? `/${c.reason}` : ''}`)).to.deep.equal([
      'PodReadyToStartContainers=False', 'Initialized=True/PodCompleted', 'Ready=False/PodCompleted', 'ContainersReady=False/PodCompleted', 'PodScheduled=True',
    ]);
    expect(kubelet.logs(NS, pod!.metadata.name!)).to.equal('hi\n');

    const evs = events('demo').map((e) => [e.type, e.reason, e.message, (e.source as { component: string }).component]);
    expect(evs).to.deep.include(['Normal', 'SuccessfulCreate', `Created pod: ${pod!.metadata.name}`, 'job-controller']);
    expect(evs).to.deep.include(['Normal', 'Completed', 'Job completed', 'job-controller']);
  });

  it('says a container started as information, not a warning: a job that runs well prints nothing at make run\'s warn level', async () => {
    const said: { level: string; msg: string }[] = [];
    startCluster({ logger: (msg, _extra, level = 'warn') => said.push({ level, msg }) });
    api.create(JOBS, NS, jobManifest('quiet', ['sh', '-c', 'exit 0']));
    await waitFor('Complete', () => cond(getJob('quiet'), 'Complete'));
    expect(said).to.deep.include({ level: 'info', msg: 'container started' });
    expect(said.filter((s) => s.level === 'warn')).to.deep.equal([]);
  });

  it('fails a Job past its backoffLimit: failed = backoffLimit + 1, BackoffLimitExceeded', async () => {
    startCluster();
    api.create(JOBS, NS, jobManifest('bad', ['sh', '-c', 'echo oops >&2; exit 3'], { backoffLimit: 1 }));
    const job = await waitFor('Failed', () => cond(getJob('bad'), 'Failed') && getJob('bad'));
    expect(job.status).to.include({ failed: 2, ready: 0, terminating: 0 });
    expect(job.status).not.to.have.property('succeeded');
    expect(job.status!.conditions!.map((c) => [c.type, c.reason, c.message])).to.deep.equal([
      ['FailureTarget', 'BackoffLimitExceeded', 'Job has reached the specified backoff limit'],
      ['Failed', 'BackoffLimitExceeded', 'Job has reached the specified backoff limit'],
    ]);
    const pods = podsOf(job);
    expect(pods).to.have.length(2);
    for (const p of pods) {
      expect(p.status!.phase).to.equal('Failed');
      expect(p.status!.containerStatuses![0]!.state.terminated).to.include({ exitCode: 3, reason: 'Error' });
    }
    expect(events('bad').map((e) => [e.type, e.reason])).to.deep.include(['Warning', 'BackoffLimitExceeded']);
  });

  it('enforces activeDeadlineSeconds: DeadlineExceeded and the running pod is killed', async () => {
    startCluster({ gracePeriodSeconds: 1 });
    api.create(JOBS, NS, jobManifest('slow', ['sleep', '30'], { activeDeadlineSeconds: 1 }));
    const job = await waitFor('Failed', () => cond(getJob('slow'), 'Failed') && getJob('slow'), 15_000);
    expect(cond(job, 'Failed')).to.include({ reason: 'DeadlineExceeded', message: 'Job was active longer than specified deadline' });
    expect(cond(job, 'FailureTarget')).to.include({ reason: 'DeadlineExceeded' });
    expect(job.status).to.include({ failed: 1, terminating: 0 });
    await waitFor('pod gone', () => podsOf(job).length === 0);
  });

  it('deletes a finished Job after ttlSecondsAfterFinished, with its pods', async () => {
    startCluster();
    const job = api.create(JOBS, NS, jobManifest('short', ['true'], { ttlSecondsAfterFinished: 0 })) as Job;
    await waitFor('job deleted', () => !getJob('short'));
    await waitFor('pods deleted', () => podsOf(job).length === 0);
  });

  it('suspends and resumes', async () => {
    startCluster();
    api.create(JOBS, NS, jobManifest('later', ['sh', '-c', 'echo resumed'], { suspend: true }));
    let job = await waitFor('Suspended', () => cond(getJob('later'), 'Suspended') && getJob('later'));
    expect(cond(job, 'Suspended')).to.include({ reason: 'JobSuspended', message: 'Job suspended' });
    expect(job.status).not.to.have.property('startTime');
    expect(podsOf(job)).to.have.length(0);
    api.mutate(JOBS, NS, 'later', (o) => {
      (o.spec as Record<string, unknown>).suspend = false;
    });
    job = await waitFor('Complete', () => cond(getJob('later'), 'Complete') && getJob('later'));
    const suspended = job.status!.conditions!.find((c) => c.type === 'Suspended')!;
    expect(suspended).to.include({ status: 'False', reason: 'JobResumed', message: 'Job resumed' });
    expect(events('later').map((e) => e.reason)).to.include.members(['Suspended', 'Resumed', 'Completed']);
  });

  it('suspending a running Job stops its pod', async () => {
    startCluster({ gracePeriodSeconds: 1 });
    const job = api.create(JOBS, NS, jobManifest('busy', ['sleep', '30'])) as Job;
    await waitFor('running', () => podsOf(job).some((p) => p.status?.phase === 'Running'));
    api.mutate(JOBS, NS, 'busy', (o) => {
      (o.spec as Record<string, unknown>).suspend = true;
    });
    const j = await waitFor('suspended, no pods', () => {
      const cur = getJob('busy');
      return cond(cur, 'Suspended') && podsOf(job).length === 0 && cur?.status?.terminating === 0 && cur;
    });
    expect(j.status).not.to.have.property('active');
    expect(j.status).not.to.have.property('failed');
  });

  it('gives the process Secret env and volume files, and the termination message', async () => {
    startCluster();
    api.create(SECRETS, NS, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'creds' }, data: { token: Buffer.from('abc123').toString('base64') } });
    const job = api.create(JOBS, NS, jobManifest('secretive', ['sh', '-c', 'echo "env=$TOKEN"; echo "file=$(cat /etc/creds/token)"; echo "$(POD_NAME) done" > /dev/termination-log'], {}, {
      volumes: [{ name: 'creds', secret: { secretName: 'creds' } }],
      containers: [{
        name: 'main', image: 'busybox:1.36', command: ['sh', '-c', 'echo "env=$TOKEN"; echo "file=$(cat /etc/creds/token)"; echo "$(POD_NAME) done" > /dev/termination-log'],
        env: [
          { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'creds', key: 'token' } } },
          { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
        ],
        volumeMounts: [{ name: 'creds', mountPath: '/etc/creds', readOnly: true }],
      }],
    })) as Job;
    await waitFor('Complete', () => cond(getJob('secretive'), 'Complete'));
    const [pod] = podsOf(job);
    expect(kubelet.logs(NS, pod!.metadata.name!)).to.equal('env=abc123\nfile=abc123\n');
    expect(pod!.status!.containerStatuses![0]!.state.terminated!.message).to.equal(`${pod!.metadata.name} done\n`);
  });

  it('keeps a container waiting with CreateContainerConfigError until its Secret exists', async () => {
    startCluster();
    const job = api.create(JOBS, NS, jobManifest('needy', ['sh', '-c', 'echo "$PASSWORD"'], {}, {
      containers: [{ name: 'main', image: 'busybox:1.36', command: ['sh', '-c', 'echo "$PASSWORD"'], env: [{ name: 'PASSWORD', valueFrom: { secretKeyRef: { name: 'later', key: 'pw' } } }] }],
    })) as Job;
    const waiting = await waitFor('config error', () => podsOf(job)[0]?.status?.containerStatuses?.[0]?.state.waiting?.reason === 'CreateContainerConfigError' && podsOf(job)[0]);
    expect(waiting.status!.phase).to.equal('Pending');
    expect(waiting.status!.containerStatuses![0]!.state.waiting!.message).to.equal('secret "later" not found');
    api.create(SECRETS, NS, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'later' }, data: { pw: Buffer.from('hunter2').toString('base64') } });
    await waitFor('Complete', () => cond(getJob('needy'), 'Complete'));
    expect(kubelet.logs(NS, podsOf(job)[0]!.metadata.name!)).to.equal('hunter2\n');
  });

  it('restarts a container in place under restartPolicy OnFailure', async () => {
    startCluster();
    const job = api.create(JOBS, NS, jobManifest('flaky', ['sh', '-c', 'if [ -f "$HOME/ran" ]; then echo second; exit 0; fi; touch "$HOME/ran"; echo first; exit 1'], {}, { restartPolicy: 'OnFailure' })) as Job;
    await waitFor('Complete', () => cond(getJob('flaky'), 'Complete'));
    const [pod] = podsOf(job);
    const cs = pod!.status!.containerStatuses![0]!;
    expect(cs.restartCount).to.equal(1);
    expect(cs.lastState.terminated).to.include({ exitCode: 1, reason: 'Error' });
    expect(kubelet.logs(NS, pod!.metadata.name!)).to.equal('second\n');
    expect(kubelet.logs(NS, pod!.metadata.name!, 'main', { previous: true })).to.equal('first\n');
    expect(getJob('flaky')!.status).to.include({ succeeded: 1 });
  });

  it('runs an image through imageCommands and leaves an unknown image in ErrImagePull', async () => {
    startCluster({ imageCommands: { 'demo/runner:dev': ['sh', '-c', 'echo "runner $*"', 'runner'] } });
    const mapped = api.create(JOBS, NS, {
      apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'mapped' },
      spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'demo/runner:dev', args: ['--input', 'x'] }] } } },
    }) as Job;
    const unknown = api.create(JOBS, NS, {
      apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'unknown' },
      spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'nowhere/image:1' }] } } },
    }) as Job;
    await waitFor('Complete', () => cond(getJob('mapped'), 'Complete'));
    expect(kubelet.logs(NS, podsOf(mapped)[0]!.metadata.name!)).to.equal('runner --input x\n');
    const waiting = await waitFor('ErrImagePull', () => podsOf(unknown)[0]?.status?.containerStatuses?.[0]?.state.waiting?.reason === 'ErrImagePull' && podsOf(unknown)[0]);
    expect(waiting.status!.containerStatuses![0]!.state.waiting!.message).to.contain('nowhere/image:1');
  });

  it('runs init containers one by one before the regular containers, sharing an emptyDir', async () => {
    startCluster();
    const job = api.create(JOBS, NS, jobManifest('staged', [], {}, {
      volumes: [{ name: 'work', emptyDir: {} }],
      initContainers: [
        { name: 'one', image: 'busybox:1.36', command: ['sh', '-c', 'echo one >> /work/trace'], volumeMounts: [{ name: 'work', mountPath: '/work' }] },
        { name: 'two', image: 'busybox:1.36', command: ['sh', '-c', 'echo two >> /work/trace'], volumeMounts: [{ name: 'work', mountPath: '/work' }] },
      ],
      containers: [{ name: 'main', image: 'busybox:1.36', command: ['cat', '/work/trace'], volumeMounts: [{ name: 'work', mountPath: '/work' }] }],
    })) as Job;
    await waitFor('Complete', () => cond(getJob('staged'), 'Complete'));
    const [pod] = podsOf(job);
    expect(kubelet.logs(NS, pod!.metadata.name!, 'main')).to.equal('one\ntwo\n');
    expect(pod!.status!.initContainerStatuses!.map((s) => [s.name, s.ready, s.state.terminated?.reason])).to.deep.equal([['one', true, 'Completed'], ['two', true, 'Completed']]);
  });

  it('fails a Never pod whose init container fails, without starting the regular container', async () => {
    startCluster();
    const job = api.create(JOBS, NS, jobManifest('noinit', ['echo', 'never'], { backoffLimit: 0 }, {
      initContainers: [{ name: 'setup', image: 'busybox:1.36', command: ['sh', '-c', 'exit 7'] }],
    })) as Job;
    await waitFor('Failed', () => cond(getJob('noinit'), 'Failed'));
    const [pod] = podsOf(job);
    expect(pod!.status!.phase).to.equal('Failed');
    expect(pod!.status!.initContainerStatuses![0]!.state.terminated).to.include({ exitCode: 7, reason: 'Error' });
    expect(pod!.status!.containerStatuses![0]!.state.waiting).to.include({ reason: 'PodInitializing' });
    expect(kubelet.logs(NS, pod!.metadata.name!, 'main')).to.equal(undefined);
  });

  it('keeps pods over the node capacity Pending and Unschedulable', async () => {
    startCluster({ maxRunningPods: 1 });
    const job = api.create(JOBS, NS, jobManifest('wide', ['sh', '-c', 'sleep 0.5'], { parallelism: 2, completions: 2 })) as Job;
    const pending = await waitFor('an unschedulable pod', () => podsOf(job).find((p) => p.status?.conditions?.some((c) => c.type === 'PodScheduled' && c.status === 'False')));
    expect(pending.status!.phase).to.equal('Pending');
    expect(pending.status!.conditions![0]).to.include({ type: 'PodScheduled', status: 'False', reason: 'Unschedulable' });
    const running = podsOf(job).filter((p) => p.status?.phase === 'Running');
    expect(running.length).to.be.at.most(1);
    await waitFor('Complete', () => cond(getJob('wide'), 'Complete'), 15_000);
    expect(getJob('wide')!.status).to.include({ succeeded: 2 });
  });

  it('runs waiting pods oldest first as the node frees up, and never one deleted while it waited', async () => {
    startCluster({ maxRunningPods: 1 });
    const bound: string[] = [];
    const unsubscribe = api.subscribe((c) => {
      const owner = c.object.metadata.ownerReferences?.[0]?.name;
      if (c.rt.kind === 'Pod' && owner && (c.object.spec as { nodeName?: string } | undefined)?.nodeName && !bound.includes(owner)) bound.push(owner);
    });
    try {
      for (const name of ['first', 'second', 'third', 'fourth']) api.create(JOBS, NS, jobManifest(name, ['sh', '-c', 'sleep 0.3']));
      // While the first runs, the others are each marked Unschedulable once; the second is then given up.
      const second = getJob('second')!;
      await waitFor('the second pod Unschedulable', () => podsOf(second)[0]?.status?.conditions?.some((c) => c.reason === 'Unschedulable'));
      api.delete(JOBS, NS, 'second', { propagationPolicy: 'Background' });
      for (const name of ['first', 'third', 'fourth']) await waitFor(`${name} Complete`, () => cond(getJob(name), 'Complete'), 15_000);
      expect(bound).to.deep.equal(['first', 'third', 'fourth']);
      const failed = api.list(EVENTS, { namespace: NS }).filter((e) => e.reason === 'FailedScheduling');
      const perPod = new Map<string, number>();
      for (const e of failed) {
        const pod = (e.involvedObject as { name: string }).name;
        perPod.set(pod, (perPod.get(pod) ?? 0) + ((e as { count?: number }).count ?? 1));
      }
      expect([...perPod.values()].every((n) => n === 1), `one FailedScheduling per waiting pod: ${JSON.stringify([...perPod])}`).to.equal(true);
    } finally {
      unsubscribe();
    }
  });

  it('OOM-kills a container on request: exit 137, reason OOMKilled, and the Job fails like any failed pod', async () => {
    startCluster();
    const job = api.create(JOBS, NS, jobManifest('hungry', ['sh', '-c', 'echo up; sleep 30'], { backoffLimit: 0 })) as Job;
    await waitFor('running', () => podsOf(job)[0] && kubelet.logs(NS, podsOf(job)[0]!.metadata.name!)?.includes('up'));
    const podName = podsOf(job)[0]!.metadata.name!;
    expect(kubelet.oomKill(NS, podName)).to.equal(true);
    const failed = await waitFor('Failed', () => cond(getJob('hungry'), 'Failed') && getJob('hungry'));
    expect(cond(failed, 'Failed')).to.include({ reason: 'BackoffLimitExceeded' });
    const pod = api.get(PODS, NS, podName) as Pod;
    expect(pod.status!.phase).to.equal('Failed');
    expect(pod.status!.containerStatuses![0]!.state.terminated).to.include({ exitCode: 137, reason: 'OOMKilled' });
    expect(kubelet.oomKill(NS, podName), 'nothing left to kill').to.equal(false);
  });

  it('evicts a pod on request: Failed, reason Evicted, a DisruptionTarget condition, the pod kept', async () => {
    startCluster();
    const job = api.create(JOBS, NS, jobManifest('evictee', ['sh', '-c', 'echo up; sleep 30'], { backoffLimit: 0 })) as Job;
    await waitFor('running', () => podsOf(job)[0] && kubelet.logs(NS, podsOf(job)[0]!.metadata.name!)?.includes('up'));
    const podName = podsOf(job)[0]!.metadata.name!;
    expect(kubelet.evict(NS, podName)).to.equal(true);
    await waitFor('Failed', () => cond(getJob('evictee'), 'Failed'));
    const pod = api.get(PODS, NS, podName) as Pod;
    expect(pod.status).to.include({ phase: 'Failed', reason: 'Evicted', message: 'The node was low on resource: memory. ' });
    expect(pod.status!.conditions!.find((c) => c.type === 'DisruptionTarget')).to.include({ status: 'True', reason: 'TerminationByKubelet' });
    // SIGTERM first, then SIGKILL: sh dies of the SIGTERM (143).
    expect(pod.status!.containerStatuses![0]!.state.terminated!.exitCode).to.be.oneOf([137, 143]);
    expect(events(podName).map((e) => [e.type, e.reason])).to.deep.include(['Warning', 'Evicted']);
  });

  it('on delete, SIGTERMs the process and SIGKILLs it after the grace period', async () => {
    startCluster();
    const pidFile = path.join(workDir, 'victim.pid');
    api.create(PODS, NS, {
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'victim' },
      spec: {
        restartPolicy: 'Never', terminationGracePeriodSeconds: 1,
        // `$$$$` is the shell's `$$` once the kubelet's $(VAR) expansion has unescaped it.
        containers: [{ name: 'main', image: 'busybox:1.36', command: ['sh', '-c', `trap 'echo got TERM' TERM; echo $$$$ > ${pidFile}; echo up; while true; do sleep 0.1; done`] }],
      },
    });
    await waitFor('running', () => kubelet.logs(NS, 'victim')?.includes('up'));
    const pid = Number(fs.readFileSync(pidFile, 'utf8'));
    let lastStatus: Pod['status'];
    const unsubscribe = api.subscribe((c) => {
      if (c.rt.kind === 'Pod' && c.object.metadata.name === 'victim') lastStatus = (c.object as Pod).status;
    });
    try {
      const t0 = Date.now();
      try {
        api.delete(PODS, NS, 'victim');
      } catch (err) {
        if (!(err instanceof StatusError)) throw err;
      }
      await waitFor('TERM delivered', () => kubelet.logs(NS, 'victim')?.includes('got TERM') || !alive(pid), 3000);
      expect(alive(pid), 'survives SIGTERM during the grace period').to.equal(Date.now() - t0 < 900);
      await waitFor('killed', () => !alive(pid), 5000);
      expect(Date.now() - t0).to.be.at.least(900);
      await waitFor('pod removed', () => !api.get(PODS, NS, 'victim'), 5000);
      if (lastStatus?.containerStatuses?.[0]?.state.terminated) {
        expect(lastStatus.containerStatuses[0].state.terminated.exitCode).to.equal(137);
        expect(lastStatus.phase).to.equal('Failed');
      }
    } finally {
      unsubscribe();
    }
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}
