// Child processes (yt-dlp, ffmpeg, ffprobe) with bounded output capture and
// cancellation.
//
// Children stay in the runner's process group on purpose: the local kubelet
// signals the whole group (SIGTERM, then SIGKILL), so nothing outlives a
// killed runner, and in a real pod everything dies with the container's PID
// namespace. A group of their own would survive a SIGKILL of the runner.
// A real kubelet signals only the container's first process, though, and
// yt-dlp starts ffmpeg itself: on SIGTERM the runner signals every process
// it started and theirs (killProcessTree, read from /proc), grandchildren
// included.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';

/** Every live child, so a SIGTERM handler can stop them all synchronously. */
const live = new Set<ChildProcess>();

export interface RunOptions {
  /** Called with each complete stdout line (without the newline). */
  onStdoutLine?: (line: string) => void;
  /** Keep stdout text (bounded) in the result; off when lines are consumed by onStdoutLine. */
  captureStdout?: boolean;
  signal?: AbortSignal;
  /** Upper bound on captured stdout, bytes; a probe's JSON can be large (many formats) but not unbounded. */
  maxStdoutBytes?: number;
  /**
   * Hand stdout to the caller as a stream (media piped into an upload)
   * instead of reading it; onStdoutLine and captureStdout then read fd 3,
   * where such a child writes its progress (ffmpeg -progress pipe:3).
   */
  pipeStdout?: (stdout: Readable) => void;
  /**
   * Or: the child's stdout is this open file (a staged upload, see
   * StorageProvider.stage), which the child writes itself; onStdoutLine and
   * captureStdout read fd 3 then too.
   */
  stdoutFd?: number;
  /**
   * Text for the child's stdin, which is closed once it is written (or at
   * once when the promise rejects). The child may start before the text is
   * known: yt-dlp reads its options there (see ytdlp.ts, startYtDlp).
   * Without it stdin is /dev/null.
   */
  stdin?: Promise<string>;
  /** Or: stdin as a stream for the caller to write (bytes copied to ffprobe as they are produced); called before runProcess returns. */
  stdinStream?: (stdin: Writable) => void;
}

export interface RunResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  /** The tail of stderr (bounded): enough to classify an error, never the whole log of a long download. */
  stderr: string;
  /** True when stdout capture hit maxStdoutBytes. */
  stdoutTruncated: boolean;
}

const STDERR_TAIL_BYTES = 64 * 1024;

/** Run a program to completion. Never rejects for a non-zero exit; rejects only when it cannot be started. */
export function runProcess(cmd: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    if (opts.signal?.aborted) {
      resolve({ exitCode: null, signal: 'SIGTERM', stdout: '', stderr: '', stdoutTruncated: false });
      return;
    }
    const stdin = opts.stdin || opts.stdinStream ? 'pipe' : 'ignore';
    const linesOnFd3 = opts.pipeStdout !== undefined || opts.stdoutFd !== undefined;
    const child = spawn(cmd, args, { stdio: linesOnFd3 ? [stdin, opts.stdoutFd ?? 'pipe', 'pipe', 'pipe'] : [stdin, 'pipe', 'pipe'] });
    live.add(child);
    if (opts.stdin && child.stdin) {
      const input = child.stdin;
      // A child that exits before reading its input (killed, failed) closes the pipe: not an error of ours.
      input.on('error', () => undefined);
      opts.stdin.then((text) => input.end(text), () => input.end());
    }
    if (opts.stdinStream && child.stdin) {
      // A child that stops reading early (exited, killed) closes the pipe: the writer sees that as the stream ending.
      child.stdin.on('error', () => undefined);
      opts.stdinStream(child.stdin);
    }
    if (opts.pipeStdout && child.stdout) opts.pipeStdout(child.stdout);
    const lines = linesOnFd3 ? (child.stdio[3] as Readable | null) : child.stdout;

    const maxStdout = opts.maxStdoutBytes ?? 64 * 1024 * 1024;
    const stdoutChunks: Buffer[] = [];
    let stdoutBytes = 0;
    let stdoutTruncated = false;
    const decoder = new StringDecoder('utf8');
    let partial = '';
    lines?.on('data', (chunk: Buffer) => {
      if (opts.captureStdout) {
        if (stdoutBytes + chunk.length <= maxStdout) {
          stdoutChunks.push(chunk);
          stdoutBytes += chunk.length;
        } else stdoutTruncated = true;
      }
      if (opts.onStdoutLine) {
        partial += decoder.write(chunk);
        const lines = partial.split(/\r?\n|\r/);
        partial = lines.pop() ?? '';
        for (const line of lines) if (line) opts.onStdoutLine(line);
        // A runaway line without newlines must not grow without bound.
        if (partial.length > 1 << 20) partial = '';
      }
    });

    let stderrTail = Buffer.alloc(0);
    child.stderr?.on('data', (chunk: Buffer) => {
      stderrTail = Buffer.concat([stderrTail, chunk]);
      if (stderrTail.length > STDERR_TAIL_BYTES) stderrTail = stderrTail.subarray(stderrTail.length - STDERR_TAIL_BYTES);
    });

    const onAbort = () => killChild(child, 'SIGTERM');
    opts.signal?.addEventListener('abort', onAbort, { once: true });

    child.once('error', (err) => {
      live.delete(child);
      opts.signal?.removeEventListener('abort', onAbort);
      reject(err);
    });
    child.once('close', (exitCode, signal) => {
      live.delete(child);
      opts.signal?.removeEventListener('abort', onAbort);
      if (opts.onStdoutLine) {
        const rest = partial + decoder.end();
        if (rest) opts.onStdoutLine(rest);
      }
      resolve({
        exitCode,
        signal,
        stdout: Buffer.concat(stdoutChunks).toString('utf8'),
        stderr: stderrTail.toString('utf8'),
        stdoutTruncated,
      });
    });
  });
}

