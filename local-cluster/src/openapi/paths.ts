// The REST paths of one resource in an OpenAPI v3 document, shaped like
// kube-apiserver's (endpoints/installer.go routes run through kube-openapi
// builder3) and, for custom resources, like apiextensions-apiserver's
// controller/openapi/builder/builder.go.
import { resourceVerbs, subresourcesOf } from '../discovery.js';
import type { ResourceType } from '../types.js';
import type { Schema } from './json.js';
import { PARAMS, pathParam, type ParamName } from './parameters.js';

export interface KindNames {
  kind: string;
  list: string;
}

const SCHEMA_REF_PREFIX = '#/components/schemas/';
const META = 'io.k8s.apimachinery.pkg.apis.meta.v1.';

const BUILTIN_PRODUCES = ['application/json', 'application/vnd.kubernetes.protobuf', 'application/yaml'];
const BUILTIN_LIST_PRODUCES = [...BUILTIN_PRODUCES, 'application/json;stream=watch', 'application/vnd.kubernetes.protobuf;stream=watch'];
const CRD_PRODUCES = ['application/json', 'application/yaml'];
// Built-in routes consume "*/*" (installer.go newWebService); CRD routes list their types.
const BUILTIN_CONSUMES = ['*/*'];
const CRD_CONSUMES = ['application/json', 'application/yaml'];
const BUILTIN_PATCH_TYPES = ['application/apply-patch+yaml', 'application/json-patch+json', 'application/merge-patch+json', 'application/strategic-merge-patch+json'];
const CRD_PATCH_TYPES = ['application/apply-patch+yaml', 'application/json-patch+json', 'application/merge-patch+json'];

const LIST_PARAMS: ParamName[] = ['allowWatchBookmarks', 'continue', 'fieldSelector', 'labelSelector', 'limit', 'resourceVersion', 'resourceVersionMatch', 'sendInitialEvents', 'timeoutSeconds', 'watch'];
const DELETE_COLLECTION_PARAMS: ParamName[] = ['continue', 'dryRun', 'fieldSelector', 'gracePeriodSeconds', 'ignoreStoreReadErrorWithClusterBreakingPotential', 'labelSelector', 'limit', 'orphanDependents', 'propagationPolicy', 'resourceVersion', 'resourceVersionMatch', 'sendInitialEvents', 'timeoutSeconds'];
const WRITE_PARAMS: ParamName[] = ['dryRun', 'fieldManager', 'fieldValidation'];
// kubectl's query-param verifier requires fieldValidation among these.
const PATCH_PARAMS: ParamName[] = ['dryRun', 'fieldManagerForPatch', 'fieldValidation', 'force'];
const DELETE_PARAMS: ParamName[] = ['dryRun', 'gracePeriodSeconds', 'ignoreStoreReadErrorWithClusterBreakingPotential', 'orphanDependents', 'propagationPolicy'];
const LOG_PARAMS: ParamName[] = ['container', 'follow', 'insecureSkipTLSVerifyBackend', 'limitBytes', 'previous', 'sinceSeconds', 'stream', 'tailLines', 'timestamps'];

// The operation-name verbs of apiserver's endpoints/openapi GetOperationIDAndTags.
const OPERATION_VERBS = ['get', 'log', 'read', 'replace', 'patch', 'delete', 'deletecollection', 'watch', 'connect', 'proxy', 'list', 'create'];

function ref(name: string): Schema {
  return { $ref: SCHEMA_REF_PREFIX + name };
}

/** apiserver endpoints/openapi ToValidOperationID. */
function toValidOperationId(s: string, capitalizeFirst: boolean): string {
  let out = '';
  let capitalize = capitalizeFirst;
  [...s].forEach((c, i) => {
    if (/\p{L}/u.test(c) || c === '_' || (i !== 0 && /\p{Nd}/u.test(c))) {
      out += capitalize ? c.toUpperCase() : c;
      capitalize = false;
    } else {
      capitalize = true;
    }
  });
  return out;
}

/** installer.go GetArticleForNoun: "a Job", "an Event", no article for plurals. */
function article(noun: string): string {
  if (!noun.endsWith('ss') && noun.endsWith('s')) return ' ';
  return /^[aeiou]/i.test(noun) ? ' an ' : ' a ';
}

interface Operation {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** The go-restful route operation, e.g. "patchNamespacedJobStatus". */
  name: string;
  action: string;
  description: string;
  params: Schema[];
  body?: { schema: string; types: string[]; required: boolean };
  responses: Array<{ code: string; description: string; schema: Schema; types: string[] }>;
}

class ResourcePaths {
  private readonly builtin: boolean;
  private readonly prefix: string;
  private readonly namespacedWord: string;

