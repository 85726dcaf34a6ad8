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
'use strict';
// Mocha's own parser of its command line (what `npx mocha` runs with), so an
// option's value (`-g foo`, `--reporter json`) is never taken for a file.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { parseMochaArgs } = require('mocha/lib/cli/parse-args.js');

const ALL = [
  'lib/test/**/*.test.ts',
  'local-cluster/test/**/*.test.ts',
  'api-gateway/test/**/*.test.ts',
  'operator/test/**/*.test.ts',
  'runner-image/test/**/*.test.ts',
  'test/**/*.test.ts',
  'clients/**/test/**/*.test.ts',
];

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

const SETS = { all: ALL, unit: UNIT };

const setName = process.env.TEST_SET || 'all';
if (!Object.hasOwn(SETS, setName)) {
  throw new Error(`TEST_SET=${setName}: no such set of tests (${Object.keys(SETS).join(', ')})`);
}

// Mocha reads this file in the process `npx mocha` starts, whose argv is the
// command line (it then runs the tests in a child given the resolved files).
const cli = parseMochaArgs(process.argv.slice(2));
const filesNamed = cli._.length > 0 || cli.spec !== undefined;

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

module.exports = config;
// Not mocha options (not enumerable, so mocha never sees them): the sets, for test/mocha-config.test.ts.
Object.defineProperty(module.exports, 'sets', { value: SETS });
