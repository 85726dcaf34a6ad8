// Local mode (`make run`) as a newcomer meets it: scripts/local-mode.ts as a
// process of its own with the embedded PostgreSQL, the banner it prints, the
// API and kubectl behind it, a real job (media made with ffmpeg, served on
// 127.0.0.1), Ctrl-C, and a restart on the same state. State and checkouts
// sit in private (0700) folders, as root's home is: as root, Postgres runs as
// the `postgres` user, who cannot enter them. Also: restarts after kill -9,
// and the one-line failures (a port taken, tools missing, an old database).
// Each run has its own state directory and ports, so it never meets a
// developer's .local/ or another test's Postgres.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { eventually, KUBECTL } from '../../local-cluster/test/support.js';
import { startMediaServer, type MediaServer } from '../support/media.js';
import { freePort } from './support.js';
import {
  api, cleanUp, dataDirOf, expectNoPostgres, IS_ROOT, killGroup, makeSite, postmastersOf, RUNTIME_ROOT, running, serverOf, startLocalMode, waitExit, waitReady,
  type Banner, type LocalMode, type Site,
} from './local-mode-support.js';

const run = promisify(execFile);

function listedIds(r: { body: Record<string, unknown> }): string[] {
  return (r.body.jobs as { id: string }[]).map((j) => j.id);
}


/** A job on the served MP4 that completes, and its file, downloadable and whole. */
async function completeJob(banner: Banner, media: MediaServer, lm: LocalMode): Promise<Record<string, unknown>> {
  const created = await api(banner, 'POST', '/jobs', { url: media.mp4Url });
  expect(created.status, JSON.stringify(created.body)).to.equal(201);
  const id = created.body.job_id as string;
  const job = await eventually(async () => {
    const r = await api(banner, 'GET', `/jobs/${id}`);
    return ['Completed', 'Failed', 'Warning', 'Skipped'].includes(r.body.status as string) ? r.body : undefined;
  }, 60_000, 200);
  expect(job, `${JSON.stringify(job)}\n${lm.output()}`).to.include({ status: 'Completed', step: 'Finished', error: null });
  await expectFile(job);
  return { ...job, id };
}

async function expectFile(job: Record<string, unknown>): Promise<void> {
  const file = await fetch(job.s3_url as string);
  expect(file.status).to.equal(200);
  expect((await file.arrayBuffer()).byteLength).to.equal(job.file_size);
}

/**
 * How a start that cannot go on must end: exit 1, one fatal line (pino's,
 * one JSON object) whose message matches, no stack trace, nothing unhandled.
 */
async function expectOneLineFailure(lm: LocalMode, message: RegExp): Promise<void> {
  expect(await waitExit(lm, 60_000), lm.output()).to.deep.equal({ code: 1, signal: null });
  const fatal = lm.output().split('\n').filter((l) => l.includes('"level":60'));
  expect(fatal, lm.output()).to.have.length(1);
  expect((JSON.parse(fatal[0]!) as { msg: string }).msg).to.match(message);
  expect(lm.output()).to.not.match(/^\s+at \S/m);
  expect(lm.output()).to.not.match(/unhandled|uncaught|\bError:/i);
  expect(lm.output()).to.not.include('mediajobs is running locally');
}

/** Something else listening on 127.0.0.1:`port`. */
async function holdPort(port: number): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}


