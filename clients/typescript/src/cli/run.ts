// The `mediajobs` command line on the SDK: argument parsing (node:util
// parseArgs, no dependency), one function per command, human output on
// stdout and progress on stderr, or the API's JSON with --json, and the
// exit code of the outcome (./exit-codes.ts). main.ts runs it on the process.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { MediaJobsClient } from '../client.js';
import { ApiError, ConfigurationError, ConnectionError } from '../errors.js';
import type { CreateJobRequest, Job, JobStatusFilter } from '../types.js';
import { EXIT, exitForStatus } from './exit-codes.js';
import { batchText, deliveriesText, jobText, jobsTable, progressLine, usageText, webhookSecretText } from './format.js';

export interface Io {
  env: NodeJS.ProcessEnv;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Whether stderr is a terminal: the progress bar redraws one line there, and prints a line per change elsewhere. */
  stderrIsTty: boolean;
  /** Aborted on Ctrl-C. */
  signal?: AbortSignal;
}

/** The gateway of `make run`, when neither --url nor MEDIAJOBS_URL says otherwise. */
export const DEFAULT_URL = 'http://127.0.0.1:8080';

class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;

const GLOBAL: Options = {
  url: { type: 'string' },
  'api-key': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

/** POST /jobs fields settable on `submit` and `batch create`: flag (the field's name, kebab-case) → its type. */
const JOB_FIELDS: Record<string, 'string' | 'integer' | 'boolean'> = {
  format: 'string', 'video-codec': 'string', 'audio-codec': 'string', 'audio-bitrate': 'string', 'video-quality': 'integer',
  'quality-preset': 'string', 'max-resolution': 'string', filename: 'string', folder: 'string', 'webhook-url': 'string',
  'audio-only': 'boolean', 'download-subtitles': 'boolean', 'download-thumbnail': 'boolean', 'clip-start': 'string', 'clip-end': 'string',
  'live-recording': 'boolean', 'live-from-start': 'boolean', 'max-duration': 'integer', 'wait-for-video': 'boolean',
  'enable-progress-webhook': 'boolean', 'storage-provider': 'string', paused: 'boolean',
};
const JOB_OPTIONS: Options = Object.fromEntries(Object.entries(JOB_FIELDS).map(([f, t]) => [f, { type: t === 'boolean' ? 'boolean' : 'string' }]));
const WAIT_OPTIONS: Options = { interval: { type: 'string' } };

export const USAGE = `Usage: mediajobs <command> [options]

Commands:
  submit URL [job options] [--wait]   create a job (a batch for a show or playlist URL)
  wait ID                              wait for a job to end, with a progress bar
  get ID                               show a job
  ls [--status S] [--limit N] [--all]  list jobs, newest first (S: pending, processing, completed, failed, warning)
  cancel ID                            cancel a job
  batch create URL [--paused]          create a batch from a show or playlist URL
  batch get ID | batch start ID | batch cancel ID
  usage                                usage, quota and the key's limits
  webhooks secret                      whether a webhook signing secret is set
  webhooks rotate                      create or rotate it (printed once)
  webhooks deliveries JOB_ID           a job's webhook events and attempts
  webhooks redeliver JOB_ID EVENT_ID   send an event again

Options:
  --url URL          the API (default MEDIAJOBS_URL, else ${DEFAULT_URL})
  --api-key KEY      the API key (default MEDIAJOBS_API_KEY)
  --json             print the API's JSON answer instead
  --wait             (submit) wait for the job and print its file's URL
  --interval SECONDS (submit --wait, wait) time between polls, default 2
  --idempotency-key K (submit, batch create) retry-safe creation across runs
  Job options: --${Object.keys(JOB_FIELDS).join(', --')}

Exit codes: 0 ok/Completed, 2 usage, 3 API error, 4 API unreachable,
  10 Failed, 11 Warning, 12 Cancelled, 13 Skipped, 130 interrupted.`;

interface Command {
  options: Options;
  /** Positional arguments after the command's own name(s). */
  args: string[];
  run(ctx: Context): Promise<number>;
}

interface Context {
  client: MediaJobsClient;
  values: Record<string, string | boolean | undefined>;
  args: string[];
  io: Io;
  json: boolean;
}

const COMMANDS: Record<string, Command> = {
  submit: { options: { ...JOB_OPTIONS, ...WAIT_OPTIONS, wait: { type: 'boolean' }, 'idempotency-key': { type: 'string' } }, args: ['URL'], run: submit },
  wait: { options: WAIT_OPTIONS, args: ['ID'], run: async (c) => waitAndReport(c, c.args[0]!) },
  get: { options: {}, args: ['ID'], run: async (c) => show(c, await c.client.getJob(c.args[0]!, sig(c)), jobText) },
  ls: { options: { status: { type: 'string' }, limit: { type: 'string' }, all: { type: 'boolean' } }, args: [], run: list },
  cancel: { options: {}, args: ['ID'], run: async (c) => show(c, await c.client.cancelJob(c.args[0]!, sig(c)), (j) => `Cancelled job ${j.id}`) },
  'batch create': { options: { ...JOB_OPTIONS, 'idempotency-key': { type: 'string' } }, args: ['URL'], run: batchCreate },
  'batch get': { options: {}, args: ['ID'], run: async (c) => show(c, await c.client.getBatch(c.args[0]!, sig(c)), batchText) },
  'batch start': {
    options: {}, args: ['ID'],
    run: async (c) => show(c, await c.client.startBatch(c.args[0]!, sig(c)), (b) => `Started batch ${b.batch_id}: ${b.started_jobs} jobs queued`),
  },
  'batch cancel': {
    options: {}, args: ['ID'],
    run: async (c) => show(c, await c.client.cancelBatch(c.args[0]!, sig(c)), (b) => `Cancelled batch ${b.id}: ${b.cancelled_jobs.length} jobs cancelled`),
  },
  usage: { options: {}, args: [], run: async (c) => show(c, await c.client.getUsage(sig(c)), usageText) },
  'webhooks secret': { options: {}, args: [], run: async (c) => show(c, await c.client.getWebhookSecret(sig(c)), webhookSecretText) },
  'webhooks rotate': {
    options: {}, args: [],
    run: async (c) => show(c, await c.client.rotateWebhookSecret(sig(c)), (s) => `${s.secret}\n${s.rotated ? 'Rotated: the previous secret still signs for 24 h. ' : ''}Shown this once: keep it now.`),
  },
  'webhooks deliveries': { options: {}, args: ['JOB_ID'], run: async (c) => show(c, await c.client.listJobWebhooks(c.args[0]!, sig(c)), deliveriesText) },
  'webhooks redeliver': {
    options: {}, args: ['JOB_ID', 'EVENT_ID'],
    run: async (c) => show(c, await c.client.redeliverWebhook(c.args[0]!, c.args[1]!, sig(c)), (d) => `Redelivering ${d.type} (event ${d.event_id})`),
  },
};

/** Every option of every command: a string option's value is never taken for a command word. */
const ALL_OPTIONS: Options = Object.assign({}, GLOBAL, ...Object.values(COMMANDS).map((c) => c.options));

/** Runs one command line (without node and the script); resolves to the exit code. */
export async function run(argv: string[], io: Io): Promise<number> {
  let ctx: Context;
  let command: Command;
  try {
    const { values, positionals } = parseArgs({ args: argv, options: ALL_OPTIONS, allowPositionals: true, strict: true });
    const name = commandName(positionals);
    if (values.help || name === undefined) {
      (values.help ? io.stdout : io.stderr)(`${USAGE}\n`);
      return values.help ? EXIT.ok : EXIT.usage;
    }
    command = COMMANDS[name]!;
    const foreign = Object.keys(values).filter((o) => !(o in GLOBAL) && !(o in command.options));
    if (foreign.length) throw new UsageError(`mediajobs ${name} has no option --${foreign[0]}`);
    const args = positionals.slice(name.split(' ').length);
    if (args.length !== command.args.length) {
      throw new UsageError(`mediajobs ${name} takes ${command.args.length ? command.args.join(' ') : 'no arguments'}${args.length ? `, not: ${args.join(' ')}` : ''}`);
    }
    const apiKey = (values['api-key'] as string | undefined) ?? io.env.MEDIAJOBS_API_KEY;
    if (!apiKey) throw new UsageError('No API key: set MEDIAJOBS_API_KEY (or pass --api-key)');
    const client = new MediaJobsClient({ baseUrl: (values.url as string | undefined) ?? io.env.MEDIAJOBS_URL ?? DEFAULT_URL, apiKey });
    ctx = { client, values: values as Context['values'], args, io, json: values.json === true };
  } catch (err) {
    if (err instanceof UsageError || err instanceof ConfigurationError || isParseError(err)) {
      io.stderr(`mediajobs: ${(err as Error).message}\nRun mediajobs --help for the commands.\n`);
      return EXIT.usage;
    }
    throw err;
  }
  try {
    return await command.run(ctx);
  } catch (err) {
    return reportError(err, io);
  }
}

/** The command the words name: `submit`, or `batch get` for the two-word ones; undefined when none. */
function commandName(words: string[]): string | undefined {
  if (words.length === 0) return undefined;
  const two = `${words[0]} ${words[1] ?? ''}`;
  if (COMMANDS[two]) return two;
  if (COMMANDS[words[0]!]) return words[0];
  const group = Object.keys(COMMANDS).filter((c) => c.startsWith(`${words[0]} `));
  throw new UsageError(group.length
    ? `mediajobs ${words[0]} needs one of: ${group.map((c) => c.split(' ')[1]).join(', ')}`
    : `Unknown command: ${words[0]}`);
}

function isParseError(err: unknown): boolean {
  return err instanceof TypeError && typeof (err as NodeJS.ErrnoException).code === 'string' && (err as NodeJS.ErrnoException).code!.startsWith('ERR_PARSE_ARGS');
}

function reportError(err: unknown, io: Io): number {
  if (io.signal?.aborted) {
    io.stderr('Interrupted.\n');
    return EXIT.interrupted;
  }
  if (err instanceof ApiError) {
    io.stderr(`Error: ${err.error} (HTTP ${err.status}${err.param ? `, ${err.param}` : ''})\n`);
    return EXIT.api;
  }
  if (err instanceof ConnectionError) {
    io.stderr(`Error: cannot reach the API: ${err.message}\n`);
    return EXIT.unreachable;
  }
  if (err instanceof UsageError) {
    io.stderr(`mediajobs: ${err.message}\n`);
    return EXIT.usage;
  }
  io.stderr(`mediajobs: unexpected error: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  return EXIT.internal;
}

const sig = (c: Context) => ({ ...(c.io.signal && { signal: c.io.signal }) });

function show<T>(c: Context, answer: T, human: (a: T) => string): number {
  c.io.stdout(`${c.json ? JSON.stringify(answer, null, 2) : human(answer)}\n`);
  return EXIT.ok;
}

/** The POST /jobs body of the job options given (their types checked here, their values by the API). */
function jobRequest(url: string, values: Context['values']): CreateJobRequest {
  const body: Record<string, unknown> = { url };
  for (const [flag, type] of Object.entries(JOB_FIELDS)) {
    const v = values[flag];
    if (v === undefined) continue;
    if (type === 'integer' && !/^-?\d+$/.test(String(v))) throw new UsageError(`--${flag} takes a whole number, not: ${String(v)}`);
    body[flag.replace(/-/g, '_')] = type === 'integer' ? Number(v) : v;
  }
  return body as unknown as CreateJobRequest;
}

function intervalMs(values: Context['values']): number {
  const raw = values.interval;
  if (raw === undefined) return 2000;
  const s = Number(raw);
  if (!Number.isFinite(s) || s <= 0) throw new UsageError(`--interval takes seconds above 0, not: ${String(raw)}`);
  return s * 1000;
}

async function submit(c: Context): Promise<number> {
  const poll = intervalMs(c.values);
  const created = await c.client.createJob(jobRequest(c.args[0]!, c.values), { ...sig(c), ...keyOption(c) });
  if (!('job_id' in created)) {
    show(c, created, (b) => `Created batch ${b.batch_id}: ${'total_episodes' in b ? b.total_episodes : b.total_videos} jobs${'paused' in b && b.paused ? ' (paused: mediajobs batch start ' + b.batch_id + ')' : ''}`);
    return EXIT.ok;
  }
  if (!c.values.wait) return show(c, created, (j) => j.job_id);
  if (!c.json) c.io.stderr(`Created job ${created.job_id}\n`);
  return waitAndReport(c, created.job_id, poll);
}

/** Waits with the progress bar on stderr; prints the file's URL (or the job's JSON) and exits by the outcome. */
async function waitAndReport(c: Context, id: string, poll = intervalMs(c.values)): Promise<number> {
  const bar = progressBar(c.io);
  let job: Job;
  try {
    job = await c.client.waitForJob(id, { pollIntervalMs: poll, onProgress: (p) => bar.update(progressLine(p)), ...sig(c) });
  } finally {
    bar.done();
  }
  if (c.json) c.io.stdout(`${JSON.stringify(job, null, 2)}\n`);
  else if (job.status === 'Completed') c.io.stdout(`${job.s3_url ?? job.s3_key ?? job.id}\n`);
  else c.io.stderr(`Job ${job.id} ended ${job.status}${job.error ? `: ${job.error}` : ''}${job.reason ? ` (${job.reason})` : ''}\n`);
  return exitForStatus(job.status);
}

/** The progress display: one line redrawn on a terminal, a line per change otherwise (logs, CI). */
function progressBar(io: Io): { update(line: string): void; done(): void } {
  let drawn = false;
  return {
    update(line) {
      if (!io.stderrIsTty) return io.stderr(`${line}\n`);
      io.stderr(`\r\x1b[2K${line}`);
      drawn = true;
    },
    done() {
      if (drawn) io.stderr('\n');
    },
  };
}

async function list(c: Context): Promise<number> {
  const status = c.values.status as string | undefined;
  const limitRaw = c.values.limit as string | undefined;
  const limit = limitRaw === undefined ? 20 : Number(limitRaw);
  if (!Number.isInteger(limit) || limit < 1 || (!c.values.all && limit > 100)) throw new UsageError(`--limit takes a whole number from 1 to 100, not: ${limitRaw}`);
  const filter = status === undefined ? {} : { status: status.toLowerCase() as JobStatusFilter };
  if (c.values.all) {
    const jobs = [];
    for await (const j of c.client.jobs({ ...filter, ...sig(c) })) jobs.push(j);
    return show(c, jobs, (js) => (js.length ? jobsTable(js) : 'No jobs'));
  }
  return show(c, await c.client.listJobs({ ...filter, limit }, sig(c)), (page) => {
    if (page.jobs.length === 0) return 'No jobs';
    const more = page.jobs.length === limit ? `\n(the newest ${limit}: --limit N or --all for more)` : '';
    return `${jobsTable(page.jobs)}${more}`;
  });
}

async function batchCreate(c: Context): Promise<number> {
  const created = await c.client.createJob(jobRequest(c.args[0]!, c.values), { ...sig(c), ...keyOption(c) });
  if ('job_id' in created) {
    c.io.stderr(`Not a show or playlist URL: created one job, ${created.job_id}\n`);
    return show(c, created, (j) => j.job_id);
  }
  return show(c, created, (b) => {
    const count = 'total_episodes' in b ? b.total_episodes : b.total_videos;
    const paused = 'paused' in b && b.paused;
    return `${b.batch_id}\nCreated batch of ${count} jobs${paused ? `, paused: mediajobs batch start ${b.batch_id}` : ''}`;
  });
}

function keyOption(c: Context): { idempotencyKey?: string } {
  const k = c.values['idempotency-key'];
  return typeof k === 'string' ? { idempotencyKey: k } : {};
}
