// The committed types (src/generated/openapi.ts) are what openapi-typescript
// makes of the gateway's current OpenAPI document: a change to the document
// without `npm run generate -w clients/typescript` fails here.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { GENERATED_FILE, generateTypes } from '../scripts/generate-types.js';

describe('@mediajobs/client generated types', function () {
  this.timeout(60_000);

  it('are exactly what the gateway\'s current /openapi.json generates', async () => {
    const fresh = await generateTypes();
    const committed = readFileSync(GENERATED_FILE, 'utf8');
    if (fresh !== committed) {
      const a = committed.split('\n');
      const b = fresh.split('\n');
      const line = a.findIndex((l, i) => l !== b[i]);
      expect.fail(`src/generated/openapi.ts is stale (first difference at line ${line + 1}: ${JSON.stringify(a[line])} is now ${JSON.stringify(b[line])}): run npm run generate -w clients/typescript`);
    }
  });

  it('change when the document does: a field added to Job appears in the generated Job', async () => {
    const { openApiDocument } = await import('../../../api-gateway/src/openapi/document.js');
    const doc = openApiDocument() as { components: { schemas: Record<string, { properties: Record<string, unknown> }> } };
    doc.components.schemas.Job!.properties.speed_bps = { type: 'integer' };
    const text = await generateTypes(doc);
    expect(text).to.not.equal(readFileSync(GENERATED_FILE, 'utf8'));
    expect(text).to.match(/speed_bps\?: number;/);
  });
});
