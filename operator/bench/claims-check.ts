// Benchmark (issue 35): what checking a completion's claims costs, side by
// side with the check off, on loopback.
//
// 1. The completion's status write: the check (stored-files.ts
//    checkedResult), the MediaJob status patch, and the finish's second
//    check (answered from the verdict kept); without the check the patch
//    alone. The destination's client is kept between jobs as the operator
//    keeps it (destination-clients.ts). BENCH_RUNS times each (default 200):
//    - a user's S3 destination on s3rver: the per-job Secret read from the
//      local cluster, then a HEAD of the media and its two sidecars;
//    - managed storage on S3: one grant-ledger lookup in Postgres.
//    Printed: p50/p99 of the write, with and without.
// 2. A ~5-second job's wall time, created → Completed, end to end: the
//    real operator and the scripted runner (a pod process that sleeps
//    BENCH_JOB_MS, default 5000, then uploads 100 kB to the user's bucket on
//    s3rver, the object's metadata naming the job, and reports it). With the
//    check, the operator as it ships; without, the same operator with its
//    controller's claims check (checkClaims) taking the report as it is, as
//    before issue 35. Jobs one at a time, in pairs (one with, one without,
//    the order turned each round), so the machine's load weighs on both
//    alike; BENCH_WALL_JOBS each (default 10) per round, BENCH_WALL_ROUNDS
//    rounds (default 3), each round printed and the medians of its p50/p99
//    side by side, with the ratio; and the median of the pairs' differences,
//    which a loaded machine's swings between rounds weigh on least. Goal:
//    the check adds under 5% to a 5-second job.
// BENCH_CLAIMS_PART=writes or =wall runs only one part.
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { buildMediaJob } from '@mediajobs/lib/mediajob/build';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type MediaJobResult, type MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import { DESTINATION_DATA_KEY } from '@mediajobs/lib/saved-destinations';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { PgGrantLedger } from '@mediajobs/lib/storage/grant-ledger';
import { S3StorageProvider } from '@mediajobs/lib/storage/s3';
import { loadAverage, machine, median } from '../../api-gateway/bench/support.js';
import { kubeConfigFor, startTestCluster } from '../../local-cluster/test/support.js';
import { createTestDatabase, insertApiKey } from '../../test/support/postgres.js';
import { startS3rver } from '../../test/support/s3rver.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { loadOperatorConfig } from '../src/config.js';
import { credentialsSecretName } from '../src/job-builder.js';
import { startOperator } from '../src/operator.js';
import { checkedResult, type RemovalDeps } from '../src/stored-files.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 200);
const JOB_MS = Number(process.env.BENCH_JOB_MS ?? 5000);
const WALL_JOBS = Number(process.env.BENCH_WALL_JOBS ?? 10);
const WALL_ROUNDS = Number(process.env.BENCH_WALL_ROUNDS ?? 3);
/** What the scripted runner uploads, and the size it claims instead: the operator with the check records the first, without it the second. */
const UPLOAD_BYTES = 100_000;
const CLAIMED_BYTES = 999_999;
const RUNNER = fileURLToPath(new URL('../test/support/scripted-runner.ts', import.meta.url));
const OPTIONS = {
  format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
} as const;

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

