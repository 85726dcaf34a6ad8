// The check of a stored spec (spec-check.ts) is the CRD's: every rule the
// CRDs carry has its TypeScript twin and every pattern its words; a table
// of bad MediaJobs and MediaBatches is refused by the real kubectl against
// the local cluster with the full CRDs and by the check alike, naming the
// same field; what the gateway builds from an accepted request passes; and a
// problem never echoes the value it is about.
import { expect } from 'chai';
import { stringify } from 'yaml';
import { startTestCluster, type TestCluster } from '../../local-cluster/test/support.js';
import { parseJobRequest } from '../src/job-options.js';
import { buildMediaJob } from '../src/mediajob/build.js';
import { allCrds, PATTERN_PROBLEMS, RULE_TWINS, type SchemaNode } from '../src/mediajob/crd-source.js';
import { generatedFiles } from '../src/mediajob/generate-crds.js';
import {
  invalidSpecMessage, jobOptionProblems, mediaBatchSpecProblems, mediaJobSpecProblems,
} from '../src/mediajob/spec-check.js';

const OWNER = '9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d';
const JOB = { url: 'https://media.example.com/v/1', owner: { apiKeyId: OWNER } };
const BATCH = { showUrl: 'https://www.youtube.com/playlist?list=PLabcdefghijkl', owner: { apiKeyId: OWNER }, episodes: [{ url: 'https://media.example.com/e/1' }] };

/** Every schema node, depth first. */
function* nodes(node: SchemaNode): Generator<SchemaNode> {
  yield node;
  for (const child of Object.values(node.properties ?? {})) yield* nodes(child);
  if (node.items) yield* nodes(node.items);
  if (node.additionalProperties) yield* nodes(node.additionalProperties);
}

/** A bad spec, the field both the apiserver and the check name, and the check's words. */
type Case = [what: string, spec: Record<string, unknown>, field: string, problem: string];

const BAD_JOBS: Case[] = [
  ['a codec the service has not', { ...JOB, videoCodec: 'av1' }, 'spec.videoCodec', 'must be one of copy, h264, h265, vp9'],
  ['clipEnd before clipStart', { ...JOB, clipStart: '00:04', clipEnd: '00:02' }, 'spec.clipEnd', 'must be greater than clipStart'],
  ['clipEnd 0 alone', { ...JOB, clipEnd: '0' }, 'spec.clipEnd', 'must be greater than 0'],
  ['a clip time in no form', { ...JOB, clipStart: 'soon' }, 'spec.clipStart', 'must be a time as HH:MM:SS, MM:SS or seconds (e.g. 01:02:03, 2:30, 90, 12.5)'],
  ['a file:// source', { ...JOB, url: 'file:///etc/passwd' }, 'spec.url', 'must be an http or https URL'],
  ['a filename that climbs out', { ...JOB, filename: '../etc' }, 'spec.filename', 'must not contain "..", "/", "\\" or a NUL byte'],
  ['an absolute folder', { ...JOB, folder: '/abs' }, 'spec.folder', 'must not start with "/" or "\\"'],
  ['a blank folder', { ...JOB, folder: '   ' }, 'spec.folder', 'must not be empty or whitespace-only'],
  ['videoQuality above 51', { ...JOB, videoQuality: 60 }, 'spec.videoQuality', 'must be at most 51'],
  ['maxDuration 0', { ...JOB, maxDuration: 0 }, 'spec.maxDuration', 'must be at least 1'],
  ['a string for a boolean', { ...JOB, audioOnly: 'always' }, 'spec.audioOnly', 'must be a boolean (true or false)'],
  ['an owner that is not a UUID', { ...JOB, owner: { apiKeyId: 'not-a-uuid' } }, 'spec.owner.apiKeyId', 'must be a UUID'],
  ['drive inline', { ...JOB, destination: { type: 'inline', provider: 'drive', secretName: 'creds' } }, 'spec.destination.provider', 'drive is available as a saved destination only, never inline'],
  ['a Secret name that is no DNS name', { ...JOB, destination: { type: 'saved', secretName: 'Not_A_Name' } }, 'spec.destination.secretName', 'must be a DNS subdomain name: lower-case letters, digits, "-" and "."'],
  ['a key limit below its bound', { ...JOB, limits: { maxFilesizeBytes: 0 } }, 'spec.limits.maxFilesizeBytes', 'must be at least 1'],
];

