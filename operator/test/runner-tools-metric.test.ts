// mediajobs_runner_tool_info{tool,version} and mediajobs_runner_ytdlp_age_days
// (issue 37 item 6): the scripted runner reports tool versions in
// status.tools as the runner does, and the operator's own /metrics listener
// shows them as a scraper reads it; versions not seen for a day, and versions
// past the kept number, leave the metric.
import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { newRegistry } from '@mediajobs/lib/metrics';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type MediaJobOptions, type MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { parseExposition, scrape } from '../../test/support/metrics.js';
import { loadOperatorConfig } from '../src/config.js';
import { OperatorMetrics, TOOL_VERSIONS_KEPT, TOOL_VERSION_TTL_MS } from '../src/metrics.js';
import { startOperator, type OperatorHandle } from '../src/operator.js';
import { TestLocalStorage } from './support/local-storage.js';

const RUNNER = fileURLToPath(new URL('./support/scripted-runner.ts', import.meta.url));
// All the operator's kinds: it waits for each one's informer to list.
const CRDS = ['mediajob.yaml', 'mediabatch.yaml', 'proxypool.yaml', 'mediaplatform.yaml'].map((f) => fileURLToPath(new URL(`../../crds/${f}`, import.meta.url)));
const OPTIONS: Omit<MediaJobOptions, 'url'> = {
  format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
};
const DAY_MS = 86_400_000;
/** Whole days since a date, as an operator reading the gauge would check it by hand. */
const daysSince = (y: number, m: number, d: number) => Math.floor((Date.now() - Date.UTC(y, m - 1, d)) / DAY_MS);

describe('runner tool versions on the operator\'s /metrics', function () {
  this.timeout(180_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let custom: k8s.CustomObjectsApi;
  let key: string;
  let operator: OperatorHandle | undefined;
  let storage: TestLocalStorage;

  before(async () => {
    tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
    await tc.kubectl(['apply', ...CRDS.flatMap((f) => ['-f', f])]);
    db = await createTestDatabase();
    storage = new TestLocalStorage();
    key = await insertApiKey(db.pool, 'tools');
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    operator = await startOperator(loadOperatorConfig({
      DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: SecretBox.generateSpec('t1'), ...storage.settings,
      RUNNER_IMAGE: 'mediajobs/runner:scripted', LEADER_ELECTION: 'false', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8', METRICS_PORT: '0', METRICS_HOST: '127.0.0.1',
    }), { log: pino({ level: process.env.LOG_LEVEL ?? 'silent' }), storage: storage.access });
  });

  after(async () => {
    await operator?.stop();
    await db?.drop();
    await tc?.stop();
    storage?.remove();
  });

  const create = (name: string, url: string) => custom.createNamespacedCustomObject({
    group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL,
    body: {
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name, namespace: 'default' },
      spec: { ...OPTIONS, url, owner: { apiKeyId: key }, destination: { type: 'managed' } },
    } satisfies MediaJob,
  });
  const get = async (name: string) => (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name })) as MediaJob;

  it('shows each tool version the fleet and a canary ran, yt-dlp\'s age by its version date, and no label a runner made up', async () => {
    await create('fleet', 'http://media.test/complete?ytdlp=2026.08.19&ffmpeg=7.1.1');
    await create('canary', 'http://media.test/complete?ytdlp=2026.11.20.233512&ffmpeg=7.1.1');
    // A runner (or whoever holds its token) writing a label-breaking "version": never a label.
    await create('liar', `http://media.test/complete?ytdlp=${encodeURIComponent('1"} evil{x="')}&ffmpeg=${'9'.repeat(65)}`);
    await eventually(async () => (await Promise.all(['fleet', 'canary', 'liar'].map(async (n) => (await get(n)).status?.status))).every((s) => s === 'Completed'), 120_000, 100);
    expect((await get('liar')).status?.tools?.ytdlp).to.equal('1"} evil{x="');

    const m = await scrape(`${operator!.metricsUrl!}/metrics`);
    const info = m.find('mediajobs_runner_tool_info').map((s) => `${s.labels.tool} ${s.labels.version} ${s.value}`).sort();
    expect(info).to.deep.equal(['ffmpeg 7.1.1 1', 'ytdlp 2026.08.19 1', 'ytdlp 2026.11.20.233512 1']);
    const age = Object.fromEntries(m.find('mediajobs_runner_ytdlp_age_days').map((s) => [s.labels.version, s.value]));
    expect(Object.keys(age).sort()).to.deep.equal(['2026.08.19', '2026.11.20.233512']);
    // Whole days; a scrape across midnight may count one more than this reading.
    expect(age['2026.08.19']).to.be.within(daysSince(2026, 8, 19), daysSince(2026, 8, 19) + 1);
    expect(age['2026.11.20.233512']).to.be.within(daysSince(2026, 11, 20), daysSince(2026, 11, 20) + 1);
  });

  it('drops a version no job ran for a day, and keeps the most recently seen ones when runners report too many', async () => {
    const metrics = new OperatorMetrics(newRegistry());
    const now = Date.now();
    const ended = (ytdlp: string, ago: number): MediaJobStatus => ({ status: 'Completed', tools: { ytdlp }, finishTime: new Date(now - ago).toISOString() });
    const versions = async () => parseExposition(await metrics.registry.metrics()).find('mediajobs_runner_tool_info').map((s) => s.labels.version).sort();

    // A finished job still in the cache after a restart counts from its finish, not from when the operator saw it again.
    metrics.runnerTools(ended('2026.01.02', TOOL_VERSION_TTL_MS + 60_000));
    metrics.runnerTools(ended('2026.01.03', TOOL_VERSION_TTL_MS - 60_000));
    metrics.runnerTools({ status: 'Processing', tools: { ytdlp: '2026.01.04' } });
    expect(await versions()).to.deep.equal(['2026.01.03', '2026.01.04']);

    for (let i = 0; i < TOOL_VERSIONS_KEPT + 3; i++) metrics.runnerTools(ended(`2025.12.${10 + i}`, (TOOL_VERSIONS_KEPT + 3 - i) * 1000));
    const kept = await versions();
    expect(kept).to.have.length(TOOL_VERSIONS_KEPT);
    expect(kept).to.include('2026.01.04').and.include(`2025.12.${10 + TOOL_VERSIONS_KEPT + 2}`).and.not.include('2026.01.03');
  });
});
