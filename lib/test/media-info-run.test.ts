// runBounded, the deadline of every gateway lookup's yt-dlp: at the deadline
// the whole process group ends, so nothing the tool started outlives it.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { runBounded } from '../src/media-info/run.js';

/** Whether a process still runs (a zombie waiting for its reaper has ended). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

async function until(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return check();
}

describe('media-info: a bounded run', () => {
  it('ends what the tool started too at the deadline, not only the tool', async () => {
    // A stand-in for yt-dlp that starts a helper of its own and waits for it.
    const run = await runBounded(['sh', '-c', 'sleep 30 & echo $!; wait'], { timeoutMs: 500 });
    expect(run.timedOut).to.equal(true);
    const helper = Number(run.stdout.trim());
    expect(helper).to.be.greaterThan(0);
    expect(await until(() => !running(helper), 2000), `helper ${helper} still runs`).to.equal(true);
  });

  it('ends the group when the caller aborts (the client went away)', async () => {
    const ac = new AbortController();
    const pending = runBounded(['sh', '-c', 'sleep 30 & echo $!; wait'], { timeoutMs: 30_000, signal: ac.signal });
    await new Promise((r) => setTimeout(r, 300));
    ac.abort();
    const run = await pending;
    expect(run.aborted).to.equal(true);
    const helper = Number(run.stdout.trim());
    expect(await until(() => !running(helper), 2000), `helper ${helper} still runs`).to.equal(true);
  });

  it('leaves a run that ends by itself as it is: its output and exit code', async () => {
    const run = await runBounded(['sh', '-c', 'echo out; echo err >&2; exit 3'], { timeoutMs: 5000 });
    expect(run).to.include({ exitCode: 3, timedOut: false, aborted: false, stdout: 'out\n', stderr: 'err\n' });
  });
});
