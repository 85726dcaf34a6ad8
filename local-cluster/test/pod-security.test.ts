// The local kubelet and a pod's securityContext, seen from outside as a
// user sees them (pod phase, exit code, waiting reason, logs through the
// API): the process runs as runAsUser/runAsGroup with fsGroup as a
// supplementary group, Secret files get defaultMode/items' modes and the
// kubelet's fsGroup ownership, runAsNonRoot refuses root. Each pod is a real
// `sh -c` process. The uid cases need the cluster to run as root (as the
// kubelet does); elsewhere they are skipped.
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import type { V1Pod, V1PodSecurityContext, V1SecurityContext, V1Volume } from '@kubernetes/client-node';
import { containerIdentity, primaryGroup } from '../src/controllers/pod-identity.js';
import type { Pod } from '../src/controllers/pod-types.js';
import { eventually, kubeConfigFor, startTestCluster, type TestCluster } from './support.js';

const NS = 'default';
const isRoot = process.getuid?.() === 0;

describe('container identity (DetermineEffectiveSecurityContext, verifyRunAsNonRoot)', () => {
  const passwd = 'root:x:0:0::/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\nsvc:x:1500:1600::/:/bin/sh\n';
  const pod = (spec: Pod['spec']): Pod => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'ns', uid: 'u1' }, spec });
  const root = { uid: 0, gid: 0 };
  const cases: Array<[string, Pod['spec'], Record<string, unknown>, ReturnType<typeof containerIdentity>]> = [
    ['the image user when nothing is set', {}, {}, { uid: 0, gid: 0, groups: [], noNewPrivs: false }],
    ['pod runAsUser, group from passwd', { securityContext: { runAsUser: 1500 } }, {}, { uid: 1500, gid: 1600, groups: [], noNewPrivs: false }],
    ['a uid passwd lacks gets group 0', { securityContext: { runAsUser: 4242 } }, {}, { uid: 4242, gid: 0, groups: [], noNewPrivs: false }],
    ['container over pod', { securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 7, supplementalGroups: [8, 7] } },
      { runAsUser: 1500, runAsGroup: 5, allowPrivilegeEscalation: false }, { uid: 1500, gid: 5, groups: [7, 8], noNewPrivs: true }],
    ['runAsNonRoot with a non-zero runAsUser', { securityContext: { runAsNonRoot: true, runAsUser: 1000 } }, {}, { uid: 1000, gid: 1000, groups: [], noNewPrivs: false }],
    ['runAsNonRoot, runAsUser 0', { securityContext: { runAsNonRoot: true } }, { runAsUser: 0 },
      { refused: 'container\'s runAsUser breaks non-root policy (pod: "p_ns(u1)", container: c)' }],
    ['runAsNonRoot, root image', {}, { runAsNonRoot: true }, { refused: 'container has runAsNonRoot and image will run as root (pod: "p_ns(u1)", container: c)' }],
    ['container runAsNonRoot false over pod true', { securityContext: { runAsNonRoot: true } }, { runAsNonRoot: false }, { uid: 0, gid: 0, groups: [], noNewPrivs: false }],
  ];
  for (const [what, spec, sc, want] of cases) {
    it(what, () => expect(containerIdentity(pod(spec), { name: 'c', securityContext: sc }, root, passwd)).to.deep.equal(want));
  }
  it('a non-root image user satisfies runAsNonRoot', () => {
    expect(containerIdentity(pod({}), { name: 'c', securityContext: { runAsNonRoot: true } }, { uid: 1000, gid: 1000 }, passwd)).to.deep.equal({ uid: 1000, gid: 1000, groups: [], noNewPrivs: false });
  });
  it('primaryGroup reads /etc/passwd', () => expect([primaryGroup(passwd, 1000), primaryGroup(passwd, 9)]).to.deep.equal([1000, 0]));
});

