/**
 * The special tokens LLMModule asks the runner to keep in the streamed text: the markers its
 * template's parsers read (Gemma 4's thought channel and tool calls are special tokens, which
 * the runner otherwise drops), and none for templates whose parsers need none.
 * @jest-environment node
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { LLMModule, models, type ModelFiles, type ToolDefinition } from '../src';
import { FakeNative } from '../src/testing/fakeNative';
import { nodeAdapters } from './support/nodeAdapters';

const FIXTURES = join(__dirname, 'fixtures');
const GEMMA4_THOUGHT = ['<|channel>', '<channel|>'];
const GEMMA4_CALLS = ['<|tool_call>', '<tool_call|>', '<|"|>', '<|tool_response>'];
const Q = '<|"|>';

const WEATHER: ToolDefinition = {
  name: 'get_weather',
  description: 'Current weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

/** A model directory: tokenizer_config.json, and chat_template.jinja when given. */
interface TemplateFiles {
  readonly tokenizerConfig: string;
  readonly chatTemplateJinja?: string;
}

const gemma4: TemplateFiles = {
  tokenizerConfig: readFileSync(join(FIXTURES, 'gemma4', 'tokenizer_config.json'), 'utf8'),
  chatTemplateJinja: readFileSync(join(FIXTURES, 'gemma4', 'gemma4.jinja'), 'utf8'),
};
const chatml: TemplateFiles = {
  tokenizerConfig: readFileSync(join(FIXTURES, 'smollm2_tokenizer_config.json'), 'utf8'),
};
const gemma3: TemplateFiles = {
  tokenizerConfig: readFileSync(join(FIXTURES, 'gemma3_tokenizer_config.json'), 'utf8'),
};

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'rne-keep-special-'));
});

afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function loaded(template: TemplateFiles, answer: (prompt: string) => string) {
  const files: ModelFiles = {
    modelPath: join(dir, 'model.pte'),
    tokenizerPath: join(dir, 'tokenizer.json'),
    chatTemplatePath: join(dir, 'tokenizer_config.json'),
  };
  writeFileSync(files.chatTemplatePath, template.tokenizerConfig);
  if (template.chatTemplateJinja) writeFileSync(join(dir, 'chat_template.jinja'), template.chatTemplateJinja);
  const native = new FakeNative({ answer: (prompt) => [answer(prompt)], tokenIntervalMs: 1 });
  const llm = new LLMModule({ model: models.llm.smollm2_135m, localFiles: files, resources: nodeAdapters(dir), native });
  await llm.load();
  return { llm, native };
}

describe('keepSpecialTokens', () => {
  it('Gemma 4 keeps its thought channel, with thinking on or off, and the thought is split off', async () => {
    const { llm, native } = await loaded(gemma4, () => '<|channel>thought\nHmm.<channel|>Paris.');
    llm.configure({ chatConfig: { thinking: true } });
    const tokens: string[] = [];
    expect(await llm.sendMessage('Capital of France?', { onToken: (t) => tokens.push(t) })).toBe('Paris.');
    expect(llm.thought).toBe('Hmm.');
    expect(tokens.join('')).toBe('Paris.');
    llm.configure({ chatConfig: { thinking: false } });
    await llm.sendMessage('And of Italy?');
    expect(native.configs.map((c) => c.keepSpecialTokens)).toEqual([GEMMA4_THOUGHT, GEMMA4_THOUGHT]);
  });

  it('Gemma 4 with tools also keeps the tool-call markers, and the call is parsed and run', async () => {
    const { llm, native } = await loaded(gemma4, (prompt) =>
      prompt.includes('<|tool_response>') ? 'Sunny.' : `<|tool_call>call:get_weather{city:${Q}Paris${Q}}<tool_call|>`,
    );
    const callback = jest.fn(async () => 'sunny');
    llm.configure({ toolsConfig: { tools: [WEATHER], executeToolCallback: callback } });
    expect(await llm.sendMessage('Weather in Paris?')).toBe('Sunny.');
    expect(callback).toHaveBeenCalledWith({ toolName: 'get_weather', arguments: { city: 'Paris' } });
    expect(native.configs.map((c) => c.keepSpecialTokens)).toEqual([
      [...GEMMA4_THOUGHT, ...GEMMA4_CALLS],
      [...GEMMA4_THOUGHT, ...GEMMA4_CALLS],
    ]);
  });

  it("a forced Gemma 4 call (its arguments, no thought channel) keeps only the string quote", async () => {
    const { llm, native } = await loaded(gemma4, (prompt) =>
      prompt.includes('<|tool_response>') ? 'Sunny.' : '{city:<|"|>Paris<|"|>}',
    );
    llm.configure({
      toolsConfig: { tools: [WEATHER], executeToolCallback: async () => 'sunny', toolChoice: { name: 'get_weather' } },
    });
    await llm.sendMessage('Weather in Paris?');
    expect(native.configs[0]?.responseFormat).toBeDefined();
    expect(native.configs[0]?.keepSpecialTokens).toEqual(['<|"|>']);
    expect(native.configs[1]?.keepSpecialTokens).toEqual([...GEMMA4_THOUGHT, ...GEMMA4_CALLS]);
  });

  it.each([
    ['ChatML (SmolLM2)', chatml],
    ['Gemma 3', gemma3],
  ])('%s keeps none, with or without tools: the config is what it was before', async (_name, template) => {
    const { llm, native } = await loaded(template, () => 'Paris.');
    await llm.sendMessage('Capital of France?');
    llm.configure({ toolsConfig: { tools: [WEATHER], executeToolCallback: async () => 'sunny' } });
    await llm.sendMessage('Weather?');
    expect(native.configs).toHaveLength(2);
    for (const config of native.configs) expect(config).not.toHaveProperty('keepSpecialTokens');
  });
});
