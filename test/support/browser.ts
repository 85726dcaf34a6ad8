// A real browser for tests and benchmarks: Debian's Chromium
// (/usr/bin/chromium, `apt-get install chromium`; .ci/run installs it)
// driven by playwright-core over a pipe, headless, with a fresh profile
// each launch. It talks to loopback only: every host name but localhost
// resolves to nothing inside the browser, and any request to another
// address is recorded as a violation for the test to fail on. axe-core is
// evaluated in the page through the DevTools protocol, which the page's
// Content-Security-Policy does not govern, so the page under test keeps its
// real policy.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** The flags of every launch (issue 38): no GPU, no QUIC, no first-run, background or update traffic. */
export const CHROMIUM_FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1',
];

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Screenshots of the browser tests, git-ignored (.cache/). */
export const SCREENSHOTS = join(ROOT, '.cache/screenshots');

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Requests the browser made to anything but loopback (none expected). */
  offLoopback: string[];
  /** Console errors and CSP refusals the page reported. */
  pageErrors: string[];
  /** Saves a full-page PNG as .cache/screenshots/<name>.png and answers its path. */
  screenshot(name: string): Promise<string>;
  close(): Promise<void>;
}

const LOOPBACK_URL = /^(https?|wss?):\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?\//;

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (Debian's package), or set CHROMIUM_PATH`);
  const profile = mkdtempSync(join(tmpdir(), 'mj-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS, viewport: { width: 1280, height: 900 },
  });
  const offLoopback: string[] = [];
  const pageErrors: string[] = [];
  context.on('request', (r) => {
    const url = r.url();
    if (!LOOPBACK_URL.test(url) && !url.startsWith('data:') && !url.startsWith('about:') && !url.startsWith('blob:')) offLoopback.push(url);
  });
  const page = context.pages()[0] ?? await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push(m.text()); });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  mkdirSync(SCREENSHOTS, { recursive: true });
  return {
    context, page, offLoopback, pageErrors,
    async screenshot(name) {
      const path = join(SCREENSHOTS, `${name}.png`);
      await page.screenshot({ path, fullPage: true });
      return path;
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** axe-core's WCAG 2 A/AA rules over the page as it is now: the violations of `minImpact` or worse. */
export async function axeViolations(page: Page, minImpact: 'serious' | 'critical' = 'serious'): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  const all = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(ctx: unknown, opts: unknown): Promise<{ violations: AxeViolation[] }> } }).axe;
    const r = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }));
  });
  const worse = minImpact === 'critical' ? ['critical'] : ['serious', 'critical'];
  return all.filter((v) => v.impact !== null && worse.includes(v.impact));
}
