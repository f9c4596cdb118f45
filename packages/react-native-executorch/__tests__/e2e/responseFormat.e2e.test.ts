/**
 * generate(messages, { responseFormat }) end to end: the real SmolLM2 export run by the C++
 * runner through the Node-API addon answers with JSON that parses and satisfies the schema
 * (grammar-constrained sampling in the C++ sampler), also when maxNewTokens cuts the answer short
 * (the constraint closes the document within it); a Zod-style schema (a union, a nullable, a
 * recursive type, a pattern and a format) holds; `{ regex }` and `{ grammar }` (GBNF) constrain a
 * whole answer; `{ jsonSchema, strict: true }` refuses the unknown format a plain schema
 * ignores; a schema, regex or grammar the constraint cannot guarantee, or a maxNewTokens
 * below the schema's shortest document, is an invalid_argument error that says so.
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

// What Zod 4's toJSONSchema writes for z.object({ name, email: z.email().nullable(), code:
// z.string().regex(...), role: z.union([z.enum([...]), z.int().min(0).max(9)]), manager:
// Employee }) with a recursive Employee.
const CODE = '^[A-Z]{3}-\\d{3}$';
const EMPLOYEE: JsonSchema = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 20 },
    email: { anyOf: [{ type: 'string', format: 'email', maxLength: 30 }, { type: 'null' }] },
    code: { type: 'string', pattern: CODE },
    role: { anyOf: [{ type: 'string', enum: ['admin', 'user'] }, { type: 'integer', minimum: 0, maximum: 9 }] },
    manager: { $ref: '#/$defs/Node' },
  },
  required: ['name', 'email', 'code', 'role', 'manager'],
  additionalProperties: false,
  $defs: {
    Node: {
      type: 'object',
      properties: {
        name: { type: 'string', maxLength: 12 },
        reports: { type: 'array', items: { $ref: '#/$defs/Node' }, maxItems: 2 },
      },
      required: ['name', 'reports'],
      additionalProperties: false,
    },
  },
};

interface TreeNode {
  name: string;
  reports: TreeNode[];
}

function expectNode(node: TreeNode): void {
  expect(Object.keys(node)).toEqual(['name', 'reports']);
  expect(typeof node.name).toBe('string');
  expect([...node.name].length).toBeLessThanOrEqual(12);
  expect(node.reports.length).toBeLessThanOrEqual(2);
  node.reports.forEach(expectNode);
}

it('answers a Zod-style schema: union, nullable, recursive type, pattern and format', async () => {
  llm.configure({ generation: { temperature: 0, maxNewTokens: 120, repetitionPenalty: 1.2 } });
  const answer = await llm.generate(
    [{ role: 'user', content: 'Describe an employee of a small company as JSON.' }],
    { responseFormat: EMPLOYEE },
  );
  const employee = JSON.parse(answer);
  expect(Object.keys(employee)).toEqual(['name', 'email', 'code', 'role', 'manager']);
  expect([...employee.name].length).toBeLessThanOrEqual(20);
  if (employee.email !== null) expect(employee.email).toMatch(/^[A-Za-z0-9_+.-]+@[A-Za-z0-9.-]+\.[A-Za-z0-9]+$/);
  expect(employee.code).toMatch(new RegExp(CODE));
  expect(['admin', 'user', 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]).toContain(employee.role);
  expectNode(employee.manager);
  expect(llm.stats?.stopReason).toBe('eos');
  llm.configure({ generation: { temperature: 0, maxNewTokens: 80, repetitionPenalty: 1.2 } });
});

it('constrains a whole answer to a regex with responseFormat: { regex }', async () => {
  const regex = '(Yes|No), [a-z]+( [a-z]+){0,6}\\.';
  const answer = await llm.generate([{ role: 'user', content: 'Is Paris the capital of France?' }], {
    responseFormat: { regex },
  });
  expect(answer).toMatch(new RegExp(`^(?:${regex})$`));
  expect(llm.stats?.stopReason).toBe('eos');
  // The next call without it is free text again.
  const free = await llm.generate([{ role: 'user', content: 'What is the capital of France?' }]);
  expect(free).toContain('Paris');
});

// A GBNF grammar (llama.cpp's format, as llama.rn takes it) that no regex can say: nested lists.
const LIST_GRAMMAR = `
root  ::= "[" items "]"
items ::= item (", " item){1,3}
item  ::= word | "[" items "]"
word  ::= [a-z]{2,10}
`;

function parseList(text: string): unknown[] {
  let at = 0;
  const list = (): unknown[] => {
    if (text[at++] !== '[') throw new Error(`expected '[' at ${at - 1} in ${text}`);
    const items: unknown[] = [];
    for (;;) {
      if (text[at] === '[') {
        items.push(list());
      } else {
        const word = /^[a-z]{2,10}/.exec(text.slice(at));
        if (!word) throw new Error(`expected a word at ${at} in ${text}`);
        items.push(word[0]);
        at += word[0].length;
      }
      if (text.startsWith(', ', at)) {
        at += 2;
        continue;
      }
      if (text[at++] !== ']') throw new Error(`expected ']' at ${at - 1} in ${text}`);
      if (items.length < 2 || items.length > 4) throw new Error(`${items.length} items in ${text}`);
      return items;
    }
  };
  const value = list();
  if (at !== text.length) throw new Error(`trailing text at ${at} in ${text}`);
  return value;
}

it('constrains a whole answer to a GBNF grammar with responseFormat: { grammar }', async () => {
  expect(() => parseList('[ab, [cd]]')).toThrow('1 items'); // the checker can fail
  const answer = await llm.generate([{ role: 'user', content: 'List some fruits, grouped by colour.' }], {
    responseFormat: { grammar: LIST_GRAMMAR },
  });
  expect(parseList(answer).length).toBeGreaterThanOrEqual(2);
  expect(llm.stats?.stopReason).toBe('eos');
  const bad = llm.generate([{ role: 'user', content: 'hi' }], {
    responseFormat: { grammar: 'root ::= item\nitem ::= item "x" | "y"\n' },
  });
  await expect(bad).rejects.toThrow("grammar line 2, column 1: rule 'item' is left-recursive");
  expect(await codeOf(bad)).toBe('invalid_argument');
});

it('refuses a schema keyword or a regex feature it cannot guarantee, naming it', async () => {
  const schema = llm.generate([{ role: 'user', content: 'hi' }], {
    responseFormat: { type: 'string', pattern: '^(?!admin)[a-z]+$' },
  });
  await expect(schema).rejects.toThrow("'#/pattern': regex '^(?!admin)[a-z]+$' at offset 1: lookaround");
  expect(await codeOf(schema)).toBe('invalid_argument');
  const keyword = llm.generate([{ role: 'user', content: 'hi' }], {
    responseFormat: { type: 'number', multipleOf: 0.7 },
  });
  await expect(keyword).rejects.toThrow("'#/multipleOf'");
  const regex = llm.generate([{ role: 'user', content: 'hi' }], { responseFormat: { regex: '(a)\\1' } });
  await expect(regex).rejects.toThrow('backreferences are not supported');
  expect(await codeOf(regex)).toBe('invalid_argument');
});

it('with { jsonSchema, strict: true } refuses the unknown format a plain schema ignores', async () => {
  // OpenAPI's int64: an annotation to JSON Schema, so the plain schema generates.
  const schema: JsonSchema = {
    type: 'object',
    properties: { id: { type: 'integer', format: 'int64' } },
    required: ['id'],
  };
  const ask = [{ role: 'user' as const, content: 'Give a record id as JSON.' }];
  expect(Number.isInteger(JSON.parse(await llm.generate(ask, { responseFormat: schema })).id)).toBe(true);
  expect(Number.isInteger(JSON.parse(await llm.generate(ask, { responseFormat: { jsonSchema: schema } })).id)).toBe(
    true,
  );
  const strict = llm.generate(ask, { responseFormat: { jsonSchema: schema, strict: true } });
  await expect(strict).rejects.toThrow("format 'int64' is not supported by constrained generation");
  expect(await codeOf(strict)).toBe('invalid_argument');
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
