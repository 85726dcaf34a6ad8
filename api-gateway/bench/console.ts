// Benchmark (issue 38): the web console as a browser loads it, for a key
// with 10,000 jobs. Measured in Debian's Chromium (test/support/browser.ts),
// each round in a fresh browser with an empty cache and the key already in
// the tab's sessionStorage (a returning person's reload):
// - first-load transfer: the bytes on the wire (Resource Timing's
//   transferSize: headers and gzipped bodies) of the page and its modules and
//   stylesheet, and separately of the API answers the jobs view asks for
//   (goal: the page and its files under 150 KB);
// - time to the jobs list: from navigation start to the first page of jobs
//   (20 rows) in the table, recorded in the page by a MutationObserver
//   (goal < 1 s on loopback); and the same for a reload with a warm cache
//   (every file revalidated, 304).
// The gateway runs in its own process on a scratch database (dropped at the
// end); the jobs are written in SQL over the last 30 days, five of the
// newest still Processing (the list asks for their progress).
//
//   npx tsx api-gateway/bench/console.ts
//
// BENCH_JOBS (10000), BENCH_ROUNDS (5), BENCH_DATABASE_ADMIN_URL
// (postgres://postgres@127.0.0.1:5432/test), BENCH_GATEWAY_LOG_LEVEL (info).
import { createApiKey } from '../src/db/api-keys.js';
import { launchBrowser } from '../../test/support/browser.js';
import { BENCH_ADMIN_URL, loadAverage, machine, median, rowPrinter, runBench, serviceEnv, startCluster, startGateway, withScratch } from './support.js';

