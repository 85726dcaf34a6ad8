// The child process of own-reads-chain.test.ts's https-upstream case: the
// runner's own reads under an egress chained to UPSTREAM, in a process
// started with NODE_EXTRA_CA_CERTS naming the https proxy's and the site's
// certificate, as a runner image trusts a private CA (Node reads it only at
// start, so the test cannot give it to its own process). Prints one JSON
// array: what fetchText and egressFetch got for each of URLS.
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { egressFetch, withEgress } from '../src/egress-proxy.js';
import { fetchText } from '../src/live.js';

const urls = JSON.parse(process.env.URLS ?? '[]') as string[];
const results = await withEgress({ policy: new OutboundPolicy({ allowed: ['127.0.0.1/32'] }), upstream: process.env.UPSTREAM! }, async () => {
  const out: { url: string; text?: string; status?: number; body?: string; error?: string }[] = [];
  for (const url of urls) {
    try {
      const text = await fetchText(url, {}, { timeoutMs: 10_000 });
      const res = await egressFetch(url, { signal: AbortSignal.timeout(10_000) });
      out.push({ url, ...(text !== undefined ? { text } : {}), status: res.status, body: await res.text() });
    } catch (err) {
      out.push({ url, error: String((err as Error)?.message ?? err) });
    }
  }
  return out;
});
process.stdout.write(`${JSON.stringify(results)}\n`);
