/**
 * Tool calling: parsing the formats models answer in, the fallback format for templates that
 * render no tools, and the call / result / continue loop of LLMModule (on the fake native
 * module; __tests__/e2e/tools.e2e.test.ts runs a round trip on the real runner).
 * @jest-environment node
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  ChatTemplate,
  LLMModule,
  parseToolCalls,
  ResourceFetcher,
  type Message,
  type ToolCall,
  type ToolDefinition,
} from '../src';
import { ToolPrompt } from '../src/tools';
import { toFallbackMessages } from '../src/tools/prompt';
import { codeOf } from './support/errorCode';
import { FakeNative } from '../src/testing/fakeNative';
import { HfServer } from './support/hfServer';
import { nodeAdapters } from './support/nodeAdapters';
import { publishOn } from './support/publishedModel';
import gemmaConfig from './fixtures/gemma3_tokenizer_config.json';
import smolConfig from './fixtures/smollm2_tokenizer_config.json';
import qwenConfig from './fixtures/tool_templates/qwen2_5_tokenizer_config.json';

const WEATHER: ToolDefinition = {
  name: 'get_weather',
  description: 'Current weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const PARIS_CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>';

describe('parseToolCalls', () => {
  it('reads Hermes / Qwen tagged calls, several, with text around them', () => {
    const parsed = parseToolCalls(
      'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n' +
        '<tool_call>{"name": "get_time", "arguments": {"zone": "CET", "precise": true}}</tool_call>',
    );
    expect(parsed).toEqual({
      calls: [
        { toolName: 'get_weather', arguments: { city: 'Paris' } },
        { toolName: 'get_time', arguments: { zone: 'CET', precise: true } },
      ],
      content: 'Let me check.',
      errors: [],
    });
  });

  it('reads a last call the answer ended inside (stopped at EOS before the closing tag)', () => {
    expect(parseToolCalls('<tool_call>\n{"name": "f", "arguments": {}}\n').calls).toEqual([
      { toolName: 'f', arguments: {} },
    ]);
  });

  it('reads Llama 3 bare JSON calls ("parameters"), after <|python_tag|>, and lists of them', () => {
    expect(parseToolCalls('{"name": "get_weather", "parameters": {"city": "Kraków"}}').calls).toEqual([
      { toolName: 'get_weather', arguments: { city: 'Kraków' } },
    ]);
    expect(parseToolCalls('<|python_tag|>{"name": "f", "parameters": {"x": 1}}').calls).toEqual([
      { toolName: 'f', arguments: { x: 1 } },
    ]);
    expect(parseToolCalls('[{"name": "a", "arguments": {}}, {"name": "b", "parameters": {"y": [1]}}]').calls).toEqual([
      { toolName: 'a', arguments: {} },
      { toolName: 'b', arguments: { y: [1] } },
    ]);
  });

  it('takes arguments written as a JSON string (OpenAI wire format)', () => {
    expect(parseToolCalls('<tool_call>{"name": "f", "arguments": "{\\"a\\": 2}"}</tool_call>').calls).toEqual([
      { toolName: 'f', arguments: { a: 2 } },
    ]);
  });

  it('leaves answers without calls alone, JSON answers that are not calls included', () => {
    expect(parseToolCalls('Paris is sunny.')).toEqual({ calls: [], content: 'Paris is sunny.', errors: [] });
    expect(parseToolCalls('{"city": "Paris"}').calls).toEqual([]);
    expect(parseToolCalls('{"name": "Ada", "age": 36}').calls).toEqual([]);
    expect(parseToolCalls('{"name": "Ada", "parameters": 3}')).toEqual({ calls: [], content: '{"name": "Ada", "parameters": 3}', errors: [] });
  });

  it('reports botched calls as errors that say what is wrong', () => {
    const parsed = parseToolCalls(
      '<tool_call>{"name": "f", "arguments": {</tool_call><tool_call>{"arguments": {}}</tool_call>' +
        '<tool_call>{"name": "g", "arguments": [1]}</tool_call>',
    );
    expect(parsed.calls).toEqual([]);
    expect(parsed.errors).toEqual([
      expect.stringContaining('not valid JSON'),
      'a tool call needs a "name" string',
      'the arguments of "g" are not a JSON object',
    ]);
  });
});

describe('the fallback format (templates that render no tools)', () => {
  const conversation: Message[] = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Weather in Paris and Rome?' },
    {
      role: 'assistant',
      content: '',
      toolCalls: [
        { toolName: 'get_weather', arguments: { city: 'Paris' } },
        { toolName: 'get_weather', arguments: { city: 'Rome' } },
      ],
    },
    { role: 'tool', content: 'sunny' },
    { role: 'tool', content: 'rain' },
  ];

  it('joins the system prompt, writes calls as assistant text and results as one user turn', () => {
    const messages = toFallbackMessages(conversation, [WEATHER]);
    expect(messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(messages[0]?.content).toMatch(/^Be brief\.\n\n# Tools\n/);
    expect(messages[0]?.content).toContain(JSON.stringify({ name: WEATHER.name, description: WEATHER.description, parameters: WEATHER.parameters }));
    expect(messages[2]?.content).toBe(
      '<tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call>\n' +
        '<tool_call>{"name":"get_weather","arguments":{"city":"Rome"}}</tool_call>',
    );
    expect(messages[3]?.content).toBe('<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrain\n</tool_response>');
    // What the model is asked to write, it reads back.
    expect(parseToolCalls(messages[2]?.content as string).calls).toEqual(conversation[2]?.toolCalls);
  });

  it('renders through SmolLM2 and Gemma 3 (which insists on alternating turns)', () => {
    for (const config of [smolConfig, gemmaConfig]) {
      const template = ChatTemplate.fromTokenizerConfig(config);
      const prompt = new ToolPrompt(template, [WEATHER]);
      expect(prompt.native).toBe(false);
      const text = prompt.render(conversation);
      expect(text).toContain('<tool_response>\nrain\n</tool_response>');
      expect(text).toContain('"name": <tool-name>');
    }
  });

  it('puts the instruction in a system message of its own when there is none', () => {
    const [head] = toFallbackMessages([{ role: 'user', content: 'Hi' }], [WEATHER]);
    expect(head).toEqual({ role: 'system', content: expect.stringMatching(/^# Tools\n/) });
  });
});

describe('LLMModule tool loop', () => {
  let server: HfServer;
  let docs: string;

  beforeEach(async () => {
    server = new HfServer();
    await server.start();
    docs = await mkdtemp(join(tmpdir(), 'rne-tools-'));
  });

  afterEach(async () => {
    await server.stop();
    await rm(docs, { recursive: true, force: true });
  });

  /** A module whose fake model answers with `answer(prompt)`, on `config`'s chat template. */
  async function loaded(answer: (prompt: string) => string | string[], config: object = smolConfig) {
    const native = new FakeNative({ answer: (prompt) => [answer(prompt)].flat(), tokenIntervalMs: 2 });
    const model = publishOn(server, 'acme/tools', 'r1', config);
    const resources = new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl });
    const llm = new LLMModule({ model, resources, native });
    await llm.load();
    return { llm, native };
  }

  /** Calls get_weather(Paris) until a result is in the prompt, then answers with it. */
  const weatherModel = (prompt: string) => {
    const result = /<tool_response>\n(.*)\n<\/tool_response>/.exec(prompt);
    return result ? `It is ${result[1]} in Paris.` : PARIS_CALL;
  };

  it('runs the call, feeds the result back and continues (fallback format, SmolLM2)', async () => {
    const { llm, native } = await loaded(weatherModel);
    const calls: ToolCall[] = [];
    llm.configure({
      toolsConfig: { tools: [WEATHER], executeToolCallback: async (call) => (calls.push(call), 'sunny') },
    });
    const pieces: string[] = [];
    const answer = await llm.sendMessage('Weather in Paris?', { onToken: (p) => pieces.push(p) });

    expect(answer).toBe('It is sunny in Paris.');
    expect(calls).toEqual([{ toolName: 'get_weather', arguments: { city: 'Paris' } }]);
    expect(native.prompts).toHaveLength(2);
    expect(native.prompts[1]).toContain(
      '<|im_start|>assistant\n<tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call><|im_end|>\n' +
        '<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
    );
    // Every round streams; the history keeps the question and the final answer only.
    expect(pieces).toEqual([PARIS_CALL, 'It is sunny in Paris.']);
    expect(llm.messageHistory).toEqual([
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: 'It is sunny in Paris.' },
    ]);
  });

  it("renders calls and results through the model's own template when it renders tools (Qwen 2.5)", async () => {
    const { llm, native } = await loaded(weatherModel, qwenConfig);
    llm.configure({
      toolsConfig: { tools: [WEATHER], executeToolCallback: async () => 'sunny', displayToolCalls: true },
    });
    expect(await llm.sendMessage('Weather in Paris?')).toBe('It is sunny in Paris.');
    const template = ChatTemplate.fromTokenizerConfig(qwenConfig);
    expect(native.prompts[0]).toBe(template.render([{ role: 'user', content: 'Weather in Paris?' }], { tools: [WEATHER] }));
    expect(native.prompts[0]).toContain(`{"type": "function", "function": {"name": "get_weather"`);
    expect(native.prompts[1]).toContain(
      '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
        '<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
    );
    // displayToolCalls: the call and its result stay in the history.
    expect(llm.messageHistory).toEqual([
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: '', toolCalls: [{ toolName: 'get_weather', arguments: { city: 'Paris' } }] },
      { role: 'tool', content: 'sunny', toolName: 'get_weather' },
      { role: 'assistant', content: 'It is sunny in Paris.' },
    ]);
    // The next turn renders that history through the template again.
    await llm.sendMessage('Thanks!');
    expect(native.prompts[2]).toContain('<tool_response>\nsunny\n</tool_response>');
  });

  it('stops after maxRounds generations of a model that keeps calling', async () => {
    const { llm, native } = await loaded(() => `Checking.${PARIS_CALL}`);
    const callback = jest.fn(async () => 'sunny');
    llm.configure({ toolsConfig: { tools: [WEATHER], executeToolCallback: callback, maxRounds: 3 } });
    expect(await llm.sendMessage('Weather?')).toBe('Checking.');
    expect(native.prompts).toHaveLength(3);
    expect(callback).toHaveBeenCalledTimes(2);
  });

  it('answers unknown tools and botched calls with an error result, without calling the app', async () => {
    const answers = [
      '<tool_call>{"name": "get_wether", "arguments": {"city": "Paris"}}</tool_call>',
      '<tool_call>{"name": "get_weather", "arguments": {"city": </tool_call>',
      'Sorry.',
    ];
    const { llm, native } = await loaded(() => answers.shift() as string);
    const callback = jest.fn(async () => 'sunny');
    llm.configure({ toolsConfig: { tools: [WEATHER], executeToolCallback: callback } });
    expect(await llm.sendMessage('Weather?')).toBe('Sorry.');
    expect(callback).not.toHaveBeenCalled();
    expect(native.prompts[1]).toContain('Error: there is no tool named "get_wether". Available tools: get_weather.');
    expect(native.prompts[2]).toContain('Error: not valid JSON');
  });

  it('ends the turn when every call of a round returns null (nothing to tell the model)', async () => {
    const { llm, native } = await loaded(() => `Turning the lights on.\n${PARIS_CALL}`);
    llm.configure({ toolsConfig: { tools: [WEATHER], executeToolCallback: async () => null } });
    expect(await llm.sendMessage('Lights on')).toBe('Turning the lights on.');
    expect(native.prompts).toHaveLength(1);
  });

  it('runs no call of an interrupted generation and ends the turn with its text', async () => {
    const { llm, native } = await loaded(() => PARIS_CALL.match(/.{1,8}/g) as string[]);
    const callback = jest.fn(async () => 'sunny');
    llm.configure({ toolsConfig: { tools: [WEATHER], executeToolCallback: callback } });
    const pieces: string[] = [];
    const answer = await llm.sendMessage('Weather?', {
      onToken: (piece) => {
        pieces.push(piece);
        if (pieces.length === 3) llm.interrupt();
      },
    });
    expect(llm.stats?.stopReason).toBe('interrupted');
    expect(answer).toBe(pieces.join(''));
    expect(answer).toMatch(/^<tool_call>\{"name"/);
    expect(callback).not.toHaveBeenCalled();
    expect(native.prompts).toHaveLength(1);
  });

  it('toolChoice { name }: the first generation is constrained to a call of that tool, later ones are free', async () => {
    const { llm, native } = await loaded((prompt) =>
      prompt.includes('<tool_response>\nsunny') ? 'It is sunny.' : '{"name":"get_weather","arguments":{"city":"Paris"}}',
    );
    const callback = jest.fn(async () => 'sunny');
    llm.configure({ toolsConfig: { tools: [WEATHER], executeToolCallback: callback, toolChoice: { name: 'get_weather' } } });
    expect(await llm.sendMessage('Paris?')).toBe('It is sunny.');
    expect(callback).toHaveBeenCalledWith({ toolName: 'get_weather', arguments: { city: 'Paris' } });
    expect(JSON.parse(native.configs[0]?.responseFormat as string)).toEqual({
      type: 'object',
      properties: { name: { const: 'get_weather' }, arguments: WEATHER.parameters },
      required: ['name', 'arguments'],
    });
    expect(native.configs[1]?.responseFormat).toBeUndefined();
  });

  it('rejects a toolChoice that names no tool', async () => {
    const { llm } = await loaded(() => 'x');
    const config = { tools: [WEATHER], executeToolCallback: async () => null, toolChoice: { name: 'get_time' } };
    expect(await codeOf(() => llm.configure({ toolsConfig: config }))).toBe('invalid_argument');
  });

  it('rejects a maxRounds that is not a positive integer', async () => {
    const { llm } = await loaded(() => 'x');
    const executeToolCallback = async () => null;
    expect(await codeOf(() => llm.configure({ toolsConfig: { tools: [WEATHER], executeToolCallback, maxRounds: 0 } }))).toBe(
      'invalid_argument',
    );
  });
});
