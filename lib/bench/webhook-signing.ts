// Benchmark (issue 15, signed webhooks): what signing adds to one webhook
// delivery, for a typical 1 KB payload, with one secret and with two (the
// 24 hours after a rotation). Prints the median µs per delivery over the
// runs, for the HMACs alone (lib/src/webhook-signing.ts signedHeaders) and
// for all the crypto the dispatcher does per delivery (opening the sealed
// secrets with the SecretBox, decoding them, signing). The secrets' read from
// Postgres is one primary-key SELECT and not measured here.
//
//   npx tsx lib/bench/webhook-signing.ts [--runs 15] [--iterations 5000]
import { randomUUID } from 'node:crypto';
import { SecretBox } from '../src/secret-box.js';
import { generateSecret, secretKey, signedHeaders } from '../src/webhook-signing.js';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? def : Number(process.argv[i + 1]);
}

const RUNS = arg('runs', 15);
const ITERATIONS = arg('iterations', 5000);

/** A job_completed body of about 1 KB, as the dispatcher sends it. */
function payload(): string {
  const jobId = randomUUID();
  const body = {
    type: 'job_completed', job_id: jobId, status: 'completed', url: 'https://media.example/watch?v=abcdefghijk',
    key: `videos/${jobId}.mp4`, s3_url: `https://bucket.s3.example/videos/${jobId}.mp4?X-Amz-Signature=${'a'.repeat(64)}&X-Amz-Expires=86400`,
    folder: 'videos', title: 'A typical title of a typical video', description: 'd'.repeat(420), release_date: '2024-05-01T00:00:00Z',
    subtitle_key: null, thumbnail_key: null, event_id: randomUUID(),
  };
  return JSON.stringify(body);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Median µs per call of `fn` over RUNS runs of ITERATIONS calls. */
function measure(fn: () => void): number {
  for (let i = 0; i < ITERATIONS; i += 1) fn(); // warm-up
  const runs: number[] = [];
  for (let r = 0; r < RUNS; r += 1) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < ITERATIONS; i += 1) fn();
    runs.push(Number(process.hrtime.bigint() - t0) / 1000 / ITERATIONS);
  }
  return median(runs);
}

const body = payload();
const id = randomUUID();
const box = new SecretBox(SecretBox.generateSpec('bench'));
const secrets = [generateSecret(), generateSecret()];
const at = { table: 'webhook_secrets', column: 'secret_enc', row: 'bench' };
const sealed = secrets.map((s) => box.seal(s, at));
const keys = secrets.map(secretKey);
let sink = 0;

console.log(`webhook signing: ${Buffer.byteLength(body)}-byte payload, ${RUNS} runs of ${ITERATIONS}; median µs per delivery`);
for (const n of [1, 2]) {
  const hmacOnly = measure(() => {
    sink += signedHeaders(keys.slice(0, n), id, Math.floor(Date.now() / 1000), body)['webhook-signature']!.length;
  });
  const perDelivery = measure(() => {
    const k = sealed.slice(0, n).map((s) => secretKey(box.open(s, at)));
    sink += signedHeaders(k, id, Math.floor(Date.now() / 1000), body)['webhook-signature']!.length;
  });
  console.log(`  ${n} secret${n > 1 ? 's' : ' '}: signatures ${hmacOnly.toFixed(2)} µs, with opening the sealed secrets ${perDelivery.toFixed(2)} µs`);
}
if (sink === 0) console.log('');
