// Request bodies checked by the schema the OpenAPI document publishes
// (lib/src/request-body.ts): the first problem, worded as POST /jobs words
// its own, for the three bodies checked that way.
import { expect } from 'chai';
import { z } from 'zod';
import { readUrlField, urlRequestSchema, URL_MAX_LENGTH } from '../src/media-info/platform-url.js';
import { NOT_AN_OBJECT, parseRequestBody, type FieldProblem } from '../src/request-body.js';

const renames = z.object({
  renames: z.array(z.object({ job_id: z.string({ error: 'must be a string' }) }, { error: 'must be an object with job_id' }), { error: 'must be an array' }),
  level: z.enum(['a', 'b'], { error: "Invalid level. Must be 'a' or 'b'" }).default('a'),
});

describe('lib: request bodies checked by their published schema', () => {
  // What each body answers: its error, and the one problem found (code and field), none for a body that is not an object.
  const cases: [string, unknown, string, [FieldProblem['code'], string]?][] = [
    ['not an object', [1], NOT_AN_OBJECT],
    ['null', null, NOT_AN_OBJECT],
    ['a required field absent', {}, "Missing required field 'renames'", ['missing_field', 'renames']],
    ['a required field null (null counts as absent)', { renames: null }, "Missing required field 'renames'", ['missing_field', 'renames']],
    ['the wrong type', { renames: 'x' }, "Invalid field 'renames': must be an array", ['invalid_field', 'renames']],
    ['a bad list entry, by its index', { renames: [{ job_id: 'a' }, 7] }, "Invalid field 'renames[1]': must be an object with job_id", ['invalid_field', 'renames[1]']],
    ['a nested field, by its path', { renames: [{ job_id: 5 }] }, "Invalid field 'renames[0].job_id': must be a string", ['invalid_field', 'renames[0].job_id']],
    ['a whole-sentence message, as it is', { renames: [], level: 'c' }, "Invalid level. Must be 'a' or 'b'", ['invalid_field', 'level']],
  ];
  for (const [what, body, error, problem] of cases) {
    it(`${what}: ${error}`, () => {
      const problems = problem ? [{ code: problem[0], param: problem[1], message: error }] : [];
      expect(parseRequestBody(renames, body)).to.deep.equal({ ok: false, error, problems });
    });
  }

  it('every problem of a body, in the schema\'s order; the first is the error', () => {
    expect(parseRequestBody(renames, { renames: [{ job_id: 1 }, 'x', { job_id: 'ok' }], level: 'z' })).to.deep.equal({
      ok: false,
      error: "Invalid field 'renames[0].job_id': must be a string",
      problems: [
        { code: 'invalid_field', param: 'renames[0].job_id', message: "Invalid field 'renames[0].job_id': must be a string" },
        { code: 'invalid_field', param: 'renames[1]', message: "Invalid field 'renames[1]': must be an object with job_id" },
        { code: 'invalid_field', param: 'level', message: "Invalid level. Must be 'a' or 'b'" },
      ],
    });
  });

  it('a valid body, its defaults applied; a null optional field is its default', () => {
    expect(parseRequestBody(renames, { renames: [{ job_id: 'j' }], level: null })).to.deep.equal({ ok: true, data: { renames: [{ job_id: 'j' }], level: 'a' } });
  });

  it('POST /metadata and /is-short: the url trimmed, blank as missing, too long refused; the same schema is the document\'s', () => {
    expect(readUrlField({ url: '  https://a.example/v  ' })).to.deep.equal({ ok: true, url: 'https://a.example/v' });
    expect(readUrlField({ url: '   ' })).to.deep.equal({ ok: false, error: "Missing required field 'url'" });
    expect(readUrlField({ url: 3 })).to.deep.equal({ ok: false, error: "Invalid field 'url': must be a string" });
    expect(readUrlField({ url: `https://a.example/${'x'.repeat(URL_MAX_LENGTH)}` }))
      .to.deep.equal({ ok: false, error: `Invalid field 'url': must be at most ${URL_MAX_LENGTH} characters` });
    const doc = z.toJSONSchema(urlRequestSchema, { io: 'input' }) as unknown as { properties: { url: { maxLength?: number } } };
    expect(doc.properties.url.maxLength).to.equal(URL_MAX_LENGTH);
  });
});
