// A redis-server of this machine (Debian's redis-server package) on a free
// loopback port, for the rate limit's tests and benchmark: stopped,
// started again on the same port, or frozen, as a real outage would.
import { spawn, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { freePort } from './ports.js';

/** A redis-server of this machine (apt's redis-server) on a loopback port, that can be stopped, started again and frozen. */
export interface RedisServer {
  url: string;
  port: number;
  /** The running server's process id (for its CPU time). */
  pid(): number | undefined;
  /** SIGTERM, and resolves once it exited; safe to call twice. */
  stop(): Promise<void>;
  /** Again on the same port, after stop(). */
  start(): Promise<void>;
  /** SIGSTOP: connections stay open and nothing answers, as a hung server. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
}

/** A fresh redis-server on a free loopback port: no persistence, so each start is empty. For the tests and the benchmarks. */
export async function startRedisServer(): Promise<RedisServer> {
  const port = await freePort();
  let proc: ChildProcess | undefined;
  const server: RedisServer = {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid: () => proc?.pid,
    async start() {
      const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmpdir(), '--daemonize', 'no'];
      const p = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
      redisServers.add(p);
      p.once('exit', () => redisServers.delete(p));
      proc = p;
      let out = '';
      const keep = (d: Buffer) => (out += d.toString());
      await new Promise<void>((resolve, reject) => {
        p.once('error', reject);
        p.once('exit', (code) => reject(new Error(`redis-server exited (${code}) before it was ready:\n${out.slice(-2000)}`)));
        p.stderr!.on('data', keep);
        p.stdout!.on('data', (d: Buffer) => {
          keep(d);
          if (out.includes('Ready to accept connections')) resolve();
        });
      });
      // Its later log lines are drained and dropped.
      for (const stream of [p.stdout!, p.stderr!]) stream.removeAllListeners('data').resume();
    },
    async stop() {
      const p = proc;
      if (!p || p.exitCode !== null || p.signalCode !== null) return;
      const exited = new Promise((r) => p.once('exit', r));
      p.kill('SIGCONT');
      p.kill('SIGTERM');
      await exited;
    },
    pause: () => proc?.kill('SIGSTOP'),
    resume: () => proc?.kill('SIGCONT'),
  };
  await server.start();
  return server;
}

const redisServers = new Set<ChildProcess>();
// Mocha runs with --exit, and a bench exits without stopping it: no redis-server outlives its run.
process.once('exit', () => {
  for (const p of redisServers) p.kill('SIGKILL');
});
