// Benchmark (issue 37, the first): a download through the job's egress
// proxy chained to an upstream proxy, against the egress proxy alone, on
// loopback, of a 1 GiB file: throughput (goal: chained ≥ 0.9× alone) and
// the runner's added CPU, as the CPU time (user + system) of the process
// that runs the egress per GiB moved, both ways.
//
// The egress runs in a process of its own, as in the runner
// (lib/src/egress-proxy.ts EgressProxy, the policy allowing loopback), so
// its CPU time is read from /proc/<pid>/stat before and after each download
// and nothing else is counted in it. The upstream proxies are the tests'
// (test/support/upstream-proxies.ts: http, and socks5 as the egress reaches
// it with the address), the file server the tests' media server, both in
// this process; the client is curl, whose own cost is the same both ways.
// Two paths, as yt-dlp and ffmpeg use them: an http URL as a forward request
// through the egress (which reads each answer's head), and a CONNECT tunnel
// (how every https URL goes; curl --proxytunnel on the same http server, so
// no TLS cost hides the proxies'). Rounds alternate alone and chained, so a
// noisy neighbour hurts both alike; medians of BENCH_ROUNDS.
//
// Environment: BENCH_BYTES (1 GiB), BENCH_ROUNDS (5), BENCH_CACHE_DIR (the
// file is written once there).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { randomFillSync } from 'node:crypto';
import { startMediaServer } from '../../test/support/media.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { startUpstreamProxy, type UpstreamProxy } from '../../test/support/upstream-proxies.js';

const run = promisify(execFile);
const BYTES = Number(process.env.BENCH_BYTES ?? 1024 ** 3);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 5));
const CACHE = process.env.BENCH_CACHE_DIR ?? join(tmpdir(), 'mediajobs-bench-media');
const GIB = 1024 ** 3;
const MB = 1024 * 1024;
const CLOCK_TICK = Number((await run('getconf', ['CLK_TCK'])).stdout.trim()) || 100;

/** The child: an egress proxy (with UPSTREAM when set) that prints its URL and runs until stdin closes. */
async function egressChild(): Promise<void> {
  const { EgressProxy } = await import('@mediajobs/lib/egress-proxy');
  const { OutboundPolicy } = await import('@mediajobs/lib/outbound');
  const proxy = await EgressProxy.start({
    policy: new OutboundPolicy({ allowed: ['127.0.0.0/8'] }), ...(process.env.UPSTREAM ? { upstream: process.env.UPSTREAM } : {}),
  });
  process.stdout.write(`${proxy.url}\n`);
  process.stdin.resume();
  await once(process.stdin, 'end');
  await proxy.close();
}

/** Random bytes (nothing compresses or caches them along the way), written once. */
async function blob(): Promise<string> {
  const name = `blob-${BYTES}.bin`;
  const file = join(CACHE, name);
  if (existsSync(file)) return name;
  mkdirSync(CACHE, { recursive: true });
  const part = `${file}.${process.pid}.part`;
  const out = createWriteStream(part);
  const chunk = Buffer.alloc(4 * MB);
  for (let left = BYTES; left > 0; left -= chunk.length) {
    randomFillSync(chunk);
    if (!out.write(left < chunk.length ? chunk.subarray(0, left) : chunk)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'close');
  renameSync(part, file);
  return name;
}

interface Egress {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

async function startEgress(upstream?: string): Promise<Egress> {
  const [node, ...args] = tsxCommand(fileURLToPath(import.meta.url));
  const child = spawn(node!, [...args, '--egress'], {
    env: { ...process.env, ...(upstream ? { UPSTREAM: upstream } : {}) }, stdio: ['pipe', 'pipe', 'inherit'],
  });
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  return {
    url: line.trim(),
    child,
    stop: async () => {
      child.stdin!.end();
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

/** utime + stime of a process, seconds (/proc/<pid>/stat fields 14 and 15). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICK;
}

interface Outcome {
  /** MB/s as the client saw it. */
  throughput: number;
  /** CPU seconds of the egress's process per GiB. */
  cpuPerGib: number;
}

async function download(egress: Egress, url: string, tunnel: boolean): Promise<Outcome> {
  const cpu0 = cpuSeconds(egress.child.pid!);
  const t0 = performance.now();
  const { stdout } = await run('curl', ['-sS', '-o', '/dev/null', '-w', '%{size_download}', '--proxy', egress.url, ...(tunnel ? ['--proxytunnel'] : []), url]);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuSeconds(egress.child.pid!) - cpu0;
  const got = Number(stdout.trim());
  if (got !== BYTES) throw new Error(`downloaded ${got} bytes of ${BYTES}`);
  return { throughput: BYTES / MB / seconds, cpuPerGib: cpu / (BYTES / GIB) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

async function main(): Promise<void> {
  const name = await blob();
  const server = await startMediaServer({ root: CACHE });
  const url = `${server.baseUrl}/${name}`;
  const upstreams: [string, UpstreamProxy][] = [
    ['http upstream', await startUpstreamProxy({ id: 'bench-http', sourceAddress: '127.0.0.10' })],
    ['socks5 upstream', await startUpstreamProxy({ id: 'bench-socks', kind: 'socks5', sourceAddress: '127.0.0.11' })],
  ];
  const rows: string[] = [];
  try {
    for (const tunnel of [false, true]) {
      for (const [label, upstream] of upstreams) {
        const alone: Outcome[] = [];
        const chained: Outcome[] = [];
        for (let i = 0; i < ROUNDS; i++) {
          for (const [list, via] of [[alone, undefined], [chained, upstream.url]] as const) {
            const egress = await startEgress(via);
            try {
              list.push(await download(egress, url, tunnel));
            } finally {
              await egress.stop();
            }
          }
          process.stdout.write(`  ${tunnel ? 'tunnel' : 'forward'}, ${label}, round ${i + 1}: alone ${alone[i]!.throughput.toFixed(0)} MB/s, chained ${chained[i]!.throughput.toFixed(0)} MB/s\n`);
        }
        const [a, c] = [median(alone.map((o) => o.throughput)), median(chained.map((o) => o.throughput))];
        const [ca, cc] = [median(alone.map((o) => o.cpuPerGib)), median(chained.map((o) => o.cpuPerGib))];
        rows.push(`| ${tunnel ? 'CONNECT tunnel' : 'forward (http)'} | ${label} | ${a.toFixed(0)} MB/s | ${c.toFixed(0)} MB/s | ${(c / a).toFixed(2)}× | ${ca.toFixed(2)} s | ${cc.toFixed(2)} s | ${(cc - ca >= 0 ? '+' : '')}${(cc - ca).toFixed(2)} s |`);
      }
    }
  } finally {
    await Promise.all([server.stop(), ...upstreams.map(([, u]) => u.stop())]);
  }
  console.log(`\na ${(BYTES / GIB).toFixed(2)} GiB download through the egress proxy, alone and chained to an upstream proxy, loopback, curl as the client`);
  console.log(`(median of ${ROUNDS} rounds; CPU: the egress process's user + system time per GiB; load average at the end ${loadavg()[0]!.toFixed(1)})`);
  console.log('| path | upstream | alone | chained | ratio (goal ≥ 0.9×) | egress CPU/GiB alone | chained | added |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const row of rows) console.log(row);
}

if (process.argv.includes('--egress')) await egressChild();
else await main();
