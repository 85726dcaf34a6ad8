// The local cluster's state is its owner's alone (issue 35, item 4): the
// snapshot holds every Secret, beside the token secret and the serving key,
// so the folder is 0700 and each file 0600: made so, tightened when an older
// run left them open, and kept so by every atomic rewrite. Where the tests run
// as root, a process of uid 1000 (the runners' user in local mode) tries to
// read the snapshot and is refused.
import { expect } from 'chai';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually, startTestCluster } from './support.js';

const RUNNER_UID = 1000;
const mode = (path: string) => statSync(path).mode & 0o777;

/** What `cat path` does as uid/gid 1000 with no supplementary groups (setpriv, as the local kubelet spawns runners). */
function readAsRunner(path: string): { code: number | null; stderr: string } {
  const r = spawnSync('setpriv', [`--reuid=${RUNNER_UID}`, `--regid=${RUNNER_UID}`, '--clear-groups', 'cat', path], { encoding: 'utf8' });
  return { code: r.status, stderr: r.stderr };
}

describe('local cluster: its state files are its owner\'s alone', function () {
  this.timeout(60_000);
  const base = mkdtempSync(join(tmpdir(), 'lc-state-'));
  // Searchable by anyone, as a home or /tmp is: the state folder's own mode is what must stop other users.
  chmodSync(base, 0o755);
  after(() => rmSync(base, { recursive: true, force: true }));

  it('writes the snapshot, the token secret and the serving key 0600 in a 0700 folder, and keeps 0600 on every rewrite', async () => {
    const stateDir = join(base, 'fresh');
    const tc = await startTestCluster({ stateDir });
    try {
      await tc.kubectl(['create', 'secret', 'generic', 'saved-destination', '--from-literal=secretKey=s3cr3t']);
      await eventually(() => readdirSync(stateDir).includes('cluster-state.json'));
      expect(mode(stateDir)).to.equal(0o700);
      for (const f of readdirSync(stateDir)) expect(mode(join(stateDir, f)), f).to.equal(0o600);
      const first = statSync(join(stateDir, 'cluster-state.json')).ino;
      await tc.kubectl(['create', 'secret', 'generic', 'another', '--from-literal=k=v']);
      // A rewrite is a new file renamed over the old one.
      await eventually(() => statSync(join(stateDir, 'cluster-state.json')).ino !== first);
      expect(mode(join(stateDir, 'cluster-state.json'))).to.equal(0o600);
    } finally {
      await tc.stop();
    }
    expect(mode(join(stateDir, 'cluster-state.json')), 'after the last write on stop').to.equal(0o600);
    expect(readdirSync(stateDir).filter((f) => f.endsWith('.tmp'))).to.deep.equal([]);
  });

  it('tightens a folder and files an older run left 0755 and 0644, a stale temporary file included', async () => {
    const stateDir = join(base, 'loose');
    const first = await startTestCluster({ stateDir });
    await first.kubectl(['create', 'secret', 'generic', 'saved-destination', '--from-literal=secretKey=s3cr3t']);
    await first.stop();
    chmodSync(stateDir, 0o755);
    for (const f of readdirSync(stateDir)) chmodSync(join(stateDir, f), 0o644);
    writeFileSync(join(stateDir, 'cluster-state.json.tmp'), '{}', { mode: 0o666 });
    chmodSync(join(stateDir, 'cluster-state.json.tmp'), 0o666);

    const again = await startTestCluster({ stateDir });
    try {
      expect(mode(stateDir)).to.equal(0o700);
      for (const f of readdirSync(stateDir)) expect(mode(join(stateDir, f)), f).to.equal(0o600);
      const kept = await again.kubectl(['get', 'secret', 'saved-destination', '-o', 'jsonpath={.data.secretKey}']);
      expect(Buffer.from(kept.stdout, 'base64').toString()).to.equal('s3cr3t');
    } finally {
      await again.stop();
    }
    expect(mode(join(stateDir, 'cluster-state.json'))).to.equal(0o600);
  });

  it('a process of the runners\' user cannot read the snapshot, even with the folder opened to it', async function () {
    if (process.getuid?.() !== 0 || spawnSync('setpriv', ['--version']).status !== 0) this.skip();
    const stateDir = join(base, 'other-user');
    mkdirSync(stateDir);
    const tc = await startTestCluster({ stateDir });
    try {
      await tc.kubectl(['create', 'secret', 'generic', 'saved-destination', '--from-literal=secretKey=s3cr3t']);
      await eventually(() => readdirSync(stateDir).includes('cluster-state.json'));
      const snapshot = join(stateDir, 'cluster-state.json');
      // The check can fail: root reads it, and so would uid 1000 were the file 0644.
      expect(execFileSync('cat', [snapshot], { encoding: 'utf8' })).to.contain('saved-destination');
      const refused = readAsRunner(snapshot);
      expect(refused.code).to.not.equal(0);
      expect(refused.stderr).to.contain('Permission denied');
      // With only the file's own mode between them.
      chmodSync(stateDir, 0o755);
      const stillRefused = readAsRunner(snapshot);
      expect(stillRefused.code).to.not.equal(0);
      expect(stillRefused.stderr).to.contain('Permission denied');
      for (const f of ['cluster-secret', 'serving.key']) expect(readAsRunner(join(stateDir, f)).code, f).to.not.equal(0);
    } finally {
      await tc.stop();
    }
  });
});