  constructor(private readonly rt: ResourceType, private readonly names: KindNames) {
    this.builtin = rt.builtin;
    this.prefix = rt.group ? `/apis/${rt.group}/${rt.version}` : `/api/${rt.version}`;
    this.namespacedWord = rt.namespaced ? 'Namespaced' : '';
  }

  build(): Record<string, Schema> {
    const { rt } = this;
    const verbs = new Set(resourceVerbs(rt));
    const collection = rt.namespaced ? `${this.prefix}/namespaces/{namespace}/${rt.plural}` : `${this.prefix}/${rt.plural}`;
    const item = `${collection}/{name}`;
    const paths: Record<string, Operation[]> = {};
    if (rt.namespaced && verbs.has('list')) paths[`${this.prefix}/${rt.plural}`] = [this.list(true)];
    paths[collection] = [
      ...(verbs.has('list') ? [this.list(false)] : []),
      ...(verbs.has('create') ? [this.create()] : []),
      ...(verbs.has('deletecollection') ? [this.deleteCollection()] : []),
    ];
    paths[item] = [
      ...(verbs.has('get') ? [this.read('')] : []),
      ...(verbs.has('update') ? [this.replace('')] : []),
      ...(verbs.has('patch') ? [this.patch('')] : []),
      ...(verbs.has('delete') ? [this.delete()] : []),
    ];
    for (const sub of subresourcesOf(rt)) {
      if (sub.name === 'status') paths[`${item}/status`] = [this.read('status'), this.replace('status'), this.patch('status')];
      if (sub.name === 'log') paths[`${item}/log`] = [this.log()];
    }
    const result: Record<string, Schema> = {};
    for (const [path, operations] of Object.entries(paths)) {
      if (operations.length) result[path] = this.pathItem(path, operations);
    }
    return result;
  }

  private get produces(): string[] {
    return this.builtin ? BUILTIN_PRODUCES : CRD_PRODUCES;
  }

  private ok(schema: string, code = '200', description = 'OK', types = this.produces): Operation['responses'][number] {
    return { code, description, schema: ref(schema), types };
  }

  private params(names: ParamName[]): Schema[] {
    return names.map((n) => PARAMS[n]);
  }

  private list(allNamespaces: boolean): Operation {
    const { rt } = this;
    return {
      method: 'get',
      name: allNamespaces ? `list${rt.kind}ForAllNamespaces` : `list${this.namespacedWord}${rt.kind}`,
      action: 'list',
      description: `${this.builtin ? 'list or watch' : 'list'} objects of kind ${rt.kind}`,
      params: this.params(LIST_PARAMS),
      responses: [this.ok(this.names.list, '200', 'OK', this.builtin ? BUILTIN_LIST_PRODUCES : CRD_PRODUCES)],
    };
  }

  private create(): Operation {
    const { rt, names } = this;
    return {
      method: 'post',
      name: `create${this.namespacedWord}${rt.kind}`,
      action: 'post',
      description: `create${article(rt.kind)}${rt.kind}`,
      params: this.params(WRITE_PARAMS),
      body: { schema: names.kind, types: this.builtin ? BUILTIN_CONSUMES : CRD_CONSUMES, required: true },
      responses: [this.ok(names.kind), this.ok(names.kind, '201', 'Created'), this.ok(names.kind, '202', 'Accepted')],
    };
  }

  private deleteCollection(): Operation {
    const { rt } = this;
    return {
      method: 'delete',
      name: `deletecollection${this.namespacedWord}${rt.kind}`,
      action: 'deletecollection',
      description: `delete collection of ${rt.kind}`,
      params: this.params(DELETE_COLLECTION_PARAMS),
      // The CRD builder only reads DeleteOptions on single deletes.
      ...(this.builtin ? { body: { schema: META + 'DeleteOptions', types: BUILTIN_CONSUMES, required: false } } : {}),
      responses: [this.ok(META + 'Status')],
    };
  }

  private subresourceWords(sub: string): { suffix: string; of: string } {
    return sub ? { suffix: sub[0]!.toUpperCase() + sub.slice(1), of: ` ${sub} of` } : { suffix: '', of: '' };
  }

  private read(sub: string): Operation {
    const { suffix, of } = this.subresourceWords(sub);
    return {
      method: 'get',
      name: `read${this.namespacedWord}${this.rt.kind}${suffix}`,
      action: 'get',
      description: `read${of} the specified ${this.rt.kind}`,
      params: [],
      responses: [this.ok(this.names.kind)],
    };
  }

  private replace(sub: string): Operation {
    const { suffix, of } = this.subresourceWords(sub);
    const { kind } = this.names;
    return {
      method: 'put',
      name: `replace${this.namespacedWord}${this.rt.kind}${suffix}`,
      action: 'put',
      description: `replace${of} the specified ${this.rt.kind}`,
      params: this.params(WRITE_PARAMS),
      body: { schema: kind, types: this.builtin ? BUILTIN_CONSUMES : CRD_CONSUMES, required: true },
      responses: [this.ok(kind), this.ok(kind, '201', 'Created')],
    };
  }

