// Volumes for a process that cannot mount anything: each volume becomes a
// directory under the pod's directory (Secret and ConfigMap keys as files,
// with items/path mapping and modes as the kubelet's atomic writer would
// leave them), hostPath maps to itself. Containers then see their mounts
// through path rewriting (see pod-process.ts). With a pod fsGroup, every
// volume but hostPath gets the kubelet's SetVolumeOwnership
// (pkg/volume/volume_linux.go): group fsGroup, group read (read-only
// volumes: Secret, ConfigMap, downward API, projected) or read-write
// (emptyDir) added, directories setgid and group-searchable.
import fs from 'node:fs';
import path from 'node:path';
import type { Container, DownwardAPIFile, KeyToPath, Pod, Volume } from './pod-types.js';
import { configMapData, fieldRefValue, secretData, type NodeInfo, type ObjectLookup } from './pod-env.js';

/** A volume could not be set up; the kubelet keeps the pod in ContainerCreating and retries. */
export class VolumeSetupError extends Error {
  override readonly name = 'VolumeSetupError';
  constructor(readonly volume: string, detail: string) {
    super(`MountVolume.SetUp failed for volume "${volume}" : ${detail}`);
  }
}

// core/v1 defaults: 0644 for Secret, ConfigMap, downward API and projected volumes.
const DEFAULT_MODE = 0o644;

/** Create every volume of the pod under `volumesDir`; returns volume name → local directory. */
export function setUpVolumes(pod: Pod, volumesDir: string, lookup: ObjectLookup, node: NodeInfo): Map<string, string> {
  const out = new Map<string, string>();
  const fsGroup = pod.spec?.securityContext?.fsGroup;
  for (const vol of pod.spec?.volumes ?? []) {
    if (!vol.name) continue;
    const dir = setUpVolume(pod, vol, path.join(volumesDir, safeName(vol.name)), lookup, node);
    // The kubelet leaves a hostPath's ownership alone; the volumes it makes are re-owned on every set-up.
    if (fsGroup !== undefined && !vol.hostPath) setVolumeOwnership(dir, fsGroup, READ_ONLY_KINDS.some((k) => vol[k] !== undefined));
    out.set(vol.name, dir);
  }
  return out;
}

// The volume plugins whose GetAttributes() say ReadOnly: their mounts are read-only whatever the pod says.
const READ_ONLY_KINDS = ['secret', 'configMap', 'downwardAPI', 'projected'] as const;
const RW_MASK = 0o660;
const RO_MASK = 0o440;
const EXEC_MASK = 0o110;
const SETGID = 0o2000;

/**
 * volume_linux.go changeFilePermission over the whole tree, children before
 * their directory (walkDeep): group fsGroup (lchown, the owner kept), mode
 * plus rw or ro mask, directories also setgid and g+x/u+x; symlinks keep
 * their mode. As in the kubelet a failure (not root: EPERM) is not fatal.
 */
export function setVolumeOwnership(dir: string, fsGroup: number, readOnly: boolean): void {
  const walk = (p: string): void => {
    let st: fs.Stats;
    try {
      st = fs.lstatSync(p);
    } catch {
      return;
    }
    if (st.isDirectory()) for (const name of fs.readdirSync(p)) walk(path.join(p, name));
    tryFs(() => fs.lchownSync(p, -1, fsGroup));
    if (st.isSymbolicLink()) return;
    const mask = (readOnly ? RO_MASK : RW_MASK) | (st.isDirectory() ? SETGID | EXEC_MASK : 0);
    tryFs(() => fs.chmodSync(p, (st.mode & 0o7777) | mask));
  };
  walk(dir);
}

function tryFs(op: () => void): void {
  try {
    op();
  } catch {
    // the kubelet logs a failed chown/chmod and goes on
  }
}

