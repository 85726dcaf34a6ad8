// A scripted stand-in for the runner image, for operator tests: a real pod
// process that speaks the runner protocol (status patches through the API,
// a termination report, the exit codes) with an outcome chosen by the job's
// URL, e.g. scripted://complete?sleepMs=500, scripted://fail, scripted://warning,
// scripted://hang (runs until it is stopped). Parameters:
// - category=<error category>: the category a fail or warning reports
//   (none without it, as a runner from before categories);
// - storageKey=<key>: the key a completion reports (without it, the key a
//   runner names the job's file with: objectKey of its folder and filename,
//   `videos/<job id>.mp4` with neither), as a runner that lies would;
// - upload=<bytes>: the completion first stores that many bytes under its
//   key through the destination the operator gave the pod (an upload grant
//   on managed S3), as a runner does; the report still says fileSize 1234
//   (reportedSize=<n> to say another), as a runner that lies would. On
//   local managed storage a completion without upload= and storageKey=
//   stores the size it reports (1234, or reportedSize) all the same, named
//   as the job's (its owner record), since the operator takes no report of
//   a file it cannot find there (docs/adr/0012 "Local managed storage").
//   A key another file has gets `-<job id 8>`, as the runner's;
// - ytdlp=<version>, ffmpeg=<version>: the tool versions the attempt
//   reports in status.tools at its start, as the runner does;
// - times=<n>: only the first n attempts (MEDIAJOB_ATTEMPT, set by the
//   operator) do the scripted thing; later ones complete at once.
// Every report carries fixed phaseSeconds (PHASE_SECONDS), whatever the
// time taken, so tests can assert the operator's histogram exactly.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import { GROUP, MEDIAJOB_PLURAL, RUNNER_EXIT, VERSION, type MediaJobSpec, type RunnerDefence, type RunnerReport, type RunnerTools } from '@mediajobs/lib/mediajob/types';
import { isStorageError, objectKey } from '@mediajobs/lib/storage/types';
import { createProvider, destinationKeyLayout, type Destination } from '@mediajobs/lib/storage/index';
import { PHASE_SECONDS } from './scripted-phases.js';

const spec = JSON.parse(process.env.MEDIAJOB_SPEC!) as MediaJobSpec;
const url = new URL(spec.url);
const attempt = Number(process.env.MEDIAJOB_ATTEMPT ?? 1);
const times = Number(url.searchParams.get('times') ?? Infinity);
const scripted = attempt <= times;
const outcome = scripted ? url.pathname.slice(1) as 'complete' | 'fail' | 'warning' | 'hang' : 'complete';
const sleepMs = scripted ? Number(url.searchParams.get('sleepMs') ?? 0) : 0;
const category = url.searchParams.get('category') ?? undefined;
// defence=<kind>: a fail reports the platform's defence as the runner does (status.defence), with the
// proxy and cookie file its env names (RUNNER_PROXY_ID, RUNNER_COOKIE_ID); retryAfter=<s> its Retry-After.
const defenceKind = url.searchParams.get('defence') ?? undefined;
const retryAfter = url.searchParams.get('retryAfter');
const defence: RunnerDefence | undefined = defenceKind ? {
  kind: defenceKind as RunnerDefence['kind'], ...(retryAfter && { retryAfterSeconds: Number(retryAfter) }),
  ...(process.env.RUNNER_PROXY_ID && { proxyId: process.env.RUNNER_PROXY_ID }), ...(process.env.RUNNER_COOKIE_ID && { cookieId: process.env.RUNNER_COOKIE_ID }),
} : undefined;

const kc = new k8s.KubeConfig();
kc.loadFromDefault();
const api = kc.makeApiClient(k8s.CustomObjectsApi);
const report = (status: RunnerReport) => api.patchNamespacedCustomObjectStatus({
  group: GROUP, version: VERSION, plural: MEDIAJOB_PLURAL,
  namespace: process.env.MEDIAJOB_NAMESPACE!, name: process.env.MEDIAJOB_NAME!, body: { status },
}, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));

function finish(r: RunnerReport, code: number): never {
  const path = process.env.LOCAL_CLUSTER_TERMINATION_LOG;
  if (path) writeFileSync(path, JSON.stringify(r));
  process.exit(code);
}

