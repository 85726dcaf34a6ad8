// Benchmark (issue 18): server-side apply on the local cluster against plain
// creates in the same run, with the project's own MediaJob CRD (its schema
// and CEL rules). 10,000 creates (POST), then 10,000 applies (PATCH
// application/apply-patch+yaml): 5,000 that create their object and 5,000
// no-ops (the same manifests again, as a GitOps sync sends them); then up to
// 1,000 no-op applies one at a time, for the latency of one apply by itself.
// Prints throughput, the ratio of applies to creates, and latency
// percentiles per kind, the lone no-op apply's p99 against its goal.
//   BENCH_OBJECTS (10000): applies, and creates; BENCH_CONCURRENCY (16).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { parse } from 'yaml';
import { benchmark, percentile, request, type Row } from './cluster-process.js';

const N = Number(process.env.BENCH_OBJECTS ?? 10_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const CRD = fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url));
const OWNER = '6f1c2a7e-0b1d-4c55-9e3a-2f4d8b7c9a10';
const APPLY = 'application/apply-patch+yaml';

const manifest = (name: string) => ({
  apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name, namespace: 'default' },
  spec: { url: `https://media.example/${name}.mp4`, format: 'mp3', audioOnly: true, folder: 'talks', owner: { apiKeyId: OWNER }, clipStart: '00:00:05', clipEnd: '00:01:00' },
});

interface Phase {
  perSecond: number;
  latencies: number[];
}

/** `count` requests, `concurrency` at a time; each must answer `expected`. */
async function phase(
  count: number, send: (i: number) => Promise<{ status: number; text: string }>, expected: number, concurrency = CONCURRENCY,
): Promise<Phase> {
  const latencies: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) {
      const i = next++;
      const s = performance.now();
      const r = await send(i);
      latencies.push(performance.now() - s);
      if (r.status !== expected) throw new Error(`request ${i}: ${r.status} ${r.text.slice(0, 300)}`);
    }
  }));
  return { perSecond: count / ((performance.now() - t0) / 1000), latencies: latencies.sort((a, b) => a - b) };
}

benchmark(CONCURRENCY, async ({ url }) => {
    const crd = await request(`${url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`, 'POST', parse(readFileSync(CRD, 'utf8')));
    if (crd.status !== 201) throw new Error(`CRD: ${crd.status} ${crd.text}`);
    await new Promise((r) => setTimeout(r, 500));
    const collection = `${url}/apis/mediajobs.io/v1alpha1/namespaces/default/mediajobs`;
    const applyTo = (name: string) => request(`${collection}/${name}?fieldManager=bench-pipeline`, 'PATCH', manifest(name), 'application/json', APPLY);

    const creates = await phase(N, (i) => request(collection, 'POST', manifest(`created-${i}`)), 201);
    const half = Math.floor(N / 2);
    const t0 = performance.now();
    const fresh = await phase(half, (i) => applyTo(`applied-${i}`), 201);
    const noop = await phase(N - half, (i) => applyTo(`applied-${i % half}`), 200);
    const appliesPerSecond = N / ((performance.now() - t0) / 1000);
    // The latency of one no-op apply by itself (a sync's), not behind CONCURRENCY others.
    const alone = await phase(Math.min(1000, half), (i) => applyTo(`applied-${i}`), 200, 1);
    // A no-op apply must write nothing: the object's resourceVersion stays.
    const before = JSON.parse((await request(`${collection}/applied-0`, 'GET')).text) as k8s.KubernetesObject;
    await applyTo('applied-0');
    const after = JSON.parse((await request(`${collection}/applied-0`, 'GET')).text) as k8s.KubernetesObject;
    if (before.metadata?.resourceVersion !== after.metadata?.resourceVersion) throw new Error('a no-op apply wrote the object');

    const ms = (x: number) => x.toFixed(2);
    const rows: Row[] = [
      [`creates (POST) per second`, creates.perSecond.toFixed(0), ''],
      [`applies per second (${half} creating, ${N - half} no-op)`, appliesPerSecond.toFixed(0), ''],
      ['applies / creates', (appliesPerSecond / creates.perSecond).toFixed(2), '>= 0.5'],
      ['create p50 / p99 (ms)', `${ms(percentile(creates.latencies, 50))} / ${ms(percentile(creates.latencies, 99))}`, ''],
      ['apply that creates p50 / p99 (ms)', `${ms(percentile(fresh.latencies, 50))} / ${ms(percentile(fresh.latencies, 99))}`, ''],
      [`no-op apply p50 / p99 (ms), ${CONCURRENCY} at a time`, `${ms(percentile(noop.latencies, 50))} / ${ms(percentile(noop.latencies, 99))}`, ''],
      [`no-op apply p50 / p99 (ms), one at a time (${alone.latencies.length})`, `${ms(percentile(alone.latencies, 50))} / ${ms(percentile(alone.latencies, 99))}`, 'p99 < 2'],
    ];
    return { title: `local-cluster server-side apply benchmark (MediaJobs=${N}, concurrency=${CONCURRENCY})`, rows, width: [56, 16] };
});
