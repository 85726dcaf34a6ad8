// charts/mediajobs/values.schema.json is what Helm checks values against (JSON Schema draft-07) at install,
// upgrade, lint and template. The chart's own values.yaml passes it, and the mistakes it is there for fail
// it: a string where a count goes (the chart would render `replicas: "two"`, which the apiserver refuses),
// a misspelt key, an empty API server list that would open the runners' egress.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv, type ErrorObject } from 'ajv';
import { expect } from 'chai';
import { parse } from 'yaml';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const root = (path: string) => fileURLToPath(new URL(`../../${path}`, import.meta.url));
const schema = JSON.parse(readFileSync(root('charts/mediajobs/values.schema.json'), 'utf8')) as Obj;
const values = () => parse(readFileSync(root('charts/mediajobs/values.yaml'), 'utf8')) as Obj;
const validate = new Ajv({ allErrors: true, strict: true }).compile(schema);

function errors(v: Obj): string[] {
  validate(v);
  return (validate.errors ?? []).map((e: ErrorObject) => `${e.instancePath} ${e.message}`);
}

describe('charts/mediajobs/values.schema.json', () => {
  it('is draft-07, as Helm reads it', () => {
    expect(schema.$schema).to.equal('http://json-schema.org/draft-07/schema#');
  });

  it('accepts the chart\'s values.yaml', () => {
    expect(errors(values())).to.deep.equal([]);
  });

  it('refuses a string for a replica count', () => {
    const v = values();
    v.gateway.replicas = 'two';
    expect(errors(v)).to.deep.equal(['/gateway/replicas must be integer']);
  });

  it('refuses a misspelt key', () => {
    const v = values();
    v.operator.maxRuningJobs = 5;
    expect(errors(v)).to.deep.equal(['/operator must NOT have additional properties']);
  });

  it('refuses an empty list of API server addresses and a bad log level', () => {
    const v = values();
    v.runner.networkPolicy.apiServerCidrs = [];
    v.logLevel = 'verbose';
    expect(errors(v)).to.deep.equal(['/logLevel must be equal to one of the allowed values', '/runner/networkPolicy/apiServerCidrs must NOT have fewer than 1 items']);
  });
});