describe('local mode (make run)', function () {
  this.timeout(120_000);
  const sites: Site[] = [];
  const held: Server[] = [];
  let media: MediaServer;

  before(async () => {
    media = await startMediaServer();
  });

  after(async () => {
    await media.stop();
  });

  afterEach(async () => {
    for (const server of held.splice(0)) await new Promise((r) => server.close(r));
    await cleanUp(sites);
  });

  async function newSite(opts: { privateCheckout?: boolean } = {}): Promise<Site> {
    const site = await makeSite(`mj_dev_${randomBytes(12).toString('hex')}`, opts);
    sites.push(site);
    return site;
  }

  it('with its state in a private folder: prints its URL, dev key and kubeconfig, completes a job, stops on Ctrl-C and keeps jobs, keys and files across a restart', async () => {
    const site = await newSite();
    const devKey = site.env.MEDIAJOBS_DEV_API_KEY!;

    const first = startLocalMode(site);
    const banner = await waitReady(first);
    expect(banner).to.deep.equal({ baseUrl: `http://127.0.0.1:${site.port}`, devKey, kubeconfig: join(site.localDir, 'kubeconfig') });
    expect(existsSync(banner.kubeconfig), 'kubeconfig file').to.equal(true);
    // As root, the postgres user cannot enter the private folder: the database lives outside, linked from it.
    expect(dataDirOf(site).startsWith(`${RUNTIME_ROOT}/state/`), dataDirOf(site)).to.equal(IS_ROOT);

    const health = await fetch(`${banner.baseUrl}/healthz`);
    expect(health.status).to.equal(200);

    const job = await completeJob(banner, media, first);
    const id = job.id as string;
    const listed = await api(banner, 'GET', '/jobs');
    expect(listed.status).to.equal(200);
    expect(listedIds(listed)).to.include(id);

    const kubectlEnv = { ...process.env, HOME: site.env.HOME, KUBECONFIG: banner.kubeconfig };
    const mediajobs = await eventually(async () => {
      const { stdout } = await run(KUBECTL, ['get', 'mediajobs', '--no-headers'], { env: kubectlEnv, timeout: 30_000 });
      return stdout.includes(id) ? stdout : undefined;
    }, 15_000, 200);
    expect(mediajobs).to.include(id);

    // The admin CLI next to it, with no settings: local mode's database. --json is for scripts.
    const admin = (...args: string[]) => run('npm', ['run', '--silent', 'admin', '--', ...args], { cwd: site.checkout, env: site.env, timeout: 60_000 });
    const made = JSON.parse((await admin('create-key', '--name', 'scripted', '--storage-limit-gb', '2', '--json')).stdout) as Record<string, unknown>;
    expect(made).to.deep.include({ name: 'scripted', created: true, storage_limit_bytes: 2 * 2 ** 30 });
    const usage = await fetch(`${banner.baseUrl}/usage`, { headers: { 'x-api-key': made.key as string } });
    expect(await usage.json()).to.deep.include({ client_name: 'scripted', usage_count: 0, storage_limit_gb: 2 });

    // Ctrl-C in a terminal signals the whole foreground process group, not only local mode.
    process.kill(-first.proc.pid!, 'SIGINT');
    expect(await waitExit(first, 30_000), first.output()).to.deep.equal({ code: 130, signal: null });
    await expectNoPostgres(site, first);
    const down = await admin('list-keys').then(() => undefined, (err: { code?: number; stderr?: string }) => err);
    // Refused, not guessed (exit 2, as for every "no database to use"): the checkout's own Postgres is stopped.
    expect(down?.code).to.equal(2);
    expect(down?.stderr).to.include('is not running').and.to.include('make run');
    // Stopped in order: Postgres last, so nothing lost its database while stopping.
    const troubled = first.output().split('\n').filter((l) => /stop failed|terminating connection|unhandled|uncaught/i.test(l));
    expect(troubled, 'lines of a disorderly stop').to.deep.equal([]);

    const second = startLocalMode(site);
    const again = await waitReady(second);
    expect(again.devKey).to.equal(devKey);
    const relisted = await api(again, 'GET', '/jobs');
    expect(relisted.status, 'the dev key still works').to.equal(200);
    expect(listedIds(relisted)).to.include(id);
    const kept = await api(again, 'GET', `/jobs/${id}`);
    expect(kept.body).to.include({ status: 'Completed', url: media.mp4Url });
    await expectFile(kept.body);

    // A signal to local mode alone (kill <pid>): Postgres must be stopped by local mode itself.
    process.kill(second.proc.pid!, 'SIGTERM');
    expect(await waitExit(second, 30_000), second.output()).to.deep.equal({ code: 143, signal: null });
    await expectNoPostgres(site, second);
  });

  it('from a checkout in a private folder (git clone … ~/mediajobs && make run as root): comes up on its own .local/, completes a job, stops on Ctrl-C', async () => {
    const site = await newSite({ privateCheckout: true });
    const lm = startLocalMode(site);
    const banner = await waitReady(lm);
    expect(banner.kubeconfig).to.equal(join(site.localDir, 'kubeconfig'));
    if (IS_ROOT) {
      // Neither the binaries in node_modules nor .local/ are reachable for the postgres user: both are placed outside.
      const [pid] = await postmastersOf(dataDirOf(site));
      const { stdout } = await run('ps', ['-o', 'user=,args=', '-p', String(pid)]);
      expect(stdout.trim()).to.match(new RegExp(`^postgres\\s+${RUNTIME_ROOT}/postgresql-[^/]+/bin/postgres -D ${RUNTIME_ROOT}/state/`));
    }
    await completeJob(banner, media, lm);
    process.kill(-lm.proc.pid!, 'SIGINT');
    expect(await waitExit(lm, 30_000), lm.output()).to.deep.equal({ code: 130, signal: null });
    await expectNoPostgres(site, lm);
  });

  it('comes up again after kill -9 of its process group (Postgres left running) and of Postgres too, with jobs, keys and files kept', async () => {
    const site = await newSite();
    const first = startLocalMode(site);
    const firstBanner = await waitReady(first);
    const job = await completeJob(firstBanner, media, first);
    const clusterServer = serverOf(firstBanner.kubeconfig);

    // Postgres runs in a group of its own: killing local mode's group leaves it running on the data directory.
    await killGroup(first);
    const [orphan] = await postmastersOf(dataDirOf(site));
    expect(orphan, 'the Postgres left running').to.be.a('number');

    const second = startLocalMode(site);
    const banner = await waitReady(second);
    expect(await postmastersOf(dataDirOf(site))).to.not.include(orphan);
    // Runner pods the kill left running keep the cluster's address: the restarted cluster listens there again.
    expect(serverOf(banner.kubeconfig), 'the local cluster\'s address').to.equal(clusterServer);
    const kept = await api(banner, 'GET', `/jobs/${job.id as string}`);
    expect(kept.body).to.include({ status: 'Completed' });
    await expectFile(kept.body);

    // The whole machine dies: everything killed, postmaster.pid left behind.
    const [postmaster] = await postmastersOf(dataDirOf(site));
    await killGroup(second);
    process.kill(postmaster!, 'SIGKILL');
    await eventually(async () => (await postmastersOf(dataDirOf(site))).length === 0, 10_000, 50);
    expect(existsSync(join(dataDirOf(site), 'postmaster.pid')), 'a stale postmaster.pid').to.equal(true);

    // Another program took the cluster's port meanwhile: a free one is used instead.
    held.push(await holdPort(Number(new URL(clusterServer).port)));
    const third = startLocalMode(site);
    const after = await waitReady(third);
    expect(serverOf(after.kubeconfig)).to.match(/^https:\/\/127\.0\.0\.1:\d+$/).and.not.equal(clusterServer);
    expect(listedIds(await api(after, 'GET', '/jobs'))).to.include(job.id);
    await completeJob(after, media, third);
    process.kill(-third.proc.pid!, 'SIGINT');
    expect(await waitExit(third, 30_000), third.output()).to.deep.equal({ code: 130, signal: null });
    await expectNoPostgres(site, third);
  });

  it('says in one line that the gateway port is taken, and starts nothing', async () => {
    const site = await newSite();
    held.push(await holdPort(site.port));
    const lm = startLocalMode(site);
    await expectOneLineFailure(lm, new RegExp(`^the gateway port ${site.port} is taken by another program: stop it, or set PORT to a free port$`));
    expect(existsSync(site.localDir), 'nothing started, not even the state folder').to.equal(false);
  });

  it('says in one line that local mode already runs on this state, and leaves that one running', async () => {
    const site = await newSite();
    const first = startLocalMode(site);
    const banner = await waitReady(first);
    const second = startLocalMode(site, { ...site.env, PORT: String(await freePort()) });
    await expectOneLineFailure(second, new RegExp(`^local mode is already running on ${site.localDir} \\(pid ${first.proc.pid}\\): stop it first`));
    expect((await api(banner, 'GET', '/jobs')).status).to.equal(200);
    process.kill(-first.proc.pid!, 'SIGINT');
    expect(await waitExit(first, 30_000), first.output()).to.deep.equal({ code: 130, signal: null });
    await expectNoPostgres(site, first);
  });

  it('says in one line that the embedded Postgres port is taken, and stops what it started', async () => {
    const site = await newSite();
    held.push(await holdPort(Number(site.env.EMBEDDED_PG_PORT)));
    const lm = startLocalMode(site);
    await expectOneLineFailure(lm, new RegExp(`^the embedded Postgres port ${site.env.EMBEDDED_PG_PORT} is taken .* set EMBEDDED_PG_PORT to a free port$`));
    await expectNoPostgres(site, lm);
  });

  it('says in one line that yt-dlp and ffmpeg are missing', async () => {
    const site = await newSite();
    const emptyBin = join(site.dir, 'bin');
    mkdirSync(emptyBin);
    const lm = startLocalMode(site, { ...site.env, PATH: emptyBin });
    await expectOneLineFailure(lm, /^yt-dlp, ffmpeg, ffprobe not found on PATH: install them/);
  });

  it('says in one line that a database made by another PostgreSQL version cannot be opened, and keeps it', async () => {
    const site = await newSite();
    const old = join(site.localDir, 'postgres');
    mkdirSync(old, { recursive: true });
    writeFileSync(join(old, 'PG_VERSION'), '16\n');
    const lm = startLocalMode(site);
    await expectOneLineFailure(lm, /^the database in \S+ was made by PostgreSQL 16 and this is PostgreSQL \d+: move that folder away/);
    expect(readFileSync(join(dataDirOf(site), 'PG_VERSION'), 'utf8')).to.equal('16\n');
  });

  it('says in one line that the disk is full, and stops what it started', async function () {
    const site = await newSite();
    // A full disk, made small: a 12 KiB tmpfs as the state folder (root only; skipped where mounting is not allowed).
    mkdirSync(site.localDir);
    try {
      await run('mount', ['-t', 'tmpfs', '-o', 'size=12k,mode=0755', 'tmpfs', site.localDir]);
    } catch {
      this.skip();
    }
    try {
      const lm = startLocalMode(site);
      await expectOneLineFailure(lm, /^the disk is full \(.+\): free some space and run again$/);
      await expectNoPostgres(site, lm);
    } finally {
      // The link to a database placed outside goes with the tmpfs: that database is removed here.
      const dataDir = dataDirOf(site);
      await run('umount', [site.localDir]);
      if (dataDir.startsWith(`${RUNTIME_ROOT}/`)) rmSync(dirname(dataDir), { recursive: true, force: true });
    }
  });

  it('stops the embedded Postgres it is still starting when SIGINT arrives before it is ready', async () => {
    const site = await newSite();
    const lm = startLocalMode(site);
    // The pid file appears once the postmaster runs, well before local mode is ready.
    await eventually(() => existsSync(join(dataDirOf(site), 'postmaster.pid')) || !running(lm), 60_000, 10);
    expect(running(lm), `exited early:\n${lm.output()}`).to.equal(true);
    // Only local mode gets the signal: nothing else would stop this Postgres.
    process.kill(lm.proc.pid!, 'SIGINT');
    expect(await waitExit(lm, 30_000), lm.output()).to.deep.equal({ code: 130, signal: null });
    expect(lm.output()).to.not.include('mediajobs is running locally');
    expect(lm.output()).to.not.match(/unhandled|uncaught/i);
    await expectNoPostgres(site, lm);
  });

  it('exits 143 on SIGTERM while its first start is still initialising, and starts normally afterwards', async () => {
    const site = await newSite();
    const lm = startLocalMode(site);
    // The state directory is made once the signal handlers are in place and the ports checked; the data directory comes next.
    await eventually(() => existsSync(site.localDir) || !running(lm), 60_000, 5);
    process.kill(lm.proc.pid!, 'SIGTERM');
    expect(await waitExit(lm, 30_000), lm.output()).to.deep.equal({ code: 143, signal: null });
    expect(lm.output()).to.not.include('mediajobs is running locally');
    expect(lm.output()).to.not.match(/unhandled|uncaught/i);
    await expectNoPostgres(site, lm);

    const next = startLocalMode(site);
    const banner = await waitReady(next);
    expect(banner.devKey).to.equal(site.env.MEDIAJOBS_DEV_API_KEY);
    expect((await api(banner, 'GET', '/jobs')).status).to.equal(200);
    process.kill(next.proc.pid!, 'SIGINT');
    expect(await waitExit(next, 30_000), next.output()).to.deep.equal({ code: 130, signal: null });
    await expectNoPostgres(site, next);
  });
});
