// Benchmark (issue 5, storage destinations): upload a 2 GB file from a
// stream to a storage server with our provider, and have rclone copy the
// same file to the same server in the same run. Prints the uploader's
// throughput against rclone's (goal: at least 0.9×) and its peak memory
// (goal: under 150 MB).
//
//   npx tsx lib/bench/upload-vs-rclone.ts [--only blob,s3] [--size-mib 2048] [--runs 2] [--no-verify]
//
// Targets: `blob` (Azurite) and `s3` (s3rver). Each names a server to start,
// the destination.json our uploader gets, and the rclone remote for the
// same place (see BenchTarget); the runs, checks and report are shared. The uploader runs in a child process (upload-child.ts) so
// its memory is measured alone, compiled with tsc and run by plain node as
// the runner image runs it (tsx alone would add ~30 MB); rclone's memory is
// sampled from /proc. Runs
// alternate the order (ours first, then rclone first) so neither side
// always meets a warmer or fuller server. Needs rclone (Debian package;
// `make bench` installs it).
import { DeleteObjectCommand, GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { ContainerSASPermissions, SASProtocol, StorageSharedKeyCredential, generateBlobSASQueryParameters } from '@azure/storage-blob';
import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startAzurite } from '../../test/support/azurite.js';
import { startS3rver } from '../../test/support/s3rver.js';

const MiB = 1024 * 1024;
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const require = createRequire(import.meta.url);

/* ------------------------------------------------------------------ */
/* Targets                                                              */
/* ------------------------------------------------------------------ */

export interface RunningTarget {
  /** destination.json for createProvider(), as the runner would get it. */
  destination: Record<string, unknown>;
  /** rclone's side: environment defining a remote, and the `remote:path` a key maps to. */
  rclone: { env: Record<string, string>; target(key: string): string };
  /** Bytes stored under `key` and their sha256, read back from the server (to check a copy is complete and intact). */
  readBack(key: string): Promise<{ bytes: number; sha256: string }>;
  /** Remove what `key` holds, so the next run starts from the same state. */
  remove(key: string): Promise<void>;
  stop(): Promise<void>;
}

export interface BenchTarget {
  /** `--only` picks targets by this name; also the provider's name. */
  name: string;
  /** What the server is, for the report. */
  server: string;
  start(workDir: string): Promise<RunningTarget>;
}

const CONTAINER = 'bench';
const BUCKET = 'bench';

/** Bytes and sha256 of a stream: the read-back check of a stored copy. */
async function digest(body: AsyncIterable<unknown>): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of body) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { bytes, sha256: hash.digest('hex') };
}

/** Azure Blob on Azurite (child process, disk persistence, access log off). */
const blobTarget: BenchTarget = {
  name: 'blob',
  server: `Azurite ${(require('azurite/package.json') as { version: string }).version}`,
  async start(workDir) {
    const az = await startAzurite({ containers: [CONTAINER], accessLog: false, baseDir: workDir });
    // rclone 1.60 builds https://<account>.<endpoint> from account+key and has
    // no way to name an emulator's URL and account, so it gets a container
    // SAS URL for the same account and container instead.
    const sas = generateBlobSASQueryParameters(
      {
        containerName: CONTAINER,
        permissions: ContainerSASPermissions.parse('racwdl'),
        expiresOn: new Date(Date.now() + 6 * 3600_000),
        protocol: SASProtocol.HttpsAndHttp,
      },
      new StorageSharedKeyCredential(az.accountName, az.accountKey),
    );
    const container = az.client().getContainerClient(CONTAINER);
    return {
      destination: {
        provider: 'blob',
        account_name: az.accountName,
        account_key: az.accountKey,
        container: CONTAINER,
        endpoint: az.endpoint,
      },
      rclone: {
        env: { RCLONE_CONFIG_BENCHBLOB_TYPE: 'azureblob', RCLONE_CONFIG_BENCHBLOB_SAS_URL: `${az.endpoint}/${CONTAINER}?${sas.toString()}` },
        target: (key) => `benchblob:${CONTAINER}/${key}`,
      },
      async readBack(key) {
        const res = await container.getBlobClient(key).download();
        return digest(res.readableStreamBody as NodeJS.ReadableStream);
      },
      async remove(key) {
        await container.getBlobClient(key).deleteIfExists();
      },
      stop: () => az.stop(),
    };
  },
};

