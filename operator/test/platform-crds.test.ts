// The ProxyPool and MediaPlatform CRDs through the real kubectl on the local
// cluster, as an admin meets them: short names and the printer columns,
// the status subresource, and the validation that keeps credentials out of
// a pool's spec and --proxy out of a platform's yt-dlp options.
import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { startTestCluster, type TestCluster } from '../../local-cluster/test/support.js';

const crd = (f: string) => fileURLToPath(new URL(`../../crds/${f}`, import.meta.url));

const pool = (proxies: string) => `apiVersion: mediajobs.io/v1alpha1
kind: ProxyPool
metadata: {name: residential}
spec:
  coolDownSeconds: 300
  proxies:
${proxies}
`;

const platform = (extra: string) => `apiVersion: mediajobs.io/v1alpha1
kind: MediaPlatform
metadata: {name: video-platform}
spec:
  match: {hosts: ["www.video.example", "video.example:8443"]}
  maxRunning: 20
  proxyPool: residential
${extra}
`;

describe('ProxyPool and MediaPlatform CRDs with kubectl', function () {
  this.timeout(60_000);
  let tc: TestCluster;

  before(async () => {
    tc = await startTestCluster();
    await tc.kubectl(['apply', '-f', crd('proxypool.yaml'), '-f', crd('mediaplatform.yaml')]);
  });
  after(async () => tc?.stop());

  const apply = (name: string, text: string) => tc.kubectl(['apply', '-f', tc.manifest(name, text)], { allowFail: true });

  it('takes a pool and a platform, shows them under their short names with the printer columns, defaults filled in', async () => {
    const p = await apply('pool.yaml', pool(`  - {id: p1, url: "http://proxy-1.example:3128"}
  - {id: p2, urlSecretRef: {namespace: mediajobs, name: proxy-p2, key: url}}`));
    expect(p.code, p.stderr).to.equal(0);
    const m = await apply('platform.yaml', platform('  ytdlpArgs: ["--sleep-requests", "1"]'));
    expect(m.code, m.stderr).to.equal(0);
    const pp = await tc.kubectl(['get', 'pp']);
    expect(pp.stdout.split('\n')[0]).to.match(/^NAME\s+READY\s+TOTAL\s+AGE$/);
    expect(pp.stdout).to.match(/^residential\s+/m);
    const mp = await tc.kubectl(['get', 'mp']);
    expect(mp.stdout.split('\n')[0]).to.match(/^NAME\s+BREAKER\s+RUNNING\s+DISABLED\s+AGE$/);
    expect(mp.stdout).to.match(/^video-platform\s+false\s+/m);
    const stored = JSON.parse((await tc.kubectl(['get', 'mp', 'video-platform', '-o', 'json'])).stdout) as { spec: Record<string, unknown> };
    expect(stored.spec.breaker).to.deep.equal({ defences: 5, windowSeconds: 120, coolDownSeconds: 600 });
    expect(stored.spec.disabled).to.equal(false);
  });

  it('keeps status in its subresource: the columns show what the operator writes there', async () => {
    const patched = await tc.kubectl(['patch', 'mp', 'video-platform', '--subresource=status', '--type=merge', '-p', '{"status":{"breaker":"Open","running":3}}']);
    expect(patched.code, patched.stderr).to.equal(0);
    await tc.kubectl(['patch', 'pp', 'residential', '--subresource=status', '--type=merge', '-p', '{"status":{"ready":1,"total":2}}']);
    expect((await tc.kubectl(['get', 'mp', 'video-platform'])).stdout).to.match(/^video-platform\s+Open\s+3\s+false\s+/m);
    expect((await tc.kubectl(['get', 'pp', 'residential'])).stdout).to.match(/^residential\s+1\s+2\s+/m);
    // A spec write leaves the status alone, and a status write through the main resource is ignored.
    await tc.kubectl(['patch', 'mp', 'video-platform', '--type=merge', '-p', '{"spec":{"maxRunning":5},"status":{"breaker":"Closed"}}']);
    expect((await tc.kubectl(['get', 'mp', 'video-platform', '-o', 'jsonpath={.status.breaker}/{.spec.maxRunning}'])).stdout).to.equal('Open/5');
  });

  it('refuses credentials in an inline proxy URL, a scheme it cannot chain, both or neither of url and urlSecretRef, and repeated ids', async () => {
    const cases: [string, string, RegExp][] = [
      ['userinfo', '  - {id: p1, url: "http://user:secret@proxy-1.example:3128"}', /must not hold credentials: give the URL with them through urlSecretRef/],
      ['ftp', '  - {id: p1, url: "ftp://proxy-1.example:21"}', /spec\.proxies\[0\]\.url/],
      ['both', '  - {id: p1, url: "http://proxy-1.example:3128", urlSecretRef: {namespace: a, name: b, key: c}}', /exactly one of url and urlSecretRef/],
      ['neither', '  - {id: p1}', /exactly one of url and urlSecretRef/],
      ['not a DNS label', '  - {id: P_1, url: "http://proxy-1.example:3128"}', /spec\.proxies\[0\]\.id/],
      ['repeated', '  - {id: p1, url: "http://a.example:3128"}\n  - {id: p1, url: "socks5h://b.example:1080"}', /Duplicate value/],
    ];
    for (const [what, proxies, message] of cases) {
      const r = await apply(`bad-${what.replace(/ /g, '-')}.yaml`, pool(proxies).replace('name: residential', 'name: bad'));
      expect(r.code, what).to.not.equal(0);
      expect(r.stderr, what).to.match(message);
      // The refusal never echoes a credential back.
      expect(r.stderr, what).to.not.contain('secret@');
    }
    const ok = await apply('socks.yaml', pool('  - {id: s1, url: "socks5h://exit.example:1080"}').replace('name: residential', 'name: socks'));
    expect(ok.code, ok.stderr).to.equal(0);
  });

  it('refuses --proxy in ytdlpArgs with a message pointing at ProxyPool, and options off the allow-list', async () => {
    const proxy = await apply('proxy-arg.yaml', platform('  ytdlpArgs: ["--proxy", "http://elsewhere.example:3128"]'));
    expect(proxy.code).to.not.equal(0);
    expect(proxy.stderr).to.contain('--proxy is not allowed: route a platform\'s downloads through a ProxyPool');
    const exec = await apply('exec-arg.yaml', platform('  ytdlpArgs: ["--exec", "touch /tmp/x"]'));
    expect(exec.code).to.not.equal(0);
    expect(exec.stderr).to.contain('only these yt-dlp options are allowed');
    const eq = await apply('eq-arg.yaml', platform('  ytdlpArgs: ["--extractor-args=youtube:player_client=web", "--retries", "3"]'));
    expect(eq.code, eq.stderr).to.equal(0);
  });
});
