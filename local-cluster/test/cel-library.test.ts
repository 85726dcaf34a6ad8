// The Kubernetes CEL library functions the local cluster provides beyond
// standard CEL (README "Known differences" lists them), each as a rule on a
// custom resource would use it: what passes, and the cause when it fails.
import { expect } from 'chai';
import type { JSONSchemaProps } from '../src/types.js';
import { celValidate } from '../src/schema/cel-validate.js';

function schemaWith(rules: string[]): JSONSchemaProps {
  return {
    type: 'object',
    properties: {
      spec: {
        type: 'object',
        'x-kubernetes-validations': rules.map((rule) => ({ rule })),
        properties: {
          sizes: { type: 'array', items: { type: 'integer' } },
          weights: { type: 'array', items: { type: 'number' } },
          site: { type: 'string' },
        },
      },
    },
  };
}

function failures(rules: string[], spec: Record<string, unknown>): string[] {
  const obj = { apiVersion: 'x.example.com/v1', kind: 'X', metadata: { name: 'x' }, spec };
  return celValidate(obj, undefined, schemaWith(rules), [], true).errors.map((c) => c.message);
}

describe('local-cluster: Kubernetes CEL library functions', () => {
  it('lists: isSorted, sum, min and max over ints and doubles', () => {
    const rules = ['self.sizes.isSorted()', 'self.sizes.sum() == 6', 'self.sizes.min() == 1', 'self.sizes.max() == 3', 'self.weights.sum() < 1.0'];
    expect(failures(rules, { sizes: [1, 2, 3], weights: [0.25, 0.5] })).to.deep.equal([]);
    expect(failures(rules, { sizes: [3, 1, 2, 1], weights: [0.5, 0.75] })).to.deep.equal([
      'Invalid value: "object": failed rule: self.sizes.isSorted()',
      'Invalid value: "object": failed rule: self.sizes.sum() == 6',
      'Invalid value: "object": failed rule: self.weights.sum() < 1.0',
    ]);
  });

  it('lists: min of an empty list is an evaluation error, reported with the rule', () => {
    expect(failures(['self.sizes.min() > 0'], { sizes: [] })).to.deep.equal([
      'Invalid value: "object": min called on empty list evaluating rule: self.sizes.min() > 0',
    ]);
  });

  it('isURL: an absolute URI or an absolute path, as Go\'s url.ParseRequestURI', () => {
    const rule = ['isURL(self.site)'];
    for (const ok of ['https://example.com/a?b=c', '/relative/to/root', 'mailto:a@example.com']) expect(failures(rule, { site: ok }), ok).to.deep.equal([]);
    for (const bad of ['example.com', 'not a url', '']) {
      expect(failures(rule, { site: bad }), bad).to.deep.equal(['Invalid value: "object": failed rule: isURL(self.site)']);
    }
  });

  it('strings extension: lowerAscii, split, join, indexOf', () => {
    const rules = ["self.site.lowerAscii() == self.site", "self.site.split('/').size() == 3", "['a', 'b'].join('-') == 'a-b'", "self.site.indexOf('/') == 1"];
    expect(failures(rules, { site: 'a/b/c' })).to.deep.equal([]);
    expect(failures(rules, { site: 'A/b' })).to.deep.equal([
      'Invalid value: "object": failed rule: self.site.lowerAscii() == self.site',
      'Invalid value: "object": failed rule: self.site.split(\'/\').size() == 3',
    ]);
  });
});