describe('local kubelet: securityContext, volume modes and fsGroup', function () {
  this.timeout(30_000);
  let tc: TestCluster;
  let core: k8s.CoreV1Api;
  let n = 0;

  before(async () => {
    tc = await startTestCluster();
    core = kubeConfigFor(tc.cluster).makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: 'creds' }, stringData: { token: 's3cr3t', user: 'bob' } },
    });
  });
  after(async () => tc?.stop());

  interface PodOptions {
    pod?: V1PodSecurityContext;
    container?: V1SecurityContext;
    volumes?: V1Volume[];
    mounts?: Array<{ name: string; mountPath: string }>;
  }

  /** Run `script` in a one-container pod that never restarts; returns its name. */
  async function runPod(script: string, o: PodOptions = {}): Promise<string> {
    const name = `sec-${++n}`;
    const body: V1Pod = {
      metadata: { name },
      spec: {
        restartPolicy: 'Never',
        securityContext: o.pod,
        volumes: o.volumes ?? [{ name: 'creds', secret: { secretName: 'creds' } }],
        containers: [{
          name: 'main', image: 'busybox:1.36', command: ['sh', '-c', script], securityContext: o.container,
          volumeMounts: o.mounts ?? [{ name: 'creds', mountPath: '/etc/creds' }],
        }],
      },
    };
    await core.createNamespacedPod({ namespace: NS, body });
    return name;
  }

  /** The pod once it ended: phase, exit code and log. */
  async function ended(name: string): Promise<{ phase: string; exitCode: number; log: string; message?: string }> {
    const pod = await eventually(async () => {
      const p = await core.readNamespacedPod({ name, namespace: NS });
      return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p : undefined;
    }, 20_000);
    const term = pod.status!.containerStatuses![0]!.state!.terminated!;
    const log = await core.readNamespacedPodLog({ name, namespace: NS });
    return { phase: pod.status!.phase!, exitCode: term.exitCode, log, message: term.message };
  }

  /** The container's waiting state once it has the given reason. */
  async function waiting(name: string, reason: string): Promise<string> {
    const state = await eventually(async () => {
      const p = await core.readNamespacedPod({ name, namespace: NS });
      const w = p.status?.containerStatuses?.[0]?.state?.waiting;
      return w?.reason === reason ? w : undefined;
    });
    return state.message ?? '';
  }

  describe('Secret volume modes, as the kubelet writes them', () => {
    it('defaultMode 0644 when unset; items get their own mode, the rest defaultMode', async () => {
      const plain = await runPod('stat -c "%a" /etc/creds/token /etc/creds/user');
      expect((await ended(plain)).log).to.equal('644\n644\n');

      const items = await runPod('stat -c "%a" /etc/creds/token /etc/creds/sub/who', {
        volumes: [{ name: 'creds', secret: { secretName: 'creds', defaultMode: 0o600, items: [{ key: 'token', path: 'token' }, { key: 'user', path: 'sub/who', mode: 0o444 }] } }],
      });
      expect((await ended(items)).log).to.equal('600\n444\n');
    });

    it('with fsGroup: files group fsGroup and group-readable (0400 becomes 0440), directories setgid', async function () {
      if (!isRoot) this.skip(); // only root may give files another group
      const name = await runPod('stat -c "%a %g" /etc/creds/token /etc/creds/sub/who /etc/creds/sub', {
        pod: { fsGroup: 2000 },
        volumes: [{ name: 'creds', secret: { secretName: 'creds', defaultMode: 0o400, items: [{ key: 'token', path: 'token' }, { key: 'user', path: 'sub/who', mode: 0o600 }] } }],
      });
      expect((await ended(name)).log).to.equal('440 2000\n640 2000\n2755 2000\n');
    });
  });

  describe('runAsUser, runAsGroup and fsGroup on the process (cluster as root)', () => {
    before(function () {
      if (!isRoot) this.skip();
    });

    it('runs the container as its runAsUser/runAsGroup, the container level over the pod level, fsGroup as a supplementary group', async () => {
      const name = await runPod('id -u; id -g; id -G', {
        pod: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000, supplementalGroups: [3000] },
        container: { runAsUser: 1001, runAsGroup: 1002 },
      });
      const r = await ended(name);
      expect(r.phase).to.equal('Succeeded');
      expect(r.log.split('\n').slice(0, 2)).to.deep.equal(['1001', '1002']);
      expect(r.log.split('\n')[2]!.split(' ').map(Number).sort()).to.deep.equal([1002, 2000, 3000]);
    });

    it('a Secret mounted 0400 without fsGroup is unreadable to uid 1000: the process gets EACCES and the pod fails', async () => {
      const name = await runPod('cat /etc/creds/token', { pod: { runAsUser: 1000, runAsGroup: 1000 }, volumes: [{ name: 'creds', secret: { secretName: 'creds', defaultMode: 0o400 } }] });
      const r = await ended(name);
      expect(r.phase).to.equal('Failed');
      expect(r.exitCode).to.equal(1);
      expect(r.log).to.match(/Permission denied/);
    });

    it('with fsGroup (not the user\'s group) and mode 0440 the same user reads it', async () => {
      const name = await runPod('cat /etc/creds/token', { pod: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000 }, volumes: [{ name: 'creds', secret: { secretName: 'creds', defaultMode: 0o440 } }] });
      const r = await ended(name);
      expect(r.phase).to.equal('Succeeded');
      expect(r.log).to.equal('s3cr3t');
    });

    it('gives a non-root user a writable emptyDir, /tmp, HOME and termination log', async () => {
      const name = await runPod('echo a > /work/f && echo b > "$TMPDIR/g" && echo c > "$HOME/h" && cat /work/f && echo done > /dev/termination-log', {
        pod: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
        volumes: [{ name: 'work', emptyDir: {} }],
        mounts: [{ name: 'work', mountPath: '/work' }],
      });
      const r = await ended(name);
      expect(r).to.include({ phase: 'Succeeded', log: 'a\n', message: 'done\n' });
    });

    it('refuses runAsNonRoot when the image would run as root (no runAsUser, the cluster is root)', async () => {
      const name = await runPod('true', { container: { runAsNonRoot: true } });
      const uid = (await core.readNamespacedPod({ name, namespace: NS })).metadata!.uid!;
      expect(await waiting(name, 'CreateContainerConfigError')).to.equal(`container has runAsNonRoot and image will run as root (pod: "${name}_${NS}(${uid})", container: main)`);
    });
  });

  it('refuses runAsNonRoot with runAsUser 0 (CreateContainerConfigError), and runs nothing', async () => {
    const name = await runPod('echo ran', { pod: { runAsNonRoot: true }, container: { runAsUser: 0 } });
    const uid = (await core.readNamespacedPod({ name, namespace: NS })).metadata!.uid!;
    expect(await waiting(name, 'CreateContainerConfigError')).to.equal(`container's runAsUser breaks non-root policy (pod: "${name}_${NS}(${uid})", container: main)`);
    const events = await core.listNamespacedEvent({ namespace: NS, fieldSelector: `involvedObject.name=${name}` });
    expect(events.items.map((e) => e.reason)).to.include('Failed').and.not.include('Started');
  });

  it('with runAsPodUsers off, a work dir or an image\'s files under a folder closed to others, runs every process as the cluster\'s user', async function () {
    if (!isRoot) this.skip();
    const closed = mkdtempSync(join(tmpdir(), 'lc-closed-')); // 0700
    // An image whose program lives in a checkout in a 0700 home, as `make run` from /root would have it.
    const program = join(closed, 'bin', 'whoami.sh');
    mkdirSync(dirname(program), { recursive: true });
    writeFileSync(program, '#!/bin/sh\nid -u\n', { mode: 0o755 });
    const clusters = await Promise.all([
      startTestCluster({ runAsPodUsers: false }),
      startTestCluster({ workDir: join(closed, 'work') }),
      startTestCluster({ imageCommands: { 'closed/whoami:1': [program] } }),
    ]);
    try {
      for (const [i, other] of clusters.entries()) {
        expect(other.cluster.kubelet.runsAsPodUsers).to.equal(false);
        const command = i === 2 ? ['--image=closed/whoami:1'] : ['--image=busybox:1.36', '--command', '--', 'id', '-u'];
        await other.kubectl(['run', 'who', '--restart=Never', '--overrides={"spec":{"securityContext":{"runAsUser":1000}}}', ...command]);
        await eventually(async () => (await other.kubectl(['get', 'pod', 'who', '-o', 'jsonpath={.status.phase}'])).stdout === 'Succeeded');
        expect((await other.kubectl(['logs', 'who'])).stdout).to.equal('0\n');
      }
    } finally {
      await Promise.all(clusters.map((c) => c.stop()));
      rmSync(closed, { recursive: true, force: true });
    }
  });
});
