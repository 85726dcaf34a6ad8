// Mocha's spec reporter, then where the time went, then one plain closing
// line, "tests: N passed, N failed, N skipped", which CI reads as the test
// count: it stays the last line.
//
// Where the time went: the 15 slowest files (each file's test time plus the
// time of the hooks that ran for it, its suites' before/after/each hooks and
// the root afterEach of the loopback guard; each runnable's own duration,
// so the same in parallel mode) and the 15 slowest tests (the test alone,
// without its hooks).
// Then each failed test again (file and title, then the error's first
// line): the spec reporter's own account of a failure comes before the time
// report, out of a CI log's tail, which only the last lines reach.
// With TEST_REPORT_JSON=<path> the same, with every file, is also written
// there as JSON (`make test-report`). Nothing of this for a --dry-run.
'use strict';
const { writeFileSync, renameSync } = require('node:fs');
const { relative } = require('node:path');
const Mocha = require('mocha');
const {
  EVENT_RUN_END, EVENT_TEST_END, EVENT_TEST_FAIL, EVENT_HOOK_END,
} = Mocha.Runner.constants;

const SHOWN = 15;
/** Root hooks that run before any test (a file's top-level before()): no file to count them to. */
const ROOT = '(root hooks)';
/** A runnable's identity across mocha's events (in parallel mode each event brings a copy). */
const key = (runnable) => `${runnable.file ?? ''}\0${runnable.fullTitle()}`;

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options = {}) {
    super(runner, options);
    const dryRun = Boolean(options.dryRun ?? runner._opts?.dryRun);
    /** file -> { testMs, hookMs, tests } */
    const files = new Map();
    /** { file, title, ms, state } for every test that ran */
    const tests = [];
    /** { file, title, message } for every failed test or hook, in the order they failed */
    const failed = [];

    // A root hook has no file: an each hook counts to its test's, one that runs
    // once (the loopback guard's afterAll after the last file) to the file before.
    let lastFile = ROOT;
    const fileOf = (runnable) => {
      const file = runnable.file ?? runnable.ctx?.currentTest?.file;
      return file ? relative(process.cwd(), file) : lastFile;
    };
    const entry = (file) => {
      let e = files.get(file);
      if (!e) files.set(file, (e = { testMs: 0, hookMs: 0, tests: 0 }));
      return e;
    };
    // Each runnable's own `duration`, which mocha measures where it runs: in
    // parallel mode (.mocharc.cjs) a worker's events arrive here together when
    // its file ends, so a clock read here would measure nothing. A runnable
    // that timed out has no duration; it ran for its timeout, which its
    // failure carries. A test's duration is the test alone, without its hooks.
    const timedOut = new Map(); // fullTitle -> the timeout a failed runnable exceeded
    const msOf = (runnable) => runnable.duration ?? timedOut.get(key(runnable)) ?? 0;
    runner.on(EVENT_TEST_FAIL, (runnable, err) => {
      if (typeof err?.timeout === 'number' && runnable.duration === undefined) timedOut.set(key(runnable), err.timeout);
      // A failed hook ends with a failure, not a hook end.
      if (runnable.type === 'hook') hookDone(runnable);
      failed.push({ file: fileOf(runnable), title: runnable.fullTitle(), message: firstLine(err) });
    });
    runner.on(EVENT_TEST_END, (runnable) => {
      const ms = msOf(runnable);
      const file = fileOf(runnable);
      lastFile = file;
      const e = entry(file);
      e.testMs += ms;
      e.tests += 1;
      tests.push({ file, title: runnable.fullTitle(), ms, state: runnable.state ?? 'unknown' });
    });
    const hookDone = (hook) => {
      entry(fileOf(hook)).hookMs += msOf(hook);
    };
    runner.on(EVENT_HOOK_END, hookDone);

    runner.once(EVENT_RUN_END, () => {
      const s = runner.stats;
      if (!dryRun) {
        const byFile = [...files]
          .map(([file, e]) => ({ file, ms: e.testMs + e.hookMs, testMs: e.testMs, hookMs: e.hookMs, tests: e.tests }))
          .sort((a, b) => b.ms - a.ms);
        const byTest = tests.slice().sort((a, b) => b.ms - a.ms);
        process.stdout.write(timeReport(byFile.slice(0, SHOWN), byTest.slice(0, SHOWN)));
        const path = process.env.TEST_REPORT_JSON;
        if (path) {
          try {
            writeReport(path, s, byFile, byTest);
            process.stdout.write(`\ntime report written to ${path}\n`);
          } catch (err) {
            process.stdout.write(`\ntime report not written to ${path}: ${err.message}\n`);
          }
        }
      }
      if (failed.length > 0) process.stdout.write(failureList(failed));
      process.stdout.write(`\ntests: ${s.passes} passed, ${s.failures} failed, ${s.pending} skipped\n`);
    });
  }
}

/** 850ms, 12.3s, 4m05s */
function duration(ms) {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const m = Math.floor(ms / 60_000);
  return `${m}m${String(Math.round((ms - m * 60_000) / 1000)).padStart(2, '0')}s`;
}

function timeReport(byFile, byTest) {
  const lines = ['', `slowest files (tests + hooks), ${byFile.length} shown:`];
  for (const f of byFile) lines.push(`  ${duration(f.ms).padStart(7)}  ${f.file}  (${f.tests} tests, hooks ${duration(f.hookMs)})`);
  lines.push('', `slowest tests, ${byTest.length} shown:`);
  for (const t of byTest) lines.push(`  ${duration(t.ms).padStart(7)}  ${t.file}  ${t.title}${t.state === 'failed' ? '  (failed)' : ''}`);
  return lines.join('\n') + '\n';
}

/** The first line of a failure's message (an assertion's diff and stack stay in the spec reporter's account). */
function firstLine(err) {
  const text = String(err?.message ?? err ?? 'failed').split('\n').find((l) => l.trim() !== '') ?? 'failed';
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

function failureList(failed) {
  const lines = ['', `failed, ${failed.length}:`];
  for (const f of failed) lines.push(`  ${f.file}  ${f.title}`, `      ${f.message}`);
  return lines.join('\n') + '\n';
}

function writeReport(path, stats, byFile, byTest) {
  const round = (ms) => Math.round(ms);
  const file = (f) => ({ file: f.file, ms: round(f.ms), testMs: round(f.testMs), hookMs: round(f.hookMs), tests: f.tests });
  const test = (t) => ({ file: t.file, title: t.title, ms: round(t.ms), state: t.state });
  const report = {
    written: new Date().toISOString(),
    stats: { passed: stats.passes, failed: stats.failures, skipped: stats.pending, wallMs: stats.duration },
    slowestFiles: byFile.slice(0, SHOWN).map(file),
    slowestTests: byTest.slice(0, SHOWN).map(test),
    files: byFile.map(file),
  };
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(report, null, 2) + '\n');
  renameSync(tmp, path);
}

module.exports = SummaryReporter;
