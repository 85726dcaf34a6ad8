import { expect } from 'chai';
import {
  AGGREGATED_CONTENT_TYPE, aggregatedDiscovery, apiGroup, apiGroupList, apiResourceList, apiVersions,
  compareKubeAwareVersions, storageVersionHash,
} from '../src/discovery.js';
import type { ResourceType } from '../src/types.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function builtin(group: string, kind: string, plural: string, extra: Partial<ResourceType> = {}): ResourceType {
  return {
    group, version: 'v1', kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase(), namespaced: true,
    shortNames: [], categories: [], statusSubresource: false, builtin: true, ...extra,
  };
}

function customResource(version: string, extra: Partial<ResourceType> = {}): ResourceType {
  return {
    group: 'mediajobs.io', version, kind: 'MediaJob', listKind: 'MediaJobList', plural: 'mediajobs', singular: 'mediajob',
    namespaced: true, shortNames: ['mj'], categories: ['all'], statusSubresource: true, builtin: false, ...extra,
  };
}

const PODS = builtin('', 'Pod', 'pods', { shortNames: ['po'], categories: ['all'], statusSubresource: true, extraSubresources: ['log'] });
const NAMESPACES = builtin('', 'Namespace', 'namespaces', { namespaced: false, shortNames: ['ns'], statusSubresource: true });
const SECRETS = builtin('', 'Secret', 'secrets');
const JOBS = builtin('batch', 'Job', 'jobs', { categories: ['all'], statusSubresource: true });
const LEASES = builtin('coordination.k8s.io', 'Lease', 'leases');
const CRDS = builtin('apiextensions.k8s.io', 'CustomResourceDefinition', 'customresourcedefinitions', {
  namespaced: false, shortNames: ['crd', 'crds'], categories: ['api-extensions'], statusSubresource: true,
});
const MEDIAJOBS = customResource('v1alpha1');
const TYPES = [MEDIAJOBS, LEASES, PODS, JOBS, SECRETS, CRDS, NAMESPACES];

const ALL_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

function resource(list: Json, group: string, plural: string): Json {
  const item = list.items.find((i: Json) => (i.metadata.name ?? '') === group);
  return item.versions[0].resources.find((r: Json) => r.resource === plural);
}

