// A real Azure Blob protocol server for tests and benchmarks: Azurite's blob
// service as a child process on an ephemeral loopback port, storing into a
// fresh temp directory that stop() removes.
//
// A child rather than in-process: the benchmark measures the uploader's
// memory, which must not include the server's, and stopping the child is a
// faithful "server gone" for the unreachable tests.
//
// Each run gets its own account name and random key (AZURITE_ACCOUNTS), so
// no well-known emulator key is involved and a wrong-key test is a real
// signature failure: Azurite verifies SharedKey signatures.
import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

/** One request Azurite's access log recorded (method, decoded path below the account, status). */
export interface AzuriteRequest {
  method: string;
  /** e.g. `/media/videos/a.mp4` (container and blob name, percent-decoded) */
  path: string;
  /** The raw query string, e.g. `comp=block&blockid=...` */
  query: string;
  status: number;
}

export interface RunningAzurite {
  /** Blob service URL including the account, e.g. http://127.0.0.1:41234/acct1a2b3c */
  endpoint: string;
  port: number;
  accountName: string;
  accountKey: string;
  /** Temp directory holding Azurite's data. */
  directory: string;
  /** PID of the Azurite process (the benchmark samples its memory apart from the uploader's). */
  pid: number;
  /**
   * Requests served so far, oldest first, when the access log is on
   * (default). The log reaches us a little after each response: call
   * settled() before reading it.
   */
  requests: AzuriteRequest[];
  /** Resolves once every request answered before the call is in `requests`. */
  settled(): Promise<void>;
  /** A client with the account's key, for setting up and inspecting containers. */
  client(): BlobServiceClient;
  /** Stop the server and delete its files; safe to call twice. */
  stop(): Promise<void>;
}

export interface AzuriteOptions {
  /** Containers to create once the server is up. */
  containers?: string[];
  /** Record every request in `requests` (Azurite's access log); default true. Off for benchmarks. */
  accessLog?: boolean;
  /** Where Azurite keeps its data; default a fresh directory under the system temp dir. */
  baseDir?: string;
}

const require = createRequire(import.meta.url);
const AZURITE_BLOB_MAIN = require.resolve('azurite/dist/src/blob/main.js');

const children = new Set<ChildProcess>();
// Mocha runs with --exit: a test that forgot stop() must not leave a server behind.
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

// morgan's "common" format, which Azurite's access log uses:
// 127.0.0.1 - - [date] "PUT /acct/media/x.mp4?comp=block HTTP/1.1" 201 -
const ACCESS_LINE = /"([A-Z]+) ([^" ]+) HTTP\/[0-9.]+" (\d{3})/;

export async function startAzurite(opts: AzuriteOptions = {}): Promise<RunningAzurite> {
  const directory = await mkdtemp(path.join(opts.baseDir ?? os.tmpdir(), 'mediajobs-azurite-'));
  const accountName = `acct${randomBytes(4).toString('hex')}`;
  const accountKey = randomBytes(64).toString('base64');
  const accessLog = opts.accessLog ?? true;
  const args = [
    AZURITE_BLOB_MAIN,
    '--blobHost', '127.0.0.1',
    '--blobPort', '0',
    '--location', directory,
    // Azurite would otherwise phone home; the test machines reach no such host.
    '--disableTelemetry',
    // The SDK may speak a newer service version than this Azurite release knows.
    '--skipApiVersionCheck',
    ...(accessLog ? [] : ['--silent']),
  ];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, AZURITE_ACCOUNTS: `${accountName}:${accountKey}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const requests: AzuriteRequest[] = [];
  const accountPrefix = `/${accountName}`;
  // settled() sends a marker request and waits for its log line: Azurite
  // logs in response order, so every earlier request is logged by then.
  const markers = new Map<string, () => void>();
  let output = '';

  const port = await new Promise<number>((resolve, reject) => {
    let buffered = '';
    const onExit = (code: number | null) => reject(new Error(`azurite exited (${code}) before listening:\n${output.slice(-2000)}`));
    child.once('exit', onExit);
    child.stderr?.on('data', (d: Buffer) => {
      output += d.toString();
    });
    child.stdout?.on('data', (d: Buffer) => {
      buffered += d.toString();
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (output.length < 20_000) output += `${line}\n`;
        const listening = /successfully listens on http:\/\/127\.0\.0\.1:(\d+)/.exec(line);
        if (listening) {
          child.off('exit', onExit);
          resolve(Number(listening[1]));
          continue;
        }
        const m = ACCESS_LINE.exec(line);
        if (m) {
          const marker = /\/__settled__\/([0-9a-f]+)/.exec(m[2] as string);
          if (marker) {
            markers.get(marker[1] as string)?.();
            continue;
          }
          const [pathPart, query = ''] = (m[2] as string).split('?', 2) as [string, string?];
          let p = decodeURIComponent(pathPart);
          if (p.startsWith(accountPrefix)) p = p.slice(accountPrefix.length) || '/';
          requests.push({ method: m[1] as string, path: p, query, status: Number(m[3]) });
        }
      }
    });
  });

  const endpoint = `http://127.0.0.1:${port}/${accountName}`;
  const client = () => new BlobServiceClient(endpoint, new StorageSharedKeyCredential(accountName, accountKey));
  async function settled(): Promise<void> {
    if (!accessLog) return;
    const id = randomBytes(6).toString('hex');
    const logged = new Promise<void>((resolve) => markers.set(id, resolve));
    await fetch(`http://127.0.0.1:${port}/__settled__/${id}`).then((r) => r.arrayBuffer());
    await logged;
    markers.delete(id);
  }
  for (const name of opts.containers ?? []) await client().getContainerClient(name).create();
  // Setup requests are not the test's.
  await settled();
  requests.length = 0;

  let stopped = false;
  return {
    endpoint,
    port,
    accountName,
    accountKey,
    directory,
    pid: child.pid as number,
    requests,
    settled,
    client,
    async stop() {
      if (stopped) return;
      stopped = true;
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGTERM');
        // Azurite closes gracefully on SIGTERM but waits for idle keep-alive sockets; do not wait for long.
        const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
        await exited;
        clearTimeout(timer);
      }
      children.delete(child);
      await rm(directory, { recursive: true, force: true });
    },
  };
}
