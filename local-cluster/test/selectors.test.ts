import { expect } from 'chai';
import { StatusError } from '../src/errors.js';
import { fieldSelectorIndexHints, labelSelectorMatcher, parseFieldSelector, parseLabelSelector } from '../src/selectors.js';
import type { KubeObject } from '../src/types.js';

function badRequestMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof StatusError && err.code === 400 && err.reason === 'BadRequest') return err.message;
    throw err;
  }
  throw new Error('expected a 400 BadRequest');
}

const withLabels = (labels: Record<string, string>): KubeObject => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', labels } });
const web = withLabels({ app: 'web', tier: 'front', n: '5', 'example.com/role': 'x' });

const QUALIFIED_NAME = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

describe('parseLabelSelector', () => {
  const matches: [string | undefined, boolean][] = [
    [undefined, true],
    ['', true],
    ['app=web', true],
    ['app==web', true],
    ['app!=web', false],
    ['app!=db', true],
    ['missing!=x', true],
    ['app in (web,db)', true],
    ['app notin (web)', false],
    ['missing notin (x)', true],
    ['app', true],
    ['!app', false],
    ['!missing', true],
    ['app=web,tier=back', false],
    ['app=web,tier=front', true],
    [' app = web , tier in ( front ) ', true],
    ['n>3', true],
    ['n<3', false],
    ['app>3', false], // a non-integer label value never compares
    ['app in ()', false], // "()" is the set containing only ""
    ['app=', false],
    ['missing=', false],
    ['app in (in)', false], // "in" is a value inside parentheses
    ['example.com/role=x', true],
  ];
  for (const [selector, expected] of matches) {
    it(`${JSON.stringify(selector)} ${expected ? 'matches' : 'does not match'}`, () => {
      expect(parseLabelSelector(selector)(web)).to.equal(expected);
    });
  }

  it('treats a missing labels map as empty', () => {
    const bare: KubeObject = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' } };
    expect([parseLabelSelector('!a')(bare), parseLabelSelector('a')(bare)]).to.deep.equal([true, false]);
  });

  const errors: [string, string][] = [
    ['a in', "unable to parse requirement: found '' expected: '('"],
    ['a b', "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"],
    ['a=b,', "found '', expected: identifier after ','"],
    ['a=b c', "found 'c', expected: ',' or 'end of string'"],
    ['=a', "found '=', expected: !, identifier, or 'end of string'"],
    ['a in (b c)', "unable to parse requirement: found 'c', expected: ',' or ')'"],
    ['-a=b', `unable to parse requirement: <nil>: Invalid value: "-a": name part ${QUALIFIED_NAME}`],
    ['a=-b', `unable to parse requirement: values[0][a]: Invalid value: "-b": ${LABEL_VALUE}`],
    ['a>x', `unable to parse requirement: values[0]: Invalid value: "x": for 'Gt', 'Lt' operators, the value must be an integer`],
    ['Example.com/a=b', "unable to parse requirement: <nil>: Invalid value: \"Example.com/a\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"],
  ];
  for (const [selector, message] of errors) {
    it(`${JSON.stringify(selector)} → 400 ${message.slice(0, 50)}…`, () => {
      expect(badRequestMessage(() => parseLabelSelector(selector))).to.equal(message);
    });
  }
});

describe('labelSelectorMatcher', () => {
  const cases: [string, Parameters<typeof labelSelectorMatcher>[0], boolean][] = [
    ['no selector matches nothing', undefined, false],
    ['an empty selector matches everything', {}, true],
    ['matchLabels', { matchLabels: { app: 'web', tier: 'front' } }, true],
    ['matchLabels mismatch', { matchLabels: { app: 'db' } }, false],
    ['In', { matchExpressions: [{ key: 'app', operator: 'In', values: ['db', 'web'] }] }, true],
    ['NotIn', { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['web'] }] }, false],
    ['Exists', { matchExpressions: [{ key: 'tier', operator: 'Exists' }] }, true],
    ['DoesNotExist', { matchExpressions: [{ key: 'tier', operator: 'DoesNotExist' }] }, false],
    ['labels and expressions are ANDed', { matchLabels: { app: 'web' }, matchExpressions: [{ key: 'zone', operator: 'Exists' }] }, false],
  ];
  for (const [name, selector, expected] of cases) {
    it(name, () => {
      expect(labelSelectorMatcher(selector)(web)).to.equal(expected);
    });
  }

  const errors: [string, Parameters<typeof labelSelectorMatcher>[0], string][] = [
    ['an unknown operator', { matchExpressions: [{ key: 'a', operator: 'Gt', values: ['1'] }] }, '"Gt" is not a valid label selector operator'],
    ['In without values', { matchExpressions: [{ key: 'a', operator: 'In', values: [] }] }, "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"],
    ['an invalid key', { matchLabels: { '-a': 'b' } }, `key: Invalid value: "-a": name part ${QUALIFIED_NAME}`],
  ];
  for (const [name, selector, message] of errors) {
    it(`${name} → 400`, () => {
      expect(badRequestMessage(() => labelSelectorMatcher(selector))).to.equal(message);
    });
  }
});

