// The real runner as the pod runs it (`node --import tsx runner-image/src/main.ts`),
// with real yt-dlp and ffmpeg against media served on loopback, reporting to
// a MediaJob on the local cluster and delivering to managed local storage.
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { expect } from 'chai';
import { pino } from 'pino';
import { LocalCluster } from '@mediajobs/local-cluster';
import { API_VERSION, GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJobStatus, type RunnerReport } from '@mediajobs/lib/mediajob/types';
import { generateMedia, MEDIA, startMediaServer, unreachableUrl, type MediaServer } from '../../test/support/media.js';
import { freePort } from '../../test/support/ports.js';
import { applyCrds } from '../../scripts/apply-crds.js';
import { cpuBudget } from '../src/child.js';
import { inClusterSink, inClusterTarget, StatusReporter } from '../src/report.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MAIN = join(ROOT, 'runner-image/src/main.ts');
const NS = 'default';

interface RunOutcome {
  exitCode: number | null;
  /** Every status the watch saw, in order. */
  statuses: MediaJobStatus[];
  termination: RunnerReport | undefined;
  terminationRaw: string;
  stdout: string;
  tmp: string;
}

async function ffprobeJson(file: string): Promise<{ format: { format_name: string; duration: string }; streams: { codec_type: string; codec_name: string; width?: number; height?: number }[] }> {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file]);
  return JSON.parse(stdout) as Awaited<ReturnType<typeof ffprobeJson>>;
}

/** Consecutive duplicates removed: the order of steps the watch saw. */
function stepSequence(statuses: MediaJobStatus[]): string[] {
  const out: string[] = [];
  for (const s of statuses) if (s.step && out[out.length - 1] !== s.step) out.push(s.step);
  return out;
}

