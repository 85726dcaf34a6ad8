// The package README's examples run as written: each ```ts block not marked
// `no-run`, as its own module (tsx), against the whole service, with
// `@mediajobs/client` resolved to this checkout's source and the README's
// example media URL served from loopback.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expect } from 'chai';
import { tsxCommand } from '../../../test/support/tsx.js';
import { startMediaServer, type MediaServer } from '../../../test/support/media.js';
import { startService, type Service } from '../../../test/e2e/support.js';

const README = fileURLToPath(new URL('../README.md', import.meta.url));
const SOURCE = pathToFileURL(fileURLToPath(new URL('../src/index.ts', import.meta.url))).href;
const EXAMPLE_MEDIA = 'https://media.example/video.mp4';

/** The runnable blocks: their heading and code. */
export function runnableBlocks(markdown: string): { heading: string; code: string }[] {
  const blocks: { heading: string; code: string }[] = [];
  let heading = '';
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith('#')) heading = line.replace(/^#+\s*/, '');
    const fence = /^```(\S+)(.*)$/.exec(line);
    if (!fence) continue;
    const end = lines.indexOf('```', i + 1);
    if (fence[1] === 'ts' && !/\bno-run\b/.test(fence[2]!)) blocks.push({ heading, code: lines.slice(i + 1, end).join('\n') });
    i = end;
  }
  return blocks;
}

describe('@mediajobs/client README examples', function () {
  this.timeout(240_000);
  let svc: Service;
  let media: MediaServer;
  let dir: string;
  const blocks = runnableBlocks(readFileSync(README, 'utf8'));

  before(async () => {
    media = await startMediaServer();
    svc = await startService();
    dir = mkdtempSync(join(tmpdir(), 'mj-readme-'));
  });

  after(async () => {
    await svc?.stop();
    await media?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('has runnable examples for configuration, jobs, paging, errors, usage and webhooks', () => {
    expect(blocks.map((b) => b.heading)).to.include.members(['Configure', 'Jobs', 'Every job, page by page', 'Errors', 'Usage, lookups, notifications', 'Webhooks']);
  });

  for (const [i, block] of blocks.entries()) {
    it(`example ${i + 1} (${block.heading}) runs and exits 0`, async () => {
      const code = block.code.replaceAll("'@mediajobs/client'", `'${SOURCE}'`).replaceAll(EXAMPLE_MEDIA, media.mp4Url);
      const file = join(dir, `example-${i + 1}.mts`);
      writeFileSync(file, code);
      const [cmd, ...args] = tsxCommand(file);
      const env = { ...process.env, MEDIAJOBS_URL: svc.gateway.url, MEDIAJOBS_API_KEY: svc.apiKey };
      const run = await new Promise<{ err: Error | null; stdout: string; stderr: string }>((resolve) => {
        execFile(cmd!, [...args, file], { env, cwd: dir, timeout: 180_000 }, (err, stdout, stderr) => resolve({ err, stdout, stderr }));
      });
      expect(run.err, `${run.stderr}\n${run.stdout}`).to.equal(null);
      if (block.heading === 'Jobs') expect(run.stdout).to.match(/^Completed http:\/\/127\.0\.0\.1:\d+\/files\//m);
      if (block.heading === 'Errors') expect(run.stdout).to.match(/^404 /);
    });
  }
});
