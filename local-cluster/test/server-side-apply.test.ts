// Server-side apply and managedFields: the ownership rules as
// structured-merge-diff's own tests state them (merge/leaf_test.go,
// merge/set_test.go, merge/update.go's prune rule), then the real clients:
// kubectl apply --server-side, client-node's KubernetesObjectApi.patch with
// the ServerSideApply strategy, and a MediaJob from the project's CRD.
import * as k8s from '@kubernetes/client-node';
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { StatusError } from '../src/errors.js';
import { FieldSet, fromFieldsV1, pathString, toFieldsV1 } from '../src/ssa/fieldset.js';
import { apply, recordUpdate, type Writer } from '../src/ssa/managed-fields.js';
import type { TypeRef } from '../src/ssa/typed.js';
import type { KubeObject } from '../src/types.js';
import { apiError, kubeConfigFor, startTestCluster, type TestCluster } from './support.js';

// ---- the rules, on a small schema ------------------------------------------------

const SCHEMA: TypeRef = {
  type: 'object',
  properties: {
    numeric: { type: 'integer' },
    string: { type: 'string' },
    bool: { type: 'boolean' },
    list: { type: 'array', items: { type: 'string' }, 'x-kubernetes-list-type': 'set' },
    atomicList: { type: 'array', items: { type: 'string' } },
    items: {
      type: 'array', 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['name'],
      items: { type: 'object', properties: { name: { type: 'string' }, value: { type: 'string' } } },
    },
    selector: { type: 'object', additionalProperties: { type: 'string' }, 'x-kubernetes-map-type': 'atomic' },
  },
};

type Op = ['apply' | 'force' | 'update', string, string];

/** Runs operations as one object's history; returns the object, each manager's fields, and the conflicts met. */
function run(ops: Op[]): { object: Record<string, unknown>; managed: Record<string, string[]>; conflicts: string[] } {
  let live: KubeObject | undefined;
  const conflicts: string[] = [];
  for (const [op, manager, yaml] of ops) {
    const config = { apiVersion: 'v1', kind: 'T', metadata: {}, ...(parseYaml(yaml) as object) } as KubeObject;
    const w: Writer = { manager, apiVersion: 'v1', statusSubresource: false };
    if (op === 'update') {
      config.metadata.managedFields = live?.metadata.managedFields;
      recordUpdate(live, config, config.metadata.managedFields, w, SCHEMA);
      live = config;
      continue;
    }
    try {
      live = apply(live, config, w, op === 'force', SCHEMA);
    } catch (e) {
      if (!(e instanceof StatusError)) throw e;
      conflicts.push(e.message);
    }
  }
  const { apiVersion: _a, kind: _k, metadata, ...object } = live!;
  const managed: Record<string, string[]> = {};
  for (const e of (metadata.managedFields ?? []) as { manager: string; fieldsV1: unknown }[]) {
    managed[e.manager] = fromFieldsV1(e.fieldsV1).paths().map(pathString);
  }
  return { object, managed, conflicts };
}