describe('runner: pipeline on real yt-dlp and ffmpeg, reporting to the local cluster', function () {
  this.timeout(120_000);
  let media: MediaServer;
  let cluster: LocalCluster;
  let kc: k8s.KubeConfig;
  let custom: k8s.CustomObjectsApi;
  let scratch: string;
  let store: string;
  let creds: string;
  let n = 0;

  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'runner-test-'));
    store = join(scratch, 'store');
    creds = join(scratch, 'creds');
    [media, cluster] = await Promise.all([
      startMediaServer(),
      LocalCluster.start({ port: 0, workDir: join(scratch, 'cluster'), logger: pino({ level: 'silent' }) }),
    ]);
    kc = new k8s.KubeConfig();
    kc.loadFromFile(cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    // As written, CEL rules and enums included: local mode's install (scripts/apply-crds.ts).
    await applyCrds(kc, { files: ['mediajob.yaml'] });
    writeDestination({ provider: 'managed' });
  });

  after(async () => {
    await Promise.all([media?.stop(), cluster?.stop()]);
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  /** The per-job Secret volume: a directory holding destination.json. */
  function writeDestination(dest: unknown): void {
    rmSync(creds, { recursive: true, force: true });
    mkdirSync(creds, { recursive: true });
    writeFileSync(join(creds, 'destination.json'), JSON.stringify(dest));
  }

  async function createMediaJob(name: string, jobId: string, url: string, extra: Record<string, unknown> = {}): Promise<void> {
    await custom.createNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: NS, plural: MEDIAJOB_PLURAL,
      body: {
        apiVersion: API_VERSION, kind: 'MediaJob', metadata: { name },
        spec: {
          jobId, owner: { apiKeyId: '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f' }, url,
          format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best',
          audioOnly: false, downloadSubtitles: false, downloadThumbnail: false, liveRecording: false,
          liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
          destination: { type: 'managed' }, ...extra,
        },
      },
    });
  }

  /** Start the runner for a new MediaJob; resolves when it exits, with what the watch saw. */
  async function runRunner(
    url: string,
    opts: { extra?: Record<string, unknown>; specOnly?: Record<string, unknown>; env?: Record<string, string>; createJob?: boolean; tmpPrefix?: string; whileRunning?: (ctl: { kill(sig: NodeJS.Signals): void; statuses: MediaJobStatus[] }) => Promise<void> } = {},
  ): Promise<RunOutcome> {
    n++;
    const jobId = `${String(n).padStart(8, '0')}-aaaa-4bbb-8ccc-${String(n).padStart(12, '0')}`;
    const name = jobId;
    const spec = { jobId, owner: { apiKeyId: '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f' }, url, format: 'mp4', videoCodec: 'copy', audioOnly: false, destination: { type: 'managed' }, ...opts.extra, ...opts.specOnly };
    if (opts.createJob !== false) await createMediaJob(name, jobId, url, opts.extra);

    const statuses: MediaJobStatus[] = [];
    const watch = new k8s.Watch(kc);
    const req = await watch.watch(
      `/apis/${GROUP}/${VERSION}/namespaces/${NS}/${MEDIAJOB_PLURAL}`,
      { fieldSelector: `metadata.name=${name}` },
      (_type, obj: { status?: MediaJobStatus }) => {
        if (obj.status) statuses.push(structuredClone(obj.status));
      },
      () => undefined,
    );

    const tmp = mkdtempSync(join(scratch, `${opts.tmpPrefix ?? ''}tmp-${n}-`));
    const termination = join(scratch, `termination-${n}.log`);
    writeFileSync(termination, '');
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH,
        HOME: scratch,
        TMPDIR: tmp,
        KUBECONFIG: cluster.kubeconfigPath,
        LOG_LEVEL: 'info',
        MEDIAJOB_SPEC: JSON.stringify(spec),
        MEDIAJOB_NAME: name,
        MEDIAJOB_NAMESPACE: NS,
        MEDIAJOB_JOB_ID: jobId,
        MEDIAJOBS_CREDENTIALS_DIR: creds,
        LOCAL_CLUSTER_TERMINATION_LOG: termination,
        MANAGED_STORAGE: 'local',
        MANAGED_STORAGE_DIR: store,
        FILE_URL_SECRET: 'runner-test-secret-0123456789',
        PUBLIC_BASE_URL: 'http://127.0.0.1:8080',
        RUNNER_PROGRESS_INTERVAL_MS: '100',
        RUNNER_SOCKET_TIMEOUT_SECONDS: '5',
        OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8,::1/128', // the media servers listen on loopback, as in local mode
        ...opts.env,
      },
    });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stdout += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    if (opts.whileRunning) await opts.whileRunning({ kill: (sig) => child.kill(sig), statuses });
    const exitCode = await exited;
    // The last patch was acknowledged before the runner exited; give the watch a moment to deliver it.
    await new Promise((r) => setTimeout(r, 300));
    req.abort();
    const raw = readFileSync(termination, 'utf8');
    return { exitCode, statuses, termination: raw ? (JSON.parse(raw) as RunnerReport) : undefined, terminationRaw: raw, stdout, tmp };
  }

  function leftoverWorkDirs(tmp: string): string[] {
    return readdirSync(tmp).filter((f) => f.startsWith('mediajob-'));
  }

  /** Files local storage has staged and neither published nor discarded (jobs here run one at a time). */
  function stagedFiles(): string[] {
    return existsSync(join(store, '.tmp')) ? readdirSync(join(store, '.tmp')) : [];
  }

  it('delivers the MP4 as streamable mp4 with video and audio, reporting Downloading → Muxing → Uploading → Finished', async () => {
    const r = await runRunner(media.mp4Url);
    expect(r.exitCode, r.stdout).to.equal(0);
    expect(stepSequence(r.statuses)).to.deep.equal(['Downloading', 'Muxing', 'Uploading', 'Finished']);
    const last = r.statuses[r.statuses.length - 1]!;
    expect(last.progress).to.equal(100);
    const progress = r.statuses.map((s) => s.progress ?? 0);
    expect(progress).to.deep.equal([...progress].sort((a, b) => a - b), 'progress never goes backwards');
    const result = last.result!;
    expect(result.storageKey).to.match(/^videos\/\d{8}-aaaa-4bbb-8ccc-\d{12}\.mp4$/);
    expect(result).to.include({ format: 'mp4', actualQuality: '240p', title: 'video', releaseDate: '2024-03-15T00:00:00.000Z' });
    const file = join(store, result.storageKey);
    expect(result.fileSize).to.equal(statSync(file).size);
    const probe = await ffprobeJson(file);
    expect(probe.format.format_name).to.contain('mp4');
    expect(Number(probe.format.duration)).to.be.closeTo(MEDIA.mp4.durationSeconds, 0.2);
    expect(probe.streams.map((s) => `${s.codec_type}:${s.codec_name}`).sort()).to.deep.equal(['audio:aac', 'video:h264']);
    // Streamable: the index (fragmented MP4's moov) comes before the media data
    const head = readFileSync(file).subarray(0, 64 * 1024).toString('latin1');
    expect(head.indexOf('moov')).to.be.greaterThan(-1).and.lessThan(head.indexOf('mdat'));
    expect(r.termination).to.deep.include({ outcome: 'completed', step: 'Finished', progress: 100 });
    expect(r.termination!.result).to.deep.equal(result);
    // The seconds of each step, in the final status patch and the termination message alike (mediajobs_runner_phase_seconds).
    const phases = r.termination!.phaseSeconds!;
    expect(Object.keys(phases).sort()).to.deep.equal(['download', 'mux', 'upload']);
    expect(phases.download, 'the probe and the download').to.be.above(0);
    for (const v of Object.values(phases)) expect(v).to.be.at.least(0).and.satisfy((x: number) => Math.round(x * 1000) === x * 1000);
    expect(last.phaseSeconds).to.deep.equal(phases);
    expect(leftoverWorkDirs(r.tmp)).to.deep.equal([]);
  });

  describe('a plain HTTP(S) file is read by ffmpeg straight from its URL (ADR 0007)', () => {
    const muxLine = (stdout: string) => stdout.split('\n').map((l) => { try { return JSON.parse(l) as { msg?: string; reading?: boolean }; } catch { return {}; } })
      .filter((l) => l.msg === 'muxing');

    it('in one pass: no yt-dlp download, the file complete and streamable, steps and progress in order', async () => {
      const r = await runRunner(media.mp4Url, { extra: { filename: 'direct' } });
      expect(r.exitCode, r.stdout).to.equal(0);
      expect(muxLine(r.stdout).map((l) => l.reading)).to.deep.equal([true]);
      expect(stepSequence(r.statuses)).to.deep.equal(['Downloading', 'Muxing', 'Uploading', 'Finished']);
      const progress = r.statuses.map((s) => s.progress ?? 0);
      expect(progress).to.deep.equal([...progress].sort((a, b) => a - b), 'progress never goes backwards');
      // yt-dlp gives a plain file no size; the server's answer to the runner's first request does (the key's reservation).
      const sourceBytes = statSync(join(await generateMedia(), MEDIA.mp4.path)).size;
      expect(new Set(r.statuses.map((s) => s.expectedBytes).filter((b) => b !== undefined))).to.deep.equal(new Set([sourceBytes]));
      expect(r.statuses.find((s) => s.expectedBytes !== undefined)?.step, 'reported while downloading').to.equal('Downloading');
      const result = r.termination!.result!;
      const probe = await ffprobeJson(join(store, result.storageKey));
      expect(Number(probe.format.duration)).to.be.closeTo(MEDIA.mp4.durationSeconds, 0.2);
      expect(probe.streams.map((s) => `${s.codec_type}:${s.codec_name}`).sort()).to.deep.equal(['audio:aac', 'video:h264']);
    });

    it('a source that refuses ffmpeg at the probe is downloaded with yt-dlp', async () => {
      const r = await runRunner(media.refusesFfmpegUrl(0), { extra: { filename: 'refused at probe' } });
      expect(r.exitCode, r.stdout).to.equal(0);
      expect(muxLine(r.stdout).map((l) => l.reading)).to.deep.equal([false]);
      const probe = await ffprobeJson(join(store, r.termination!.result!.storageKey));
      expect(Number(probe.format.duration)).to.be.closeTo(MEDIA.mp4.durationSeconds, 0.2);
    });

    it('a pass that fails on its source starts over with a yt-dlp download, steps again from Downloading, nothing half-stored', async () => {
      // The probe's request goes through, the mux's is refused.
      const r = await runRunner(media.refusesFfmpegUrl(1), { extra: { filename: 'refused in the pass' } });
      expect(r.exitCode, r.stdout).to.equal(0);
      expect(r.stdout).to.contain('reading the source directly failed; downloading it with yt-dlp instead');
      expect(muxLine(r.stdout).map((l) => l.reading)).to.deep.equal([true, false]);
      const result = r.termination!.result!;
      expect(result.storageKey).to.equal('videos/refused in the pass.mp4', 'the failed pass left nothing under the key');
      const probe = await ffprobeJson(join(store, result.storageKey));
      expect(Number(probe.format.duration)).to.be.closeTo(MEDIA.mp4.durationSeconds, 0.2);
      expect(r.statuses[r.statuses.length - 1]).to.deep.include({ step: 'Finished', progress: 100 });
      expect(stagedFiles(), 'the failed pass\'s staged file is gone').to.deep.equal([]);
    });
  });

  it('muxes the best HLS rendition with the separate audio rendition, under the requested filename and folder', async () => {
    const r = await runRunner(media.hlsUrl, { extra: { filename: 'My Clip', folder: 'shows/s1' } });
    expect(r.exitCode, r.stdout).to.equal(0);
    expect(stepSequence(r.statuses)).to.deep.equal(['Downloading', 'Muxing', 'Uploading', 'Finished']);
    const result = r.statuses[r.statuses.length - 1]!.result!;
    expect(result.storageKey).to.equal('videos/shows/s1/My Clip.mp4');
    expect(result.actualQuality).to.equal('720p');
    const probe = await ffprobeJson(join(store, result.storageKey));
    const video = probe.streams.find((s) => s.codec_type === 'video')!;
    expect([video.width, video.height]).to.deep.equal([1280, 720]);
    expect(probe.streams.some((s) => s.codec_type === 'audio' && s.codec_name === 'aac')).to.equal(true);
    expect(Number(probe.format.duration)).to.be.closeTo(MEDIA.hls.durationSeconds, 0.2);
    // Intermediate progress was reported inside the steps, not only at their edges.
    expect(r.statuses.some((s) => s.progress !== undefined && ![0, 33, 66, 100].includes(s.progress))).to.equal(true);
    // The audio rendition has no size (EXT-X-MEDIA gives no bandwidth): nothing is expected, the job keeps the default reservation.
    expect(r.statuses.map((s) => s.expectedBytes).filter((b) => b !== undefined)).to.deep.equal([]);
  });

  it('works in a directory whose path has spaces, quotes and # (the download run reads its options as a yt-dlp config)', async () => {
    const r = await runRunner(media.hlsUrl, { tmpPrefix: `it's a "#dir" ` });
    expect(r.exitCode, r.stdout).to.equal(0);
    expect(r.termination).to.deep.include({ outcome: 'completed', step: 'Finished' });
    const probe = await ffprobeJson(join(store, r.termination!.result!.storageKey));
    expect(probe.streams.map((s) => s.codec_type).sort()).to.deep.equal(['audio', 'video']);
    expect(leftoverWorkDirs(r.tmp)).to.deep.equal([]);
  });

  it('never overwrites: the same filename again gets -<jobId 8>', async () => {
    const r = await runRunner(media.mp4Url, { extra: { filename: 'My Clip', folder: 'shows/s1' } });
    expect(r.exitCode, r.stdout).to.equal(0);
    const key = r.termination!.result!.storageKey;
    expect(key).to.match(/^videos\/shows\/s1\/My Clip-\d{8}\.mp4$/);
    const first = await ffprobeJson(join(store, 'videos/shows/s1/My Clip.mp4'));
    expect(first.streams.find((s) => s.codec_type === 'video')!.height).to.equal(720, 'the first file is untouched');
    const second = await ffprobeJson(join(store, key));
    expect(Number(second.format.duration)).to.be.closeTo(MEDIA.mp4.durationSeconds, 0.2);
    expect(stagedFiles()).to.deep.equal([]);
  });

  it('an unreachable URL fails with errorType error, exit 10, and a message without address or port', async () => {
    const url = await unreachableUrl();
    const port = new URL(url).port;
    const r = await runRunner(url);
    expect(r.exitCode, r.stdout).to.equal(10);
    const last = r.statuses[r.statuses.length - 1]!;
    expect(last).to.include({ errorType: 'error', error: 'Connection error while downloading the media', step: 'Downloading' });
    expect(r.termination).to.include({ outcome: 'failed', errorType: 'error', error: 'Connection error while downloading the media' });
    // A failure reports the phases it went through: the download only.
    expect(Object.keys(r.termination!.phaseSeconds!)).to.deep.equal(['download']);
    expect(last.phaseSeconds).to.deep.equal(r.termination!.phaseSeconds);
    for (const text of [JSON.stringify(r.statuses), r.terminationRaw]) {
      expect(text).to.not.contain('127.0.0.1');
      expect(text).to.not.contain(port);
      expect(text).to.not.contain('Errno');
    }
    expect(leftoverWorkDirs(r.tmp)).to.deep.equal([]);
  });

  it('a 404 is a content warning (unavailable), exit 11', async () => {
    const r = await runRunner(media.notFoundUrl);
    expect(r.exitCode, r.stdout).to.equal(11);
    expect(r.termination).to.include({ outcome: 'warning', errorType: 'warning', error: 'Video is unavailable or has been removed' });
    expect(r.statuses[r.statuses.length - 1]).to.include({ errorType: 'warning' });
  });

  it('a clip it cannot cut as asked (clipEnd before clipStart) fails invalid_spec, exit 10, naming the field: nothing downloaded, nothing stored', async () => {
    const before = media.requests;
    const stored = existsSync(store) ? readdirSync(store, { recursive: true }).length : 0;
    // The MediaJob as the apiserver took it; the pod's MEDIAJOB_SPEC with the clip the CRD's rules would refuse.
    const r = await runRunner(media.mp4Url, { specOnly: { clipStart: '00:04', clipEnd: '00:02' } });
    expect(r.exitCode, r.stdout).to.equal(10);
    const failure = { outcome: 'failed', errorType: 'error', category: 'invalid_spec', reason: 'invalid_spec', error: 'spec.clipEnd: must be greater than clipStart' };
    expect(r.termination).to.include(failure);
    const { outcome: _o, ...reported } = failure;
    expect(r.statuses[r.statuses.length - 1]).to.include(reported);
    expect(media.requests).to.equal(before, 'nothing was downloaded');
    expect(existsSync(store) ? readdirSync(store, { recursive: true }).length : 0, 'nothing stored').to.equal(stored);
    expect(leftoverWorkDirs(r.tmp)).to.deep.equal([]);
  });

  it('a destination that cannot be set up fails with reason storage_unreachable before downloading', async () => {
    writeDestination({ provider: 's3', bucket: 'b' });
    try {
      const before = media.requests;
      const r = await runRunner(media.mp4Url);
      expect(r.exitCode, r.stdout).to.equal(10);
      expect(r.termination).to.include({ outcome: 'failed', errorType: 'error', reason: 'storage_unreachable' });
      expect(r.statuses[r.statuses.length - 1]).to.include({ reason: 'storage_unreachable' });
      expect(media.requests).to.equal(before, 'nothing was downloaded');
    } finally {
      writeDestination({ provider: 'managed' });
    }
  });

  it('a status patch that keeps failing does not fail the job: the termination message carries the outcome', async () => {
    // No MediaJob of that name: every patch gets 404.
    const r = await runRunner(media.mp4Url, { createJob: false });
    expect(r.exitCode, r.stdout).to.equal(0);
    expect(r.statuses).to.deep.equal([]);
    expect(r.termination).to.include({ outcome: 'completed' });
    expect(r.stdout).to.contain('status patch failed');
  });

  it('keeps trying its final report while the API server is away, and exits with the outcome\'s code', async () => {
    // The cluster's kubeconfig, pointing at a loopback port nothing listens on (as while a local cluster restarts).
    const closed = await freePort();
    const away = join(scratch, 'kubeconfig-away');
    writeFileSync(away, readFileSync(cluster.kubeconfigPath, 'utf8').replace(/(server:\s*https:\/\/127\.0\.0\.1:)\d+/, `$1${closed}`));
    const r = await runRunner(media.notFoundUrl, { createJob: false, env: { KUBECONFIG: away } });
    expect(r.termination).to.include({ outcome: 'warning' });
    expect(r.exitCode, r.stdout).to.equal(11);
    // Every attempt of the final report was made (six), not cut short by the process ending in a backoff.
    expect(r.stdout).to.match(/"attempt":6,"msg":"status patch failed/);
  });

  it('runs as the container of a batch/v1 Job: Secret volume at the contract path, termination message in the pod status', async () => {
    n++;
    const jobId = `${String(n).padStart(8, '0')}-aaaa-4bbb-8ccc-${String(n).padStart(12, '0')}`;
    await createMediaJob(jobId, jobId, media.hlsUrl);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const batch = kc.makeApiClient(k8s.BatchV1Api);
    const secretName = `mj-${n}-credentials`;
    await core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: secretName }, stringData: { 'destination.json': JSON.stringify({ provider: 'managed' }) } } });
    const env: Record<string, string> = {
      MEDIAJOB_NAME: jobId, MEDIAJOB_NAMESPACE: NS, MEDIAJOB_JOB_ID: jobId,
      MEDIAJOB_SPEC: JSON.stringify({ jobId, owner: { apiKeyId: '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f' }, url: media.hlsUrl, format: 'mp4', videoCodec: 'copy', audioOnly: false, destination: { type: 'managed' } }),
      MEDIAJOBS_CREDENTIALS_DIR: '/var/run/mediajobs/credentials',
      // The local kubelet gives pods no in-cluster credentials; local mode passes the kubeconfig.
      KUBECONFIG: cluster.kubeconfigPath,
      MANAGED_STORAGE: 'local', MANAGED_STORAGE_DIR: store, FILE_URL_SECRET: 'runner-test-secret-0123456789',
      OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8,::1/128',
    };
    await batch.createNamespacedJob({
      namespace: NS,
      body: {
        metadata: { name: `mj-${n}` },
        spec: {
          backoffLimit: 0,
          template: {
            spec: {
              restartPolicy: 'Never',
              volumes: [{ name: 'credentials', secret: { secretName } }],
              containers: [{
                name: 'runner', image: 'mediajobs/runner:dev', workingDir: ROOT,
                command: [process.execPath, '--import', 'tsx', MAIN],
                env: Object.entries(env).map(([name, value]) => ({ name, value })),
                volumeMounts: [{ name: 'credentials', mountPath: '/var/run/mediajobs/credentials', readOnly: true }],
              }],
            },
          },
        },
      },
    });
    let terminated: k8s.V1ContainerStateTerminated | undefined;
    for (const deadline = Date.now() + 60_000; !terminated && Date.now() < deadline;) {
      const pods = await core.listNamespacedPod({ namespace: NS, labelSelector: `job-name=mj-${n}` });
      terminated = pods.items[0]?.status?.containerStatuses?.[0]?.state?.terminated;
      if (!terminated) await new Promise((r) => setTimeout(r, 200));
    }
    expect(terminated, 'the runner pod terminated').to.not.equal(undefined);
    expect(terminated!.exitCode).to.equal(0);
    const report = JSON.parse(terminated!.message ?? '') as RunnerReport;
    expect(report).to.deep.include({ outcome: 'completed', step: 'Finished' });
    const mj = (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: MEDIAJOB_PLURAL, name: jobId })) as { status?: MediaJobStatus };
    expect(mj.status).to.deep.include({ step: 'Finished', progress: 100 });
    expect(mj.status!.result).to.deep.equal(report.result);
    expect(statSync(join(store, report.result!.storageKey)).size).to.equal(report.result!.fileSize);
  });

  it('SIGTERM mid-download stops the transfer, removes the temp dir and exits 143', async () => {
    let sawTransfer = false;
    // The whole URL, its port included: another test file running beside this one (parallel mode) may read a slow URL of its own server.
    const source = media.slowUrl(30);
    const r = await runRunner(source, {
      whileRunning: async ({ kill, statuses }) => {
        const deadline = Date.now() + 30_000;
        // Wait until the transfer is in flight: Downloading reported and
        // ffmpeg reading the source (ADR 0007: an MP4 over HTTP is read by
        // the mux itself, not downloaded to disk first).
        while (Date.now() < deadline) {
          if (statuses.some((s) => s.step === 'Downloading') && media.requests > 0) {
            const { stdout } = await run('ps', ['-eo', 'args']);
            if (stdout.split('\n').some((l) => /^\S*ffmpeg /.test(l) && l.includes('-progress') && l.includes(source))) {
              sawTransfer = true;
              break;
            }
          }
          await new Promise((res) => setTimeout(res, 50));
        }
        kill('SIGTERM');
      },
    });
    expect(sawTransfer, 'the transfer had started').to.equal(true);
    expect(r.exitCode, r.stdout).to.equal(143);
    expect(leftoverWorkDirs(r.tmp)).to.deep.equal([]);
    expect(stagedFiles(), 'nothing half-written left in storage').to.deep.equal([]);
    const { stdout } = await run('ps', ['-eo', 'args']);
    expect(stdout).to.not.contain(source);
  });
  describe('status reporting in a pod (in-cluster configuration, without client-node)', () => {
    it('is chosen exactly when client-node would choose in-cluster: no $KUBECONFIG, no ~/.kube/config, a ServiceAccount token', () => {
      const sa = mkdtempSync(join(scratch, 'sa-'));
      const home = mkdtempSync(join(scratch, 'home-'));
      const env = { HOME: home, KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
      expect(inClusterTarget(env, sa), 'no token').to.equal(undefined);
      writeFileSync(join(sa, 'token'), 'abc');
      expect(inClusterTarget(env, sa)).to.deep.equal({ server: 'https://10.96.0.1:443', caFile: join(sa, 'ca.crt'), tokenFile: join(sa, 'token') });
      expect(inClusterTarget({ ...env, KUBERNETES_SERVICE_HOST: 'fd00::1' }, sa)!.server).to.equal('https://[fd00::1]:443');
      expect(inClusterTarget({ ...env, KUBERNETES_SERVICE_PORT: '8080' }, sa)).to.deep.equal({ server: 'http://10.96.0.1:8080', tokenFile: join(sa, 'token') });
      expect(inClusterTarget({ ...env, KUBECONFIG: '/some/kubeconfig' }, sa), 'a kubeconfig wins').to.equal(undefined);
      mkdirSync(join(home, '.kube'));
      writeFileSync(join(home, '.kube', 'config'), 'apiVersion: v1');
      expect(inClusterTarget(env, sa), '~/.kube/config wins').to.equal(undefined);
    });

    it('patches the MediaJob status over TLS with the ServiceAccount token, trusting only the cluster CA', async () => {
      // An API server endpoint as a pod sees it: HTTPS with a certificate of
      // the cluster's CA, requiring the ServiceAccount token, in front of the
      // local cluster (which it calls with the local cluster's own token).
      const dir = mkdtempSync(join(scratch, 'tls-'));
      await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
        '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'ca.crt')]);
      const upstream = new URL(cluster.url);
      const seen: string[] = [];
      const server = https.createServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'ca.crt')) }, (req, res) => {
        seen.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
        if (req.headers.authorization !== 'Bearer sa-token-1') {
          res.writeHead(401).end();
          return;
        }
        const out = https.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host, authorization: `Bearer ${cluster.token}` }, ca: cluster.caCert }, (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        });
        req.pipe(out);
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      try {
        const sa = join(dir, 'sa');
        mkdirSync(sa);
        writeFileSync(join(sa, 'token'), 'sa-token-1\n');
        writeFileSync(join(sa, 'ca.crt'), readFileSync(join(dir, 'ca.crt')));
        const port = String((server.address() as AddressInfo).port);
        const target = inClusterTarget({ KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: port }, sa)!;
        n++;
        const name = `${String(n).padStart(8, '0')}-aaaa-4bbb-8ccc-${String(n).padStart(12, '0')}`;
        await createMediaJob(name, name, media.mp4Url);

        const reporter = new StatusReporter({ namespace: NS, name, logger: pino({ level: 'silent' }), sink: inClusterSink(target, NS, name), backoffMs: 1 });
        void reporter.setStep('Muxing', 40, { error: null });
        await reporter.finish({ outcome: 'failed', step: 'Muxing', progress: 40, error: 'Processing failed', errorType: 'error' });
        expect(reporter.failures).to.equal(0);
        const mj = (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: MEDIAJOB_PLURAL, name })) as { status?: MediaJobStatus };
        expect(mj.status).to.deep.include({ step: 'Muxing', progress: 40, error: 'Processing failed', errorType: 'error' });
        expect(seen[0]).to.equal(`PATCH /apis/${GROUP}/${VERSION}/namespaces/${NS}/${MEDIAJOB_PLURAL}/${name}/status application/merge-patch+json`);

        // A MediaJob that is gone: 404, given up at once rather than retried.
        const gone = new StatusReporter({ namespace: NS, name: 'no-such-job', logger: pino({ level: 'silent' }), sink: inClusterSink(target, NS, 'no-such-job'), backoffMs: 1 });
        const before = seen.length;
        await gone.finish({ outcome: 'completed' });
        expect([gone.failures, seen.length - before]).to.deep.equal([1, 1]);

        // A server whose certificate the ServiceAccount CA did not sign is not talked to.
        const other = mkdtempSync(join(scratch, 'ca-'));
        await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-keyout', join(other, 'k.pem'), '-out', join(other, 'c.pem')]);
        writeFileSync(join(sa, 'ca.crt'), readFileSync(join(other, 'c.pem')));
        const untrusting = new StatusReporter({ namespace: NS, name, logger: pino({ level: 'silent' }), sink: inClusterSink(target, NS, name), attempts: 1, backoffMs: 1 });
        const sent = seen.length;
        await untrusting.finish({ outcome: 'completed' });
        expect([untrusting.failures, seen.length - sent]).to.deep.equal([1, 0]);
      } finally {
        await new Promise((r) => server.close(r));
      }
    });
  });
});

