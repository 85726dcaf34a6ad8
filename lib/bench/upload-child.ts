// The uploader side of upload-vs-rclone.ts, in its own process so that its
// peak memory is the uploader's alone (not the benchmark driver's, nor the
// server's). Reads {destination, file, key, contentType} as JSON on stdin,
// streams the file through createProvider(destination).upload() as the
// runner does, and prints one JSON line with the figures.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createProvider } from '../src/storage/index.js';

interface ChildInput {
  destination: unknown;
  file: string;
  key: string;
  contentType?: string;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function main(): Promise<void> {
  const input = JSON.parse(await readStdin()) as ChildInput;
  const provider = await createProvider(input.destination);
  const { size } = await stat(input.file);
  // maxRSS counts from process start: what node, tsx and the SDKs take before a byte moves.
  const baselineRssBytes = process.memoryUsage().rss;
  // Where the memory goes during the upload: JS heap vs buffers outside it.
  const peak = { heapTotal: 0, arrayBuffers: 0 };
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    peak.heapTotal = Math.max(peak.heapTotal, m.heapTotal);
    peak.arrayBuffers = Math.max(peak.arrayBuffers, m.arrayBuffers);
  }, 50);
  const started = performance.now();
  const result = await provider.upload(input.key, createReadStream(input.file), {
    size,
    ...(input.contentType ? { contentType: input.contentType } : {}),
  });
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  process.stdout.write(
    `${JSON.stringify({
      bytes: result.size,
      seconds,
      baselineRssBytes,
      peakHeapBytes: peak.heapTotal,
      peakBuffersBytes: peak.arrayBuffers,
      // resourceUsage().maxRSS is in KiB: the process's peak resident memory.
      peakRssBytes: process.resourceUsage().maxRSS * 1024,
    })}\n`,
  );
}

main().catch((err: unknown) => {
  // StorageError messages carry no secrets (see types.ts); anything else is reduced to its name.
  const e = err as { name?: string; message?: string; code?: string; reason?: string };
  process.stderr.write(`upload failed: ${e.name === 'StorageError' ? `${e.message} [${e.code}/${e.reason}]` : (e.name ?? 'error')}\n`);
  process.exit(1);
});
