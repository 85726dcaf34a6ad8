// Mocha's configuration (read by `npx mocha`, `make test`, `make test-unit`).
//
// Which files run:
// - `npx mocha a.test.ts b.test.ts` (or `make test FILES="…"`): exactly the
//   files named (mocha adds a config's `spec` to the files given on the
//   command line, so `spec` is left out whenever a file, directory, glob or
//   `--spec` is given);
// - `npx mocha` with none: SETS[TEST_SET] (default `all`, every test;
//   `TEST_SET=unit`, what `make test-unit` runs: UNIT below).
// Either way every file runs behind the loopback guard and with the
// summary reporter. test/mocha-config.test.ts checks all of this.
//
// How they run: a set (`npx mocha` with no file named) runs in mocha's
// parallel mode, a file per worker process at a time, TEST_JOBS workers
// (default one per core); files named run one after another in this
// process, unless TEST_JOBS says otherwise. Most of a file's time is spent
// waiting (for pods, for yt-dlp and ffmpeg, for timers), which files can do
// at once: the figures are in docs/test-speed.md. The slowest files
// (SLOW_FIRST) start first, so no long file starts last.
'use strict';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { existsSync, readdirSync } = require('node:fs');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { join } = require('node:path');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { availableParallelism } = require('node:os');
// Mocha's own parser of its command line (what `npx mocha` runs with), so an
// option's value (`-g foo`, `--reporter json`) is never taken for a file.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { parseMochaArgs } = require('mocha/lib/cli/parse-args.js');

/** The trees whose *.test.ts files are the whole run. */
const TREES = [
  'lib/test', 'local-cluster/test', 'api-gateway/test', 'operator/test', 'runner-image/test', 'test',
  // Each client package's tests (clients/<package>/test).
  ...(existsSync(join(__dirname, 'clients')) ? readdirSync(join(__dirname, 'clients')) : [])
    .map((c) => `clients/${c}/test`).filter((d) => existsSync(join(__dirname, d))),
];

/**
 * The files that take longest (tests and hooks; docs/test-speed.md), slowest
 * first: in parallel mode a worker takes the next file when it is free, in
 * this order, so these start at once and the short files fill in around them.
 */
const SLOW_FIRST = [
  'test/soak/idle-soak.test.ts',
  'operator/test/retry.test.ts',
  'test/e2e/media-matrix.test.ts',
  'runner-image/test/runner.test.ts',
  'operator/test/operator.test.ts',
  'operator/test/batch-controller.test.ts',
  'test/e2e/batches.test.ts',
  'test/e2e/media-extras.test.ts',
  'test/e2e/local-mode.test.ts',
  'test/e2e/media-options.test.ts',
  'test/mocha-config.test.ts',
  'operator/test/fair-admission.test.ts',
  'runner-image/test/key-limits.test.ts',
  'test/e2e/accounts.test.ts',
  'test/chaos/postgres-restart.test.ts',
  'test/chaos/operator-kills.test.ts',
  'operator/test/namespaces.test.ts',
  'runner-image/test/mux.test.ts',
  'api-gateway/test/metadata.test.ts',
  'operator/test/materializer.test.ts',
  'test/chaos/runner-kills.test.ts',
  'api-gateway/test/hostile-input.test.ts',
  'test/chaos/apiserver-restart.test.ts',
  'test/chaos/storage-outage.test.ts',
  'api-gateway/test/admin-database.test.ts',
];

/** Every *.test.ts under `dir` (relative to the checkout), sorted; as a glob's `**` does, none whose name starts with a dot. */
function testFiles(dir) {
  const found = [];
  for (const e of readdirSync(join(__dirname, dir), { withFileTypes: true })) {
    if (e.name.startsWith('.')) continue;
    const path = `${dir}/${e.name}`;
    if (e.isDirectory() && e.name !== 'node_modules') found.push(...testFiles(path));
    else if (e.isFile() && e.name.endsWith('.test.ts')) found.push(path);
  }
  return found.sort();
}

/** Each file once, the slow ones first (a file named twice in `spec` would run twice). */
function slowFirst(files) {
  const slow = SLOW_FIRST.filter((f) => files.includes(f));
  return [...slow, ...files.filter((f) => !slow.includes(f))];
}

const ALL = slowFirst([...new Set(TREES.flatMap(testFiles))]);