/**
 * S3 on s3rver, in this (the driver's) process, storing to disk. s3rver is a
 * single-threaded JS server that writes every part to a file and
 * concatenates them on CompleteMultipartUpload, so it, not the client, sets
 * the pace: both sides meet the same ceiling, and the ratio says more than
 * the MiB/s.
 */
const s3Target: BenchTarget = {
  name: 's3',
  server: `s3rver ${(require('s3rver/package.json') as { version: string }).version}`,
  async start() {
    const s3 = await startS3rver({ buckets: [BUCKET] });
    const region = 'us-east-1';
    const client = new S3Client({
      endpoint: s3.endpoint,
      region,
      forcePathStyle: true,
      credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    });
    return {
      destination: {
        provider: 's3',
        endpoint: s3.endpoint,
        bucket: BUCKET,
        region,
        access_key: s3.accessKeyId,
        secret_key: s3.secretAccessKey,
      },
      rclone: {
        env: {
          RCLONE_CONFIG_BENCHS3_TYPE: 's3',
          RCLONE_CONFIG_BENCHS3_PROVIDER: 'Other',
          RCLONE_CONFIG_BENCHS3_ENDPOINT: s3.endpoint,
          RCLONE_CONFIG_BENCHS3_REGION: region,
          RCLONE_CONFIG_BENCHS3_FORCE_PATH_STYLE: 'true',
          RCLONE_CONFIG_BENCHS3_ACCESS_KEY_ID: s3.accessKeyId,
          RCLONE_CONFIG_BENCHS3_SECRET_ACCESS_KEY: s3.secretAccessKey,
        },
        target: (key) => `benchs3:${BUCKET}/${key}`,
      },
      async readBack(key) {
        const res = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
        return digest(res.Body as AsyncIterable<unknown>);
      },
      async remove(key) {
        await client.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: key }));
      },
      async stop() {
        client.destroy();
        await s3.stop();
      },
    };
  },
};

/** Every target this benchmark knows; add one here to benchmark another provider. */
const TARGETS: BenchTarget[] = [blobTarget, s3Target];

/* ------------------------------------------------------------------ */
/* Measurements                                                         */
/* ------------------------------------------------------------------ */

interface Measurement {
  bytes: number;
  seconds: number;
  peakRssBytes: number;
  baselineRssBytes?: number;
  /** Uploader only: peak JS heap and peak Buffer memory outside it, sampled every 50 ms. */
  peakHeapBytes?: number;
  peakBuffersBytes?: number;
}

/** Where the uploader is compiled to: inside the repository, so its imports find node_modules. */
const BUILD_DIR = path.join(ROOT, '.local/bench-build');

/** Compile upload-child.ts and what it imports, as the images do (tsc, then plain node). */
async function buildUploader(): Promise<string> {
  await rm(BUILD_DIR, { recursive: true, force: true });
  await mkdir(BUILD_DIR, { recursive: true });
  const tsconfig = path.join(BUILD_DIR, 'tsconfig.json');
  await writeFile(
    tsconfig,
    JSON.stringify({
      extends: path.join(ROOT, 'tsconfig.base.json'),
      compilerOptions: { outDir: BUILD_DIR, rootDir: ROOT, noEmit: false, sourceMap: false },
      files: [path.join(ROOT, 'lib/bench/upload-child.ts')],
    }),
  );
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', tsconfig], { cwd: ROOT, stdio: 'inherit' });
  return path.join(BUILD_DIR, 'lib/bench/upload-child.js');
}

