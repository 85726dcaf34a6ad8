// Benchmark (issue 35): what checking a completion's claims costs. A
// completion's status write is the check (stored-files.ts checkedResult),
// the MediaJob status patch, and the finish's second check (answered from
// the verdict kept); without the check it is the patch alone. The
// destination's client is kept between jobs as the operator keeps it
// (destination-clients.ts). Side by side, BENCH_RUNS times each (default 200), on loopback:
// - a user's S3 destination on s3rver: the per-job Secret read from the
//   local cluster, then a HEAD of the media and its two sidecars;
// - managed storage on S3: one grant-ledger lookup in Postgres.
// Printed: p50/p99 of the write, with and without, and the added p99 as a
// share of a 5-second job's wall time. Goal: under 5% (250 ms).
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { buildMediaJob } from '@mediajobs/lib/mediajob/build';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type MediaJobResult } from '@mediajobs/lib/mediajob/types';
import { DESTINATION_DATA_KEY } from '@mediajobs/lib/saved-destinations';
import { PgGrantLedger } from '@mediajobs/lib/storage/grant-ledger';
import { S3StorageProvider } from '@mediajobs/lib/storage/s3';
import { kubeConfigFor, startTestCluster } from '../../local-cluster/test/support.js';
import { createTestDatabase, insertApiKey } from '../../test/support/postgres.js';
import { startS3rver } from '../../test/support/s3rver.js';
import { loadOperatorConfig } from '../src/config.js';
import { credentialsSecretName } from '../src/job-builder.js';
import { checkedResult, type RemovalDeps } from '../src/stored-files.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 200);
const JOB_MS = 5000;
const OPTIONS = {
  format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
} as const;

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

async function main(): Promise<void> {
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
      process.stdout.write(`  a ${JOB_MS / 1000} s job's wall time p50 / p99 (ms)        off ${(JOB_MS + pct(off, 50)).toFixed(0)} / ${(JOB_MS + pct(off, 99)).toFixed(0)}`
        + `   on ${(JOB_MS + pct(on, 50)).toFixed(0)} / ${(JOB_MS + pct(on, 99)).toFixed(0)}\n`);
      process.stdout.write(`  added at p99: ${added.toFixed(1)} ms = ${((added / JOB_MS) * 100).toFixed(2)}% of a 5 s job; goal < 5%: ${added / JOB_MS < 0.05 ? 'met' : 'NOT met'}\n`);
    }
  } finally {
    bucket.destroy();
    await s3.stop();
    await db.drop();
    await tc.stop();
  }
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
