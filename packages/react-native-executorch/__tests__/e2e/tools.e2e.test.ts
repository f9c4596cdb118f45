/**
 * A tool-call round trip on the real runner: SmolLM2 (greedy, through the Node-API addon) is
 * given a tool in the fallback format (its template renders no tools), calls it, the app's
 * callback runs, its result goes back to the model, and the model answers with it.
 * SmolLM2-135M does not call tools reliably on its own, so two earlier exchanges in the history
 * show it the format (few-shot examples, as apps do for small models); greedy decoding makes
 * the run repeatable. With `toolChoice` the grammar-constrained sampler (responseFormat) makes
 * the call instead, with no examples.
 * @jest-environment node
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { LLMModule, ResourceFetcher, type Message, type ModelFiles, type ToolCall, type ToolDefinition } from '../../src';
import { HfServer } from '../support/hfServer';
import { nodeAdapters } from '../support/nodeAdapters';
import { createRealNative } from './support/realNative';
import { publishSmollm2, smollm2Files } from './support/targets';

const WEATHER: ToolDefinition = {
  name: 'get_weather',
  description: 'Current weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const call = (city: string): Message => ({
  role: 'assistant',
  content: '',
  toolCalls: [{ toolName: 'get_weather', arguments: { city } }],
});
/** Two solved exchanges: the call format and how a result turns into an answer. */
const EXAMPLES: Message[] = [
  { role: 'user', content: 'What is the weather in Rome?' },
  call('Rome'),
  { role: 'tool', content: 'Rain, 12 degrees.' },
  { role: 'assistant', content: 'In Rome it is raining and 12 degrees.' },
  { role: 'user', content: 'What is the weather in Oslo?' },
  call('Oslo'),
  { role: 'tool', content: 'Snow, -3 degrees.' },
  { role: 'assistant', content: 'In Oslo it is snowing and -3 degrees.' },
];

let server: HfServer;
let docs: string;
let files: ModelFiles;
let llm: LLMModule;

beforeAll(async () => {
  server = new HfServer();
  await server.start();
  docs = mkdtempSync(join(tmpdir(), 'rne-e2e-tools-'));
  const model = publishSmollm2(server, smollm2Files());
  const resources = new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl });
  files = await resources.fetchModel(model, 'xnnpack');
  const native = createRealNative({ os: 'android', isSimulator: false, osVersion: '34' });
  llm = new LLMModule({ model, localFiles: files, resources, native });
  await llm.load();
});

afterAll(async () => {
  llm?.release();
  await server.stop();
  rmSync(docs, { recursive: true, force: true });
});

describe('tool calling on the real runner (SmolLM2)', () => {
  it('calls the tool, runs the callback, feeds the result back and answers with it', async () => {
    const calls: ToolCall[] = [];
    const pieces: string[] = [];
    llm.configure({
      chatConfig: { initialMessageHistory: EXAMPLES },
      generationConfig: { temperature: 0, maxNewTokens: 48 },
      toolsConfig: {
        tools: [WEATHER],
        displayToolCalls: true,
        executeToolCallback: async (call) => {
          calls.push(call);
          return 'Sunny, 24 degrees.';
        },
      },
    });
    const answer = await llm.sendMessage('What is the weather in Paris?', { onToken: (p) => pieces.push(p) });
    process.stdout.write(`tool round trip: ${JSON.stringify(pieces.join(''))}\n`);

    expect(calls).toEqual([{ toolName: 'get_weather', arguments: { city: 'Paris' } }]);
    expect(answer).toMatch(/sunny.*24|24.*sunny/i);
    expect(answer).not.toContain('<tool_call>');
    expect(llm.messageHistory.slice(EXAMPLES.length)).toEqual([
      { role: 'user', content: 'What is the weather in Paris?' },
      { role: 'assistant', content: expect.any(String), toolCalls: calls },
      { role: 'tool', content: 'Sunny, 24 degrees.', toolName: 'get_weather' },
      { role: 'assistant', content: answer },
    ]);
    // Two generations: the call, then the answer (prefilled on top of the cached conversation).
    expect(llm.stats?.reusedTokens).toBeGreaterThan(0);
  });

  it('toolChoice { name }: the call is constrained to the tool schema, without examples', async () => {
    const calls: ToolCall[] = [];
    llm.configure({
      chatConfig: { initialMessageHistory: [] },
      generationConfig: { temperature: 0, maxNewTokens: 48 },
      toolsConfig: {
        tools: [WEATHER],
        toolChoice: { name: 'get_weather' },
        displayToolCalls: true,
        executeToolCallback: async (call) => {
          calls.push(call);
          return 'Sunny, 24 degrees.';
        },
      },
    });
    const pieces: string[] = [];
    const answer = await llm.sendMessage('What is the weather in Paris?', { onToken: (p) => pieces.push(p) });
    process.stdout.write(`constrained tool round trip: ${JSON.stringify(pieces.join(''))}\n`);

    // One valid call of the tool (the grammar), with the city the user asked about (the model).
    expect(calls).toEqual([{ toolName: 'get_weather', arguments: { city: 'Paris' } }]);
    expect(llm.messageHistory.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(llm.messageHistory[1]?.toolCalls).toEqual(calls);
    expect(answer).toMatch(/24/);
    expect(answer).not.toContain('"arguments"');
  });
});
