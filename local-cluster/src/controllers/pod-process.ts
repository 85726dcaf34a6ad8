// One container instance as a local process: spawn with a minimal
// environment in its own process group (so a kill reaches everything it
// started, as a container's PID namespace would), capture stdout+stderr into
// a bounded in-memory buffer and a rotated file, and report the exit the way
// a container runtime does (exit code, 128+signal, StartError).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ProcessIdentity } from './pod-identity.js';

export interface PathMapping {
  /** The path the pod spec uses (a volume mountPath, /dev/termination-log...). */
  from: string;
  /** Where it really is on this machine. */
  to: string;
}

// Characters that continue a path segment: a mapping only applies when the
// path stands on its own, so /etc/secret does not rewrite /etc/secrets or /x/etc/secret.
const PATH_CHAR = String.raw`[A-Za-z0-9._~\-]`;

/**
 * Replace every standalone occurrence of a mapped path (the exact path, or
 * the path followed by `/`) in `value`. Longest mappings win, so a mount at
 * /data/in inside a mount at /data resolves to the inner one.
 */
export function rewritePaths(value: string, mappings: readonly PathMapping[]): string {
  if (mappings.length === 0 || value === '') return value;
  const sorted = [...mappings].filter((m) => m.from && m.from !== '/').sort((a, b) => b.from.length - a.from.length);
  if (sorted.length === 0) return value;
  const alternatives = sorted.map((m) => m.from.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|');
  const re = new RegExp(`(?<!${PATH_CHAR}|/)(${alternatives})(?=$|/|[^A-Za-z0-9._~\\-])`, 'g');
  return value.replace(re, (match) => sorted.find((m) => m.from === match)?.to ?? match);
}

export interface ProcessSpec {
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  /** Combined stdout/stderr file; rotated to `<file>.1` past `maxLogFileBytes`. */
  logFile: string;
  /** In-memory log kept for `kubectl logs` (default 10 MiB). */
  maxLogMemoryBytes?: number;
  maxLogFileBytes?: number;
  /** Run as this user, group and supplementary groups (needs root); unset: as the local cluster's user. */
  identity?: ProcessIdentity;
}

export interface ProcessExit {
  exitCode: number;
  /** Set when a signal ended the process (exitCode is then 128 + its number). */
  signal?: NodeJS.Signals;
  startedAt: Date;
  finishedAt: Date;
  /** Set when the process never started; the runtime's StartError message. */
  startError?: string;
}

const MiB = 1024 * 1024;

/** A bounded log: the newest bytes stay in memory, everything goes to disk with one rotation. */
export class LogSink {
  private chunks: Buffer[] = [];
  private memoryBytes = 0;
  private fd: number | undefined;
  private fileBytes = 0;
  private readonly listeners = new Set<(chunk: Buffer) => void>();
  private closed = false;
  private onDisk = false;

  constructor(private readonly file: string, private readonly maxMemory = 10 * MiB, private readonly maxFile = 10 * MiB) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    try {
      this.fd = fs.openSync(file, 'a', 0o600);
      this.fileBytes = fs.fstatSync(this.fd).size;
    } catch {
      this.fd = undefined; // an unwritable disk must not stop the container
    }
  }

  write(chunk: Buffer): void {
    if (this.closed) return;
    this.chunks.push(chunk);
    this.memoryBytes += chunk.length;
    while (this.memoryBytes > this.maxMemory && this.chunks.length > 1) {
      this.memoryBytes -= this.chunks.shift()!.length;
    }
    if (this.memoryBytes > this.maxMemory) {
      const only = this.chunks[0]!;
      this.chunks[0] = only.subarray(only.length - this.maxMemory);
      this.memoryBytes = this.maxMemory;
    }
    this.writeFile(chunk);
    for (const l of this.listeners) {
      try {
        l(chunk);
      } catch {
        // a follower's failure is its own business
      }
    }
  }

  private writeFile(chunk: Buffer): void {
    if (this.fd === undefined) return;
    try {
      if (this.fileBytes + chunk.length > this.maxFile && this.fileBytes > 0) {
        fs.closeSync(this.fd);
        fs.renameSync(this.file, `${this.file}.1`);
        this.fd = fs.openSync(this.file, 'a', 0o600);
        this.fileBytes = 0;
      }
      fs.writeSync(this.fd, chunk);
      this.fileBytes += chunk.length;
    } catch {
      this.fd = undefined;
    }
  }

  text(): string {
    if (!this.onDisk) return Buffer.concat(this.chunks).toString('utf8');
    // A finished container's log is read back from disk, so finished pods cost no memory.
    const parts: Buffer[] = [];
    for (const f of [`${this.file}.1`, this.file]) {
      try {
        parts.push(fs.readFileSync(f));
      } catch {
        // rotated file may not exist
      }
    }
    const all = Buffer.concat(parts);
    return all.subarray(Math.max(0, all.length - this.maxMemory)).toString('utf8');
  }

  /** Follow new output; returns an unsubscribe function. */
  follow(listener: (chunk: Buffer) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.fd !== undefined) {
      try {
        fs.closeSync(this.fd);
        // Everything reached the file: serve it from there from now on.
        this.onDisk = true;
        this.chunks = [];
        this.memoryBytes = 0;
      } catch {
        // keep the in-memory copy
      }
      this.fd = undefined;
    }
    this.listeners.clear();
  }
}

