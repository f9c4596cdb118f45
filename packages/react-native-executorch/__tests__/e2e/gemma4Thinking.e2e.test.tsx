/**
 * Thinking on and off through LLMModule and useLLM on the real runner: the tiny random Gemma 4
 * with Gemma 4's real template and the Gemma-4-shaped tokenizer. The runner must prefill exactly
 * the ids transformers' apply_chat_template(enable_thinking=..., tokenize=True) gives
 * (fixtures/gemma4_chat_expected.json: thinking on adds the `<|think|>` system turn, off ends the
 * generation prompt with an empty thought channel, earlier thoughts are stripped), and keep the
 * thought channel's markers as text (the runner refuses a kept text that is not one of the
 * model's special tokens). Random weights do not think on their own: the thought splitting
 * itself is covered by the jest suites (thinking.test.tsx) on scripted answers.
 */
import { act, renderHook, waitFor } from '@testing-library/react-native';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { LLMModule, ResourceFetcher, useLLM, type LLMDescriptor, type Message, type ModelFiles } from '../../src';
import expected from '../fixtures/gemma4_chat_expected.json';
import { HfServer } from '../support/hfServer';
import { nodeAdapters } from '../support/nodeAdapters';
import { publishTinyGemma4 } from './support/gemma4';
import { createRealNative } from './support/realNative';

interface Case {
  readonly name: string;
  readonly enable_thinking?: boolean;
  readonly add_generation_prompt: boolean;
  readonly messages: Message[];
  readonly ids?: number[];
}
const CASES = (expected.templates['gemma4.jinja'] as Case[]).filter(
  (c) => c.add_generation_prompt && c.ids && ['thinking on', 'thinking off explicitly', 'earlier answers with thought channels'].includes(c.name),
);
const PLATFORM = { os: 'android', isSimulator: false, osVersion: '34' } as const;

let server: HfServer;
let docs: string;
let model: LLMDescriptor<'xnnpack'>;
let localFiles: ModelFiles;
let resources: ResourceFetcher;

beforeAll(async () => {
  server = new HfServer();
  await server.start();
  docs = mkdtempSync(join(tmpdir(), 'rne-e2e-thinking-'));
  model = publishTinyGemma4(server);
  resources = new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl });
  localFiles = await resources.fetchModel(model, 'xnnpack');
});

afterAll(async () => {
  await server?.stop();
  if (docs) rmSync(docs, { recursive: true, force: true });
});

describe('thinking on the real runner (tiny Gemma 4): LLMModule', () => {
  let llm: LLMModule;
  beforeAll(async () => {
    llm = new LLMModule({ model, localFiles, resources, native: createRealNative(PLATFORM) });
    await llm.load();
  });
  afterAll(() => llm?.release());

  expect(CASES).toHaveLength(3);
  it.each(CASES.map((c) => [c.name, c] as const))('%s: the runner prefills the ids transformers gives', async (_, c) => {
    llm.configure({ chatConfig: { thinking: c.enable_thinking ?? false }, generationConfig: { temperature: 0, maxNewTokens: 3 } });
    expect(llm.countTokens(c.messages)).toBe(c.ids!.length);
    llm.clearHistory();
    const thoughts: string[] = [];
    await llm.generate(c.messages, { onThought: (t) => thoughts.push(t) });
    const stats = llm.stats!;
    expect(stats.reusedTokens + stats.promptTokens).toBe(c.ids!.length);
    expect(stats.generatedTokens).toBeGreaterThan(0);
  });

  it('sendMessage with thinking on keeps the answer and its thought apart in the history', async () => {
    llm.clearHistory();
    llm.configure({ chatConfig: { thinking: true }, generationConfig: { temperature: 0, maxNewTokens: 6 } });
    const answer = await llm.sendMessage('Why is the sky blue?');
    const last = llm.messageHistory[llm.messageHistory.length - 1]!;
    expect(last.role).toBe('assistant');
    expect(last.content).toBe(answer);
    // No channel markup leaks into the answer, whatever the random model wrote.
    expect(answer).not.toMatch(/<\|channel>|<channel\|>/);
    // The next turn's prompt strips the earlier thought, as the template does.
    const next: Message[] = [...llm.messageHistory, { role: 'user', content: 'And at sunset?' }];
    const withoutThought = next.map(({ thought: _, ...m }) => m);
    expect(llm.countTokens(next)).toBe(llm.countTokens(withoutThought));
  });
});

describe('thinking on the real runner (tiny Gemma 4): useLLM', () => {
  it('configure({ chatConfig: { thinking } }) changes the prompt the runner prefills, as the template says', async () => {
    const native = createRealNative(PLATFORM);
    const hook = renderHook(() => useLLM({ model, localFiles, resources, native }));
    await waitFor(() => expect(hook.result.current.isReady).toBe(true), { timeout: 60000 });
    const byName = (name: string) => CASES.find((c) => c.name === name)!;
    for (const [thinking, c] of [
      [true, byName('thinking on')],
      [false, byName('thinking off explicitly')],
    ] as const) {
      act(() => hook.result.current.configure({ chatConfig: { thinking }, generationConfig: { temperature: 0, maxNewTokens: 3 } }));
      await act(async () => {
        await hook.result.current.generate(c.messages);
      });
      const stats = hook.result.current.stats!;
      expect(stats.reusedTokens + stats.promptTokens).toBe(c.ids!.length);
    }
    hook.unmount();
  });
});
