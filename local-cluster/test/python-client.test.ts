// The local cluster against a client no one here wrote in a language it is
// not written in: the official Python client (kubernetes-client/python,
// Debian's python3-kubernetes), as admin scripts use it (issue 18, item 6).
// clients/python_client.py does the work and prints a line per step; the
// steps are listed here so a missing one names itself.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { isTrue } from '../src/http.js';
import { startTestCluster, type TestCluster } from './support.js';

const SCRIPT = fileURLToPath(new URL('./clients/python_client.py', import.meta.url));
/** Debian's interpreter, which has python3-kubernetes (make test-tools installs it), whatever python3 comes first on PATH. */
const PYTHON = process.env.PYTHON ?? '/usr/bin/python3';

describe('local cluster: the official Python client', function () {
  this.timeout(120_000);
  let tc: TestCluster;
  before(async () => { tc = await startTestCluster(); });
  after(() => tc?.stop());

  it('runs CRDs, custom objects, watch, conflicts, Jobs and Leases as against kube-apiserver', async () => {
    const run = await promisify(execFile)(PYTHON, [SCRIPT, tc.cluster.kubeconfigPath, 'default'], { encoding: 'utf8', timeout: 90_000 })
      .catch((err: { stdout?: string; stderr?: string }) => ({ stdout: err.stdout ?? '', stderr: err.stderr ?? String(err) }));
    const steps = run.stdout.split('\n').filter((l) => l.startsWith('ok ')).map((l) => l.slice(3));
    expect(steps, run.stdout + run.stderr.slice(-2000)).to.deep.equal([
      'crd established', 'custom object created', 'invalid custom object refused 422', 'custom objects listed',
      'custom object merge-patched', 'stale update refused 409', 'status subresource patched', 'watch from a resourceVersion',
      'custom object deleted', 'cel rule refused 422', 'custom object server-side applied', 'apply conflict 409, then forced', 'job created, listed, read, deleted', 'lease renewed', 'stale lease takeover refused 409', 'done',
    ]);
  });

  it('reads boolean query parameters as apimachinery does (watch=True is a watch; only "0" and "false" are false)', () => {
    const table: [string | null, boolean][] = [
      [null, false], ['false', false], ['FALSE', false], ['False', false], ['0', false],
      ['true', true], ['True', true], ['1', true], ['', true], ['yes', true],
    ];
    for (const [v, want] of table) expect(isTrue(v), String(v)).to.equal(want);
  });
});