function setUpVolume(pod: Pod, vol: Volume, dir: string, lookup: ObjectLookup, node: NodeInfo): string {
  const name = vol.name!;
  if (vol.hostPath?.path) {
    // The process already runs on the host: the host path is the mount.
    const type = vol.hostPath.type ?? '';
    if (type === 'DirectoryOrCreate') fs.mkdirSync(vol.hostPath.path, { recursive: true });
    else if (type === 'Directory' && !isDir(vol.hostPath.path)) throw new VolumeSetupError(name, `hostPath type check failed: ${vol.hostPath.path} is not a directory`);
    return vol.hostPath.path;
  }
  if (vol.secret) {
    const secretName = vol.secret.secretName ?? '';
    const secret = lookup.secret(secretName);
    let files = new Map<string, { data: Buffer; mode?: number }>();
    if (!secret) {
      if (!vol.secret.optional) throw new VolumeSetupError(name, `secret "${secretName}" not found`);
    } else {
      files = project(secretData(secret), vol.secret.items, vol.secret.optional, (k) => `references non-existent secret key: ${k}`, name);
    }
    writeFiles(dir, files, vol.secret.defaultMode ?? DEFAULT_MODE);
    return dir;
  }
  if (vol.configMap) {
    const cmName = vol.configMap.name ?? '';
    const cm = lookup.configMap(cmName);
    let files = new Map<string, { data: Buffer; mode?: number }>();
    if (!cm) {
      if (!vol.configMap.optional) throw new VolumeSetupError(name, `configmap "${cmName}" not found`);
    } else {
      files = project(configMapData(cm), vol.configMap.items, vol.configMap.optional, (k) => `configmap references non-existent config key: ${k}`, name);
    }
    writeFiles(dir, files, vol.configMap.defaultMode ?? DEFAULT_MODE);
    return dir;
  }
  if (vol.downwardAPI) {
    writeFiles(dir, downwardFiles(pod, vol.downwardAPI.items, node, name), vol.downwardAPI.defaultMode ?? DEFAULT_MODE);
    return dir;
  }
  if (vol.projected) {
    const files = new Map<string, { data: Buffer; mode?: number }>();
    for (const src of vol.projected.sources ?? []) {
      if (src.secret) {
        const s = lookup.secret(src.secret.name ?? '');
        if (!s) {
          if (!src.secret.optional) throw new VolumeSetupError(name, `secret "${src.secret.name ?? ''}" not found`);
          continue;
        }
        merge(files, project(secretData(s), src.secret.items, src.secret.optional, (k) => `references non-existent secret key: ${k}`, name));
      } else if (src.configMap) {
        const c = lookup.configMap(src.configMap.name ?? '');
        if (!c) {
          if (!src.configMap.optional) throw new VolumeSetupError(name, `configmap "${src.configMap.name ?? ''}" not found`);
          continue;
        }
        merge(files, project(configMapData(c), src.configMap.items, src.configMap.optional, (k) => `configmap references non-existent config key: ${k}`, name));
      } else if (src.downwardAPI) {
        merge(files, downwardFiles(pod, src.downwardAPI.items, node, name));
      } else if (src.serviceAccountToken) {
        // The pod's own ServiceAccount's token, which the local API server accepts (an opaque token, not a JWT).
        const token = lookup.serviceAccountToken?.(pod.spec?.serviceAccountName || 'default') ?? '';
        files.set(src.serviceAccountToken.path ?? 'token', { data: Buffer.from(token) });
      }
    }
    writeFiles(dir, files, vol.projected.defaultMode ?? DEFAULT_MODE);
    return dir;
  }
  // emptyDir, and any volume type a local process cannot have (PVCs, CSI...):
  // a fresh directory keeps the pod runnable rather than stuck forever.
  // emptyDir's setupDir makes it 0777 whatever the umask, so any user of the pod may write.
  fs.mkdirSync(dir, { recursive: true, mode: 0o777 });
  fs.chmodSync(dir, 0o777);
  return dir;
}

function project(
  data: Record<string, Buffer>, items: KeyToPath[] | undefined, optional: boolean | undefined,
  missing: (key: string) => string, volume: string,
): Map<string, { data: Buffer; mode?: number }> {
  const files = new Map<string, { data: Buffer; mode?: number }>();
  if (!items || items.length === 0) {
    for (const [k, v] of Object.entries(data)) files.set(k, { data: v });
    return files;
  }
  for (const item of items) {
    const key = item.key ?? '';
    const value = data[key];
    if (!value) {
      if (optional) continue;
      throw new VolumeSetupError(volume, missing(key));
    }
    files.set(item.path ?? key, { data: value, mode: item.mode });
  }
  return files;
}

function downwardFiles(pod: Pod, items: DownwardAPIFile[] | undefined, node: NodeInfo, volume: string): Map<string, { data: Buffer; mode?: number }> {
  const files = new Map<string, { data: Buffer; mode?: number }>();
  for (const item of items ?? []) {
    if (!item.path || !item.fieldRef) continue;
    try {
      files.set(item.path, { data: Buffer.from(fieldRefValue(pod, item.fieldRef, node)), mode: item.mode });
    } catch (err) {
      throw new VolumeSetupError(volume, (err as Error).message);
    }
  }
  return files;
}

function merge(into: Map<string, { data: Buffer; mode?: number }>, from: Map<string, { data: Buffer; mode?: number }>): void {
  for (const [k, v] of from) into.set(k, v);
}

function writeFiles(dir: string, files: Map<string, { data: Buffer; mode?: number }>, defaultMode: number): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  for (const [rel, { data, mode }] of files) {
    const target = path.resolve(dir, rel);
    // Paths come from user data; never let them escape the volume.
    if (!target.startsWith(dir + path.sep)) continue;
    fs.mkdirSync(path.dirname(target), { recursive: true, mode: 0o755 });
    fs.writeFileSync(target, data);
    fs.chmodSync(target, (mode ?? defaultMode) & 0o777);
  }
}

function isDir(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** Volume and container names are DNS labels, but be defensive: they become path segments. */
export function safeName(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]/g, '_') || '_';
}

export interface Mount { mountPath: string; localPath: string }

/** The container's volumeMounts as mountPath → local path (subPath resolved inside the volume). */
export function containerMounts(container: Container, volumes: Map<string, string>): Mount[] {
  const mounts: Mount[] = [];
  for (const m of container.volumeMounts ?? []) {
    if (!m.mountPath || !m.name) continue;
    const base = volumes.get(m.name);
    if (base === undefined) continue;
    let localPath = base;
    if (m.subPath) {
      const target = path.resolve(base, m.subPath);
      if (target.startsWith(base + path.sep) || target === base) {
        // As the kubelet does, a missing subPath inside the volume is created as a directory.
        if (!fs.existsSync(target)) fs.mkdirSync(target, { recursive: true });
        localPath = target;
      }
    }
    mounts.push({ mountPath: m.mountPath.replace(/\/+$/, '') || '/', localPath });
  }
  return mounts;
}
