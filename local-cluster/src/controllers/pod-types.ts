// The subset of core/v1 and batch/v1 shapes the controllers read and write.
// Objects stay plain JSON (see types.ts); these types only describe the
// fields we touch, every one optional because clients may send anything.
import type { KubeObject, ObjectMeta } from '../types.js';

export interface KeySelector { name?: string; key?: string; optional?: boolean }
export interface ObjectFieldSelector { apiVersion?: string; fieldPath?: string }
export interface ResourceFieldSelector { containerName?: string; resource?: string; divisor?: string | number }

export interface EnvVar {
  name?: string;
  value?: string;
  valueFrom?: {
    fieldRef?: ObjectFieldSelector;
    resourceFieldRef?: ResourceFieldSelector;
    configMapKeyRef?: KeySelector;
    secretKeyRef?: KeySelector;
  };
}

export interface EnvFromSource {
  prefix?: string;
  configMapRef?: { name?: string; optional?: boolean };
  secretRef?: { name?: string; optional?: boolean };
}

export interface VolumeMount { name?: string; mountPath?: string; subPath?: string; readOnly?: boolean }

/** The fields of a container's securityContext the local kubelet honours. */
export interface SecurityContext {
  runAsUser?: number;
  runAsGroup?: number;
  runAsNonRoot?: boolean;
  allowPrivilegeEscalation?: boolean;
  [key: string]: unknown;
}

/** The fields of a pod's securityContext the local kubelet honours. */
export interface PodSecurityContext {
  runAsUser?: number;
  runAsGroup?: number;
  runAsNonRoot?: boolean;
  fsGroup?: number;
  supplementalGroups?: number[];
  fsGroupChangePolicy?: string;
  [key: string]: unknown;
}

export interface Container {
  name?: string;
  image?: string;
  command?: string[];
  args?: string[];
  workingDir?: string;
  env?: EnvVar[];
  envFrom?: EnvFromSource[];
  volumeMounts?: VolumeMount[];
  terminationMessagePath?: string;
  terminationMessagePolicy?: string;
  imagePullPolicy?: string;
  restartPolicy?: string;
  resources?: { limits?: Record<string, string | number>; requests?: Record<string, string | number> };
  securityContext?: SecurityContext;
  [key: string]: unknown;
}

export interface KeyToPath { key?: string; path?: string; mode?: number }
export interface DownwardAPIFile { path?: string; fieldRef?: ObjectFieldSelector; resourceFieldRef?: ResourceFieldSelector; mode?: number }

export interface Volume {
  name?: string;
  secret?: { secretName?: string; items?: KeyToPath[]; defaultMode?: number; optional?: boolean };
  configMap?: { name?: string; items?: KeyToPath[]; defaultMode?: number; optional?: boolean };
  emptyDir?: Record<string, unknown>;
  hostPath?: { path?: string; type?: string };
  downwardAPI?: { items?: DownwardAPIFile[]; defaultMode?: number };
  projected?: {
    defaultMode?: number;
    sources?: Array<{
      secret?: { name?: string; items?: KeyToPath[]; optional?: boolean };
      configMap?: { name?: string; items?: KeyToPath[]; optional?: boolean };
      downwardAPI?: { items?: DownwardAPIFile[] };
      serviceAccountToken?: { path?: string; expirationSeconds?: number; audience?: string };
    }>;
  };
  [key: string]: unknown;
}

export interface PodSpec {
  containers?: Container[];
  initContainers?: Container[];
  volumes?: Volume[];
  restartPolicy?: string;
  terminationGracePeriodSeconds?: number;
  activeDeadlineSeconds?: number;
  nodeName?: string;
  serviceAccountName?: string;
  automountServiceAccountToken?: boolean;
  hostname?: string;
  securityContext?: PodSecurityContext;
  [key: string]: unknown;
}

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastProbeTime?: string | null;
  lastTransitionTime?: string;
}

export interface ContainerStateTerminated {
  exitCode: number;
  reason?: string;
  message?: string;
  startedAt?: string | null;
  finishedAt?: string | null;
  containerID?: string;
  signal?: number;
}

export interface ContainerState {
  waiting?: { reason?: string; message?: string };
  running?: { startedAt?: string };
  terminated?: ContainerStateTerminated;
}

export interface ContainerStatus {
  name: string;
  state: ContainerState;
  lastState: ContainerState;
  ready: boolean;
  restartCount: number;
  image: string;
  imageID: string;
  containerID?: string;
  started?: boolean;
}

export interface PodStatus {
  phase?: string;
  conditions?: Condition[];
  message?: string;
  reason?: string;
  hostIP?: string;
  hostIPs?: Array<{ ip: string }>;
  podIP?: string;
  podIPs?: Array<{ ip: string }>;
  startTime?: string;
  initContainerStatuses?: ContainerStatus[];
  containerStatuses?: ContainerStatus[];
  qosClass?: string;
  [key: string]: unknown;
}

export interface Pod extends KubeObject {
  metadata: ObjectMeta;
  spec?: PodSpec;
  status?: PodStatus;
}

export interface PodTemplateSpec { metadata?: ObjectMeta; spec?: PodSpec }

export interface LabelSelectorRequirement { key?: string; operator?: string; values?: string[] }
export interface LabelSelector { matchLabels?: Record<string, string>; matchExpressions?: LabelSelectorRequirement[] }

export interface JobSpec {
  parallelism?: number | null;
  completions?: number | null;
  activeDeadlineSeconds?: number | null;
  backoffLimit?: number | null;
  selector?: LabelSelector | null;
  manualSelector?: boolean | null;
  template?: PodTemplateSpec;
  ttlSecondsAfterFinished?: number | null;
  completionMode?: string | null;
  suspend?: boolean | null;
  podReplacementPolicy?: string | null;
  podFailurePolicy?: unknown;
  managedBy?: string | null;
  [key: string]: unknown;
}

export interface JobStatus {
  conditions?: Condition[];
  startTime?: string;
  completionTime?: string;
  active?: number;
  succeeded?: number;
  failed?: number;
  ready?: number;
  terminating?: number;
  uncountedTerminatedPods?: { succeeded?: string[]; failed?: string[] };
  [key: string]: unknown;
}

export interface Job extends KubeObject {
  spec?: JobSpec;
  status?: JobStatus;
}

export function findCondition(list: readonly Condition[] | undefined, type: string): Condition | undefined {
  return list?.find((c) => c.type === type);
}

export function isPodReady(pod: Pod): boolean {
  return findCondition(pod.status?.conditions, 'Ready')?.status === 'True';
}

export function isPodTerminal(pod: Pod): boolean {
  const phase = pod.status?.phase;
  return phase === 'Succeeded' || phase === 'Failed';
}

/** The controlling ownerReference, if any (metav1.GetControllerOf). */
export function controllerOf(obj: KubeObject): { apiVersion: string; kind: string; name: string; uid: string } | undefined {
  return obj.metadata.ownerReferences?.find((r) => r.controller === true);
}
