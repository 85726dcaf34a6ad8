// What a person sees in the terminal `make run` runs in (issue 38 item 1):
// local mode under a pseudo-terminal (util-linux `script`, as a shell would
// run it) prints human lines with a time and a level, no JSON at info,
// no line per polling request, and exactly one line per transition of a
// job that completes and of one that fails (media made with ffmpeg, served
// on 127.0.0.1; the failing one's source a closed loopback port). A start
// that cannot go on reads as one plain line there, and as one JSON line
// through a pipe, where every log line stays JSON.
import { expect } from 'chai';
import { createServer, type Server } from 'node:net';
import { randomBytes } from 'node:crypto';
import { eventually } from '../../local-cluster/test/support.js';
import { startMediaServer, unreachableUrl, type MediaServer } from '../support/media.js';
import {
  api, cleanUp, makeSite, startLocalMode, waitExit, waitReady, type Banner, type LocalMode, type Site,
} from './local-mode-support.js';

/** argv run by `script` on a pseudo-terminal of its own: -q no banner, -f flush at once, -e its exit code, the log to /dev/null. */
const underTerminal = (argv: string[]): string[] => ['script', '-qfec', argv.map(shellWord).join(' '), '/dev/null'];
const shellWord = (w: string) => `'${w.replace(/'/g, `'\\''`)}'`;

/** The terminal's text as lines: colours and carriage returns gone. */
 
const screenLines = (lm: LocalMode): string[] => lm.output().replace(/\x1b\[[0-9;]*m/g, '').split(/\r?\n/);

/** A human log line: `[HH:MM:ss.mmm] LEVEL (component): message key=value …`. */
const HUMAN = /^\[(\d\d:\d\d:\d\d\.\d{3})\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) \(([\w-]+)\): (.*)$/;

interface HumanLine {
  level: string;
  component: string;
  text: string;
}

function humanLines(lm: LocalMode): HumanLine[] {
  return screenLines(lm).flatMap((l) => {
    const m = HUMAN.exec(l);
    return m ? [{ level: m[2]!, component: m[3]!, text: m[4]! }] : [];
  });
}

/** What the operator said of job `id`, message by message. */
const transitionsOf = (lines: HumanLine[], id: string) => lines.filter((l) => l.component === 'operator' && l.text.includes(`jobId=${id}`));

async function submitAndWait(banner: Banner, lm: LocalMode, url: string): Promise<{ id: string; job: Record<string, unknown> }> {
  const created = await api(banner, 'POST', '/jobs', { url });
  expect(created.status, JSON.stringify(created.body)).to.equal(201);
  const id = created.body.job_id as string;
  const job = await eventually(async () => {
    const r = await api(banner, 'GET', `/jobs/${id}`);
    return ['Completed', 'Failed', 'Warning', 'Skipped'].includes(r.body.status as string) ? r.body : undefined;
  }, 120_000, 200).catch((err: Error) => {
    throw new Error(`${err.message}: job ${id} did not end\n${lm.output()}`);
  });
  return { id, job };
}

describe('local mode in a terminal (make run)', function () {
  this.timeout(300_000);
  const sites: Site[] = [];
  let media: MediaServer;
  let held: Server | undefined;

  before(async () => {
    media = await startMediaServer();
  });

  after(async () => {
    await media.stop();
  });

  afterEach(async () => {
    if (held) await new Promise((r) => held!.close(r));
    held = undefined;
    await cleanUp(sites);
  });

  async function newSite(): Promise<Site> {
    const site = await makeSite(`mj_dev_${randomBytes(12).toString('hex')}`);
    // What `make run` in a shell has: LOG_FORMAT unset (auto), the terminal's TERM.
    delete site.env.LOG_FORMAT;
    delete site.env.REQUEST_LOG_LEVEL;
    site.env.TERM = 'xterm';
    // A refused connection is retried by default (30 s, then 60 s); one attempt ends the failing job at once.
    site.env.RETRY_MAX_ATTEMPTS = '1';
    sites.push(site);
    return site;
  }

  it('prints human lines with a time and a level, no JSON and no request lines, and one line per transition of a completed and a failed job', async () => {
    const site = await newSite();
    const lm = startLocalMode(site, site.env, underTerminal);
    const banner = await waitReady(lm);
    const completed = await submitAndWait(banner, lm, media.mp4Url);
    const failed = await submitAndWait(banner, lm, await unreachableUrl());
    expect(completed.job, lm.output()).to.include({ status: 'Completed' });
    expect(failed.job, lm.output()).to.include({ status: 'Failed' });
    // The operator says the end after writing it; the API may answer first.
    await eventually(() => transitionsOf(humanLines(lm), failed.id).some((l) => l.text.startsWith('job failed ')), 15_000, 100);
    await eventually(() => transitionsOf(humanLines(lm), completed.id).some((l) => l.text.startsWith('job completed ')), 15_000, 100);

    const screen = screenLines(lm);
    const lines = humanLines(lm);
    expect(screen.filter((l) => /^\s*\{/.test(l)), 'JSON on the terminal').to.deep.equal([]);
    expect(lines.length, lm.output()).to.be.at.least(4);
    expect(lines.filter((l) => !['DEBUG', 'TRACE'].includes(l.level) && /^request\b/.test(l.text)), 'request lines at info').to.deep.equal([]);
    expect(screen.join('\n')).to.include('mediajobs is running locally');

    // One line per transition: accepted, maybe started (a fast runner may finish before it is seen running), the end.
    const completedLines = transitionsOf(lines, completed.id).map((l) => l.text);
    expect(completedLines.filter((t) => t.startsWith('job accepted '))).to.have.length(1);
    expect(completedLines.filter((t) => t.startsWith('job started'))).to.have.length.at.most(1);
    const done = completedLines.filter((t) => t.startsWith('job completed '));
    expect(done, completedLines.join('\n')).to.have.length(1);
    expect(done[0]).to.match(new RegExp(`jobId=${completed.id} size="[\\d.]+ [kMG]?B" bytes=${String(completed.job.file_size)} duration="[\\d.]+ s" where=managed:\\S+\\.mp4$`));
    expect(transitionsOf(lines, completed.id).map((l) => l.level)).to.satisfy((levels: string[]) => levels.every((l) => l === 'INFO'));

    const failedLines = transitionsOf(lines, failed.id).map((l) => l.text);
    expect(failedLines.filter((t) => t.startsWith('job accepted '))).to.have.length(1);
    const end = transitionsOf(lines, failed.id).filter((l) => l.text.startsWith('job failed '));
    expect(end, failedLines.join('\n')).to.have.length(1);
    expect(end[0]!.level).to.equal('WARN');
    expect(end[0]!.text).to.match(new RegExp(`^job failed jobId=${failed.id} category=\\w+ cause=`));
    expect(failedLines.filter((t) => !/^job (accepted|started|failed|attempt failed; retrying) /.test(t)), 'other operator lines about the job').to.deep.equal([]);
    expect(completedLines.filter((t) => !/^job (accepted|started|completed) /.test(t)), 'other operator lines about the job').to.deep.equal([]);
  });

  it('a start that cannot go on: one plain line in a terminal, one JSON line through a pipe', async () => {
    const site = await newSite();
    held = createServer();
    await new Promise<void>((resolve) => held!.listen(site.port, '127.0.0.1', resolve));
    const message = `the gateway port ${site.port} is taken by another program: stop it, or set PORT to a free port`;

    const inTerminal = startLocalMode(site, site.env, underTerminal);
    expect(await waitExit(inTerminal, 60_000), inTerminal.output()).to.deep.include({ code: 1 });
    const shown = screenLines(inTerminal).filter(Boolean);
    expect(shown, inTerminal.output()).to.have.length(1);
    expect(shown[0]).to.match(new RegExp(`^\\[\\d\\d:\\d\\d:\\d\\d\\.\\d{3}\\] FATAL \\(local-mode\\): ${message}$`));

    const piped = startLocalMode(site);
    expect(await waitExit(piped, 60_000), piped.output()).to.deep.equal({ code: 1, signal: null });
    const out = piped.output().split('\n').filter(Boolean);
    expect(out, piped.output()).to.have.length(1);
    expect(JSON.parse(out[0]!)).to.include({ level: 60, name: 'local-mode', msg: message });
  });
});
