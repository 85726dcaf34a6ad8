// Who a container's process runs as, decided the way the kubelet and the
// container runtime decide it: the container's securityContext over the
// pod's (securitycontext.DetermineEffectiveSecurityContext), runAsNonRoot
// checked before the container is created (kuberuntime verifyRunAsNonRoot),
// the pod's fsGroup and supplementalGroups as supplementary groups. Pure:
// spawning with these ids is pod-process.ts's, volume ownership
// pod-volumes.ts's.
//
// Images are local commands here, so "the image's user" is the user the
// local cluster runs as, and the image's /etc/passwd is the host's.
import fs from 'node:fs';
import type { Container, Pod } from './pod-types.js';

export interface ProcessIdentity {
  uid: number;
  gid: number;
  /** Supplementary groups: the pod's fsGroup, then its supplementalGroups. */
  groups: number[];
  /** allowPrivilegeEscalation: false (the runtime's no_new_privs). */
  noNewPrivs: boolean;
}

/** What the process would run as when nothing says otherwise: the local cluster's own ids. */
export interface ImageUser { uid: number; gid: number }

/** uid → primary gid from an /etc/passwd text; a uid it does not list gets group 0, as containerd gives it. */
export function primaryGroup(passwd: string, uid: number): number {
  for (const line of passwd.split('\n')) {
    const f = line.split(':');
    if (f.length >= 4 && Number(f[2]) === uid && f[2] !== '') return Number(f[3]);
  }
  return 0;
}

let passwdCache: string | undefined;
function hostPasswd(): string {
  if (passwdCache === undefined) {
    try {
      passwdCache = fs.readFileSync('/etc/passwd', 'utf8');
    } catch {
      passwdCache = '';
    }
  }
  return passwdCache;
}

/** kubelet format.Pod: `name_namespace(uid)`. */
function podRef(pod: Pod): string {
  return `${pod.metadata.name ?? ''}_${pod.metadata.namespace ?? 'default'}(${pod.metadata.uid ?? ''})`;
}

/**
 * The container's process identity, or the message of the
 * CreateContainerConfigError the kubelet reports when runAsNonRoot forbids
 * it (the exact wording of kuberuntime's verifyRunAsNonRoot).
 */
export function containerIdentity(pod: Pod, c: Container, image: ImageUser, passwd: string = hostPasswd()): ProcessIdentity | { refused: string } {
  const podSc = pod.spec?.securityContext ?? {};
  const sc = c.securityContext ?? {};
  const runAsUser = sc.runAsUser ?? podSc.runAsUser;
  const runAsGroup = sc.runAsGroup ?? podSc.runAsGroup;
  const runAsNonRoot = sc.runAsNonRoot ?? podSc.runAsNonRoot;
  const ref = `(pod: "${podRef(pod)}", container: ${c.name ?? ''})`;
  if (runAsNonRoot === true) {
    if (runAsUser === 0) return { refused: `container's runAsUser breaks non-root policy ${ref}` };
    if (runAsUser === undefined && image.uid === 0) return { refused: `container has runAsNonRoot and image will run as root ${ref}` };
  }
  const uid = runAsUser ?? image.uid;
  // A uid named in the spec takes its group from the image's passwd (containerd); the image's own user keeps its group.
  const gid = runAsGroup ?? (runAsUser === undefined ? image.gid : primaryGroup(passwd, uid));
  const groups = [...new Set([podSc.fsGroup, ...(podSc.supplementalGroups ?? [])].filter((g): g is number => typeof g === 'number'))];
  return { uid, gid, groups, noNewPrivs: sc.allowPrivilegeEscalation === false };
}
