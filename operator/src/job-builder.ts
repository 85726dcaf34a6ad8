// The children of a MediaJob: its credentials Secret and the batch/v1 Job
// that runs the runner image, one per attempt (docs/adr/0018). Names are
// deterministic so a repeated or restarted reconcile finds what it made
// instead of making it twice.
import { createHash } from 'node:crypto';
import type { V1Job, V1ResourceRequirements, V1Role, V1RoleBinding, V1Secret, V1ServiceAccount } from '@kubernetes/client-node';
import { API_VERSION, GROUP, MEDIAJOB_PLURAL, jobIdOf, type MediaJob } from '@mediajobs/lib/mediajob/types';

export const MANAGED_BY = 'mediajobs-operator';
export const LABEL_JOB_ID = 'mediajobs.io/job-id';
export const LABEL_MEDIAJOB = 'mediajobs.io/mediajob';
export const LABEL_ATTEMPT = 'mediajobs.io/attempt';
export const CREDENTIALS_MOUNT = '/var/run/mediajobs/credentials';
/** The runner image's unprivileged user and group (the node base image's `node`, runner-image/Dockerfile). */
export const RUNNER_UID = 1000;
/** The media's working copy, yt-dlp's cache and HOME: the only writable place of a read-only root filesystem. */
const WORK_MOUNT = '/tmp';
/** The work volume's size when RUNNER_RESOURCES sets no ephemeral-storage limit. */
const DEFAULT_WORK_SIZE = '20Gi';

export interface JobSettings {
  image: string;
  backoffLimit: number;
  activeDeadlineSeconds: number;
  ttlSecondsAfterFinished: number;
  serviceAccountName?: string;
  /** The runner container's requests and limits (RUNNER_RESOURCES). */
  resources?: V1ResourceRequirements;
  /** The operator's OUTBOUND_ALLOWED_CIDRS: the runner's egress applies the same outbound policy (ADR 0014). */
  outboundAllowedCidrs?: readonly string[];
  extraEnv?: Record<string, string>;
}

/** Hashes of namespace/name kept at most: every pass names the runner Job, its Secret and its account several times. */
const HASHES_KEPT = 10_000;
const hashes = new Map<string, string>();

/** The first 10 hex digits of the SHA-256 of `namespaceName`, remembered. */
function nameHash(namespaceName: string): string {
  let hash = hashes.get(namespaceName);
  if (hash === undefined) {
    hash = createHash('sha256').update(namespaceName).digest('hex').slice(0, 10);
    if (hashes.size >= HASHES_KEPT) hashes.delete(hashes.keys().next().value!);
    hashes.set(namespaceName, hash);
  }
  return hash;
}

/**
 * `mj-<job id 8>-<10 hex of namespace/name>` for the first attempt, with
 * `-a<n>` after it for attempt n >= 2: unique, stable, at most 63 characters.
 */
export function runnerJobName(mj: MediaJob, attempt = 1): string {
  const hash = nameHash(`${mj.metadata.namespace}/${mj.metadata.name}`);
  const id = jobIdOf(mj).replace(/[^a-z0-9]/g, '').slice(0, 8);
  return `mj-${id}-${hash}${attempt > 1 ? `-a${attempt}` : ''}`;
}

/** The attempt a MediaJob is at (status.attempt; 1 before any retry). */
export function currentAttempt(mj: MediaJob): number {
  return mj.status?.attempt ?? 1;
}

/** The runner Job of the MediaJob's current attempt. */
export function currentJobName(mj: MediaJob): string {
  return runnerJobName(mj, currentAttempt(mj));
}

/** One Secret per MediaJob, whatever the attempt (written again for each attempt after the last one's was removed). */
export function credentialsSecretName(mj: MediaJob): string {
  return `${runnerJobName(mj)}-credentials`;
}

/** The per-job runner identity's name: its ServiceAccount, Role and RoleBinding (docs/adr/0021). */
export function runnerIdentityName(mj: MediaJob): string {
  return `${runnerJobName(mj)}-runner`;
}

/**
 * The runner's own identity (docs/adr/0021): a ServiceAccount whose Role
 * lets it read and patch the status of this MediaJob and nothing else
 * (resourceNames), bound by a RoleBinding. Every attempt's pod runs as it;
 * all three go with the MediaJob (owner references).
 */
export function buildRunnerIdentity(mj: MediaJob): { serviceAccount: V1ServiceAccount; role: V1Role; roleBinding: V1RoleBinding } {
  const name = runnerIdentityName(mj);
  const metadata = () => ({ name, namespace: mj.metadata.namespace, labels: labels(mj), ownerReferences: [ownerReference(mj)] });
  return {
    serviceAccount: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: metadata() },
    role: {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: metadata(),
      rules: [{ apiGroups: [GROUP], resources: [`${MEDIAJOB_PLURAL}/status`], resourceNames: [mj.metadata.name!], verbs: ['get', 'patch'] }],
    },
    roleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: metadata(),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace: mj.metadata.namespace }],
    },
  };
}

