// `npm run local-cluster -- --kubeconfig <file> [--port N] [--state <dir>]`:
// runs the local cluster in the foreground until SIGINT/SIGTERM.
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { startLocalCluster } from './index.js';

const USAGE = `usage: local-cluster --kubeconfig <file> [--port N] [--state <dir>] [--work-dir <dir>]
                     [--image-map <json-file>] [--max-running-pods N] [--backoff-base-ms N]
                     [--max-writes-per-second N]   (or LOCAL_CLUSTER_WRITE_RATE)
                     [--event-ttl-seconds N]   (default 3600, as kube-apiserver's --event-ttl)
environment: LOCAL_CLUSTER_WATCH_FAULTS="drop=0.05,reset=0.02,expire=0.1,listDelayMs=200,bookmarkMs=1000,seed=7"
             drops, resets and 410 expiries of watches, slow lists (local-cluster/README.md, "Watch fault mode")`;

function fail(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(2);
}

function intOption(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) fail(`--${name} must be a non-negative integer, got "${v}"`);
  return n;
}

const seconds = (s: number | undefined) => (s === undefined ? undefined : s * 1000);

async function main(): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        kubeconfig: { type: 'string' },
        port: { type: 'string' },
        state: { type: 'string' },
        'work-dir': { type: 'string' },
        'image-map': { type: 'string' },
        'max-running-pods': { type: 'string' },
        'backoff-base-ms': { type: 'string' },
        'max-writes-per-second': { type: 'string' },
        'event-ttl-seconds': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    fail((e as Error).message);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (!values.kubeconfig) fail('--kubeconfig is required');
  let imageCommands: Record<string, string[]> | undefined;
  if (values['image-map']) {
    try {
      imageCommands = JSON.parse(readFileSync(values['image-map'], 'utf8')) as Record<string, string[]>;
    } catch (e) {
      fail(`--image-map: ${(e as Error).message}`);
    }
  }
  const cluster = await startLocalCluster({
    kubeconfigPath: values.kubeconfig,
    port: intOption('port', values.port) ?? 0,
    stateDir: values.state,
    workDir: values['work-dir'],
    imageCommands,
    maxRunningPods: intOption('max-running-pods', values['max-running-pods']),
    backoffBaseMs: intOption('backoff-base-ms', values['backoff-base-ms']),
    maxWritesPerSecond: intOption('max-writes-per-second', values['max-writes-per-second'] ?? process.env.LOCAL_CLUSTER_WRITE_RATE) || undefined,
    eventTtlMs: seconds(intOption('event-ttl-seconds', values['event-ttl-seconds'])),
  });
  process.stdout.write(`local cluster at ${cluster.url}\nkubeconfig: ${cluster.kubeconfigPath}\n`);
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    cluster.stop().then(() => process.exit(0), () => process.exit(1));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((e: unknown) => {
  process.stderr.write(`local-cluster: ${(e as Error).message}\n`);
  process.exit(1);
});
