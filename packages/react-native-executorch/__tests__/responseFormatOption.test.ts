/**
 * generate(messages, { responseFormat }) picks the native option by the format's shape: an
 * object with only a string `grammar` is a GBNF grammar (responseGrammar), only a string `regex`
 * a regex (responseRegex), only `jsonSchema` and a boolean `strict` that schema (responseFormat) with
 * responseStrict, anything else a JSON Schema sent as its JSON text (responseFormat).
 * @jest-environment node
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { LLMModule, ResourceFetcher } from '../src';
import { FakeNative } from '../src/testing/fakeNative';
import { HfServer } from './support/hfServer';
import { nodeAdapters } from './support/nodeAdapters';
import { publishOn } from './support/publishedModel';

let server: HfServer;
let docs: string;

beforeEach(async () => {
  server = new HfServer();
  await server.start();
  docs = await mkdtemp(join(tmpdir(), 'rne-format-'));
});

afterEach(async () => {
  await server.stop();
  await rm(docs, { recursive: true, force: true });
});

/** An LLMModule loaded over a fake native module that answers "yes." */
async function loaded(): Promise<{ native: FakeNative; llm: LLMModule }> {
  const native = new FakeNative({ answer: () => ['yes', '.'] });
  const llm = new LLMModule({
    model: publishOn(server),
    resources: new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl }),
    native,
  });
  await llm.load();
  return { native, llm };
}

const GRAMMAR = 'root ::= ("yes" | "no") "."\n';

it('sends { grammar } as responseGrammar, { regex } as responseRegex, a schema as its JSON', async () => {
  const { native, llm } = await loaded();
  const ask = [{ role: 'user' as const, content: 'Yes or no?' }];
  await llm.generate(ask, { responseFormat: { grammar: GRAMMAR } });
  await llm.generate(ask, { responseFormat: { regex: '(yes|no)\\.' } });
  // Not only a string `grammar`: a JSON Schema (whose keywords the native side checks).
  await llm.generate(ask, { responseFormat: { grammar: GRAMMAR, type: 'string' } });
  await llm.generate(ask, { responseFormat: { grammar: 3 } });
  await llm.generate(ask);
  const formats = native.configs.map(({ responseFormat, responseRegex, responseGrammar }) => ({
    responseFormat,
    responseRegex,
    responseGrammar,
  }));
  expect(formats).toEqual([
    { responseFormat: undefined, responseRegex: undefined, responseGrammar: GRAMMAR },
    { responseFormat: undefined, responseRegex: '(yes|no)\\.', responseGrammar: undefined },
    {
      responseFormat: JSON.stringify({ grammar: GRAMMAR, type: 'string' }),
      responseRegex: undefined,
      responseGrammar: undefined,
    },
    { responseFormat: '{"grammar":3}', responseRegex: undefined, responseGrammar: undefined },
    { responseFormat: undefined, responseRegex: undefined, responseGrammar: undefined },
  ]);
  llm.release();
});

it('sends { jsonSchema, strict } as the schema and responseStrict; other keys make it a schema', async () => {
  const { native, llm } = await loaded();
  const ask = [{ role: 'user' as const, content: 'Yes or no?' }];
  const schema = { type: 'string', format: 'int64' };
  await llm.generate(ask, { responseFormat: { jsonSchema: schema, strict: true } });
  await llm.generate(ask, { responseFormat: { jsonSchema: schema, strict: false } });
  await llm.generate(ask, { responseFormat: { jsonSchema: true } });
  // Not only `jsonSchema` and a boolean `strict`: a JSON Schema of its own.
  await llm.generate(ask, { responseFormat: { jsonSchema: schema, strict: 'yes' } });
  await llm.generate(ask, { responseFormat: { jsonSchema: schema, type: 'object' } });
  const formats = native.configs.map(({ responseFormat, responseStrict }) => ({ responseFormat, responseStrict }));
  expect(formats).toEqual([
    { responseFormat: JSON.stringify(schema), responseStrict: true },
    { responseFormat: JSON.stringify(schema), responseStrict: undefined },
    { responseFormat: 'true', responseStrict: undefined },
    { responseFormat: JSON.stringify({ jsonSchema: schema, strict: 'yes' }), responseStrict: undefined },
    { responseFormat: JSON.stringify({ jsonSchema: schema, type: 'object' }), responseStrict: undefined },
  ]);
  llm.release();
});

it('refuses an empty regex or grammar instead of generating unconstrained', async () => {
  const { native, llm } = await loaded();
  const ask = [{ role: 'user' as const, content: 'Yes or no?' }];
  for (const responseFormat of [{ regex: '' }, { grammar: '' }, { grammar: ' \n' }]) {
    await expect(llm.generate(ask, { responseFormat })).rejects.toMatchObject({
      code: 'invalid_argument',
      message: expect.stringContaining('is empty'),
    });
  }
  expect(native.configs).toHaveLength(0);
  llm.release();
});