/** Part 1: the completion's status write, with the check and without. */
async function statusWrites(): Promise<void> {
  const tc = await startTestCluster();
  await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url))]);
  const db = await createTestDatabase();
  const s3 = await startS3rver({ buckets: ['user'] });
  const kc = kubeConfigFor(tc.cluster);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const bucket = new S3StorageProvider({
    endpoint: s3.endpoint, bucket: 'user', region: 'us-east-1', accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, forcePathStyle: true,
  });
  try {
    const apiKeyId = await insertApiKey(db.pool);
    const cfg = (storage: 'local' | 's3') => loadOperatorConfig({
      DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: 'unused', RUNNER_IMAGE: 'unused', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8',
      ...(storage === 's3' ? { MANAGED_STORAGE: 's3', MANAGED_S3_BUCKET: 'user', MANAGED_S3_ENDPOINT: s3.endpoint } : {}),
    });
    const log = pino({ level: 'silent' });
    const ledger = new PgGrantLedger(db.pool);

    /** A MediaJob as the operator has it at completion: on the user's bucket (its Secret beside it) or on managed storage. */
    const jobAt = async (user: boolean) => {
      const jobId = randomUUID();
      const built = buildMediaJob({
        jobId, apiKeyId, namespace: 'default', options: { ...OPTIONS, url: 'https://media.test/x' },
        destination: user ? { type: 'inline', provider: 's3' } : { type: 'managed' },
      });
      const mj = (await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, body: built })) as MediaJob;
      const keys = [`videos/${jobId}.mp4`, `videos/${jobId}.en.vtt`, `videos/${jobId}.jpg`];
      if (user) {
        const doc = { provider: 's3', endpoint: s3.endpoint, bucket: 'user', region: 'us-east-1', access_key: s3.accessKeyId, secret_key: s3.secretAccessKey };
        await core.createNamespacedSecret({
          namespace: 'default',
          body: {
            metadata: { name: credentialsSecretName(mj), ownerReferences: [{ apiVersion: mj.apiVersion, kind: 'MediaJob', name: mj.metadata.name!, uid: mj.metadata.uid!, controller: true }] },
            data: { [DESTINATION_DATA_KEY]: Buffer.from(JSON.stringify(doc)).toString('base64') },
          },
        });
        for (const k of keys) await bucket.upload(k, Readable.from([Buffer.alloc(1000)]), { jobId });
      } else {
        for (const k of keys) {
          await db.pool.query(`INSERT INTO grant_uploads (grant_id, job_id, key, upload_id, state, size, completed_at)
                               VALUES ($1, $2, $3, 'u', 'completed', 1000, now())`, [`g-${jobId}`, jobId, k]);
        }
      }
      const result: MediaJobResult = { storageKey: keys[0]!, subtitleKey: keys[1]!, thumbnailKey: keys[2]!, fileSize: 1000, uploadedBytes: 3000 };
      return { mj, result };
    };
    const write = (mj: MediaJob, result: MediaJobResult) => custom.patchNamespacedCustomObjectStatus({
      group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name: mj.metadata.name!,
      body: { status: { status: 'Completed', step: 'Finished', progress: 100, result } },
    }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));

    const series = async (user: boolean) => {
      const deps: RemovalDeps = { core, cfg: cfg(user ? 'local' : 's3'), log, ledger };
      const off: number[] = [];
      const on: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        const { mj, result } = await jobAt(user);
        // Alternated, so load on the machine weighs on both alike.
        const checked = i % 2 === 0;
        const t0 = performance.now();
        if (checked) {
          const c = await checkedResult(deps, mj, result, async () => undefined);
          if ('refused' in c) throw new Error('a true claim was refused');
        }
        await write(mj, result);
        // The job's finish checks the written result again (controller.ts finish): answered from the verdict kept.
        if (checked && 'refused' in await checkedResult(deps, mj, result, async () => undefined)) throw new Error('a true claim was refused');
        (checked ? on : off).push(performance.now() - t0);
      }
      return { off: off.sort((a, b) => a - b), on: on.sort((a, b) => a - b) };
    };

    for (const [name, user] of [['user S3 destination (Secret + 3 HEADs, s3rver)', true], ['managed S3 (grant ledger lookup, Postgres)', false]] as const) {
      const { off, on } = await series(user);
      const added = pct(on, 99) - pct(off, 99);
      process.stdout.write(`claims check: ${name}, n=${on.length} + ${off.length}\n`);
      process.stdout.write(`  completion status write without check p50 / p99 (ms)  ${pct(off, 50).toFixed(1)} / ${pct(off, 99).toFixed(1)}\n`);
      process.stdout.write(`  completion status write with check    p50 / p99 (ms)  ${pct(on, 50).toFixed(1)} / ${pct(on, 99).toFixed(1)}\n`);
      process.stdout.write(`  added at p99: ${added.toFixed(1)} ms = ${((added / 5000) * 100).toFixed(2)}% of a 5 s job; goal < 5%: ${added / 5000 < 0.05 ? 'met' : 'NOT met'}\n`);
    }
  } finally {
    bucket.destroy();
    await s3.stop();
    await db.drop();
    await tc.stop();
  }
}

