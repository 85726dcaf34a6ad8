// The web console (issue 38 items 2 and 3) in a real browser: Debian's
// Chromium driven by playwright-core (test/support/browser.ts) against the
// whole service (local cluster running the real runner with yt-dlp and
// ffmpeg, Postgres, gateway, operator) and local media. A person signs in,
// submits a job from the form, watches it reach Completed in the list,
// plays the delivered file, redelivers a webhook, cancels another job,
// reads the usage chart, and renames and starts a paused show's batch; the
// keyboard reaches everything in order, and
// axe-core finds no serious or critical violation on any view. Each test
// saves a screenshot under .cache/screenshots/console-*.png.
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { buildFeed, lookupResult, serve, startFakePlatform, type FakePlatform } from '../../lib/test/batches-support.js';
import { eventually } from '../../local-cluster/test/support.js';
import { axeViolations, launchBrowser, type Browser } from '../support/browser.js';
import { startMediaServer, type MediaServer } from '../support/media.js';
import { startPodcastMediaServer, type PodcastMediaServer } from '../support/podcast-media.js';
import { startReceiver, startService, type Receiver, type Service } from './support.js';

describe('end to end: the web console in Chromium', function () {
  // Two real downloads (one of them 2 minutes slow, cancelled early) and the console's polling every 3 s.
  this.timeout(240_000);
  let svc: Service;
  let media: MediaServer;
  let receiver: Receiver;
  let browser: Browser;
  let page: Page;
  let completedId: string;
  let platform: FakePlatform;
  let podcast: PodcastMediaServer;
  const SHOW = '1000000038';
  const showUrl = `https://podcasts.apple.com/us/podcast/console-show/id${SHOW}`;

  before(async () => {
    [media, receiver, platform, podcast] = await Promise.all([startMediaServer(), startReceiver(), startFakePlatform(), startPodcastMediaServer()]);
    // A show of two short episodes, as the platform's lookup API and its feed give it (lib/test/batches-support.ts).
    platform.routes.set(`/feeds/${SHOW}.xml`, serve(buildFeed({
      title: 'The Console Show',
      items: [
        { title: 'Episode two', pubDate: 'Tue, 05 Mar 2024 09:30:00 GMT', enclosure: { url: podcast.episodeUrl('ep1.m4a'), type: 'audio/x-m4a' }, guid: 'c-2' },
        { title: 'Episode one', pubDate: 'Fri, 01 Mar 2024 06:00:00 GMT', enclosure: { url: podcast.episodeUrl('ep2.m4a'), type: 'audio/x-m4a' }, guid: 'c-1' },
      ],
    })));
    platform.shows.set(SHOW, lookupResult(SHOW, `${platform.baseUrl}/feeds/${SHOW}.xml`, 'The Console Show'));
    svc = await startService({ env: { PODCAST_LOOKUP_ENDPOINT: platform.lookupEndpoint } });
    browser = await launchBrowser();
    page = browser.page;
  });

  after(async () => {
    await browser?.close();
    await svc?.stop();
    await Promise.all([receiver?.stop(), media?.stop(), platform?.stop(), podcast?.stop()]);
  });

  afterEach(async function () {
    if (!browser) return;
    const name = (this.currentTest?.title ?? 'test').replace(/[^a-z0-9]+/gi, '-').slice(0, 60).toLowerCase();
    await browser.screenshot(`console-${name}`);
  });

  /** The violations axe reports, as lines a failure can show. */
  const axe = async () => (await axeViolations(page)).map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
  const rowOf = (url: string) => page.locator('table.jobs tbody tr', { has: page.getByRole('link', { name: url, exact: true }) });
  const submit = async (url: string, webhook?: string) => {
    await page.goto(`${svc.gateway.url}/#/jobs`);
    await page.getByLabel('Media URL').fill(url);
    if (webhook) {
      await page.getByText('Options', { exact: true }).click();
      await page.getByLabel('Webhook URL').fill(webhook);
    }
    await page.getByRole('button', { name: 'Submit' }).click();
    const accepted = page.getByRole('status').filter({ hasText: 'Job accepted' });
    await accepted.waitFor();
    return (await accepted.getByRole('link').textContent())!.trim();
  };

  it('signs in: a wrong key is refused in the API\'s words, the right one opens the jobs list and lives in sessionStorage only', async () => {
    const res = await page.goto(`${svc.gateway.url}/`);
    expect(res?.status()).to.equal(200);
    const csp = res!.headers()['content-security-policy']!;
    expect(csp).to.match(/script-src 'self' 'sha256-[A-Za-z0-9+/=]+';/).and.not.include('unsafe');
    expect(await axe(), 'sign-in page').to.deep.equal([]);

    await page.getByLabel('API key').fill('mj_not-a-real-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect(await page.getByRole('alert').textContent()).to.equal('Invalid API Key');

    await page.getByLabel('API key').fill(svc.apiKey);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
    await page.getByText('Signed in as e2e').waitFor();
    const stored = await page.evaluate(() => ({
      session: Object.fromEntries(Object.entries(sessionStorage)), local: localStorage.length, cookie: document.cookie, url: location.href,
    }));
    expect(stored.session['mediajobs.apiKey']).to.equal(svc.apiKey);
    expect(stored).to.include({ local: 0, cookie: '' });
    expect(stored.url).to.not.include(svc.apiKey);
    expect(await axe(), 'jobs page').to.deep.equal([]);
  });

  it('submits a job from the form and shows it reaching Completed in the list', async () => {
    completedId = await submit(media.mp4Url, receiver.url);
    const row = rowOf(media.mp4Url);
    await row.waitFor();
    // The list polls every 3 s: the badge changes without a reload.
    await row.locator('.badge', { hasText: /^Completed$/ }).waitFor({ timeout: 150_000 });
    expect((await svc.api('GET', `/jobs/${completedId}`)).body.status).to.equal('Completed');
    // The filter narrows the list to completed jobs, with this one in it.
    await page.getByRole('radio', { name: 'Completed' }).check();
    await eventually(async () => (await page.locator('table.jobs tbody tr').count()) === 1, 10_000);
    await rowOf(media.mp4Url).waitFor();
  });

  it("opens the job's page and plays the delivered file: the video's metadata loads", async () => {
    await rowOf(media.mp4Url).getByRole('link').click();
    await page.getByRole('heading', { name: 'Delivered file' }).waitFor();
    expect(page.url()).to.match(new RegExp(`#/jobs/${completedId}$`));
    const video = page.locator('video');
    await page.waitForFunction(() => {
      const v = document.querySelector('video');
      return v !== null && v.readyState >= 1 && v.duration > 0;
    }, undefined, { timeout: 30_000 });
    const meta = await video.evaluate((v: HTMLVideoElement) => ({ readyState: v.readyState, duration: v.duration, width: v.videoWidth, error: v.error?.code ?? null }));
    expect(meta.readyState).to.be.at.least(1);
    expect(meta.duration).to.be.greaterThan(0);
    expect(meta.width).to.be.greaterThan(0);
    expect(meta.error).to.equal(null);
    const download = page.getByRole('link', { name: /^Download / });
    // Signed anew on each read: the same file, whatever the signature.
    const withoutQuery = (u: string) => u.replace(/\?.*$/, '');
    expect(withoutQuery((await download.getAttribute('href'))!)).to.equal(withoutQuery((await svc.api('GET', `/jobs/${completedId}`)).body.s3_url as string));
    // The timeline has the acceptance, the webhook events and the end, each with a time.
    const timeline = await page.locator('.timeline li').allTextContents();
    expect(timeline[0]).to.include('Accepted (Pending)');
    expect(timeline.join('\n')).to.include('job_processing').and.include('job_completed').and.include('Ended: Completed');
    expect(await axe(), 'job page').to.deep.equal([]);
  });

  it("redelivers a job's webhook from the deliveries table: the receiver gets it again under the same webhook-id", async () => {
    const deliveries = page.locator('section', { has: page.getByRole('heading', { name: 'Webhook deliveries' }) });
    const completedRow = deliveries.locator('tr', { has: page.getByRole('cell', { name: 'job_completed', exact: true }) });
    await completedRow.getByRole('cell', { name: /^delivered/ }).waitFor({ timeout: 30_000 });
    const before = receiver.hooks.filter((h) => h.body.job_id === completedId && h.body.type === 'job_completed');
    expect(before).to.have.length(1);
    await completedRow.getByRole('button', { name: 'Redeliver job_completed' }).click();
    await deliveries.getByRole('status').filter({ hasText: 'job_completed queued for redelivery' }).waitFor();
    const again = await eventually(() => {
      const got = receiver.hooks.filter((h) => h.body.job_id === completedId && h.body.type === 'job_completed');
      return got.length === 2 ? got : undefined;
    }, 30_000);
    expect(again[1]!.webhookId).to.equal(before[0]!.webhookId);
    // The table says so once the dispatcher sent it (the page polls while a delivery is pending).
    await completedRow.getByRole('cell', { name: /redelivered 1×/ }).waitFor({ timeout: 30_000 });
  });

  it('cancels another job from its page: Cancelled in the page and in the API', async () => {
    const id = await submit(media.slowUrl(120));
    await page.getByRole('link', { name: id }).click();
    await page.getByRole('heading', { name: media.slowUrl(120) }).waitFor();
    await page.locator('.status-line .badge', { hasText: /^Processing$/ }).waitFor({ timeout: 90_000 });
    await page.getByRole('button', { name: 'Cancel job' }).click();
    await page.getByRole('status').filter({ hasText: 'Job cancelled' }).waitFor();
    await page.locator('.status-line .badge', { hasText: /^Cancelled$/ }).waitFor();
    expect(await page.getByRole('button', { name: 'Cancel job' }).count()).to.equal(0);
    expect((await svc.api('GET', `/jobs/${id}`)).body.status).to.equal('Cancelled');
  });

  it("shows the last 30 days' usage as charts: today's bar holds the two jobs", async () => {
    await page.getByRole('link', { name: 'Usage' }).click();
    await page.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
    const chart = page.locator('svg[data-chart="jobs-per-day"]');
    await chart.waitFor();
    expect(await chart.locator('rect.bar').count()).to.equal(30);
    const today = chart.locator('rect.bar').last();
    expect(Number(await today.getAttribute('height'))).to.be.greaterThan(0);
    expect(await today.locator('title').textContent()).to.match(/: 2$/);
    expect(await page.getByText('Jobs created: 2 in 30 days').count()).to.equal(1);
    const delivered = (await svc.api('GET', `/jobs/${completedId}`)).body.file_size as number;
    expect(delivered).to.be.greaterThan(0);
    expect(Number(await page.locator('svg[data-chart="bytes-per-day"] rect.bar').last().getAttribute('height'))).to.be.greaterThan(0);
    expect(await axe(), 'usage page').to.deep.equal([]);
  });

  it('is usable from the keyboard: Tab goes skip link, navigation, form, in that order; Enter follows a link and focuses its heading', async () => {
    // A fresh load: Tab starts at the top of the document.
    await page.goto(`${svc.gateway.url}/#/jobs`);
    await page.reload();
    await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
    const order: string[] = [];
    for (let i = 0; i < 10; i++) {
      await page.keyboard.press('Tab');
      order.push(await page.evaluate(() => {
        const el = document.activeElement as HTMLElement;
        const label = el.id ? document.querySelector(`label[for="${el.id}"]`)?.textContent : undefined;
        return `${el.tagName.toLowerCase()}:${(label ?? el.getAttribute('aria-label') ?? el.textContent ?? '').trim()}`;
      }));
    }
    expect(order).to.deep.equal([
      'a:Skip to content', 'a:Jobs', 'a:Batches', 'a:Usage', 'a:Settings', 'a:API reference', 'button:Sign out',
      'input:Media URL', 'button:Submit', 'summary:Options',
    ]);
    // Back to the Settings link, and Enter: the view's heading takes focus.
    for (let i = 0; i < 5; i++) await page.keyboard.press('Shift+Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).to.equal('Settings');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Settings', level: 1 }).waitFor();
    await eventually(() => page.evaluate(() => document.activeElement?.tagName === 'H1' && document.activeElement.textContent === 'Settings'), 5_000);
  });

  it('settings and batches pass axe too; a new webhook secret is shown once; nothing left loopback and no policy refused a load', async () => {
    await page.goto(`${svc.gateway.url}/#/settings`);
    await page.getByRole('heading', { name: 'Storage destinations' }).waitFor();
    await page.getByRole('cell', { name: 'not configured' }).first().waitFor();
    expect(await axe(), 'settings page').to.deep.equal([]);
    await page.getByRole('button', { name: 'Create secret' }).click();
    const secret = await page.getByLabel('New secret (shown this once: store it now)').inputValue();
    expect(secret).to.match(/^whsec_/);
    expect((await svc.api('GET', '/user/webhook-secret')).body.configured).to.equal(true);
    await page.getByRole('link', { name: 'Batches' }).click();
    await page.getByRole('heading', { name: 'Batches', level: 1 }).waitFor();
    expect(await axe(), 'batches page').to.deep.equal([]);
    expect(browser.offLoopback).to.deep.equal([]);
    expect(browser.pageErrors.filter((e) => /Content Security Policy|Refused to/i.test(e))).to.deep.equal([]);
  });

  it('a show submitted paused from the form: its batch page renames an episode, starts it, and shows each episode reach Completed', async () => {
    await page.goto(`${svc.gateway.url}/#/jobs`);
    await page.getByLabel('Media URL').fill(showUrl);
    await page.getByText('Options', { exact: true }).click();
    await page.getByLabel('Show: create paused').check();
    await page.getByRole('button', { name: 'Submit' }).click();
    await page.getByRole('status').filter({ hasText: 'Batch accepted' }).getByRole('link', { name: '2 episodes' }).click();
    await page.getByRole('heading', { name: showUrl, level: 1 }).waitFor();
    await page.locator('.status-line .badge', { hasText: /^paused$/ }).waitFor();
    expect(await axe(), 'paused batch page').to.deep.equal([]);

    await page.getByLabel('Episode one').fill('first-episode');
    await page.getByRole('button', { name: 'Save names' }).click();
    await page.getByRole('status').filter({ hasText: '1 renamed' }).waitFor();
    await page.getByRole('button', { name: 'Start batch' }).click();
    await page.getByRole('status').filter({ hasText: 'Started 2 jobs' }).waitFor();
    // Polled while processing: the page follows the batch to its end without a reload.
    await page.locator('.status-line .badge', { hasText: /^completed$/ }).waitFor({ timeout: 120_000 });
    const rows = page.locator('table tbody tr');
    expect(await rows.count()).to.equal(2);
    await eventually(async () => (await rows.locator('.badge', { hasText: /^Completed$/ }).count()) === 2, 15_000);
    const batchId = page.url().split('/').pop()!;
    const batch = (await svc.api('GET', `/batch/${batchId}`)).body;
    expect(batch).to.include({ status: 'completed', completed_episodes: 2 });
    const keys = await Promise.all((batch.episode_jobs as string[]).map(async (id) => (await svc.api('GET', `/jobs/${id}`)).body.s3_key as string));
    expect(keys.filter((k) => /\/first-episode\.mp4$/.test(k)), keys.join(', ')).to.have.length(1);
    // The batch is listed among this tab's.
    await page.getByRole('navigation').getByRole('link', { name: 'Batches' }).click();
    await page.getByRole('link', { name: showUrl }).waitFor();
  });
});