const tools: RunnerTools = {
  ...(url.searchParams.has('ytdlp') && { ytdlp: url.searchParams.get('ytdlp')! }), ...(url.searchParams.has('ffmpeg') && { ffmpeg: url.searchParams.get('ffmpeg')! }),
};
await report({ step: 'Downloading', progress: 0, ...(Object.keys(tools).length > 0 && { tools }) });
if (outcome === 'hang') await new Promise((r) => setTimeout(r, 120_000));
await new Promise((r) => setTimeout(r, sleepMs));
if (outcome === 'fail') {
  const r: RunnerReport = {
    outcome: 'failed', error: 'Connection error while downloading the media', errorType: 'error', reason: 'connection_error', ...(category && { category }),
    phaseSeconds: PHASE_SECONDS.failed, ...(defence && { defence }),
  };
  await report(r);
  finish(r, RUNNER_EXIT.failed);
}
if (outcome === 'warning') {
  const r: RunnerReport = { outcome: 'warning', error: 'Video is private', errorType: 'warning', ...(category && { category }), phaseSeconds: PHASE_SECONDS.warning };
  await report(r);
  finish(r, RUNNER_EXIT.warning);
}
await report({ step: 'Uploading', progress: 66 });
// The key a runner names its file with (its folder and filename; `videos/<job id>.mp4` without them), `-<job id 8>` when taken.
const claimedKey = url.searchParams.get('storageKey');
const jobId = process.env.MEDIAJOB_JOB_ID!;
const ownKey = (suffix?: string) => objectKey({ ...keyLayout(), folder: spec.folder, name: spec.filename, fallback: jobId, ext: 'mp4', ...(suffix && { suffix }) });
const reportedSize = Number(url.searchParams.get('reportedSize') ?? 1234);
const uploadBytes = scripted && url.searchParams.has('upload') ? Number(url.searchParams.get('upload'))
  : claimedKey === null && onLocalDisk() ? reportedSize : undefined;
const storageKey = uploadBytes === undefined ? claimedKey ?? ownKey() : await store(uploadBytes);
const r: RunnerReport = {
  outcome: 'completed', step: 'Finished', progress: 100,
  result: { storageKey, fileSize: reportedSize, actualQuality: '240p', title: 'Scripted' },
  phaseSeconds: PHASE_SECONDS.completed,
};
await report(r);
finish(r, RUNNER_EXIT.completed);

/** The key layout of the destination the operator gave this pod (its folder_prefix on managed storage), as the runner reads it; none without one. */
function keyLayout(): { folderPrefix?: string; baseFolder?: string } {
  try {
    return destinationKeyLayout(destination() as Destination);
  } catch {
    return {};
  }
}

/**
 * Store `bytes` as the runner does: through the destination the operator
 * gave the pod, named as the job's (its object's metadata, or the owner
 * record on local disk; the operator reads it back), under the reported key
 * or, as the runner's uploadJobFile, the job's own key, `-<job id 8>` when
 * another file has it. The key stored.
 */
async function store(bytes: number): Promise<string> {
  const doc = destination() as { managed?: Record<string, string> };
  // The document's managed-storage settings over the pod's env, as the runner reads them (runner-image/src/destination.ts).
  const provider = await createProvider(doc as unknown as Destination, { env: doc.managed ? { ...process.env, ...doc.managed } : process.env });
  const keys = claimedKey !== null ? [claimedKey] : [ownKey(), ownKey(jobId.slice(0, 8))];
  for (const [i, key] of keys.entries()) {
    try {
      await provider.upload(key, Readable.from([Buffer.alloc(bytes, 7)]), { size: bytes, contentType: 'video/mp4', jobId });
      return key;
    } catch (err) {
      if (!isStorageError(err) || err.code !== 'conflict' || i === keys.length - 1) throw err;
    }
  }
  throw new Error('unreachable');
}

/** Whether the operator gave this pod local managed storage (a directory the runner writes itself). */
function onLocalDisk(): boolean {
  const doc = destination() as { provider?: string; managed?: { MANAGED_STORAGE?: string } };
  return doc.provider === 'managed' && doc.managed?.MANAGED_STORAGE === 'local';
}

/** The pod's destination.json, as the runner reads it. */
function destination(): unknown {
  const dir = process.env.MEDIAJOBS_CREDENTIALS_DIR ?? '/var/run/mediajobs/credentials';
  return JSON.parse(readFileSync(join(dir, 'destination.json'), 'utf8'));
}