export class ContainerProcess {
  readonly startedAt = new Date();
  readonly log: LogSink;
  readonly exited: Promise<ProcessExit>;
  private child: ChildProcess | undefined;
  private done = false;
  private killTimer: NodeJS.Timeout | undefined;

  private constructor(spec: ProcessSpec) {
    this.log = new LogSink(spec.logFile, spec.maxLogMemoryBytes, spec.maxLogFileBytes);
    this.exited = new Promise<ProcessExit>((resolve) => this.run(spec, resolve));
  }

  static start(spec: ProcessSpec): ContainerProcess {
    return new ContainerProcess(spec);
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return !this.done;
  }

  private run(spec: ProcessSpec, resolve: (exit: ProcessExit) => void): void {
    const finish = (exit: Omit<ProcessExit, 'startedAt' | 'finishedAt'>) => {
      if (this.done) return;
      this.done = true;
      if (this.killTimer) clearTimeout(this.killTimer);
      const result: ProcessExit = { ...exit, startedAt: this.startedAt, finishedAt: new Date() };
      // The container is gone when its main process is: take the rest of its process group with it.
      this.signalGroup('SIGKILL');
      // Let buffered output land before the log is declared complete.
      const child = this.child;
      const closeLog = () => {
        this.log.close();
        resolve(result);
      };
      if (child && child.pid !== undefined && !exit.startError && child.stdout && !child.stdout.readableEnded) {
        const t = setTimeout(closeLog, 2000);
        child.once('close', () => {
          clearTimeout(t);
          closeLog();
        });
      } else {
        closeLog();
      }
    };

    const [file, ...args] = spec.argv;
    if (!file) {
      finish({ exitCode: 128, startError: startErrorMessage('', 'ENOENT') });
      return;
    }
    let child: ChildProcess;
    try {
      const [command, commandArgs, ids] = spec.identity ? asIdentity(file, args, spec) : [file, args, {}];
      child = spawn(command, commandArgs, {
        cwd: spec.cwd,
        env: spec.env,
        detached: true, // own process group, killed as a unit
        stdio: ['ignore', 'pipe', 'pipe'],
        ...ids,
      });
    } catch (err) {
      finish({ exitCode: 128, startError: startErrorMessage(file, (err as NodeJS.ErrnoException).code) });
      return;
    }
    this.child = child;
    child.stdout?.on('data', (b: Buffer) => this.log.write(b));
    child.stderr?.on('data', (b: Buffer) => this.log.write(b));
    child.on('error', (err: NodeJS.ErrnoException) => {
      if (child.pid === undefined || err.syscall?.startsWith('spawn')) {
        finish({ exitCode: 128, startError: startErrorMessage(file, err.code) });
      }
    });
    child.on('exit', (code, signal) => {
      if (signal) finish({ exitCode: 128 + (os.constants.signals[signal] ?? 0), signal });
      else finish({ exitCode: code ?? 0 });
    });
  }

  private signalGroup(sig: NodeJS.Signals): void {
    const pid = this.child?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, sig);
    } catch {
      // group already empty
    }
  }

  /** SIGTERM the process group, SIGKILL it after `graceMs`; resolves on exit. */
  terminate(graceMs: number): Promise<ProcessExit> {
    if (!this.done) {
      this.signalGroup('SIGTERM');
      if (!this.killTimer) {
        this.killTimer = setTimeout(() => this.signalGroup('SIGKILL'), Math.max(0, graceMs));
        this.killTimer.unref();
      }
    }
    return this.exited;
  }

  /** SIGKILL now. */
  kill(): Promise<ProcessExit> {
    if (!this.done) this.signalGroup('SIGKILL');
    return this.exited;
  }
}

const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => isExecutableFile(p, undefined));

/**
 * The spawn that gives the process `spec.identity`. Node's own uid/gid
 * options clear the supplementary groups (libuv calls setgroups(0)), which
 * would lose fsGroup, so util-linux's setpriv sets all three and execs the
 * program in place (same pid, same process group). setpriv reports a
 * failed exec as an exit status, so the program is resolved here first and
 * a missing or non-executable one throws as spawn would (a StartError).
 * Without setpriv: uid and gid only.
 */
