/**
 * Gemma 4's native tool calls on the real runner: a tiny random Gemma 4 (Gemma 4's vocabulary
 * size, through the Node-API addon) with Gemma 4's real chat template and the Gemma-4-shaped
 * tokenizer (Gemma 4's special tokens at Gemma 4's ids), served over HTTP like a published model.
 * The weights are random, so the call is forced (`toolChoice`): the prompt opens
 * `<|tool_call>call:get_weather` and the grammar-constrained sampler writes the arguments in
 * Gemma 4's own syntax, valid for the tool's schema, whatever the model prefers. The call is
 * parsed, the callback runs, its result is rendered in the template's `tool_responses` form and
 * the model continues from the cached conversation.
 * @jest-environment node
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { ChatTemplate, LLMModule, ResourceFetcher, type GenerationStats, type ToolCall, type ToolDefinition } from '../../src';
import { ToolPrompt } from '../../src/tools';
import { HfServer } from '../support/hfServer';
import { nodeAdapters } from '../support/nodeAdapters';
import { GEMMA4_TEMPLATE, GEMMA4_TOKENIZER_CONFIG, gemma4Files, publishTinyGemma4 } from './support/gemma4';
import { createRealNative } from './support/realNative';

const WEATHER: ToolDefinition = {
  name: 'get_weather',
  description: 'Weather forecast for a city.',
  parameters: {
    type: 'object',
    properties: {
      units: { type: 'string', enum: ['celsius', 'fahrenheit'] },
      city: { type: 'string', maxLength: 24 },
      days: { type: 'integer', minimum: 1, maximum: 7 },
      options: { type: 'object', properties: { hourly: { type: 'boolean' } }, required: ['hourly'] },
    },
    required: ['city', 'days', 'options'],
  },
};

let server: HfServer;
let docs: string;
let llm: LLMModule;

beforeAll(async () => {
  server = new HfServer();
  await server.start();
  docs = mkdtempSync(join(tmpdir(), 'rne-e2e-gemma4-'));
  const model = publishTinyGemma4(server);
  const resources = new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl });
  const localFiles = await resources.fetchModel(model, 'xnnpack');
  const native = createRealNative({ os: 'android', isSimulator: false, osVersion: '34' });
  llm = new LLMModule({ model, localFiles, resources, native });
  await llm.load();
});

afterAll(async () => {
  llm?.release();
  await server?.stop();
  if (docs) rmSync(docs, { recursive: true, force: true });
});

describe("Gemma 4's native tool calls on the real runner (tiny random Gemma 4)", () => {
  it('toolChoice forces a call in Gemma 4 syntax: parsed, run, answered, continued', async () => {
    const calls: ToolCall[] = [];
    let callRound: GenerationStats | null = null;
    llm.configure({
      // The budget covers the shortest valid call (one token per byte is the bound it checks).
      generationConfig: { temperature: 0, maxNewTokens: 96 },
      toolsConfig: {
        tools: [WEATHER],
        toolChoice: { name: 'get_weather' },
        displayToolCalls: true,
        maxRounds: 2,
        executeToolCallback: async (call) => {
          calls.push(call);
          callRound = llm.stats;
          return 'Sunny, 24 degrees.';
        },
      },
    });
    const pieces: string[] = [];
    const answer = await llm.sendMessage('What is the weather in Kraków this week?', { onToken: (p) => pieces.push(p) });
    const streamed = pieces.join('');
    const afterCall = llm.stats as GenerationStats;
    process.stdout.write(
      `gemma4 forced call: ${JSON.stringify(streamed.slice(0, 200))}\n` +
        `  call round: prompt ${callRound!.promptTokens}, generated ${callRound!.generatedTokens}; ` +
        `next round: reused ${afterCall.reusedTokens}, prefilled ${afterCall.promptTokens}\n`,
    );

    // One call, its arguments valid for the schema (the grammar), keys in the template's order.
    expect(calls).toHaveLength(1);
    const args = calls[0]!.arguments as Record<string, unknown>;
    expect(calls[0]!.toolName).toBe('get_weather');
    expect(typeof args.city).toBe('string');
    expect((args.city as string).length).toBeLessThanOrEqual(24);
    expect(Number.isInteger(args.days) && (args.days as number) >= 1 && (args.days as number) <= 7).toBe(true);
    expect(typeof (args.options as { hourly?: unknown }).hourly).toBe('boolean');
    if ('units' in args) expect(['celsius', 'fahrenheit']).toContain(args.units);
    expect(Object.keys(args)).toEqual(Object.keys(args).sort((a, b) => a.toLowerCase().localeCompare(b.toLowerCase())));
    // The stream is the call exactly as Gemma 4 writes one, then the continuation.
    expect(streamed).toMatch(/^<\|tool_call>call:get_weather\{.*\}<tool_call\|>/s);

    // History: the call, the result, the continuation; the template re-renders the call byte
    // for byte as it was generated.
    const history = llm.messageHistory;
    expect(history.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(history[1]?.toolCalls).toEqual(calls);
    expect(history[2]).toEqual({ role: 'tool', content: 'Sunny, 24 degrees.', toolName: 'get_weather' });
    expect(history[3]?.content).toBe(answer);
    const call = streamed.slice(0, streamed.indexOf('<tool_call|>') + '<tool_call|>'.length);
    const template = ChatTemplate.fromFiles({ chatTemplateJinja: GEMMA4_TEMPLATE, tokenizerConfig: GEMMA4_TOKENIZER_CONFIG });
    const rendered = new ToolPrompt(template, [WEATHER])
      .renderParts(history.slice(0, 3), { addGenerationPrompt: false })
      .map((part) => part.text)
      .join('');
    expect(rendered).toContain(`${call}<|tool_response>response:get_weather{value:<|"|>Sunny, 24 degrees.<|"|>}<tool_response|>`);

    // The next round is prefilled on top of the cached conversation. The re-rendered history
    // leaves out the generation prompt's empty thought channel, so it diverges from the cache
    // just before the call; past the sliding window, the runner restores the ring checkpoint it
    // saved 16 tokens before the end of the call round's prefill.
    expect(afterCall.reusedTokens).toBeGreaterThanOrEqual(callRound!.reusedTokens + callRound!.promptTokens - 16);
    expect(afterCall.generatedTokens).toBeGreaterThan(0);
  });

  it('rejects a response syntax the runner does not know, naming the option', async () => {
    const native = createRealNative({ os: 'android', isSimulator: false, osVersion: '34' });
    const { pte, tokenizer } = gemma4Files();
    const handle = await native.loadLLM({ modelPath: pte, tokenizerPath: tokenizer, backend: 'xnnpack' });
    try {
      const config = {
        maxNewTokens: 4,
        temperature: 0,
        topK: 0,
        topP: 1,
        minP: 0,
        repetitionPenalty: 1,
        seed: 0,
        stopStrings: [],
        responseFormat: '{"type": "object"}',
        responseSyntax: 'yaml',
      } as unknown as Parameters<typeof native.generate>[2];
      // The seam validates the config before queueing: a synchronous throw or a rejection.
      await expect((async () => native.generate(handle, 'Hi', config, () => {}))()).rejects.toThrow(
        'config.responseSyntax must be "json" or "gemma4"',
      );
    } finally {
      native.release(handle);
    }
  });
});