function killChild(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    child.kill(signal);
  } catch {
    // already gone
  }
}

/** Signal every live child; synchronous so it can run in a signal handler before exit. */
export function killAllChildren(signal: NodeJS.Signals = 'SIGTERM'): void {
  for (const child of live) killChild(child, signal);
}

/** Number of children still running (for tests and shutdown). */
export function liveChildren(): number {
  return live.size;
}

/**
 * Every live process below `root` (children, theirs, and so on), from
 * /proc; zombies (exited, not yet reaped) are left out. Empty without /proc.
 */
export function descendants(root: number = process.pid, procDir = '/proc'): number[] {
  let entries: string[];
  try {
    entries = readdirSync(procDir);
  } catch {
    return [];
  }
  const children = new Map<number, number[]>();
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    let stat: string;
    try {
      stat = readFileSync(`${procDir}/${e}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (state === 'Z') continue;
    const list = children.get(Number(ppid)) ?? [];
    list.push(Number(e));
    children.set(Number(ppid), list);
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length) {
    for (const pid of children.get(queue.shift()!) ?? []) {
      found.push(pid);
      queue.push(pid);
    }
  }
  return found;
}

/** Processes signalled by killProcessTree: signalled again in a later round even if their parent is gone by then. */
const signalled = new Set<number>();

/**
 * Signal every process the runner started and what they started in turn
 * (yt-dlp's ffmpeg), found from /proc before any of them is signalled, so a
 * grandchild whose parent dies first is not lost. Processes the runner did
 * not start through runProcess (a loader's helper) are left alone.
 * Synchronous, for a signal handler. Returns how many were signalled.
 */
export function killProcessTree(signal: NodeJS.Signals): number {
  const roots = [...live].map((c) => c.pid).filter((pid): pid is number => pid !== undefined);
  for (const root of roots) {
    signalled.add(root);
    for (const pid of descendants(root)) signalled.add(pid);
  }
  let n = 0;
  for (const pid of signalled) {
    try {
      process.kill(pid, signal);
      n++;
    } catch {
      signalled.delete(pid); // exited
    }
  }
  return n;
}

/** Processes killProcessTree signalled that are still running (zombies not counted). */
export function liveSignalled(): number {
  let n = 0;
  for (const pid of signalled) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (!stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) n++;
    } catch {
      signalled.delete(pid);
    }
  }
  return n;
}

/**
 * The CPUs this container may use: its cgroup's CPU quota (a pod's CPU
 * limit) when it has one, else the CPUs it may run on. ffmpeg sizes its
 * decoder and encoder threads from the machine's cores, which a pod's limit
 * does not change, and every libx264 thread holds frames: at 1080p about
 * 22 MB each, so 300 MB with 3 threads, 1.3 GB with the 48 a 32-core node
 * gets (measured, ffmpeg 5.1 veryfast).
 */
export function cpuBudget(cgroupRoot = '/sys/fs/cgroup'): number {
  const cpus = os.availableParallelism();
  const quota = cgroupCpuQuota(cgroupRoot);
  return quota === undefined ? cpus : Math.max(1, Math.min(cpus, Math.ceil(quota)));
}

function cgroupCpuQuota(root: string): number | undefined {
  const read = (file: string) => {
    try {
      return readFileSync(path.join(root, file), 'utf8').trim();
    } catch {
      return undefined;
    }
  };
  // cgroup v2: "<quota> <period>", or "max <period>" for none.
  const v2 = read('cpu.max')?.split(/\s+/);
  if (v2) return v2[0] === 'max' ? undefined : Number(v2[0]) / Number(v2[1]) || undefined;
  // cgroup v1: a quota of -1 is none.
  const quota = Number(read('cpu/cpu.cfs_quota_us'));
  const period = Number(read('cpu/cpu.cfs_period_us'));
  return quota > 0 && period > 0 ? quota / period : undefined;
}
