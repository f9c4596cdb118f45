/**
 * Gemma 4's native tool calls: the parser of `<|tool_call>call:NAME{...}<tool_call|>`, the
 * conversation in the template's `tool_responses` form, and LLMModule's tool loop on Gemma 4's
 * real template (fake native; the format is chosen from the template, never from the model id).
 * @jest-environment node
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { ChatTemplate, LLMModule, models, parseToolCalls, type Message, type ModelFiles, type ToolDefinition } from '../src';
import { FakeNative } from '../src/testing/fakeNative';
import { toGemma4Messages, ToolPrompt } from '../src/tools/prompt';
import expected from './fixtures/gemma4_chat_expected.json';
import { nodeAdapters } from './support/nodeAdapters';

const GEMMA4 = join(__dirname, 'fixtures', 'gemma4');
const JINJA = readFileSync(join(GEMMA4, 'gemma4.jinja'), 'utf8');
const CONFIG = readFileSync(join(GEMMA4, 'tokenizer_config.json'), 'utf8');
const gemma4 = () => ChatTemplate.fromFiles({ chatTemplateJinja: JINJA, tokenizerConfig: CONFIG });

const WEATHER: ToolDefinition = {
  name: 'get_weather',
  description: 'Current weather in a city.',
  parameters: {
    type: 'object',
    properties: {
      city: { type: 'string', description: 'City name, e.g. Paris' },
      unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    },
    required: ['city'],
  },
};
const Q = '<|"|>';

describe('parseToolCalls, Gemma 4 syntax', () => {
  it('reads strings, numbers, booleans, null, nested objects and lists, several calls, text around', () => {
    const answer =
      `Let me check.<|tool_call>call:get_weather{city:${Q}Kraków, "PL" {x}${Q},unit:${Q}celsius${Q}}<tool_call|>` +
      `<|tool_call>call:plan_trip{budget:1200.5,n:-3,ok:true,no:false,none:None,nil:null,` +
      `stops:[{city:${Q}Wien${Q},nights:1},{${Q}city${Q}:${Q}Praha${Q}}],empty:{},list:[]}<tool_call|> Done.`;
    const parsed = parseToolCalls(answer, 'gemma4');
    expect(parsed.errors).toEqual([]);
    expect(parsed.calls).toEqual([
      { toolName: 'get_weather', arguments: { city: 'Kraków, "PL" {x}', unit: 'celsius' } },
      {
        toolName: 'plan_trip',
        arguments: {
          budget: 1200.5, n: -3, ok: true, no: false, none: null, nil: null,
          stops: [{ city: 'Wien', nights: 1 }, { city: 'Praha' }], empty: {}, list: [],
        },
      },
    ]);
    expect(parsed.content).toBe('Let me check. Done.');
  });

  it('reads back every call the real template writes (the fixtures), whatever the arguments', () => {
    for (const [file, cases] of Object.entries(expected.templates)) {
      for (const c of cases as unknown as { prompt?: string; messages: { tool_calls?: { function: { name: string; arguments: unknown } }[] }[] }[]) {
        const written = c.messages.flatMap((m) => m.tool_calls ?? []).filter((t) => typeof t.function.arguments === 'object');
        if (!c.prompt || written.length === 0) continue;
        const turn = c.prompt.slice(c.prompt.indexOf('<|tool_call>'));
        const parsed = parseToolCalls(turn.slice(0, turn.lastIndexOf('<tool_call|>') + '<tool_call|>'.length), 'gemma4');
        expect([file, parsed.calls]).toEqual([file, written.map((t) => ({ toolName: t.function.name, arguments: t.function.arguments }))]);
      }
    }
  });

  it('counts a last call the answer ended inside, and accepts JSON-quoted strings', () => {
    expect(parseToolCalls(`<|tool_call>call:f{a:"x\\"y",b:[1,2]}`, 'gemma4').calls).toEqual([
      { toolName: 'f', arguments: { a: 'x"y', b: [1, 2] } },
    ]);
  });

  it('reports malformed calls as errors naming the tool, keeping the good ones', () => {
    const parsed = parseToolCalls(
      `<|tool_call>call:f{a:${Q}open}<tool_call|><|tool_call>call:g{a:bare words}<tool_call|>` +
        `<|tool_call>nonsense<tool_call|><|tool_call>call:h{a:1} trailing<tool_call|><|tool_call>call:ok{}<tool_call|>`,
      'gemma4',
    );
    expect(parsed.calls).toEqual([{ toolName: 'ok', arguments: {} }]);
    expect(parsed.errors).toHaveLength(4);
    expect(parsed.errors[0]).toMatch(/the arguments of "f" do not parse: a string opened by <\|"\|> never closes/);
    expect(parsed.errors[1]).toMatch(/"bare" is not a value/);
    expect(parsed.errors[2]).toMatch(/must read call:NAME\{\.\.\.\}/);
    expect(parsed.errors[3]).toMatch(/unexpected text after the arguments/);
    expect(parsed.errorTools).toEqual(['f', 'g', undefined, 'h']);
  });

  it('leaves other templates\' formats alone: Gemma 4 markup is only read for Gemma 4 templates', () => {
    const text = `<|tool_call>call:f{a:1}<tool_call|>`;
    expect(parseToolCalls(text).calls).toEqual([]);
    expect(parseToolCalls(text, 'gemma4').calls).toEqual([{ toolName: 'f', arguments: { a: 1 } }]);
    // A call forced as JSON (toolChoice) still reads with the Gemma 4 syntax.
    expect(parseToolCalls('{"name": "f", "arguments": {"a": 1}}', 'gemma4').calls).toEqual([{ toolName: 'f', arguments: { a: 1 } }]);
  });
});

describe("Gemma 4's tool_responses form", () => {
  const conversation: Message[] = [
    { role: 'user', content: 'Weather in Kraków, in celsius?' },
    { role: 'assistant', content: '', toolCalls: [{ toolName: 'get_weather', arguments: { city: 'Kraków', unit: 'celsius' } }] },
    { role: 'tool', toolName: 'get_weather', content: '{"temperature": 3, "sky": "snow ❄", "windy": false}' },
  ];

  it('renders the results inside the calling turn, exactly as transformers does (fixture)', () => {
    const fixture = expected.templates['gemma4.jinja'].find((c) => c.name === 'a tool call and its response, continuing the turn')!;
    expect(new ToolPrompt(gemma4(), [WEATHER]).render(conversation)).toBe(fixture.prompt);
  });

  it('joins the answer after the results into the same model turn; text results become value', () => {
    const messages = toGemma4Messages([
      ...conversation.slice(0, 2),
      { role: 'tool', toolName: 'get_weather', content: 'snowing' },
      { role: 'assistant', content: 'It snows.' },
      { role: 'user', content: 'Thanks' },
    ]);
    expect(messages).toEqual([
      { role: 'user', content: 'Weather in Kraków, in celsius?' },
      {
        role: 'assistant',
        content: 'It snows.',
        tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: { city: 'Kraków', unit: 'celsius' } } }],
        tool_responses: [{ name: 'get_weather', response: 'snowing' }],
      },
      { role: 'user', content: 'Thanks' },
    ]);
    const text = gemma4().renderTemplateMessages(messages, { tools: [WEATHER] });
    expect(text).toContain(
      '<|turn>model\n<|tool_call>call:get_weather{city:<|"|>Kraków<|"|>,unit:<|"|>celsius<|"|>}<tool_call|>' +
        '<|tool_response>response:get_weather{value:<|"|>snowing<|"|>}<tool_response|>It snows.<turn|>\n<|turn>user\nThanks<turn|>\n',
    );
  });
});

describe('LLMModule tool loop on Gemma 4', () => {
  let dir: string;
  let files: ModelFiles;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rne-gemma4-tools-'));
    files = {
      modelPath: join(dir, 'model.pte'),
      tokenizerPath: join(dir, 'tokenizer.json'),
      chatTemplatePath: join(dir, 'tokenizer_config.json'),
    };
    // As recent Hugging Face repos ship it: the template in chat_template.jinja beside the config.
    writeFileSync(files.chatTemplatePath, CONFIG);
    writeFileSync(join(dir, 'chat_template.jinja'), JINJA);
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  async function loaded(answer: (prompt: string) => string) {
    const native = new FakeNative({ answer: (prompt) => [answer(prompt)], tokenIntervalMs: 1 });
    // The model id says SmolLM2: the format must come from the template alone.
    const llm = new LLMModule({ model: models.llm.smollm2_135m, localFiles: files, resources: nodeAdapters(dir), native });
    await llm.load();
    return { llm, native };
  }

  const weatherModel = (prompt: string) => {
    const result = /<\|tool_response>response:get_weather\{(.*?)\}<tool_response\|>/.exec(prompt);
    if (result) return `It is ${result[1]}.`;
    return `<|tool_call>call:get_weather{city:${Q}Paris${Q}}<tool_call|><|tool_call>call:get_weather{city:${Q}Rome${Q},unit:${Q}celsius${Q}}<tool_call|>`;
  };

  it('parses several native calls, runs them, sends the results in tool_responses form and continues', async () => {
    const { llm, native } = await loaded(weatherModel);
    const callback = jest.fn(async (call: { arguments: Record<string, unknown> }) =>
      call.arguments.city === 'Paris' ? JSON.stringify({ sky: 'sunny', temperature: 21 }) : 'rain',
    );
    llm.configure({ toolsConfig: { tools: [WEATHER], executeToolCallback: callback, displayToolCalls: true } });
    const answer = await llm.sendMessage('Weather in Paris and Rome?');

    expect(callback.mock.calls.map(([call]) => call)).toEqual([
      { toolName: 'get_weather', arguments: { city: 'Paris' } },
      { toolName: 'get_weather', arguments: { city: 'Rome', unit: 'celsius' } },
    ]);
    expect(native.prompts[0]).toContain('<|tool>declaration:get_weather{');
    expect(native.prompts[1]!.endsWith(
      '<|turn>model\n<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>' +
        '<|tool_call>call:get_weather{city:<|"|>Rome<|"|>,unit:<|"|>celsius<|"|>}<tool_call|>' +
        '<|tool_response>response:get_weather{sky:<|"|>sunny<|"|>,temperature:21}<tool_response|>' +
        '<|tool_response>response:get_weather{value:<|"|>rain<|"|>}<tool_response|>' +
        '<|channel>thought\n<channel|>',
    )).toBe(true);
    expect(answer).toBe('It is sky:<|"|>sunny<|"|>,temperature:21.');
    expect(llm.messageHistory.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'assistant']);
    // The next turn re-renders that history as one model turn: calls, results, answer.
    await llm.sendMessage('Thanks');
    expect(native.prompts[2]).toContain('<tool_response|>It is sky:<|"|>sunny<|"|>,temperature:21.<turn|>\n<|turn>user\nThanks<turn|>');
  });

  it('stops where the model opens the tool response itself, so an invented result is never read', async () => {
    let round = 0;
    const { llm, native } = await loaded(() =>
      ++round === 1
        ? `<|tool_call>call:get_weather{city:${Q}Oslo${Q}}<tool_call|><|tool_response>response:get_weather{sky:${Q}made up${Q}}<tool_response|>Made up.`
        : 'Snow.',
    );
    const callback = jest.fn(async () => 'snow');
    llm.configure({ toolsConfig: { tools: [WEATHER], executeToolCallback: callback } });
    expect(await llm.sendMessage('Weather in Oslo?')).toBe('Snow.');
    expect(native.configs[0]?.stopStrings).toContain('<|tool_response>');
    expect(native.configs[0]?.keepSpecialTokens).toContain('<|tool_response>');
    expect(callback).toHaveBeenCalledTimes(1);
    expect(native.prompts[1]).toContain('<|tool_response>response:get_weather{value:<|"|>snow<|"|>}<tool_response|>');
    expect(native.prompts[1]).not.toContain('made up');
  });

  it('answers an unknown tool and a malformed call with error results the model can correct', async () => {
    let round = 0;
    const { llm, native } = await loaded(() =>
      ++round === 1
        ? `<|tool_call>call:get_time{}<tool_call|><|tool_call>call:get_weather{city:Paris}<tool_call|>`
        : 'Sorry.',
    );
    const callback = jest.fn(async () => 'sunny');
    llm.configure({ toolsConfig: { tools: [WEATHER], executeToolCallback: callback } });
    expect(await llm.sendMessage('Time and weather?')).toBe('Sorry.');
    expect(callback).not.toHaveBeenCalled();
    expect(native.prompts[1]).toContain(
      '<|tool_response>response:get_weather{value:<|"|>Error: the arguments of "get_weather" do not parse: "Paris" is not a value',
    );
    expect(native.prompts[1]).toContain('<|tool_response>response:get_time{value:<|"|>Error: there is no tool named "get_time"');
  });

  it('sendMessage never throws on a hostile call: a bad escape and deep nesting come back as errors', async () => {
    let round = 0;
    const { llm, native } = await loaded(() =>
      ++round === 1
        ? `<|tool_call>call:get_weather{city:"Pa\\qris"}<tool_call|><|tool_call>call:get_weather{city:${'['.repeat(100_000)}}<tool_call|>` +
          `<|tool_call>call:get_weather{city:"Line one\nline two"}<tool_call|>`
        : 'Sorry.',
    );
    const callback = jest.fn(async () => 'sunny');
    llm.configure({ toolsConfig: { tools: [WEATHER], executeToolCallback: callback } });
    expect(await llm.sendMessage('Weather?')).toBe('Sorry.');
    // The raw newline is read as json.loads(strict=False) reads it; the other two are refused.
    expect(callback.mock.calls).toEqual([[{ toolName: 'get_weather', arguments: { city: 'Line one\nline two' } }]]);
    expect(native.prompts[1]).toContain('Error: the arguments of "get_weather" do not parse: "\\q" is not a JSON escape');
    expect(native.prompts[1]).toContain('objects and lists nest deeper than 64 levels');
  });

  it('forces a call in its own syntax with toolChoice: the prompt opens the call, the grammar writes the arguments', async () => {
    const { llm, native } = await loaded((prompt) =>
      prompt.includes('<|tool_response>') ? 'Done.' : '{city:<|"|>Oslo<|"|>}',
    );
    const callback = jest.fn(async () => 'cold');
    llm.configure({ toolsConfig: { tools: [WEATHER], executeToolCallback: callback, toolChoice: { name: 'get_weather' } } });
    const pieces: string[] = [];
    expect(await llm.sendMessage('Oslo?', { onToken: (piece) => pieces.push(piece) })).toBe('Done.');
    expect(native.prompts[0]?.endsWith('<|turn>model\n<|channel>thought\n<channel|><|tool_call>call:get_weather')).toBe(true);
    expect(native.configs[0]).toMatchObject({ responseSyntax: 'gemma4', keepSpecialTokens: ['<|"|>'] });
    expect(JSON.parse(native.configs[0]?.responseFormat ?? 'null')).toEqual({ type: 'object', ...WEATHER.parameters });
    expect(native.configs[1]).not.toHaveProperty('responseSyntax');
    expect(callback).toHaveBeenCalledWith({ toolName: 'get_weather', arguments: { city: 'Oslo' } });
    expect(native.prompts[1]).toContain('<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|><|tool_response>');
    expect(pieces.join('')).toBe('<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>Done.');
  });
});
