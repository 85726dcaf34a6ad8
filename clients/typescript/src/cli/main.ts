#!/usr/bin/env node
// The `mediajobs` executable: ./run.ts on this process' arguments, streams
// and environment; Ctrl-C stops waiting (exit 130) and leaves the job running.
import { run } from './run.js';

const controller = new AbortController();
process.once('SIGINT', () => controller.abort(new Error('interrupted')));
const code = await run(process.argv.slice(2), {
  env: process.env,
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
  stderrIsTty: process.stderr.isTTY === true,
  signal: controller.signal,
});
process.exitCode = code;
