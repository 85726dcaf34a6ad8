// The process runner and the pure pieces of the kubelet: $(VAR) expansion,
// environment and volume resolution, path mapping, termination messages,
// and real processes (exit codes, logs, SIGTERM/SIGKILL of a process group).
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expand, mappingFor } from '../src/controllers/expansion.js';
import { ContainerConfigError, resolveEnv, type ObjectLookup } from '../src/controllers/pod-env.js';
import { ContainerProcess, LogSink, lastLogLines, rewritePaths, terminationMessage } from '../src/controllers/pod-process.js';
import type { Pod } from '../src/controllers/pod-types.js';
import { containerMounts, setUpVolumes, VolumeSetupError } from '../src/controllers/pod-volumes.js';
import type { KubeObject } from '../src/types.js';

const node = { nodeName: 'local-node', hostIP: '127.0.0.1', podIP: '127.0.0.1' };
const b64 = (s: string) => Buffer.from(s).toString('base64');

const tmpDirs: string[] = [];
function tmp(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pod-process-test-'));
  tmpDirs.push(dir);
  return dir;
}
after(() => {
  for (const d of tmpDirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe('$(VAR) expansion', () => {
  // The cases of kubernetes third_party/forked/golang/expansion/expand_test.go.
  const ctx = { VAR_A: 'A', VAR_B: 'B', VAR_C: 'C', VAR_REF: '$(VAR_A)', VAR_EMPTY: '' };
  const cases: Array<[string, string]> = [
    ['$(VAR_A)', 'A'], ['$(VAR_A)-$(VAR_A)', 'A-A'], ['___$(VAR_B)___', '___B___'],
    ['$(VAR_A)_$(VAR_B)_$(VAR_C)', 'A_B_C'], ['$$(VAR_B)_$(VAR_A)', '$(VAR_B)_A'],
    ['$$(VAR_A)_$$(VAR_B)', '$(VAR_A)_$(VAR_B)'], ['f000-$$VAR_A', 'f000-$VAR_A'],
    ['foo\\$(VAR_C)bar', 'foo\\Cbar'], ['$(VAR_A$(VAR_B))', '$(VAR_A$(VAR_B))'],
    ['$(VAR_A$(VAR_B)', '$(VAR_A$(VAR_B)'], ['$(VAR_REF)', '$(VAR_A)'], ['foo$(VAR_EMPTY)bar', 'foobar'],
    ['foo$(VAR_Awhoops!', 'foo$(VAR_Awhoops!'], ['$?_boo_$!', '$?_boo_$!'], ['$VAR_A', '$VAR_A'],
    ['$(VAR_DNE)', '$(VAR_DNE)'], ['$$$$$$(BIG_MONEY)', '$$$(BIG_MONEY)'], ['$$$$$$(VAR_A)', '$$$(VAR_A)'],
    ['$$$$$$$(GOOD_ODDS)', '$$$$(GOOD_ODDS)'], ['$$$$$$$(VAR_A)', '$$$A'], ['${VAR_A}', '${VAR_A}'],
    ['$(VAR_B)_______$(A', 'B_______$(A'], ['$(VAR_C)_______$(', 'C_______$('], ['$(VAR_A)foobarzab$', 'Afoobarzab$'],
    ['--$($($($($--', '--$($($($($--'], ['$($($($($--foo$(', '$($($($($--foo$('], ['$(foo$$var)', '$(foo$$var)'],
  ];
  for (const [input, want] of cases) {
    it(`${input} → ${want}`, () => expect(expand(input, mappingFor(ctx))).to.equal(want));
  }
});

describe('path mapping', () => {
  const maps = [{ from: '/etc/creds', to: '/tmp/p/creds' }, { from: '/dev/termination-log', to: '/tmp/p/tl' }, { from: '/data', to: '/tmp/d' }, { from: '/data/in', to: '/tmp/in' }];
  it('rewrites standalone occurrences, inside shell scripts and flags', () => {
    expect(rewritePaths('/etc/creds/token', maps)).to.equal('/tmp/p/creds/token');
    expect(rewritePaths('cat /etc/creds/token > /dev/termination-log', maps)).to.equal('cat /tmp/p/creds/token > /tmp/p/tl');
    expect(rewritePaths('--config=/etc/creds', maps)).to.equal('--config=/tmp/p/creds');
    expect(rewritePaths('/data/in/x /data/out', maps)).to.equal('/tmp/in/x /tmp/d/out');
  });
  it('leaves other paths alone', () => {
    expect(rewritePaths('/etc/credstore', maps)).to.equal('/etc/credstore');
    expect(rewritePaths('/x/etc/creds', maps)).to.equal('/x/etc/creds');
    expect(rewritePaths('/database', maps)).to.equal('/database');
  });
});

describe('container environment', () => {
  const pod: Pod = {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { name: 'p1', namespace: 'ns1', uid: 'u-1', labels: { app: 'x' }, annotations: { note: 'hi' } },
    spec: { containers: [{ name: 'main', image: 'busybox' }] },
  };
  const objects: Record<string, KubeObject> = {
    'Secret/creds': { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'creds' }, data: { token: b64('s3cr3t'), user: b64('bob') } },
    'ConfigMap/cfg': { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cfg' }, data: { mode: 'fast', level: '3' } },
  };
  const lookup: ObjectLookup = { secret: (n) => objects[`Secret/${n}`], configMap: (n) => objects[`ConfigMap/${n}`] };

  it('resolves env, valueFrom and envFrom with the kubelet precedence', () => {
    const env = resolveEnv(pod, {
      name: 'main',
      envFrom: [{ configMapRef: { name: 'cfg' } }, { prefix: 'S_', secretRef: { name: 'creds' } }],
      env: [
        { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'creds', key: 'token' } } },
        { name: 'MODE', value: 'slow' },
        { name: 'GREETING', value: '$(MODE)-$(S_user)-$(NOPE)-$$(MODE)' },
        { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
        { name: 'APP', valueFrom: { fieldRef: { fieldPath: "metadata.labels['app']" } } },
        { name: 'IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
        { name: 'LEVEL', valueFrom: { configMapKeyRef: { name: 'cfg', key: 'level' } } },
        { name: 'OPT', valueFrom: { secretKeyRef: { name: 'missing', key: 'x', optional: true } } },
      ],
    }, lookup, node);
    expect(Object.fromEntries(env)).to.deep.equal({
      mode: 'fast', level: '3', S_token: 's3cr3t', S_user: 'bob', TOKEN: 's3cr3t', MODE: 'slow',
      GREETING: 'slow-bob-$(NOPE)-$(MODE)', POD: 'p1', APP: 'x', IP: '127.0.0.1', LEVEL: '3',
    });
  });

  it('fails like the kubelet on missing objects and keys', () => {
    const fail = (env: NonNullable<Parameters<typeof resolveEnv>[1]['env']>) => {
      try {
        resolveEnv(pod, { name: 'main', env }, lookup, node);
      } catch (err) {
        expect(err).to.be.instanceOf(ContainerConfigError);
        return (err as Error).message;
      }
      return 'no error';
    };
    expect(fail([{ name: 'A', valueFrom: { secretKeyRef: { name: 'nope', key: 'k' } } }])).to.equal('secret "nope" not found');
    expect(fail([{ name: 'A', valueFrom: { secretKeyRef: { name: 'creds', key: 'k' } } }])).to.equal("couldn't find key k in Secret ns1/creds");
    expect(fail([{ name: 'A', valueFrom: { configMapKeyRef: { name: 'nope', key: 'k' } } }])).to.equal('configmap "nope" not found');
    expect(fail([{ name: 'A', valueFrom: { configMapKeyRef: { name: 'cfg', key: 'k' } } }])).to.equal("couldn't find key k in ConfigMap ns1/cfg");
  });

  it('materialises Secret and ConfigMap volumes with items, modes and subPath', () => {
    const dir = tmp();
    const volPod: Pod = {
      ...pod,
      spec: {
        containers: [],
        volumes: [
          { name: 'creds', secret: { secretName: 'creds', defaultMode: 0o400 } },
          { name: 'cfg', configMap: { name: 'cfg', items: [{ key: 'mode', path: 'sub/mode.txt', mode: 0o600 }] } },
          { name: 'scratch', emptyDir: {} },
        ],
      },
    };
    const vols = setUpVolumes(volPod, dir, lookup, node);
    expect(fs.readFileSync(path.join(vols.get('creds')!, 'token'), 'utf8')).to.equal('s3cr3t');
    expect(fs.statSync(path.join(vols.get('creds')!, 'token')).mode & 0o777).to.equal(0o400);
    expect(fs.readFileSync(path.join(vols.get('cfg')!, 'sub/mode.txt'), 'utf8')).to.equal('fast');
    expect(fs.existsSync(path.join(vols.get('cfg')!, 'level'))).to.equal(false);
    expect(fs.statSync(vols.get('scratch')!).isDirectory()).to.equal(true);
    const mounts = containerMounts({ volumeMounts: [{ name: 'creds', mountPath: '/etc/creds/' }, { name: 'scratch', mountPath: '/work', subPath: 'a/b' }] }, vols);
    expect(mounts).to.deep.equal([
      { mountPath: '/etc/creds', localPath: vols.get('creds') },
      { mountPath: '/work', localPath: path.join(vols.get('scratch')!, 'a/b') },
    ]);
    const missing: Pod = { ...pod, spec: { volumes: [{ name: 'v', secret: { secretName: 'gone' } }] } };
    expect(() => setUpVolumes(missing, dir, lookup, node)).to.throw(VolumeSetupError, 'MountVolume.SetUp failed for volume "v" : secret "gone" not found');
  });
});

describe('ContainerProcess', function () {
  this.timeout(15000);
  let dir: string;
  beforeEach(() => {
    dir = tmp();
  });
  const start = (argv: string[], env: Record<string, string> = {}) =>
    ContainerProcess.start({ argv, env: { PATH: process.env.PATH ?? '', ...env }, cwd: dir, logFile: path.join(dir, 'logs', 'c.log') });

  it('captures stdout and stderr and the exit code', async () => {
    // stdout and stderr are separate pipes: only the order within each is defined.
    const p = start(['sh', '-c', 'echo out; echo "$GREETING"; echo err >&2; exit 3'], { GREETING: 'hello' });
    const exit = await p.exited;
    expect(exit.exitCode).to.equal(3);
    expect(exit.signal).to.equal(undefined);
    expect(p.log.text().split('\n').sort()).to.deep.equal(['', 'err', 'hello', 'out']);
    expect(p.log.text()).to.contain('out\nhello\n');
    expect(fs.readFileSync(path.join(dir, 'logs', 'c.log'), 'utf8')).to.equal(p.log.text());
  });

  it('reports a missing executable as a StartError (exit 128)', async () => {
    const exit = await start(['definitely-not-a-command-xyz']).exited;
    expect(exit.exitCode).to.equal(128);
    expect(exit.startError).to.contain('exec: "definitely-not-a-command-xyz": executable file not found in $PATH');
  });

  it('terminates with SIGTERM: a cooperative process exits 143', async () => {
    const p = start(['node', '-e', 'setInterval(() => {}, 1000); console.log("up")']);
    await waitFor(() => p.log.text().includes('up'));
    const t0 = Date.now();
    const exit = await p.terminate(5000);
    expect(exit.exitCode).to.equal(143);
    expect(exit.signal).to.equal('SIGTERM');
    expect(Date.now() - t0).to.be.below(2000);
  });

  it('SIGKILLs a process that ignores SIGTERM after the grace period, with its children', async () => {
    const marker = path.join(dir, 'child.pid');
    const p = start(['sh', '-c', `trap "" TERM; sleep 60 & echo $! > ${marker}; echo up; wait; wait`]);
    await waitFor(() => p.log.text().includes('up'));
    const childPid = Number(fs.readFileSync(marker, 'utf8'));
    const t0 = Date.now();
    const exit = await p.terminate(700);
    const took = Date.now() - t0;
    expect(exit.exitCode).to.equal(137);
    expect(took).to.be.within(600, 4000);
    await waitFor(() => !alive(childPid), 2000);
  });

  it('kills what the main process left behind when it exits', async () => {
    const marker = path.join(dir, 'bg.pid');
    const exit = await start(['sh', '-c', `sleep 60 >/dev/null 2>&1 & echo $! > ${marker}; exit 0`]).exited;
    expect(exit.exitCode).to.equal(0);
    const bg = Number(fs.readFileSync(marker, 'utf8'));
    await waitFor(() => !alive(bg));
  });
});

describe('termination messages and logs', () => {
  it('reads the tail of the termination-log file, capped at 4096 bytes', () => {
    const dir = tmp();
    const f = path.join(dir, 'tl');
    fs.writeFileSync(f, 'done: 42');
    expect(terminationMessage(f, 'File', 0, 'log')).to.equal('done: 42');
    fs.writeFileSync(f, 'x'.repeat(5000) + 'END');
    const msg = terminationMessage(f, 'File', 1, '');
    expect(msg.length).to.equal(4096);
    expect(msg.endsWith('END')).to.equal(true);
  });

  it('falls back to the last 80 log lines / 2048 bytes on error only', () => {
    const dir = tmp();
    const f = path.join(dir, 'tl');
    fs.writeFileSync(f, '');
    const log = Array.from({ length: 100 }, (_, i) => `line ${i}`).join('\n') + '\n';
    expect(terminationMessage(f, 'FallbackToLogsOnError', 0, log)).to.equal('');
    expect(terminationMessage(f, 'File', 2, log)).to.equal('');
    const fb = terminationMessage(f, 'FallbackToLogsOnError', 2, log);
    expect(fb.startsWith('line 20\n')).to.equal(true);
    expect(fb.endsWith('line 99\n')).to.equal(true);
    fs.writeFileSync(f, 'explicit');
    expect(terminationMessage(f, 'FallbackToLogsOnError', 2, log)).to.equal('explicit');
    expect(lastLogLines('y'.repeat(3000), 80, 2048)).to.have.length(2048);
  });

  it('bounds the in-memory log and rotates the file', () => {
    const dir = tmp();
    const file = path.join(dir, 'c.log');
    const sink = new LogSink(file, 100, 150);
    for (let i = 0; i < 10; i++) sink.write(Buffer.from(`${String(i).repeat(29)}\n`));
    expect(Buffer.byteLength(sink.text())).to.be.at.most(100);
    expect(sink.text().endsWith(`${'9'.repeat(29)}\n`)).to.equal(true);
    expect(fs.existsSync(`${file}.1`)).to.equal(true);
    expect(fs.statSync(file).size).to.be.at.most(150);
    sink.close();
    expect(sink.text().endsWith(`${'9'.repeat(29)}\n`)).to.equal(true);
    expect(Buffer.byteLength(sink.text())).to.be.at.most(100);
  });
});

/** Running (a zombie waiting for a reaper that may never come is dead enough). */
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

async function waitFor(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}
