// crds/*.yaml installed the way local mode installs them
// (scripts/apply-crds.ts, which scripts/local-mode.ts calls) is stored as
// written: every CEL rule, enum, default, bound, pattern and printer column
// of the file is in the API server's copy. The only differences allowed are
// the fields the API server defaults itself, listed below. (client-node's
// typed clients drop `enum`, `default` and every `x-kubernetes-*` key on
// the way: issue 34.)
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { applyCrds, CRDS_DIR, FIELD_MANAGER, kubeRequest } from '../scripts/apply-crds.js';
import { kubeConfigFor, startTestCluster, type TestCluster } from '../local-cluster/test/support.js';

type Json = Record<string, unknown>;

/**
 * What the API server sets in a CRD's spec when the manifest leaves it out
 * (apiextensions v1 SetDefaults_CustomResourceDefinitionSpec): the
 * conversion strategy and preserveUnknownFields. The names' singular and
 * listKind and each version's served and storage are defaulted too, but our
 * files set them all.
 */
function withServerDefaults(spec: Json): Json {
  return { conversion: { strategy: 'None' }, preserveUnknownFields: false, ...spec };
}

/** Every value under `key` anywhere in `doc`, with its path. */
function collect(doc: unknown, key: string, path = ''): string[] {
  if (Array.isArray(doc)) return doc.flatMap((v, i) => collect(v, key, `${path}[${i}]`));
  if (doc === null || typeof doc !== 'object') return [];
  return Object.entries(doc as Json).flatMap(([k, v]) => [
    ...(k === key ? [`${path}.${k}=${JSON.stringify(v)}`] : []),
    ...collect(v, key, `${path}.${k}`),
  ]);
}

describe('CRDs installed by local mode (scripts/apply-crds.ts)', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  const files = ['mediabatch.yaml', 'mediajob.yaml', 'mediaplatform.yaml', 'proxypool.yaml'];
  const fileDoc = (f: string) => parseYaml(readFileSync(join(CRDS_DIR, f), 'utf8')) as Json;
  const stored = async (name: string) => kubeRequest(kubeConfigFor(tc.cluster), 'GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);

  before(async () => {
    tc = await startTestCluster();
  });
  after(async () => tc?.stop());

  it('are stored exactly as crds/*.yaml says, on a first install and on a restart\'s second one', async () => {
    for (const round of ['first', 'again']) {
      const names = await applyCrds(kubeConfigFor(tc.cluster));
      expect(names, round).to.deep.equal(['mediabatches.mediajobs.io', 'mediajobs.mediajobs.io', 'mediaplatforms.mediajobs.io', 'proxypools.mediajobs.io']);
      for (const f of files) {
        const want = fileDoc(f);
        const got = await stored((want.metadata as Json).name as string);
        expect(got.spec, `${round}: ${f}`).to.deep.equal(withServerDefaults(want.spec as Json));
        expect((got.metadata as Json).labels, f).to.deep.equal((want.metadata as Json).labels);
        const managers = ((got.metadata as Json).managedFields as { manager: string; operation: string }[]).map((m) => `${m.manager}/${m.operation}`);
        expect(managers, f).to.deep.equal([`${FIELD_MANAGER}/Apply`]);
      }
    }
  });

  it('keeps what a typed round trip would lose: the CEL rules, enums, defaults and preserve-unknown-fields, counted', async () => {
    await applyCrds(kubeConfigFor(tc.cluster));
    for (const f of files) {
      const want = fileDoc(f);
      const got = await stored((want.metadata as Json).name as string);
      for (const key of ['x-kubernetes-validations', 'enum', 'default', 'x-kubernetes-preserve-unknown-fields', 'maxLength', 'maximum', 'pattern', 'additionalPrinterColumns']) {
        const inFile = collect(want.spec, key);
        if (['x-kubernetes-validations', 'enum', 'additionalPrinterColumns'].includes(key)) expect(inFile.length, `${f} has ${key}`).to.be.greaterThan(0);
        expect(collect(got.spec, key), `${f}: ${key}`).to.deep.equal(inFile);
      }
    }
  });
});