/** The controller method that checks a completion's claims (controller.ts checkClaims), replaced on the instance to turn the check off. */
interface ClaimsCheck {
  checkClaims?: (mj: MediaJob, desired: MediaJobStatus) => Promise<MediaJobStatus>;
}

/**
 * Part 2: a ~5-second job's wall time, created → Completed (the watch event
 * that shows it), with the check and without, on the real operator and the
 * scripted runner uploading to a user's bucket on s3rver.
 */
async function wallTimes(): Promise<void> {
  const tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
  await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url)), '-f', fileURLToPath(new URL('../../crds/mediabatch.yaml', import.meta.url))]);
  const db = await createTestDatabase();
  const s3 = await startS3rver({ buckets: ['user'] });
  const kc = kubeConfigFor(tc.cluster);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const ended = new Map<string, { at: number; mj: MediaJob }>();
  const waiting = new Map<string, () => void>();
  let stopping = false;
  let watch: { abort(): void } | undefined;
  const watchJobs = async (): Promise<void> => {
    // Restarted when the server ends it: its first events are then every MediaJob as it is.
    watch = await new k8s.Watch(kc).watch(`/apis/${GROUP}/${VERSION}/namespaces/default/${MEDIAJOB_PLURAL}`, {}, (_type, obj: MediaJob) => {
      const name = obj.metadata.name!;
      if (ended.has(name) || !['Completed', 'Failed', 'Warning'].includes(obj.status?.status ?? '')) return;
      ended.set(name, { at: performance.now(), mj: obj });
      waiting.get(name)?.();
    }, () => {
      if (!stopping) void watchJobs();
    });
  };
  let operator: Awaited<ReturnType<typeof startOperator>> | undefined;
  try {
    const apiKeyId = await insertApiKey(db.pool);
    const doc = { provider: 's3', endpoint: s3.endpoint, bucket: 'user', region: 'us-east-1', access_key: s3.accessKeyId, secret_key: s3.secretAccessKey };
    await kc.makeApiClient(k8s.CoreV1Api).createNamespacedSecret({
      namespace: 'default', body: { metadata: { name: 'user-s3' }, data: { [DESTINATION_DATA_KEY]: Buffer.from(JSON.stringify(doc)).toString('base64') } },
    });
    operator = await startOperator(loadOperatorConfig({
      DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: SecretBox.generateSpec('b1'), RUNNER_IMAGE: 'mediajobs/runner:scripted',
      LEADER_ELECTION: 'false', MATERIALIZE_SAFETY_SECONDS: '1', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8,::1/128',
    }), { log: pino({ level: 'silent' }), storage: { presign: async (key) => `http://files.test/${key}`, destination: () => ({ provider: 'managed' }) } });
    const controller = operator.controller as unknown as ClaimsCheck;
    if (typeof controller.checkClaims !== 'function') throw new Error('MediaJobController has no checkClaims to turn off: update this bench');
    const setChecked = (on: boolean) => {
      if (on) delete controller.checkClaims;
      else controller.checkClaims = async (_mj, desired) => desired;
    };
    await watchJobs();

    /** One job's wall time (ms); the size recorded says whether the check ran (the stored size) or not (the claimed one). */
    const job = async (name: string, checked: boolean): Promise<number> => {
      setChecked(checked);
      const done = new Promise<void>((resolve) => waiting.set(name, resolve));
      const t0 = performance.now();
      await custom.createNamespacedCustomObject({
        group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL,
        body: {
          apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaJob', metadata: { name, namespace: 'default' },
          spec: {
            ...OPTIONS, url: `http://scripted.invalid/complete?sleepMs=${JOB_MS}&upload=${UPLOAD_BYTES}&reportedSize=${CLAIMED_BYTES}`,
            owner: { apiKeyId }, destination: { type: 'saved', provider: 's3', secretName: 'user-s3' },
          },
        } satisfies MediaJob,
      });
      await done;
      const { at, mj } = ended.get(name)!;
      waiting.delete(name);
      if (mj.status?.status !== 'Completed') throw new Error(`${name} ended ${mj.status?.status} (${mj.status?.reason ?? ''}), not Completed`);
      const size = mj.status.result?.fileSize;
      if (size !== (checked ? UPLOAD_BYTES : CLAIMED_BYTES)) throw new Error(`${name}: recorded ${size} bytes; the check was ${checked ? 'on' : 'off'}`);
      return at - t0;
    };

    process.stdout.write(`\nclaims check: a ${JOB_MS / 1000} s job's wall time, created → Completed, user S3 destination on s3rver `
      + `(${WALL_JOBS} jobs each way per round, one at a time, alternating; ${machine(loadAverage())})\n`);
    const rounds: { off: number[]; on: number[] }[] = [];
    // Each job with the check minus the job beside it without: the pair ran under nearly the same load.
    const pairs: number[] = [];
    for (let round = 0; round < WALL_ROUNDS; round++) {
      const off: number[] = [];
      const on: number[] = [];
      for (let i = 0; i < 2 * WALL_JOBS; i += 2) {
        // The order turned each round, so neither side always goes first.
        const first = round % 2 === 0;
        const a = await job(`wall-${round}-${i}`, first);
        const b = await job(`wall-${round}-${i + 1}`, !first);
        on.push(first ? a : b);
        off.push(first ? b : a);
        pairs.push(first ? a - b : b - a);
      }
      const roundPairs = pairs.slice(-WALL_JOBS).sort((x, y) => x - y);
      off.sort((x, y) => x - y);
      on.sort((x, y) => x - y);
      rounds.push({ off, on });
      process.stdout.write(`  round ${round + 1}: without p50 / p99 (ms) ${pct(off, 50).toFixed(0)} / ${pct(off, 99).toFixed(0)}`
        + `   with ${pct(on, 50).toFixed(0)} / ${pct(on, 99).toFixed(0)}   with − without, median of pairs ${pct(roundPairs, 50).toFixed(0)} ms   load ${loadAverage()}\n`);
    }
    const m = (side: 'off' | 'on', p: number) => median(rounds.map((r) => pct(r[side], p)));
    for (const p of [50, 99]) {
      const added = m('on', p) - m('off', p);
      process.stdout.write(`  medians of ${WALL_ROUNDS} rounds, p${p}: without ${m('off', p).toFixed(0)} ms, with ${m('on', p).toFixed(0)} ms, `
        + `with/without ${(m('on', p) / m('off', p)).toFixed(3)}, added ${added.toFixed(0)} ms = ${((added / JOB_MS) * 100).toFixed(2)}% of a ${JOB_MS / 1000} s job`
        + `; goal < 5%: ${added / JOB_MS < 0.05 ? 'met' : 'NOT met'}\n`);
    }
    pairs.sort((a, b) => a - b);
    const paired = pct(pairs, 50);
    process.stdout.write(`  with − without, all ${pairs.length} pairs: median ${paired.toFixed(0)} ms (quartiles ${pct(pairs, 25).toFixed(0)} / ${pct(pairs, 75).toFixed(0)})`
      + ` = ${((paired / JOB_MS) * 100).toFixed(2)}% of a ${JOB_MS / 1000} s job; goal < 5%: ${paired / JOB_MS < 0.05 ? 'met' : 'NOT met'}\n`);
  } finally {
    stopping = true;
    watch?.abort();
    await operator?.stop();
    await s3.stop();
    await db.drop();
    await tc.stop();
  }
}

async function main(): Promise<void> {
  if (process.env.BENCH_CLAIMS_PART !== 'wall') await statusWrites();
  if (process.env.BENCH_CLAIMS_PART !== 'writes') await wallTimes();
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
