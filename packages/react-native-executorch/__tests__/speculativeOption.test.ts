/**
 * generationConfig.speculative: checked when configured (a bad value throws `invalid_argument`
 * naming it and leaves the configuration as it was), and sent to the native side as its flat
 * options (drafter, maxDraftTokens, ngramMax, ngramMin), only the ones given.
 * @jest-environment node
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { LLMModule, ResourceFetcher, type SpeculativeConfig } from '../src';
import { FakeNative } from '../src/testing/fakeNative';
import { HfServer } from './support/hfServer';
import { nodeAdapters } from './support/nodeAdapters';
import { publishWithAssistant } from './support/publishedModel';

let server: HfServer;
let docs: string;

beforeEach(async () => {
  server = new HfServer();
  await server.start();
  docs = await mkdtemp(join(tmpdir(), 'rne-speculative-'));
});

afterEach(async () => {
  await server.stop();
  await rm(docs, { recursive: true, force: true });
});

async function loaded(): Promise<{ native: FakeNative; llm: LLMModule }> {
  const native = new FakeNative({ answer: () => ['yes', '.'] });
  // With its assistant drafter's program, so that drafter 'assistant' is available too.
  const llm = new LLMModule({
    model: publishWithAssistant(server),
    assistant: true,
    resources: new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl }),
    native,
  });
  await llm.load();
  return { native, llm };
}

const ask = [{ role: 'user' as const, content: 'Repeat: yes.' }];

/** The speculative part of a native config. */
function speculativeFields(config: object): Record<string, unknown> {
  const names = ['drafter', 'maxDraftTokens', 'ngramMax', 'ngramMin', 'speculative'];
  return Object.fromEntries(Object.entries(config).filter(([name]) => names.includes(name)));
}

it('sends the options given, flat, and nothing when speculative is absent or turned off', async () => {
  const { native, llm } = await loaded();
  await llm.generate(ask);
  llm.configure({ generationConfig: { speculative: { drafter: 'promptLookup' } } });
  await llm.generate(ask);
  llm.configure({
    generationConfig: { speculative: { drafter: 'promptLookup', maxDraftTokens: 6, ngramMax: 4, ngramMin: 2 } },
  });
  await llm.generate(ask);
  // Another generation setting keeps speculative as it was.
  llm.configure({ generationConfig: { temperature: 0 } });
  await llm.generate(ask);
  llm.configure({ generationConfig: { speculative: { drafter: 'assistant', ngramMin: undefined } } });
  await llm.generate(ask);
  llm.configure({ generationConfig: { speculative: undefined } });
  await llm.generate(ask);
  expect(native.configs.map(speculativeFields)).toEqual([
    {},
    { drafter: 'promptLookup' },
    { drafter: 'promptLookup', maxDraftTokens: 6, ngramMax: 4, ngramMin: 2 },
    { drafter: 'promptLookup', maxDraftTokens: 6, ngramMax: 4, ngramMin: 2 },
    { drafter: 'assistant' },
    {},
  ]);
  llm.release();
});

it('refuses a bad speculative config, naming what is wrong, and keeps the previous one', async () => {
  const { native, llm } = await loaded();
  llm.configure({ generationConfig: { speculative: { drafter: 'promptLookup', maxDraftTokens: 3 } } });
  const cases: [unknown, string][] = [
    [{ drafter: 'lookup' }, `speculative.drafter "lookup" is not one of 'promptLookup', 'assistant'`],
    [{}, 'speculative.drafter undefined is not one of'],
    [{ drafter: 'promptLookup', maxDraftTokens: 0 }, 'speculative.maxDraftTokens 0 is not an integer >= 1'],
    [{ drafter: 'promptLookup', maxDraftTokens: 2.5 }, 'speculative.maxDraftTokens 2.5 is not an integer >= 1'],
    [{ drafter: 'promptLookup', ngramMin: 0 }, 'speculative.ngramMin 0 is not an integer >= 1'],
    [{ drafter: 'promptLookup', ngramMax: -1 }, 'speculative.ngramMax -1 is not an integer >= 1'],
    [{ drafter: 'promptLookup', ngramMin: 3, ngramMax: 2 }, 'speculative.ngramMin 3 is above ngramMax 2'],
    [{ drafter: 'promptLookup', draftTokens: 4 }, 'speculative.draftTokens is not an option'],
    ['promptLookup', 'speculative must be an object'],
  ];
  for (const [speculative, message] of cases) {
    expect(() => llm.configure({ generationConfig: { speculative: speculative as SpeculativeConfig } })).toThrow(
      expect.objectContaining({ code: 'invalid_argument', message: expect.stringContaining(message) }),
    );
  }
  // The edge values themselves are accepted.
  llm.configure({ generationConfig: { speculative: { drafter: 'promptLookup', maxDraftTokens: 1, ngramMin: 1, ngramMax: 1 } } });
  llm.configure({ generationConfig: { speculative: { drafter: 'promptLookup', maxDraftTokens: 3 } } });
  await llm.generate(ask);
  expect(native.configs.map(speculativeFields)).toEqual([{ drafter: 'promptLookup', maxDraftTokens: 3 }]);
  llm.release();
});