const BAD_BATCHES: Case[] = [
  ['an option the service has not', { ...BATCH, options: { videoCodec: 'av1' } }, 'spec.options.videoCodec', 'must be one of copy, h264, h265, vp9'],
  ['its clip backwards', { ...BATCH, options: { clipStart: '10', clipEnd: '5' } }, 'spec.options.clipEnd', 'must be greater than clipStart'],
  ['an episode that is no http URL', { ...BATCH, episodes: [{ url: 'https://media.example.com/e/1' }, { url: 'ftp://media.example.com/e/2' }] }, 'spec.episodes[1].url', 'must be an http or https URL'],
  ['an episode without its URL', { ...BATCH, episodes: [{ title: 'x' }] }, 'spec.episodes[0].url', 'is required'],
  ['no showUrl', { owner: BATCH.owner }, 'spec.showUrl', 'is required'],
  ['an unknown kind', { ...BATCH, kind: 'album' }, 'spec.kind', 'must be one of show, playlist'],
];

describe('spec check: the CRD\'s schema and rules, for a spec the apiserver did not check', () => {
  it('has a TypeScript twin for every rule on what the CRDs store (rules on a change excepted), and words for every pattern', () => {
    const rules = allCrds().flatMap((crd) => [...nodes(crd.spec.versions[0]!.schema.openAPIV3Schema)].flatMap((n) => n['x-kubernetes-validations'] ?? []));
    const stored = rules.filter((r) => !r.rule.includes('oldSelf')).map((r) => r.message);
    expect(stored).to.have.length.greaterThan(2);
    expect(stored.filter((m) => !RULE_TWINS[m]), 'rules without a twin').to.deep.equal([]);
    const patterns = allCrds().flatMap((crd) => [...nodes(crd.spec.versions[0]!.schema.openAPIV3Schema)]
      .flatMap((n) => [n.pattern, ...(n.allOf ?? []).map((a) => a.pattern)]).filter((p): p is string => p !== undefined));
    expect([...new Set(patterns)].filter((p) => !PATTERN_PROBLEMS[p]), 'patterns without words').to.deep.equal([]);
  });

  for (const [what, spec, field, problem] of BAD_JOBS) {
    it(`a MediaJob with ${what}: ${field}`, () => {
      expect(mediaJobSpecProblems(spec)).to.deep.equal([`${field}: ${problem}`]);
    });
  }
  for (const [what, spec, field, problem] of BAD_BATCHES) {
    it(`a MediaBatch with ${what}: ${field}`, () => {
      expect(mediaBatchSpecProblems(spec)).to.deep.equal([`${field}: ${problem}`]);
    });
  }

  it('reads clip times as the gateway and the runner do: minutes and seconds below 60, which the CRD\'s shape alone lets by', () => {
    const problem = 'must be a time as HH:MM:SS, MM:SS or seconds, with minutes and seconds below 60';
    expect(mediaJobSpecProblems({ ...JOB, clipStart: '2:75' })).to.deep.equal([`spec.clipStart: ${problem}`]);
    expect(mediaJobSpecProblems({ ...JOB, clipEnd: '1:00:60' })).to.deep.equal([`spec.clipEnd: ${problem}`]);
    expect(mediaJobSpecProblems({ ...JOB, clipStart: '1:02:03.5', clipEnd: '90:00' })).to.deep.equal([]);
  });

  it('names every problem, judges the rules only once the fields are right, and never echoes a value', () => {
    const secret = 'https://hooks.example.com/x?token=s3cr3t';
    const problems = mediaJobSpecProblems({ url: 'file:///s3cr3t', webhookUrl: 'ftp://s3cr3t', format: 's3cr3t', clipStart: 5, clipEnd: '1' });
    expect(problems).to.deep.equal([
      'spec.url: must be an http or https URL', 'spec.format: must be one of mp4, mkv, webm, mov, m4a, mp3, ogg, opus',
      'spec.clipStart: must be a string', 'spec.webhookUrl: must be an http or https URL',
    ]);
    expect(problems.join()).to.not.contain('s3cr3t');
    expect(mediaJobSpecProblems({ ...JOB, webhookUrl: secret })).to.deep.equal([]);
    expect(mediaJobSpecProblems(undefined)).to.deep.equal(['spec: is required']);
    expect(mediaJobSpecProblems({})).to.deep.equal(['spec.url: is required']);
    expect(invalidSpecMessage(['a', 'b'])).to.equal('a; b');
    expect(invalidSpecMessage(['1', '2', '3', '4', '5', '6', '7'])).to.equal('1; 2; 3; 4; 5 (and 2 more)');
  });

  it('passes what the gateway builds from any accepted request, and what a manifest may leave to the defaults', () => {
    const bodies = [
      {}, { clip_start: '1:02', clip_end: '90' }, { format: 'webm', video_codec: 'h264', audio_bitrate: '64k' }, { audio_only: true, quality_preset: 'low' },
      { filename: 'Ünïcode name.', folder: 'talks/2026', max_resolution: 1080, max_duration: 600 }, { clip_end: '0.5' },
    ];
    for (const body of bodies) {
      const parsed = parseJobRequest({ url: 'https://media.example.com/v', ...body });
      if (!parsed.ok) throw new Error(parsed.error);
      const mj = buildMediaJob({ jobId: '6f1c2d3e-4a5b-4c6d-8e7f-001122334455', apiKeyId: OWNER, namespace: 'default', options: parsed.request.options });
      expect(mediaJobSpecProblems(mj.spec), JSON.stringify(body)).to.deep.equal([]);
      expect(jobOptionProblems(mj.spec), JSON.stringify(body)).to.deep.equal([]);
    }
    expect(mediaJobSpecProblems(JOB)).to.deep.equal([]);
    expect(mediaBatchSpecProblems(BATCH)).to.deep.equal([]);
  });

  it('the runner\'s check reads the options only: not the owner, the job id or the destination it never acts on', () => {
    expect(jobOptionProblems({ url: 'https://media.example.com/v', jobId: 'j', owner: { apiKeyId: 'k' }, destination: { type: 'inline', provider: 'drive' } })).to.deep.equal([]);
    expect(jobOptionProblems({ url: 'https://media.example.com/v', clipStart: '00:04', clipEnd: '00:02' })).to.deep.equal(['spec.clipEnd: must be greater than clipStart']);
  });
});