describe('runner: the CPU budget ffmpeg threads are sized by', () => {
  it('is the cgroup CPU quota (v2 or v1) rounded up, never more than the CPUs the runner may use', () => {
    const cpus = availableParallelism();
    const root = mkdtempSync(join(tmpdir(), 'runner-cgroup-'));
    try {
      const budget = (files: Record<string, string>) => {
        rmSync(root, { recursive: true, force: true });
        for (const [f, text] of Object.entries(files)) {
          mkdirSync(join(root, f, '..'), { recursive: true });
          writeFileSync(join(root, f), text);
        }
        return cpuBudget(root);
      };
      expect(budget({})).to.equal(cpus, 'no cgroup files');
      expect(budget({ 'cpu.max': 'max 100000\n' })).to.equal(cpus, 'v2 without a limit');
      expect(budget({ 'cpu.max': '50000 100000\n' })).to.equal(1, 'v2, half a CPU');
      expect(budget({ 'cpu.max': '150000 100000\n' })).to.equal(Math.min(cpus, 2), 'v2, 1.5 CPUs');
      expect(budget({ 'cpu.max': '6400000 100000\n' })).to.equal(cpus, 'v2, more than the machine has');
      expect(budget({ 'cpu/cpu.cfs_quota_us': '-1\n', 'cpu/cpu.cfs_period_us': '100000\n' })).to.equal(cpus, 'v1 without a limit');
      expect(budget({ 'cpu/cpu.cfs_quota_us': '100000\n', 'cpu/cpu.cfs_period_us': '100000\n' })).to.equal(1, 'v1, one CPU');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