function asIdentity(file: string, args: string[], spec: ProcessSpec): [string, string[], { uid?: number; gid?: number }] {
  const id = spec.identity!;
  if (!SETPRIV) return [file, args, { uid: id.uid, gid: id.gid }];
  const resolved = resolveExecutable(file, spec.env.PATH ?? '', spec.cwd, id);
  const groups = id.groups.length ? [`--groups=${id.groups.join(',')}`] : ['--clear-groups'];
  const nnp = id.noNewPrivs ? ['--no-new-privs'] : [];
  return [SETPRIV, [`--reuid=${id.uid}`, `--regid=${id.gid}`, ...groups, ...nnp, '--', resolved, ...args], {}];
}

/** execvp's search, for the target user: the first PATH entry holding the file; throws ENOENT or EACCES as spawn would. */
export function resolveExecutable(file: string, searchPath: string, cwd: string, id: ProcessIdentity): string {
  const candidates = file.includes('/') ? [path.resolve(cwd, file)] : searchPath.split(':').filter(Boolean).map((d) => path.join(d, file));
  let denied = false;
  for (const c of candidates) {
    if (isExecutableFile(c, id)) return c;
    if (fs.existsSync(c)) denied = true;
  }
  throw Object.assign(new Error(`spawn ${file} ${denied ? 'EACCES' : 'ENOENT'}`), { code: denied ? 'EACCES' : 'ENOENT' });
}

/** A regular file this identity may execute (by the owner, group or other bits; root needs any x bit). */
function isExecutableFile(p: string, id: ProcessIdentity | undefined): boolean {
  let st: fs.Stats;
  try {
    st = fs.statSync(p);
  } catch {
    return false;
  }
  if (!st.isFile()) return false;
  if (!id || id.uid === 0) return (st.mode & 0o111) !== 0;
  if (st.uid === id.uid) return (st.mode & 0o100) !== 0;
  if (st.gid === id.gid || id.groups.includes(st.gid)) return (st.mode & 0o010) !== 0;
  return (st.mode & 0o001) !== 0;
}

// runc's wording as containerd reports it in the StartError message.
function startErrorMessage(file: string, code: string | undefined): string {
  let why: string;
  if (code === 'EACCES') why = `exec: "${file}": permission denied`;
  else if (file.includes('/')) why = `exec: "${file}": stat ${file}: no such file or directory`;
  else why = `exec: "${file}": executable file not found in $PATH`;
  return `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: ${why}: unknown`;
}

// kubecontainer.MaxContainerTerminationMessageLength and the log fallback limits.
export const MAX_TERMINATION_MESSAGE_BYTES = 4096;
const FALLBACK_LOG_LINES = 80;
const FALLBACK_LOG_BYTES = 2048;

/**
 * The termination message as the kubelet computes it: the tail (at most 4 KiB)
 * of the termination-log file; with FallbackToLogsOnError, an empty or missing
 * file and a non-zero exit use the last 80 log lines, cut at 2 KiB.
 */
export function terminationMessage(file: string | undefined, policy: string | undefined, exitCode: number, logText: string, startFailed = false): string {
  const fallback = policy === 'FallbackToLogsOnError' && exitCode !== 0 && !startFailed;
  let message = '';
  let useLogs = fallback;
  if (file) {
    try {
      const fd = fs.openSync(file, 'r');
      try {
        const size = fs.fstatSync(fd).size;
        const len = Math.min(size, MAX_TERMINATION_MESSAGE_BYTES);
        const buf = Buffer.alloc(len);
        fs.readSync(fd, buf, 0, len, size - len);
        message = buf.toString('utf8');
        useLogs = fallback && len === 0;
      } finally {
        fs.closeSync(fd);
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        return `Error on reading termination log ${file}: ${(err as Error).message}`;
      }
    }
  }
  if (useLogs) message = lastLogLines(logText, FALLBACK_LOG_LINES, FALLBACK_LOG_BYTES);
  return message;
}

/** The last `lines` lines of a log, limited to its first `bytes` bytes (tail + limitBytes). */
export function lastLogLines(text: string, lines: number, bytes: number): string {
  const parts = text.split('\n');
  const trailingNewline = parts.length > 1 && parts[parts.length - 1] === '';
  if (trailingNewline) parts.pop();
  let tail = parts.slice(-lines).join('\n');
  if (trailingNewline) tail += '\n';
  const buf = Buffer.from(tail, 'utf8');
  return buf.length <= bytes ? tail : buf.subarray(0, bytes).toString('utf8');
}