  private patch(sub: string): Operation {
    const { suffix, of } = this.subresourceWords(sub);
    const { kind } = this.names;
    return {
      method: 'patch',
      name: `patch${this.namespacedWord}${this.rt.kind}${suffix}`,
      action: 'patch',
      description: `partially update${of} the specified ${this.rt.kind}`,
      params: this.params(PATCH_PARAMS),
      body: { schema: META + 'Patch', types: this.builtin ? BUILTIN_PATCH_TYPES : CRD_PATCH_TYPES, required: true },
      responses: [this.ok(kind), this.ok(kind, '201', 'Created')],
    };
  }

  private delete(): Operation {
    const { rt } = this;
    // Pods answer a delete with the pod itself (its storage returns the deleted object).
    const returned = rt.builtin && rt.group === '' && rt.kind === 'Pod' ? this.names.kind : META + 'Status';
    return {
      method: 'delete',
      name: `delete${this.namespacedWord}${rt.kind}`,
      action: 'delete',
      description: `delete${article(rt.kind)}${rt.kind}`,
      params: this.params(DELETE_PARAMS),
      body: { schema: META + 'DeleteOptions', types: this.builtin ? BUILTIN_CONSUMES : CRD_CONSUMES, required: false },
      responses: [this.ok(returned), this.ok(returned, '202', 'Accepted')],
    };
  }

  private log(): Operation {
    const { rt } = this;
    return {
      method: 'get',
      name: `read${this.namespacedWord}${rt.kind}Log`,
      action: 'get',
      description: `read log of the specified ${rt.kind}`,
      params: this.params(LOG_PARAMS),
      responses: [{ code: '200', description: 'OK', schema: { type: 'string' }, types: ['text/plain'] }],
    };
  }

  /** GetOperationIDAndTags: verb + group + version + the rest of the route operation. */
  private idAndTag(operation: string): { id: string; tag: string } {
    const verb = OPERATION_VERBS.filter((v) => operation.startsWith(v)).sort((a, b) => a.length - b.length)[0] ?? '';
    const group = this.rt.group ? this.rt.group.replace(/\.k8s\.io$/, '') : 'core';
    const id = verb + toValidOperationId(group, verb !== '') + toValidOperationId(this.rt.version, true)
      + toValidOperationId(operation.slice(verb.length), true);
    return { id, tag: `${toValidOperationId(group, false)}_${toValidOperationId(this.rt.version, false)}` };
  }

  private operationObject(op: Operation, params: Schema[]): Schema {
    const { id, tag } = this.idAndTag(op.name);
    const content = (types: string[], schema: Schema): Schema => Object.fromEntries(types.map((t) => [t, { schema }]));
    const responses: Schema = {};
    for (const r of op.responses) responses[r.code] = { content: content(r.types, r.schema), description: r.description };
    responses['401'] = { description: 'Unauthorized' };
    const result: Schema = { description: op.description, operationId: id };
    if (params.length) result.parameters = params;
    if (op.body) {
      result.requestBody = { content: content(op.body.types, ref(op.body.schema)), ...(op.body.required ? { required: true } : {}) };
    }
    result.responses = responses;
    result.tags = [tag];
    result['x-kubernetes-action'] = op.action;
    result['x-kubernetes-group-version-kind'] = { group: this.rt.group, kind: this.rt.kind, version: this.rt.version };
    return result;
  }

  /**
   * builder3 moves the parameters every operation of a path shares (path
   * parameters, pretty, and all of them for single-operation paths) up to
   * the path item; parameters are listed by name.
   */
  private pathItem(path: string, operations: Operation[]): Schema {
    const common: Schema[] = [];
    if (path.includes('{name}')) common.push(pathParam('name', `name of the ${this.rt.kind}`));
    if (path.includes('{namespace}')) common.push(pathParam('namespace', 'object name and auth scope, such as for teams and projects'));
    common.push(this.builtin ? PARAMS.pretty : PARAMS.prettyForCustomResource);
    let shared = operations.length === 1 ? operations[0]!.params : [];
    const byName = (a: Schema, b: Schema): number => (String(a.name) < String(b.name) ? -1 : String(a.name) > String(b.name) ? 1 : 0);
    const item: Schema = {};
    for (const op of operations) {
      const own = op.params.filter((p) => !shared.includes(p)).sort(byName);
      item[op.method] = this.operationObject(op, own);
    }
    shared = [...common, ...shared].sort(byName);
    item.parameters = shared;
    return item;
  }
}

/** The paths (collection, item, subresources, all-namespaces list) of one resource. */
export function resourcePaths(rt: ResourceType, names: KindNames): Record<string, Schema> {
  return new ResourcePaths(rt, names).build();
}