/** Our provider, in a child process: the compiled uploader under plain node. */
async function runUploader(uploader: string, target: RunningTarget, file: string, key: string): Promise<Measurement> {
  const child = spawn(process.execPath, [uploader], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  // The destination (with its key) goes over stdin, never on a command line.
  child.stdin.end(JSON.stringify({ destination: target.destination, file, key, contentType: 'video/mp4' }));
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`uploader exited ${code}: ${err.trim().split('\n').slice(-3).join(' | ')}`);
  return JSON.parse(out.trim().split('\n').at(-1) as string) as Measurement;
}

/** Peak resident memory of a running process, sampled from /proc (VmHWM is its high-water mark). */
function watchPeakRss(pid: number): () => number {
  let peak = 0;
  const sample = () => {
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
      peak = Math.max(peak, kb * 1024);
    } catch {
      // The process has exited; the last sample stands.
    }
  };
  const timer = setInterval(sample, 100);
  return () => {
    sample();
    clearInterval(timer);
    return peak;
  };
}

async function runRclone(target: RunningTarget, file: string, key: string): Promise<Measurement> {
  const started = performance.now();
  // rclone's defaults, as its users run it: azureblob 4 MiB chunks, 16 in
  // flight; s3 5 MiB parts, 4 in flight, after an MD5 pass over the file.
  // Without AWS_CA_BUNDLE: rclone 1.60's S3 client fails to start when it is
  // set ("unsupported transport"), and the servers here are plain-HTTP loopback.
  const { AWS_CA_BUNDLE: _caBundle, ...env } = process.env;
  const child = spawn('rclone', ['copyto', file, target.rclone.target(key), '--retries', '1'], {
    env: { ...env, ...target.rclone.env, RCLONE_CONFIG: '/dev/null' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const stopWatching = watchPeakRss(child.pid as number);
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  const seconds = (performance.now() - started) / 1000;
  const peakRssBytes = stopWatching();
  if (code !== 0) throw new Error(`rclone exited ${code}: ${err.trim().split('\n').slice(-3).join(' | ')}`);
  return { bytes: 0, seconds, peakRssBytes };
}

/* ------------------------------------------------------------------ */
/* Driver                                                               */
/* ------------------------------------------------------------------ */

interface Args {
  only: string[];
  sizeMiB: number;
  runs: number;
  verify: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { only: [], sizeMiB: 2048, runs: 2, verify: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--only') args.only.push(...value().split(','));
    else if (a === '--size-mib') args.sizeMiB = Number(value());
    else if (a === '--runs') args.runs = Number(value());
    else if (a === '--no-verify') args.verify = false;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(args.sizeMiB) || args.sizeMiB < 1) throw new Error('--size-mib must be a positive integer');
  if (!Number.isInteger(args.runs) || args.runs < 1) throw new Error('--runs must be a positive integer');
  const unknown = args.only.filter((n) => !TARGETS.some((t) => t.name === n));
  if (unknown.length) throw new Error(`unknown target ${unknown.join(', ')}; known: ${TARGETS.map((t) => t.name).join(', ')}`);
  return args;
}

/** `sizeMiB` of random data (incompressible, so no layer can shortcut it), with its sha256. */
async function makeFile(file: string, sizeMiB: number): Promise<string> {
  const hash = createHash('sha256');
  const out = createWriteStream(file);
  for (let i = 0; i < sizeMiB; i += 16) {
    const block = randomBytes(Math.min(16, sizeMiB - i) * MiB);
    hash.update(block);
    if (!out.write(block)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
  }
  await new Promise<void>((resolve, reject) => out.end((e?: Error | null) => (e ? reject(e) : resolve())));
  return hash.digest('hex');
}

const mib = (b: number) => b / MiB;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

interface Setup {
  args: Args;
  workDir: string;
  file: string;
  sha256: string;
  uploader: string;
  rcloneVersion: string;
}

async function benchTarget(t: BenchTarget, { args, workDir, file, sha256, uploader, rcloneVersion }: Setup): Promise<void> {
  const bytes = args.sizeMiB * MiB;
  const running = await t.start(workDir);
  const ours: Measurement[] = [];
  const theirs: Measurement[] = [];
  try {
    for (let run = 0; run < args.runs; run++) {
      const order = run % 2 === 0 ? (['ours', 'rclone'] as const) : (['rclone', 'ours'] as const);
      for (const who of order) {
        const key = `bench/${who}-${run}.bin`;
        const m = who === 'ours' ? await runUploader(uploader, running, file, key) : await runRclone(running, file, key);
        if (args.verify) {
          const back = await running.readBack(key);
          if (back.bytes !== bytes || back.sha256 !== sha256) throw new Error(`${who} run ${run}: stored copy differs from the file`);
        }
        (who === 'ours' ? ours : theirs).push(m);
        console.log(
          `  run ${run + 1} ${who === 'ours' ? `mediajobs ${t.name}` : 'rclone'}: ${(mib(bytes) / m.seconds).toFixed(1)} MiB/s ` +
            `(${m.seconds.toFixed(1)} s), peak RSS ${mib(m.peakRssBytes).toFixed(0)} MiB` +
            (m.peakHeapBytes !== undefined ? ` (heap ${mib(m.peakHeapBytes).toFixed(0)}, buffers ${mib(m.peakBuffersBytes ?? 0).toFixed(0)})` : ''),
        );
        await running.remove(key);
      }
    }
  } finally {
    await running.stop();
  }
  const oursRate = median(ours.map((m) => mib(bytes) / m.seconds));
  const theirRate = median(theirs.map((m) => mib(bytes) / m.seconds));
  const peak = Math.max(...ours.map((m) => m.peakRssBytes));
  const baseline = Math.max(...ours.map((m) => m.baselineRssBytes ?? 0));
  const ratio = oursRate / theirRate;
  console.log(`${t.name} → ${t.server}, ${args.sizeMiB} MiB, ${args.runs} run(s), median:`);
  console.log(`  mediajobs ${t.name}: ${oursRate.toFixed(1)} MiB/s, peak RSS ${mib(peak).toFixed(0)} MiB (${mib(baseline).toFixed(0)} MiB of it before the upload began)`);
  console.log(`  ${rcloneVersion}: ${theirRate.toFixed(1)} MiB/s, peak RSS ${mib(Math.max(...theirs.map((m) => m.peakRssBytes))).toFixed(0)} MiB`);
  console.log(`  throughput ${ratio.toFixed(2)}× rclone (goal ≥ 0.9×): ${ratio >= 0.9 ? 'met' : 'MISSED'}`);
  console.log(`  uploader peak memory ${(peak / 1e6).toFixed(0)} MB (goal < 150 MB): ${peak < 150e6 ? 'met' : 'MISSED'}`);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  let rcloneVersion: string;
  try {
    rcloneVersion = execFileSync('rclone', ['version'], { encoding: 'utf8' }).split('\n')[0]?.trim() ?? 'rclone';
  } catch {
    throw new Error('rclone is not installed (Debian package `rclone`; `make bench` installs it)');
  }
  const targets = args.only.length ? TARGETS.filter((t) => args.only.includes(t.name)) : TARGETS;
  const workDir = await mkdtemp(path.join(os.tmpdir(), 'mj-upload-bench-'));
  try {
    const uploader = await buildUploader();
    const file = path.join(workDir, 'source.bin');
    const sha256 = await makeFile(file, args.sizeMiB);
    console.log(`upload-vs-rclone: ${args.sizeMiB} MiB random file, ${os.cpus().length} CPUs, node ${process.version}, ${rcloneVersion}`);
    for (const t of targets) await benchTarget(t, { args, workDir, file, sha256, uploader, rcloneVersion });
  } finally {
    await rm(workDir, { recursive: true, force: true });
    await rm(BUILD_DIR, { recursive: true, force: true });
  }
}

// Guarded so a future target module can import the types above without running the benchmark.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