describe('parseFieldSelector', () => {
  const job: KubeObject = { apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'demo', namespace: 'default' }, status: { succeeded: 1 } };
  const pod: KubeObject = {
    apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p1', namespace: 'ns' },
    spec: { nodeName: 'local', restartPolicy: 'Never' },
    status: { phase: 'Running', podIPs: [{ ip: '10.0.0.7' }] },
  };
  const event: KubeObject = {
    apiVersion: 'v1', kind: 'Event', metadata: { name: 'demo.1', namespace: 'default' },
    involvedObject: { kind: 'MediaJob', name: 'demo', namespace: 'default', uid: 'u-1' },
    reason: 'Started', type: 'Normal', reportingComponent: 'mediajob-operator',
  };
  const secret: KubeObject = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's', namespace: 'default' }, type: 'Opaque' };
  const odd: KubeObject = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a,b=c\\d', namespace: 'default' } };
  const cr: KubeObject = { apiVersion: 'media.example.com/v1', kind: 'MediaJob', metadata: { name: 'm', namespace: 'default' }, spec: { color: 'red', replicas: 2 } };

  const cases: [string, KubeObject, string | undefined, boolean][] = [
    ['no selector', job, undefined, true],
    ['metadata.name', job, 'metadata.name=demo', true],
    ['== is =', job, 'metadata.name==demo', true],
    ['!=', job, 'metadata.name!=demo', false],
    ['AND of terms', job, 'metadata.name=demo,metadata.namespace=other', false],
    ['Job status.successful', job, 'status.successful=1', true],
    ['Pod spec.nodeName', pod, 'spec.nodeName=local', true],
    ['Pod spec.host is spec.nodeName', pod, 'spec.host=local', true],
    ['Pod status.phase', pod, 'status.phase=Running', true],
    ['Pod status.podIP comes from podIPs', pod, 'status.podIP=10.0.0.7', true],
    ['Pod spec.hostNetwork defaults to false', pod, 'spec.hostNetwork=false', true],
    ['Pod status.podIPs is accepted but never set', pod, 'status.podIPs=', true],
    ['Event: kubectl describe', event, 'involvedObject.name=demo,involvedObject.namespace=default,involvedObject.kind=MediaJob,involvedObject.uid=u-1', true],
    ['Event source falls back to reportingComponent', event, 'source=mediajob-operator', true],
    ['Event reason and type', event, 'reason=Started,type=Normal', true],
    ['Secret type', secret, 'type=Opaque', true],
    ['escaped , = and \\ in a value', odd, 'metadata.name=a\\,b\\=c\\\\d', true],
    ['custom resource metadata.namespace', cr, 'metadata.namespace=default', true],
  ];
  for (const [name, obj, selector, expected] of cases) {
    it(`${name}: ${String(selector)}`, () => {
      const builtin = obj.kind !== 'MediaJob';
      expect(parseFieldSelector(selector, obj.kind, builtin)(obj)).to.equal(expected);
    });
  }

  it('custom resource selectableFields', () => {
    const opts = { selectableFields: ['.spec.color', '.spec.replicas'] };
    expect(parseFieldSelector('spec.color=red,spec.replicas=2', 'MediaJob', false, opts)(cr)).to.equal(true);
    expect(parseFieldSelector('spec.color!=red', 'MediaJob', false, opts)(cr)).to.equal(false);
  });

  const errors: [string, string, boolean, string][] = [
    ['foo', 'Job', true, "invalid selector: 'foo'; can't understand 'foo'"],
    ['zzz=1,aaa', 'Job', true, "invalid selector: 'zzz=1,aaa'; can't understand 'aaa'"], // terms are sorted first
    ['metadata.name=a=b', 'Job', true, 'invalid field selector: unescapedRune character in value: 61'],
    ['metadata.name=a\\x', 'Job', true, 'invalid field selector: invalid escape sequence: \\x'],
    ['metadata.name=a\\', 'Job', true, 'invalid field selector: invalid escape sequence: \\'],
    ['spec.foo=x', 'Job', true, 'field label "spec.foo" not supported for batchv1.Job'],
    ['spec.foo=x', 'Pod', true, 'field label not supported: spec.foo'],
    ['involvedObject.foo=x', 'Event', true, 'field label not supported: involvedObject.foo'],
    ['metadata.namespace=x', 'Namespace', true, 'field label not supported: metadata.namespace'],
    ['data.x=1', 'ConfigMap', true, '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"'],
    ['spec.foo=x', 'MediaJob', false, 'field label not supported: spec.foo'],
  ];
  for (const [selector, kind, builtin, message] of errors) {
    it(`${kind} ${JSON.stringify(selector)} → 400`, () => {
      expect(badRequestMessage(() => parseFieldSelector(selector, kind, builtin))).to.equal(message);
    });
  }

  it('cluster-scoped custom resources reject metadata.namespace', () => {
    expect(badRequestMessage(() => parseFieldSelector('metadata.namespace=x', 'Widget', false, { namespaced: false })))
      .to.equal('field label not supported: metadata.namespace');
  });
});

describe('fieldSelectorIndexHints', () => {
  const cases: [string | undefined, { name?: string; namespace?: string }][] = [
    [undefined, {}],
    ['metadata.name=demo', { name: 'demo' }],
    ['metadata.namespace==ns,metadata.name=demo', { name: 'demo', namespace: 'ns' }],
    ['metadata.name!=demo', {}],
    ['metadata.name=a\\,b', { name: 'a,b' }],
    ['garbage', {}],
  ];
  for (const [selector, expected] of cases) {
    it(String(selector), () => {
      expect(fieldSelectorIndexHints(selector)).to.deep.equal(expected);
    });
  }
});