function ownerReference(mj: MediaJob) {
  return { apiVersion: API_VERSION, kind: 'MediaJob', name: mj.metadata.name!, uid: mj.metadata.uid!, controller: true, blockOwnerDeletion: true };
}

function labels(mj: MediaJob): Record<string, string> {
  return {
    'app.kubernetes.io/managed-by': MANAGED_BY,
    'app.kubernetes.io/name': 'mediajobs-runner',
    [LABEL_JOB_ID]: jobIdOf(mj),
    [LABEL_MEDIAJOB]: mj.metadata.name!,
  };
}

/**
 * The per-job Secret: destination credentials as a file, never in env or
 * argv; with a platform (docs/adr/0027), its attempt's upstream proxy URL
 * and cookie file as further keys (`extra`, plain text).
 */
export function buildCredentialsSecret(mj: MediaJob, destination: Record<string, unknown>, extra: Record<string, string> = {}): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: credentialsSecretName(mj), namespace: mj.metadata.namespace, labels: labels(mj), ownerReferences: [ownerReference(mj)] },
    type: 'Opaque',
    data: {
      'destination.json': Buffer.from(JSON.stringify(destination)).toString('base64'),
      ...Object.fromEntries(Object.entries(extra).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
    },
  };
}

/** The work volume's size: the container's ephemeral-storage limit, which the kubelet enforces on it too. */
function workSize(resources: V1ResourceRequirements | undefined): string {
  return resources?.limits?.['ephemeral-storage'] ?? DEFAULT_WORK_SIZE;
}

export function buildRunnerJob(mj: MediaJob, s: JobSettings, attempt = 1): V1Job {
  // The runner gets the options it needs, never the webhook address (the operator delivers webhooks).
  const { webhookUrl: _webhook, ...spec } = mj.spec;
  const env = [
    { name: 'MEDIAJOB_NAME', value: mj.metadata.name! },
    { name: 'MEDIAJOB_NAMESPACE', value: mj.metadata.namespace! },
    { name: 'MEDIAJOB_JOB_ID', value: jobIdOf(mj) },
    { name: 'MEDIAJOB_ATTEMPT', value: String(attempt) },
    { name: 'MEDIAJOB_SPEC', value: JSON.stringify(spec) },
    { name: 'MEDIAJOBS_CREDENTIALS_DIR', value: CREDENTIALS_MOUNT },
    ...Object.entries(s.extraEnv ?? {}).map(([name, value]) => ({ name, value })),
    // After extraEnv (RUNNER_ENV): the later of two entries wins, and the policy is not RUNNER_ENV's to widen.
    ...(s.outboundAllowedCidrs?.length ? [{ name: 'OUTBOUND_ALLOWED_CIDRS', value: s.outboundAllowedCidrs.join(',') }] : []),
  ];
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: runnerJobName(mj, attempt), namespace: mj.metadata.namespace,
      labels: { ...labels(mj), [LABEL_ATTEMPT]: String(attempt) }, ownerReferences: [ownerReference(mj)],
    },
    spec: {
      backoffLimit: s.backoffLimit,
      activeDeadlineSeconds: s.activeDeadlineSeconds,
      ttlSecondsAfterFinished: s.ttlSecondsAfterFinished,
      template: {
        metadata: { labels: labels(mj) },
        spec: {
          restartPolicy: 'Never',
          serviceAccountName: s.serviceAccountName,
          // No <SERVICE>_HOST/_PORT variables for every Service of the namespace: a
          // runner fetches what a user's URL names and needs no map of the cluster.
          enableServiceLinks: false,
          // The Secret's files are root's (kubelet) with the pod's fsGroup as
          // their group: 0440 lets the runner's user read them and nobody
          // else. With fsGroup the kubelet adds group read to a Secret volume
          // anyway (SetVolumeOwnership); without it, 0400 would leave them
          // unreadable to uid 1000 (operator/test/runner-pod.test.ts).
          securityContext: {
            runAsNonRoot: true, runAsUser: RUNNER_UID, runAsGroup: RUNNER_UID, fsGroup: RUNNER_UID,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          volumes: [
            { name: 'credentials', secret: { secretName: credentialsSecretName(mj), defaultMode: 0o440 } },
            { name: 'work', emptyDir: { sizeLimit: workSize(s.resources) } },
          ],
          containers: [{
            name: 'runner',
            image: s.image,
            env: [...env, { name: 'HOME', value: WORK_MOUNT }],
            ...(s.resources ? { resources: s.resources } : {}),
            securityContext: {
              allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] }, runAsNonRoot: true,
            },
            volumeMounts: [
              { name: 'credentials', mountPath: CREDENTIALS_MOUNT, readOnly: true },
              { name: 'work', mountPath: WORK_MOUNT },
            ],
            terminationMessagePolicy: 'FallbackToLogsOnError',
          }],
        },
      },
    },
  };
}