describe('spec check: the apiserver with the full CRDs refuses the same specs, naming the same field', function () {
  this.timeout(60_000);
  let t: TestCluster;

  before(async () => {
    t = await startTestCluster();
    for (const f of generatedFiles().filter((g) => g.path.startsWith('crds/'))) await t.kubectl(['apply', '-f', t.manifest(f.path.slice(5), f.text)]);
  });

  after(async () => {
    await t?.stop();
  });

  const refused = async (kind: 'MediaJob' | 'MediaBatch', name: string, spec: Record<string, unknown>) => {
    const manifest = stringify({ apiVersion: 'mediajobs.io/v1alpha1', kind, metadata: { name, namespace: 'default' }, spec });
    const res = await t.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: manifest, allowFail: true });
    return res.code === 0 ? undefined : res.stderr;
  };

  it('refuses every bad spec of the table with the field the check names; takes the good ones', async () => {
    for (const [kind, table] of [['MediaJob', BAD_JOBS], ['MediaBatch', BAD_BATCHES]] as const) {
      for (const [i, [what, spec, field]] of table.entries()) {
        const stderr = await refused(kind, `bad-${i}`, spec);
        expect(stderr, `${kind} with ${what}`).to.be.a('string');
        // The apiserver's path of a list item is field[i] too; a missing one it names as the parent's Required value.
        expect(stderr, `${kind} with ${what}`).to.contain(`${field}:`);
      }
    }
    expect(await refused('MediaJob', 'good', JOB)).to.equal(undefined);
    expect(await refused('MediaBatch', 'good', BATCH)).to.equal(undefined);
  });
});