describe('discovery', () => {
  it('uses the exact aggregated discovery content type kubectl negotiates', () => {
    expect(AGGREGATED_CONTENT_TYPE).to.equal('application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList');
  });

  describe('aggregated /api', () => {
    const list = aggregatedDiscovery(TYPES, 'api') as Json;

    it('is an APIGroupDiscoveryList with the core group only, unnamed', () => {
      expect(list).to.include({ kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2' });
      expect(list.metadata).to.deep.equal({});
      expect(list.items).to.have.length(1);
      expect(list.items[0].metadata).to.deep.equal({ creationTimestamp: null });
      expect(list.items[0].versions.map((v: Json) => [v.version, v.freshness])).to.deep.equal([['v1', 'Current']]);
    });

    it('lists resources sorted, built-in response kinds without group/version, subresources by name', () => {
      const resources = list.items[0].versions[0].resources;
      expect(resources.map((r: Json) => r.resource)).to.deep.equal(['namespaces', 'pods', 'secrets']);
      expect(resource(list, '', 'pods')).to.deep.equal({
        resource: 'pods',
        responseKind: { group: '', version: '', kind: 'Pod' },
        scope: 'Namespaced',
        singularResource: 'pod',
        verbs: ALL_VERBS,
        shortNames: ['po'],
        categories: ['all'],
        subresources: [
          { subresource: 'log', responseKind: { group: '', version: '', kind: 'Pod' }, verbs: ['get'] },
          { subresource: 'status', responseKind: { group: '', version: '', kind: 'Pod' }, verbs: ['get', 'patch', 'update'] },
        ],
      });
    });

    it('omits empty shortNames, categories and subresources', () => {
      expect(resource(list, '', 'secrets')).to.not.have.any.keys('shortNames', 'categories', 'subresources');
    });

    it('gives namespaces no deletecollection and cluster scope', () => {
      const ns = resource(list, '', 'namespaces');
      expect(ns.scope).to.equal('Cluster');
      expect(ns.verbs).to.deep.equal(['create', 'delete', 'get', 'list', 'patch', 'update', 'watch']);
    });
  });

  describe('aggregated /apis', () => {
    const list = aggregatedDiscovery(TYPES, 'apis') as Json;

    it('orders groups by kube-aggregator priority, CRD groups last', () => {
      expect(list.items.map((i: Json) => i.metadata.name)).to.deep.equal(['batch', 'apiextensions.k8s.io', 'coordination.k8s.io', 'mediajobs.io']);
    });

    it('puts jobs in category all (kubectl get all)', () => {
      expect(resource(list, 'batch', 'jobs').categories).to.deep.equal(['all']);
    });

    it('describes custom resources like the CRD discovery controller', () => {
      expect(resource(list, 'mediajobs.io', 'mediajobs')).to.deep.equal({
        resource: 'mediajobs',
        responseKind: { group: 'mediajobs.io', version: 'v1alpha1', kind: 'MediaJob' },
        scope: 'Namespaced',
        singularResource: 'mediajob',
        verbs: ['delete', 'deletecollection', 'get', 'list', 'patch', 'create', 'update', 'watch'],
        shortNames: ['mj'],
        categories: ['all'],
        subresources: [{ subresource: 'status', responseKind: { group: 'mediajobs.io', version: 'v1alpha1', kind: 'MediaJob' }, verbs: ['get', 'patch', 'update'] }],
      });
    });

    it('lists a group\'s versions preferred first', () => {
      const multi = aggregatedDiscovery([customResource('v1alpha1'), customResource('v1'), customResource('v1beta2')], 'apis') as Json;
      expect(multi.items[0].versions.map((v: Json) => v.version)).to.deep.equal(['v1', 'v1beta2', 'v1alpha1']);
    });

    it('shows a newly served CRD at once (no caching)', () => {
      const extra = { ...customResource('v1'), group: 'other.io', kind: 'Thing', plural: 'things', singular: 'thing' };
      const names = (aggregatedDiscovery([...TYPES, extra], 'apis') as Json).items.map((i: Json) => i.metadata.name);
      expect(names).to.include('other.io');
    });
  });

  it('orders versions like apimachinery CompareKubeAwareVersionStrings', () => {
    const sorted = ['v1alpha1', 'foo10', 'v11alpha2', 'v2', 'v1', 'v1beta1', 'foo1', 'v10beta3', 'v12alpha1', 'v11beta2']
      .sort((a, b) => compareKubeAwareVersions(b, a));
    expect(sorted).to.deep.equal(['v2', 'v1', 'v11beta2', 'v10beta3', 'v1beta1', 'v12alpha1', 'v11alpha2', 'v1alpha1', 'foo1', 'foo10']);
  });

  describe('legacy discovery', () => {
    it('serves APIVersions without apiVersion', () => {
      expect(apiVersions('127.0.0.1:8443')).to.deep.equal({
        kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1:8443' }],
      });
    });

    it('serves APIGroupList and APIGroup as the aggregator does', () => {
      const groups = apiGroupList(TYPES) as Json;
      expect(groups).to.include({ kind: 'APIGroupList', apiVersion: 'v1' });
      expect(groups.groups[0]).to.deep.equal({
        name: 'batch',
        versions: [{ groupVersion: 'batch/v1', version: 'v1' }],
        preferredVersion: { groupVersion: 'batch/v1', version: 'v1' },
      });
      expect(apiGroup(TYPES, 'mediajobs.io')).to.deep.equal({
        kind: 'APIGroup', apiVersion: 'v1', name: 'mediajobs.io',
        versions: [{ groupVersion: 'mediajobs.io/v1alpha1', version: 'v1alpha1' }],
        preferredVersion: { groupVersion: 'mediajobs.io/v1alpha1', version: 'v1alpha1' },
      });
      expect(apiGroup(TYPES, 'nope.io')).to.equal(undefined);
      expect(apiGroup(TYPES, '')).to.equal(undefined);
    });

    it('serves the core APIResourceList without apiVersion, with subresources', () => {
      const core = apiResourceList(TYPES, '', 'v1') as Json;
      expect(core).to.not.have.property('apiVersion');
      expect(core).to.include({ kind: 'APIResourceList', groupVersion: 'v1' });
      expect(core.resources.map((r: Json) => r.name)).to.deep.equal(['namespaces', 'namespaces/status', 'pods', 'pods/log', 'pods/status', 'secrets']);
      expect(core.resources[2]).to.deep.equal({
        name: 'pods', singularName: 'pod', namespaced: true, kind: 'Pod', verbs: ALL_VERBS,
        shortNames: ['po'], categories: ['all'], storageVersionHash: 'xPOwRZ+Yhw8=',
      });
      expect(core.resources[3]).to.deep.equal({ name: 'pods/log', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get'] });
    });

    it('serves group APIResourceLists with apiVersion v1, including <plural>/status', () => {
      const batch = apiResourceList(TYPES, 'batch', 'v1') as Json;
      expect(batch).to.include({ kind: 'APIResourceList', apiVersion: 'v1', groupVersion: 'batch/v1' });
      const crd = apiResourceList(TYPES, 'mediajobs.io', 'v1alpha1') as Json;
      expect(crd.resources.map((r: Json) => r.name)).to.deep.equal(['mediajobs', 'mediajobs/status']);
      expect(crd.resources[1]).to.deep.equal({
        name: 'mediajobs/status', singularName: '', namespaced: true, kind: 'MediaJob', verbs: ['get', 'patch', 'update'],
      });
      expect(apiResourceList(TYPES, 'batch', 'v2')).to.equal(undefined);
    });

    it('computes storage version hashes like discovery.StorageVersionHash', () => {
      expect(storageVersionHash({ group: '', version: 'v1', kind: 'Pod' })).to.equal('xPOwRZ+Yhw8=');
    });
  });
});