// The tests that need no service: no PostgreSQL, no local cluster (nor the
// processes it runs pods as), no yt-dlp or ffmpeg, no s3rver or Azurite, no
// Redis, no child process started by the test itself. In-process fakes (an
// HTTP server the test starts, fake GCS/OSS/Drive/Stripe) are fine. Under two
// minutes on a 2-core machine. test/mocha-config.test.ts checks that no file
// here imports a service's support (directly or through another module); a
// new file that qualifies is added here by hand.
const UNIT = [
  'lib/test/batches-config.test.ts',
  'lib/test/batches-detect.test.ts',
  'lib/test/batches-feed.test.ts',
  'lib/test/batches-show.test.ts',
  'lib/test/billing.test.ts',
  'lib/test/cause-line.test.ts',
  'lib/test/chat-notification.test.ts',
  'lib/test/http-get.test.ts',
  'lib/test/job-options.test.ts',
  'lib/test/logger.test.ts',
  'lib/test/media-info-info.test.ts',
  'lib/test/media-info-run.test.ts',
  'lib/test/media-info-urls.test.ts',
  'lib/test/outbound.test.ts',
  'lib/test/progress-stages.test.ts',
  'lib/test/read-budget.test.ts',
  'lib/test/reconcile.test.ts',
  'lib/test/request-body.test.ts',
  'lib/test/secret-box.test.ts',
  'lib/test/storage-drive.test.ts',
  'lib/test/storage-endpoints.test.ts',
  'lib/test/storage-gcs.test.ts',
  'lib/test/storage-keys.test.ts',
  'lib/test/storage-managed-keys.test.ts',
  'lib/test/storage-oss.test.ts',
  'lib/test/upload-grant-tokens.test.ts',
  'lib/test/work-queue.test.ts',
  'local-cluster/test/builtin-decode.test.ts',
  'local-cluster/test/cel-library.test.ts',
  'local-cluster/test/discovery.test.ts',
  'local-cluster/test/patch.test.ts',
  'local-cluster/test/schema.test.ts',
  'local-cluster/test/selectors.test.ts',
  'local-cluster/test/table.test.ts',
  'operator/test/admission.test.ts',
  'operator/test/batch-status.test.ts',
  'operator/test/managed-storage.test.ts',
  'operator/test/retry-policy.test.ts',
  'operator/test/status.test.ts',
  'operator/test/transition-log.test.ts',
  'operator/test/ttl.test.ts',
  'operator/test/webhook-post.test.ts',
  'runner-image/test/classify.test.ts',
  'runner-image/test/destination-managed.test.ts',
  'runner-image/test/egress-proxy.test.ts',
  'runner-image/test/error-category.test.ts',
  'runner-image/test/plan.test.ts',
  'runner-image/test/sections.test.ts',
  'runner-image/test/steps.test.ts',
  'runner-image/test/units.test.ts',
  'test/deploy/chart-values.test.ts',
  'test/images.test.ts',
  'test/outbound-allowance.test.ts',
  'test/secret-scan.test.ts',
];

const SETS = { all: ALL, unit: slowFirst(UNIT) };

/**
 * Workers of a whole run, unless TEST_JOBS says otherwise. The unit set
 * (in-process, no pods) takes one per core. The full set stays in one
 * process until parallel mode is measured on a quiet machine: on the shared,
 * loaded machine it was measured on, two workers used more CPU than the
 * serial run and four starved one another's pods into timeouts
 * (docs/test-speed.md); `TEST_JOBS=2 make test` tries it.
 */
const DEFAULT_JOBS = { all: 1, unit: availableParallelism() };

const setName = process.env.TEST_SET || 'all';
if (!Object.hasOwn(SETS, setName)) {
  throw new Error(`TEST_SET=${setName}: no such set of tests (${Object.keys(SETS).join(', ')})`);
}

// Mocha reads this file in the process `npx mocha` starts, whose argv is the
// command line (it then runs the tests in a child given the resolved files).
const cli = parseMochaArgs(process.argv.slice(2));
const filesNamed = cli._.length > 0 || cli.spec !== undefined;

const jobsSetting = process.env.TEST_JOBS;
if (jobsSetting !== undefined && !/^[1-9][0-9]*$/.test(jobsSetting)) {
  throw new Error(`TEST_JOBS=${jobsSetting}: the number of worker processes, 1 or more`);
}
const JOBS = DEFAULT_JOBS[setName];
const jobs = jobsSetting !== undefined ? Number(jobsSetting) : filesNamed ? 1 : JOBS;

const config = {
  'node-option': ['import=tsx'],
  extension: ['ts'],
  reporter: './test/support/summary-reporter.cjs',
  timeout: 20000,
  exit: true,
  'forbid-only': true,
  require: ['./test/support/loopback-only.ts'],
};
if (!filesNamed) config.spec = SETS[setName];
// One worker is this process itself: mocha's serial mode, the output as each test ends.
if (jobs > 1) Object.assign(config, { parallel: true, jobs });

module.exports = config;
// Not mocha options (not enumerable, so mocha never sees them): the sets and the
// default number of workers, for test/mocha-config.test.ts.
Object.defineProperty(module.exports, 'sets', { value: SETS });
Object.defineProperty(module.exports, 'defaultJobs', { value: DEFAULT_JOBS });
Object.defineProperty(module.exports, 'slowFirst', { value: SLOW_FIRST });