const JOBS = Number(process.env.BENCH_JOBS ?? 10_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
/** Rows of the list's first page (jobs.js PAGE). */
const ROWS = 20;

interface Load {
  /** ms from navigation start to ROWS rows in the table. */
  listMs: number;
  /** Bytes on the wire of the page and its files, and of the API answers. */
  assetBytes: number;
  apiBytes: number;
  /** The same files' bodies as the browser decoded them. */
  assetDecoded: number;
  files: number;
  /** ms from navigation start until the last of the page's files, and the first page of GET /jobs, had arrived. */
  assetsMs: number;
  jobsMs: number;
}

/** Records, in the page, when the jobs table first holds ROWS rows (before any script of the page runs). */
const WATCH_ROWS = `(() => {
  const seen = () => document.querySelectorAll('table.jobs tbody tr').length >= ${ROWS};
  new MutationObserver((_, obs) => {
    if (seen()) { window.__listAt = performance.now(); obs.disconnect(); }
  }).observe(document, { childList: true, subtree: true });
})();`;

/**
 * The load's figures, read in the page (a string: the bench's TypeScript
 * transform would add helpers to a function that the page does not have).
 */
const READ_LOAD = `(() => {
  const entries = [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')];
  const isAsset = (e) => { const p = new URL(e.name).pathname; return p === '/' || p.startsWith('/console/'); };
  const assets = entries.filter(isAsset);
  const sum = (xs, f) => xs.reduce((s, e) => s + e[f], 0);
  return {
    listMs: window.__listAt, assetBytes: sum(assets, 'transferSize'), apiBytes: sum(entries.filter((e) => !isAsset(e)), 'transferSize'),
    assetDecoded: sum(assets, 'decodedBodySize'), files: assets.length,
    assetsMs: Math.max(...assets.map((e) => e.responseEnd)),
    jobsMs: entries.find((e) => new URL(e.name).pathname === '/jobs')?.responseEnd ?? NaN,
  };
})()`;

async function measure(page: import('playwright-core').Page, url: string, reload: boolean): Promise<Load> {
  if (reload) await page.reload();
  else await page.goto(url);
  await page.waitForFunction(() => (window as unknown as { __listAt?: number }).__listAt !== undefined, undefined, { timeout: 30_000 });
  return page.evaluate(READ_LOAD) as Promise<Load>;
}

async function main(): Promise<void> {
  const load0 = loadAverage();
  await withScratch({ adminUrl: BENCH_ADMIN_URL, poolMax: 2, workPrefix: 'mj-bench-console-' }, async ({ dbUrl, pool, work }) => {
    const key = await createApiKey(pool, { name: 'console bench' });
    process.stdout.write(`writing ${JOBS.toLocaleString('en')} jobs over 30 days...\n`);
    await pool.query(`INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, cr_namespace, cr_name, file_size, reserved_bytes, created_at)
      SELECT gen_random_uuid(), $1, 'https://media.example/watch?v=' || g,
             CASE WHEN g > $2 - 5 THEN 'Processing' WHEN g % 17 = 0 THEN 'Failed' ELSE 'Completed' END,
             CASE WHEN g > $2 - 5 THEN 'Downloading' WHEN g % 17 = 0 THEN 'Queued' ELSE 'Finished' END,
             CASE WHEN g > $2 - 5 THEN 40 ELSE 100 END, '{}'::jsonb, 'default', 'j' || g,
             CASE WHEN g > $2 - 5 OR g % 17 = 0 THEN NULL ELSE (g % 1000) * 100000 END, 0,
             now() - make_interval(secs => ($2 - g) * (30 * 86400.0 / $2))
        FROM generate_series(1, $2::int) g`, [key.id, JOBS]);
    await pool.query('VACUUM ANALYZE jobs');

    const cluster = await startCluster(work, ['mediajob.yaml']);
    const gateway = await startGateway(serviceEnv(dbUrl, cluster.kubeconfig, work), work);
    const url = `${gateway.url}/#/jobs`;

    const cold: Load[] = [];
    const warm: Load[] = [];
    for (let round = 0; round <= ROUNDS; round++) {
      // A fresh browser each round: an empty cache and a new profile.
      const b = await launchBrowser();
      try {
        await b.context.addInitScript(`sessionStorage.setItem('mediajobs.apiKey', ${JSON.stringify(key.key)});`);
        await b.context.addInitScript(WATCH_ROWS);
        const first = await measure(b.page, url, false);
        const again = await measure(b.page, url, true);
        if (b.offLoopback.length) throw new Error(`the browser left loopback: ${b.offLoopback.join(', ')}`);
        // Round 0 warms the gateway (JIT, connections, prepared statements) and is not counted.
        if (round === 0) continue;
        process.stdout.write(`round ${round}/${ROUNDS}: list in ${first.listMs.toFixed(0)} ms cold, ${again.listMs.toFixed(0)} ms warm; ${first.files} files, ${first.assetBytes} bytes\n`);
        cold.push(first);
        warm.push(again);
      } finally {
        await b.close();
      }
    }
    const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
    const line = rowPrinter(62, 22);
    process.stdout.write(`\nConsole benchmark (${JOBS.toLocaleString('en')} jobs for the key, gateway LOG_LEVEL=${process.env.BENCH_GATEWAY_LOG_LEVEL ?? 'info'}, ${machine(load0)})\n`);
    line(`first load: page and ${cold[0]!.files} files on the wire (gzip)`, kb(median(cold.map((r) => r.assetBytes))), '< 150 KB');
    line('first load: the same files decoded', kb(median(cold.map((r) => r.assetDecoded))));
    line('first load: API answers on the wire (/usage, /jobs, progress)', kb(median(cold.map((r) => r.apiBytes))));
    line('empty cache: page and files arrived, median ms', median(cold.map((r) => r.assetsMs)).toFixed(0));
    line('empty cache: GET /jobs answered, median ms', median(cold.map((r) => r.jobsMs)).toFixed(0));
    line('time to the jobs list, empty cache: ms per round', cold.map((r) => r.listMs.toFixed(0)).join(' / '));
    line('time to the jobs list, empty cache: median ms', median(cold.map((r) => r.listMs)).toFixed(0), '< 1000');
    line('time to the jobs list, reload (304s): median ms', median(warm.map((r) => r.listMs)).toFixed(0), '< 1000');
  });
}

runBench(main);
