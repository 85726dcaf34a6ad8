// core/v1 Events as client-go's event recorder writes them, so that
// `kubectl describe` and `kubectl get events` show what the controllers and
// the kubelet did. Recording is best effort: a failed write (namespace going
// away, API stopping) never disturbs the caller.
import { randomBytes } from 'node:crypto';
import type { ClusterApi } from '../cluster-api.js';
import type { KubeObject } from '../types.js';
import { rfc3339 } from '../object-meta.js';

export interface EventSource {
  component: string;
  host?: string;
}

export type EventType = 'Normal' | 'Warning';

export function recordEvent(
  api: ClusterApi, involved: KubeObject, type: EventType, reason: string, message: string, source: EventSource,
): void {
  const rt = api.resourceForKind('v1', 'Event');
  const ns = involved.metadata.namespace ?? 'default';
  if (!rt) return;
  const now = new Date();
  const ts = rfc3339(now);
  // client-go names events "<object>.<hex unix nanos>"; the random low digits keep names unique within a millisecond.
  const nanos = BigInt(now.getTime()) * 1_000_000n + BigInt(randomBytes(3).readUIntBE(0, 3) % 1_000_000);
  const event: KubeObject = {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: `${involved.metadata.name}.${nanos.toString(16)}`, namespace: ns },
    involvedObject: {
      kind: involved.kind,
      namespace: involved.metadata.namespace,
      name: involved.metadata.name,
      uid: involved.metadata.uid,
      apiVersion: involved.apiVersion,
      resourceVersion: involved.metadata.resourceVersion,
    },
    reason,
    message,
    source: source.host ? { component: source.component, host: source.host } : { component: source.component },
    firstTimestamp: ts,
    lastTimestamp: ts,
    count: 1,
    type,
    eventTime: null,
    reportingComponent: source.component,
    reportingInstance: source.host ?? '',
  };
  try {
    // The kubelet records its own events; every controller here runs in kube-controller-manager.
    api.create(rt, ns, event, { fieldManager: source.component === 'kubelet' ? 'kubelet' : 'kube-controller-manager' });
  } catch {
    // best effort, like the real recorder
  }
}
