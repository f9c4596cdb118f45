/**
 * generate(messages, { responseFormat }) end to end: the real SmolLM2 export run by the C++
 * runner through the Node-API addon answers with JSON that parses and satisfies the schema
 * (grammar-constrained sampling in the C++ sampler), also when maxNewTokens cuts the answer short
 * (the constraint closes the document within it); a schema the grammar cannot guarantee, or a
 * maxNewTokens below the schema's shortest document, is an invalid_argument error that says so.
 * @jest-environment node
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { LLMModule, ResourceFetcher, type JsonSchema } from '../../src';
import { HfServer } from '../support/hfServer';
import { codeOf } from '../support/errorCode';
import { nodeAdapters } from '../support/nodeAdapters';
import { publishSmollm2, smollm2Files, TARGETS } from './support/targets';

const REAL = TARGETS.find((target) => target.real);
if (!REAL) throw new Error('the e2e targets have no real runner');

const BOOK: JsonSchema = {
  type: 'object',
  properties: {
    title: { type: 'string' },
    year: { type: 'integer' },
    genre: { enum: ['mystery', 'fantasy', 'science fiction'] },
    inPrint: { type: 'boolean' },
  },
  required: ['title', 'year', 'genre', 'inPrint'],
};

let server: HfServer;
let docs: string;
let llm: LLMModule;

beforeAll(async () => {
  server = new HfServer();
  await server.start();
  docs = mkdtempSync(join(tmpdir(), 'rne-e2e-json-'));
  const resources = new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl });
  llm = new LLMModule({ model: publishSmollm2(server, smollm2Files()), native: REAL.create(), resources });
  llm.configure({ generation: { temperature: 0, maxNewTokens: 80, repetitionPenalty: 1.2 } });
  await llm.load();
});

afterAll(async () => {
  llm?.release();
  await server.stop();
  rmSync(docs, { recursive: true, force: true });
});

it('answers with JSON that parses and has every required field, of the declared types', async () => {
  const answer = await llm.generate([{ role: 'user', content: 'Describe a fictional book as JSON.' }], {
    responseFormat: BOOK,
  });
  const book = JSON.parse(answer);
  expect(Object.keys(book)).toEqual(['title', 'year', 'genre', 'inPrint']);
  expect(typeof book.title).toBe('string');
  expect(Number.isInteger(book.year)).toBe(true);
  expect(['mystery', 'fantasy', 'science fiction']).toContain(book.genre);
  expect(typeof book.inPrint).toBe('boolean');
  expect(llm.stats?.stopReason).toBe('eos');
});

it('constrains one call only: the next call without responseFormat is free text again', async () => {
  const list = await llm.generate([{ role: 'user', content: 'Name three colours.' }], {
    responseFormat: { type: 'array', items: { enum: ['red', 'green', 'blue'] }, minItems: 3, maxItems: 3 },
  });
  expect(JSON.parse(list)).toHaveLength(3);
  const free = await llm.generate([{ role: 'user', content: 'What is the capital of France?' }]);
  expect(free).toContain('Paris');
});

it('refuses a schema keyword it cannot guarantee, naming it', async () => {
  const call = llm.generate([{ role: 'user', content: 'hi' }], {
    responseFormat: { type: 'string', pattern: '^[a-z]+$' },
  });
  await expect(call).rejects.toThrow("'#/pattern'");
  expect(await codeOf(call)).toBe('invalid_argument');
});

const SUMMARY: JsonSchema = {
  type: 'object',
  properties: { summary: { type: 'string' }, year: { type: 'integer' } },
  required: ['summary'],
};

it('closes the document within a tiny maxNewTokens: the long summary is cut, the JSON is whole', async () => {
  llm.configure({ generation: { temperature: 0, maxNewTokens: 24, repetitionPenalty: 1 } });
  const answer = await llm.generate(
    [{ role: 'user', content: 'Summarize the plot of Hamlet in detail, as JSON.' }],
    { responseFormat: SUMMARY },
  );
  const parsed = JSON.parse(answer);
  expect(Object.keys(parsed)).toContain('summary');
  expect(parsed.summary.length).toBeGreaterThan(20); // the model's own text, cut short
  expect(llm.stats?.generatedTokens).toBeLessThanOrEqual(24);
  expect(llm.stats?.stopReason).toBe('eos');
});

it('refuses a maxNewTokens below the shortest document before generating, saying what to do', async () => {
  llm.configure({ generation: { temperature: 0, maxNewTokens: 10 } });
  const call = llm.generate([{ role: 'user', content: 'Summarize Hamlet.' }], { responseFormat: SUMMARY });
  await expect(call).rejects.toThrow(/needs at least 15 tokens.*raise max_new_tokens \(maxNewTokens\)/);
  expect(await codeOf(call)).toBe('invalid_argument');
});
