// `make chart-check`, on a machine with helm (the project's machines have
// none, docs/adr/0019): the chart rendered with its defaults must equal
// deploy/base field by field (scripts/chart-parity.ts), and pass the same
// `kubectl apply --dry-run=server` on the local cluster that deploy/ passes
// (test/deploy/kustomize.test.ts). `helm lint` runs before, in the Makefile.
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { LocalCluster } from '@mediajobs/local-cluster';
import { compareRenderings } from './chart-parity.js';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const NAMESPACE = 'mediajobs';

function run(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
}

/** kubectl against the in-process local cluster: asynchronous, so the cluster can answer meanwhile. */
function kubectl(args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<string> {
  return new Promise((resolveOut, reject) => {
    const child = execFile('kubectl', args, { cwd: ROOT, env, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`kubectl ${args.join(' ')}: ${stderr || err.message}`));
      else resolveOut(stdout);
    });
    if (input !== undefined) child.stdin!.end(input);
  });
}

async function main(): Promise<void> {
  // The Secret is the user's (as deploy/ expects); the release is named like the objects of deploy/base.
  const chart = run('helm', ['template', 'mediajobs', 'charts/mediajobs', '--namespace', NAMESPACE, '--include-crds',
    '--set', 'secrets.existingSecret=mediajobs-secrets']);
  const base = run('kubectl', ['kustomize', 'deploy/base']);

  const diffs = compareRenderings(base, chart);
  if (diffs.length) {
    console.error(`charts/mediajobs and deploy/base differ (${diffs.length}):\n  ${diffs.join('\n  ')}`);
    process.exitCode = 1;
  } else {
    console.log('charts/mediajobs renders what deploy/base renders, field by field');
  }

  const home = mkdtempSync(join(tmpdir(), 'chart-check-'));
  const cluster = await LocalCluster.start({ workDir: join(home, 'work'), logger: pino({ level: 'silent' }) });
  try {
    const env = { ...process.env, KUBECONFIG: cluster.kubeconfigPath, HOME: home };
    await kubectl(['create', 'namespace', NAMESPACE], env);
    process.stdout.write(await kubectl(['apply', '--dry-run=server', '-f', '-'], env, chart));
  } finally {
    await cluster.stop();
    rmSync(home, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