describe('server-side apply rules (structured-merge-diff)', () => {
  it('leaf apply_update_apply_no_conflict: a field another manager added stays theirs', () => {
    expect(run([
      ['apply', 'default', 'numeric: 1\nstring: string'],
      ['update', 'controller', 'numeric: 1\nstring: string\nbool: true'],
      ['apply', 'default', 'numeric: 2\nstring: string'],
    ])).to.deep.equal({
      object: { numeric: 2, string: 'string', bool: true },
      managed: { default: ['.numeric', '.string'], controller: ['.bool'] },
      conflicts: [],
    });
  });

  it('leaf apply_update_apply_with_conflict: changing an updater\'s field conflicts; force takes it', () => {
    const r = run([
      ['apply', 'default', 'numeric: 1\nstring: string'],
      ['update', 'controller', 'numeric: 1\nstring: controller string\nbool: true'],
      ['apply', 'default', 'numeric: 2\nstring: user string'],
      ['force', 'default', 'numeric: 2\nstring: user string'],
    ]);
    expect(r.conflicts).to.deep.equal(['Apply failed with 1 conflict: conflict with "controller" using v1: .string']);
    expect(r.object).to.deep.equal({ numeric: 2, string: 'user string', bool: true });
    expect(r.managed).to.deep.equal({ default: ['.numeric', '.string'], controller: ['.bool'] });
  });

  it('set apply_update_apply_no_overlap: items keep their places, each owned by who added it', () => {
    const r = run([
      ['apply', 'default', 'list: [a, c]'],
      ['update', 'controller', 'list: [a, b, c, d]'],
      ['apply', 'default', 'list: [a, aprime, c, cprime]'],
    ]);
    expect(r.object).to.deep.equal({ list: ['a', 'b', 'aprime', 'c', 'd', 'cprime'] });
    expect(r.managed).to.deep.equal({
      default: ['.list[="a"]', '.list[="aprime"]', '.list[="c"]', '.list[="cprime"]'],
      controller: ['.list[="b"]', '.list[="d"]'],
    });
  });

  it('set apply_update_apply_reorder: the applier\'s order wins and the reordering updater owns nothing', () => {
    const r = run([
      ['apply', 'default', 'list: [a, b, c, d]'],
      ['update', 'controller', 'list: [a, d, c, b]'],
      ['apply', 'default', 'list: [a, b, c, d]'],
    ]);
    expect(r.object).to.deep.equal({ list: ['a', 'b', 'c', 'd'] });
    expect(Object.keys(r.managed)).to.deep.equal(['default']);
  });

  it('set apply_twice_remove: items the applier drops are removed', () => {
    expect(run([['apply', 'default', 'list: [a, b, c, d]'], ['apply', 'default', 'list: [a, c]']]).object)
      .to.deep.equal({ list: ['a', 'c'] });
  });

  it('prune: a dropped field another applier also applied stays, owned by it alone', () => {
    const r = run([
      ['apply', 'a', 'numeric: 1\nstring: x'],
      ['apply', 'b', 'string: x'],
      ['apply', 'a', 'numeric: 1'],
    ]);
    expect(r.object).to.deep.equal({ numeric: 1, string: 'x' });
    expect(r.managed).to.deep.equal({ a: ['.numeric'], b: ['.string'] });
  });

  it('map lists merge by key: two appliers own one item each', () => {
    const r = run([
      ['apply', 'a', 'items: [{name: x, value: "1"}]'],
      ['apply', 'b', 'items: [{name: y, value: "2"}]'],
    ]);
    expect(r.object).to.deep.equal({ items: [{ name: 'x', value: '1' }, { name: 'y', value: '2' }] });
    expect(r.managed.b).to.deep.equal(['.items[name="y"]', '.items[name="y"].name', '.items[name="y"].value']);
  });

  it('atomic lists and maps are one field: a second applier with a different value conflicts on the whole', () => {
    const r = run([
      ['apply', 'a', 'atomicList: [x]\nselector: {app: web}'],
      ['apply', 'b', 'atomicList: [y]\nselector: {app: web, tier: db}'],
    ]);
    expect(r.conflicts).to.deep.equal(['Apply failed with 2 conflicts: conflicts with "a":\n- .atomicList\n- .selector']);
  });

  it('encodes FieldsV1 with "." on an element that is itself owned and has children', () => {
    const set = FieldSet.fromPaths([['f:items', 'k:{"name":"x"}'], ['f:items', 'k:{"name":"x"}', 'f:value'], ['f:list', 'v:"a"']]);
    expect(toFieldsV1(set)).to.deep.equal({ 'f:items': { 'k:{"name":"x"}': { '.': {}, 'f:value': {} } }, 'f:list': { 'v:"a"': {} } });
    expect(fromFieldsV1(toFieldsV1(set)).paths()).to.deep.equal(set.paths());
  });
});
