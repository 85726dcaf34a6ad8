// The part of kube-apiserver's hand-written validation of apps/v1 Deployments
// (pkg/apis/apps/validation ValidateDeploymentSpec) that a manifest most often
// gets wrong: a selector, one that matches the template's labels, and the pod
// template's own checks (names, images, env names, mounts; shared with Jobs).
// Runs after builtin-decode.ts; answers 422 as the apiserver does.
import { goMap, invalidCause, required, selectorMatches, validatePodSpec, validateSelector } from './controllers/job-defaults.js';
import type { LabelSelector, PodSpec } from './controllers/pod-types.js';
import { isObject } from './object-meta.js';
import type { KubeObject, StatusCause } from './types.js';

export function validateDeployment(obj: KubeObject): StatusCause[] {
  const spec = (isObject(obj.spec) ? obj.spec : {}) as { selector?: LabelSelector | null; template?: { metadata?: { labels?: Record<string, string> }; spec?: PodSpec } };
  const causes: StatusCause[] = [];
  const selector = spec.selector;
  if (!selector) {
    causes.push(required('spec.selector'));
  } else {
    causes.push(...validateSelector(selector, 'spec.selector'));
    const labels = spec.template?.metadata?.labels ?? {};
    const empty = !Object.keys(selector.matchLabels ?? {}).length && !(selector.matchExpressions ?? []).length;
    if (!empty && !selectorMatches(selector, labels)) {
      causes.push(invalidCause('spec.template.metadata.labels', goMap(labels), '`selector` does not match template `labels`'));
    }
  }
  causes.push(...validatePodSpec(spec.template?.spec ?? {}, 'spec.template.spec'));
  return causes;
}
