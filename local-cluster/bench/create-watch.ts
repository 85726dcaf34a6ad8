// Benchmark (issue: local cluster): create 10,000 custom resources over
// keep-alive HTTPS while one client-node informer watches them. Prints create
// throughput, watch delivery latency, the cluster's resident memory once all
// exist, and list latency for 10,000 objects with and without Table output.
// The cluster runs in its own process so its memory is measured alone.
import { readFileSync } from 'node:fs';
import * as k8s from '@kubernetes/client-node';
import { benchmark, median, percentile, request, type Row } from './cluster-process.js';

const N = Number(process.env.BENCH_OBJECTS ?? 10_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const GROUP = 'bench.mediajobs.io';
const PLURAL = 'items';

const crd = {
  apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition',
  metadata: { name: `${PLURAL}.${GROUP}` },
  spec: {
    group: GROUP, scope: 'Namespaced',
    names: { plural: PLURAL, singular: 'item', kind: 'Item' },
    versions: [{
      name: 'v1', served: true, storage: true, subresources: { status: {} },
      additionalPrinterColumns: [{ name: 'Url', type: 'string', jsonPath: '.spec.url' }, { name: 'Phase', type: 'string', jsonPath: '.status.phase' }],
      schema: { openAPIV3Schema: { type: 'object', properties: {
        spec: { type: 'object', required: ['url'], properties: {
          url: { type: 'string', maxLength: 2048 }, format: { type: 'string', enum: ['mp4', 'mkv', 'webm'], default: 'mp4' },
          quality: { type: 'integer', minimum: 0, maximum: 51, default: 23 },
        } },
        status: { type: 'object', properties: { phase: { type: 'string' } } },
      } } },
    }],
  },
};

function rssMb(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}

benchmark(CONCURRENCY, async ({ proc, url, kc }) => {
    const created = await request(`${url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`, 'POST', crd);
    if (created.status !== 201) throw new Error(`CRD create failed: ${created.text}`);

    const custom = kc.makeApiClient(k8s.CustomObjectsApi);
    const path = `/apis/${GROUP}/v1/namespaces/default/${PLURAL}`;
    const informer = k8s.makeInformer(kc, path, () => custom.listNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: 'default', plural: PLURAL }) as never);
    const seenAt = new Map<string, number>();
    let resolveAll!: () => void;
    const allSeen = new Promise<void>((r) => (resolveAll = r));
    informer.on('add', (obj: k8s.KubernetesObject) => {
      const name = obj.metadata!.name!;
      if (!seenAt.has(name)) seenAt.set(name, performance.now());
      if (seenAt.size === N) resolveAll();
    });
    await informer.start();

    const sentAt = new Array<number>(N);
    const doneAt = new Array<number>(N);
    let next = 0;
    const t0 = performance.now();
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      for (;;) {
        const i = next++;
        if (i >= N) return;
        sentAt[i] = performance.now();
        const r = await request(`${url}${path}`, 'POST', {
          apiVersion: `${GROUP}/v1`, kind: 'Item', metadata: { name: `item-${i}`, labels: { batch: String(i % 10) } },
          spec: { url: `https://media.example/${i}.mp4` },
        });
        if (r.status !== 201) throw new Error(`create ${i}: ${r.status} ${r.text}`);
        doneAt[i] = performance.now();
      }
    }));
    const createSeconds = (performance.now() - t0) / 1000;
    await allSeen;
    const mem = rssMb(proc.pid!);
    await informer.stop();

    const afterResponse: number[] = [];
    const afterSend: number[] = [];
    for (let i = 0; i < N; i++) {
      const seen = seenAt.get(`item-${i}`)!;
      afterResponse.push(Math.max(0, seen - doneAt[i]!));
      afterSend.push(seen - sentAt[i]!);
    }
    afterResponse.sort((a, b) => a - b);
    afterSend.sort((a, b) => a - b);

    const timeList = async (accept: string) => {
      const times: number[] = [];
      for (let k = 0; k < 5; k++) {
        const s = performance.now();
        const r = await request(`${url}${path}`, 'GET', undefined, accept);
        if (r.status !== 200) throw new Error(`list: ${r.status}`);
        times.push(performance.now() - s);
      }
      return median(times);
    };
    const listJson = await timeList('application/json');
    const listTable = await timeList('application/json;as=Table;v=v1;g=meta.k8s.io,application/json');

    const rows: Row[] = [
      [`creates/s (${N} over keep-alive, concurrency ${CONCURRENCY})`, (N / createSeconds).toFixed(0), '>= 2000'],
      ['watch delivery p50 / p99 after the create response (ms)', `${percentile(afterResponse, 50).toFixed(1)} / ${percentile(afterResponse, 99).toFixed(1)}`, 'p99 < 50'],
      ['watch delivery p50 / p99 after the create request was sent (ms)', `${percentile(afterSend, 50).toFixed(1)} / ${percentile(afterSend, 99).toFixed(1)}`, ''],
      [`cluster RSS with ${N} objects / peak (MB)`, `${mem.rss.toFixed(0)} / ${mem.peak.toFixed(0)}`, '< 500'],
      [`list ${N} objects, JSON, median of 5 (ms)`, listJson.toFixed(0), ''],
      [`list ${N} objects, Table, median of 5 (ms)`, listTable.toFixed(0), ''],
    ];
    return { title: `local-cluster benchmark (objects=${N})`, rows, width: [68, 14] };
});
