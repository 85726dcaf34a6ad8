// One extractor process with a hard deadline.
//
// yt-dlp's --socket-timeout only bounds a stalled socket: a server that
// trickles bytes, or a chain of slow requests, keeps it going for as long as
// it likes. The bound here is wall-clock: at the deadline (or when the caller
// aborts, e.g. the client disconnected) the process's whole group gets
// SIGKILL, which needs no cooperation from it: the run starts a group of its
// own, so whatever yt-dlp started (ffprobe, a helper) ends with it rather
// than running on unbounded. The promise settles at once instead of on
// 'close', so even a process holding the pipes open cannot stretch the
// bound. Nothing is left to clean up: the lookup runs with -J, no cache
// directory and a temporary working directory, so it writes no files.
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';

export interface BoundedRun {
  /** null when killed or not started. */
  exitCode: number | null;
  timedOut: boolean;
  aborted: boolean;
  /** The program could not be started (ENOENT, EACCES). */
  spawnError?: NodeJS.ErrnoException;
  stdout: string;
  stdoutTruncated: boolean;
  /** The tail of stderr: enough for the error lines, bounded however chatty the run. */
  stderr: string;
  ms: number;
}

export interface BoundedRunOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  maxStdoutBytes?: number;
  /** The process's environment; default this process's. */
  env?: NodeJS.ProcessEnv;
}

const STDERR_TAIL_BYTES = 64 * 1024;

export function runBounded(argv: readonly string[], opts: BoundedRunOptions): Promise<BoundedRun> {
  const started = Date.now();
  const [cmd, ...args] = argv;
  const base = { exitCode: null, timedOut: false, aborted: false, stdout: '', stdoutTruncated: false, stderr: '' };
  if (!cmd) return Promise.reject(new Error('runBounded: empty command'));
  if (opts.signal?.aborted) return Promise.resolve({ ...base, aborted: true, ms: 0 });

  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: tmpdir(), detached: true, ...(opts.env && { env: opts.env }) });
    const maxStdout = opts.maxStdoutBytes ?? 32 * 1024 * 1024;
    const out: Buffer[] = [];
    let outBytes = 0;
    let stdoutTruncated = false;
    let errTail = Buffer.alloc(0);

    child.stdout.on('data', (chunk: Buffer) => {
      if (outBytes + chunk.length > maxStdout) {
        stdoutTruncated = true;
        return;
      }
      out.push(chunk);
      outBytes += chunk.length;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      errTail = Buffer.concat([errTail, chunk]);
      if (errTail.length > STDERR_TAIL_BYTES) errTail = errTail.subarray(errTail.length - STDERR_TAIL_BYTES);
    });

    let settled = false;
    const settle = (r: Partial<BoundedRun>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      resolve({
        ...base,
        stdout: Buffer.concat(out).toString('utf8'),
        stdoutTruncated,
        stderr: errTail.toString('utf8'),
        ...r,
        ms: Date.now() - started,
      });
    };
    const kill = (why: 'timedOut' | 'aborted') => {
      killGroup(child.pid);
      child.stdout.destroy();
      child.stderr.destroy();
      settle({ [why]: true, exitCode: null });
    };
    const onAbort = () => kill('aborted');
    const timer = setTimeout(() => kill('timedOut'), opts.timeoutMs);
    opts.signal?.addEventListener('abort', onAbort, { once: true });

    child.once('error', (err: NodeJS.ErrnoException) => settle({ spawnError: err }));
    child.once('close', (code) => settle({ exitCode: code }));
  });
}

/**
 * SIGKILL the process group led by `pid` (spawned detached), and the process
 * itself: on a loaded machine a deadline can pass before the forked child
 * has run setsid, when there is no group of that id yet and only the
 * process can be killed (a CI run found yt-dlp alive after its deadline so).
 * One already gone is nothing to do.
 */
function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, 'SIGKILL');
    } catch {
      // ESRCH: that group or process has ended already (or, for the group, does not exist yet).
    }
  }
}
