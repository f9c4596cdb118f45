/**
 * @jest-environment node
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { LLMModule, ResourceFetcher } from '../src';
import { codeOf } from './support/errorCode';
import { FakeNative } from '../src/testing/fakeNative';
import { HfServer } from './support/hfServer';
import { nodeAdapters } from './support/nodeAdapters';
import { publishOn } from './support/publishedModel';

let server: HfServer;
let docs: string;

beforeEach(async () => {
  server = new HfServer();
  await server.start();
  docs = await mkdtemp(join(tmpdir(), 'rne-module-'));
});

afterEach(async () => {
  await server.stop();
  await rm(docs, { recursive: true, force: true });
});

function fetcher() {
  return new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl });
}

describe('LLMModule', () => {
  it('downloads a published model over HTTP, loads it and chats', async () => {
    const model = publishOn(server);
    const native = new FakeNative({ os: 'android', answer: () => ['Paris', '.'] });
    const llm = new LLMModule({ model, resources: fetcher(), native });
    const progress: number[] = [];
    await llm.load({ onDownloadProgress: (p) => progress.push(p) });

    expect(llm.isReady).toBe(true);
    expect(llm.backend).toBe('xnnpack');
    expect(progress[progress.length - 1]).toBe(1);
    expect(progress.length).toBeGreaterThan(3);
    const root = join(docs, 'react-native-executorch/models/acme/smol-published/r1');
    expect(native.loads).toEqual([
      {
        modelPath: join(root, 'xnnpack/smol.pte'),
        tokenizerPath: join(root, 'tokenizer.json'),
        backend: 'xnnpack',
        // The registry's measured peak, for the native memory check before the load.
        peakMemoryBytes: 235302502,
      },
    ]);

    const pieces: string[] = [];
    expect(await llm.sendMessage('Capital of France?', { onToken: (t) => pieces.push(t) })).toBe('Paris.');
    expect(pieces).toEqual(['Paris', '.']);
    expect(llm.messageHistory).toHaveLength(2);
    expect(llm.stats?.generatedTokens).toBe(2);

    expect(await llm.generate([{ role: 'user', content: 'Again?' }])).toBe('Paris.');
    expect(llm.messageHistory).toHaveLength(2);

    llm.clearHistory();
    expect(llm.messageHistory).toHaveLength(0);
    expect(native.calls).toContain('reset');

    llm.release();
    expect(native.liveHandles()).toBe(0);
    expect(await codeOf(llm.sendMessage('x'))).toBe('released');
    expect(await codeOf(llm.load())).toBe('released');
  });

  it('a second module finds the files in the cache without downloading', async () => {
    const model = publishOn(server);
    await new LLMModule({ model, resources: fetcher(), native: new FakeNative() }).load();
    const requests = server.requests.length;
    const again = new LLMModule({ model, resources: fetcher(), native: new FakeNative() });
    await again.load();
    expect(again.isReady).toBe(true);
    expect(server.requests.length).toBe(requests);
  });

  it('cancels loading through the signal with download_cancelled', async () => {
    const model = publishOn(server);
    server.add('acme/smol-published', 'r1', 'xnnpack/smol.pte', {
      body: Buffer.alloc(120_000),
      chunkSize: 4096,
      chunkDelayMs: 10,
    });
    const llm = new LLMModule({ model, resources: fetcher(), native: new FakeNative() });
    const controller = new AbortController();
    const loading = llm.load({ signal: controller.signal });
    setTimeout(() => controller.abort(), 30);
    expect(await codeOf(loading)).toBe('download_cancelled');
    expect(llm.isReady).toBe(false);
  });

  it('release() during the download cancels it and the load rejects with released', async () => {
    const model = publishOn(server);
    server.add('acme/smol-published', 'r1', 'xnnpack/smol.pte', {
      body: Buffer.alloc(120_000),
      chunkSize: 4096,
      chunkDelayMs: 10,
    });
    const native = new FakeNative();
    const llm = new LLMModule({ model, resources: fetcher(), native });
    // Released once the first bytes are on disk.
    const loading = llm.load({ onDownloadProgress: (p) => p > 0 && llm.release() });
    expect(await codeOf(loading)).toBe('released');
    expect(native.loads).toHaveLength(0);
    // The download stopped: well after the time the whole file needs (~300 ms at this pace),
    // the model has not reached its final (verified) name.
    await new Promise((r) => setTimeout(r, 500));
    const finalPath = join(docs, 'react-native-executorch/models/acme/smol-published/r1/xnnpack/smol.pte');
    expect(existsSync(finalPath)).toBe(false);
  });

  it('refuses to generate before load', async () => {
    const llm = new LLMModule({ model: publishOn(server), resources: fetcher(), native: new FakeNative() });
    expect(await codeOf(llm.sendMessage('x'))).toBe('model_not_loaded');
  });

  it('needs resource adapters to download when react-native-blob-util is absent', async () => {
    const llm = new LLMModule({ model: publishOn(server), native: new FakeNative() });
    expect(await codeOf(llm.load())).toBe('no_resource_adapter');
  });
});

describe('LLMModule conversation API', () => {
  async function loaded(native: FakeNative): Promise<LLMModule> {
    const llm = new LLMModule({ model: publishOn(server), resources: fetcher(), native });
    await llm.load();
    return llm;
  }

  it('configure takes { chatConfig, toolsConfig, generationConfig } and the older flat form, merged', async () => {
    const native = new FakeNative();
    const llm = await loaded(native);
    const executeToolCallback = async () => 'sunny';
    const tools = [{ name: 'weather', description: 'Weather in a city', parameters: { type: 'object' } }];
    llm.configure({
      chatConfig: { systemPrompt: 'Be brief.' },
      generationConfig: { maxNewTokens: 3, temperature: 0 },
      toolsConfig: { tools, executeToolCallback },
    });
    llm.configure({ generation: { topK: 5 } });
    await llm.sendMessage('Hi');
    expect(native.configs[0]).toMatchObject({ maxNewTokens: 3, temperature: 0, topK: 5 });
    // SmolLM2's template renders no tools: they join the system prompt (the fallback format).
    expect(native.prompts[0]).toContain('<|im_start|>system\nBe brief.\n\n# Tools\n');
    expect(llm.toolsConfig).toEqual({ tools, executeToolCallback });

    llm.configure({ systemPrompt: 'Be kind.' });
    await llm.sendMessage('Hello');
    expect(native.prompts[1]).toContain('<|im_start|>system\nBe kind.\n\n# Tools\n');

    for (const bad of [
      { generationConfig: { topP: 2 } },
      { chatConfig: { contextReserveTokens: -1 } },
      { chatConfig: { contextStrategy: 'truncateMiddle' as never } },
      { toolsConfig: { tools: 'weather' as never, executeToolCallback } },
    ]) {
      expect(() => llm.configure(bad)).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    }
  });

  it('initialMessageHistory seeds the conversation; deleteMessage drops a message and the later ones', async () => {
    const native = new FakeNative();
    const llm = await loaded(native);
    const saved = [
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: 'Hello Ada!' },
    ] as const;
    llm.configure({ chatConfig: { initialMessageHistory: saved } });
    expect(llm.messageHistory).toEqual(saved);
    await llm.sendMessage('What is my name?');
    expect(native.prompts[0]).toContain('My name is Ada.<|im_end|>\n<|im_start|>assistant\nHello Ada!');
    expect(llm.messageHistory).toHaveLength(4);

    llm.deleteMessage(2);
    expect(llm.messageHistory).toEqual(saved);
    expect(() => llm.deleteMessage(2)).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    expect(() => llm.deleteMessage(-1)).toThrow(/indices 0\.\.1/);
    // The next prompt shares the first turns with the cache: only the rest is prefilled.
    await llm.sendMessage('And my age?');
    expect(llm.stats?.reusedTokens).toBeGreaterThan(0);
  });

  it('counts tokens of texts and of rendered messages, and during and after a generation', async () => {
    const native = new FakeNative({ maxContext: 1000, answer: () => ['one', ' two', ' three'], tokenIntervalMs: 5 });
    const llm = await loaded(native);
    llm.configure({ systemPrompt: 'S' });
    expect(llm.getMaxContextLength()).toBe(1000);
    expect(llm.countTokens('12345678')).toBe(2);
    const messages = [{ role: 'user', content: 'Hi' }] as const;
    const rendered = '<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n';
    expect(llm.countTokens(messages)).toBe(Math.ceil(rendered.length / 4));

    const during: number[] = [];
    await llm.sendMessage('Hi', { onToken: () => during.push(llm.getGeneratedTokenCount()) });
    expect(during).toEqual([1, 2, 3]);
    expect(native.prompts[0]).toBe(rendered);
    expect(llm.getPromptTokenCount()).toBe(llm.countTokens(rendered));
    expect(llm.getGeneratedTokenCount()).toBe(3);
    expect(llm.getTotalTokenCount()).toBe(llm.countTokens(rendered) + 3);
    const stats = llm.stats!;
    expect(stats.reusedTokens + stats.promptTokens).toBe(llm.getPromptTokenCount());
  });

  /** A module whose fake model holds 120 tokens and answers 10 tokens of 4 characters. */
  async function smallContext(): Promise<{ llm: LLMModule; native: FakeNative }> {
    const native = new FakeNative({ maxContext: 120, answer: () => Array.from({ length: 10 }, () => 'word') });
    const llm = await loaded(native);
    llm.configure({ systemPrompt: 'You are terse.', generationConfig: { maxNewTokens: 10 } });
    return { llm, native };
  }
  const question = (i: number) => `Question number ${i}: what comes next in the sequence?`;

  it("slidingWindow (default) keeps the system prompt and the newest messages that fit, leaving room for the answer", async () => {
    const { llm, native } = await smallContext();
    for (let i = 0; i < 8; i += 1) await llm.sendMessage(question(i));
    expect(llm.messageHistory).toHaveLength(16);
    const budget = 120 - 10;
    for (const prompt of native.prompts) {
      expect(llm.countTokens(prompt)).toBeLessThanOrEqual(budget);
      expect(prompt.startsWith('<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n')).toBe(true);
    }
    const last = native.prompts[7]!;
    expect(last).toContain(question(7));
    expect(last).not.toContain(question(0));
    // The window is as large as fits: one more (older) turn would not.
    const kept = llm.messageHistory.findIndex((m) => last.includes(`user\n${m.content}<|im_end|>`));
    const wider = [{ role: 'system', content: 'You are terse.' }, ...llm.messageHistory.slice(kept - 2, 15)] as const;
    expect(llm.countTokens(wider)).toBeGreaterThan(budget);
    // A turn that does not slide extends the cache: the prompt before it is reused.
    const slides = native.prompts.map((p, i) => i > 0 && !p.startsWith(native.prompts[i - 1]!));
    expect(slides.some(Boolean)).toBe(true);
    expect(slides.some((s, i) => i > 0 && !s)).toBe(true);
  });

  it("'error' sends everything and the native side rejects a prompt that does not fit", async () => {
    const { llm } = await smallContext();
    llm.configure({ chatConfig: { contextStrategy: 'error' } });
    let failure: unknown;
    for (let i = 0; i < 8 && !failure; i += 1) failure = await llm.sendMessage(question(i)).then(() => null, (e) => e);
    expect((failure as { code?: string })?.code).toBe('context_full');
  });

  it('a custom strategy gets the conversation and the budget and chooses what is sent', async () => {
    const { llm, native } = await smallContext();
    const seen: { count: number; budget: number; all: number }[] = [];
    llm.configure({
      chatConfig: {
        contextReserveTokens: 30,
        contextStrategy: (messages, budget) => {
          seen.push({ count: messages.length, budget: budget.maxPromptTokens, all: budget.countTokens(messages) });
          return [messages[0]!, messages[messages.length - 1]!];
        },
      },
    });
    await llm.sendMessage(question(1));
    await llm.sendMessage(question(2));
    expect(seen.map((s) => [s.count, s.budget])).toEqual([[2, 90], [4, 90]]);
    expect(seen[1]!.all).toBe(llm.countTokens(llm.messageHistory.slice(0, 3)));
    expect(native.prompts[1]).not.toContain(question(1));
    expect(native.prompts[1]).toContain(question(2));
  });

  it('a message that cannot fit even alone is a context_full error that says what to do', async () => {
    const { llm, native } = await smallContext();
    const error = await llm.sendMessage('x'.repeat(600)).catch((e: unknown) => e);
    expect((error as { code?: string }).code).toBe('context_full');
    expect((error as Error).message).toMatch(/lower maxNewTokens \/ contextReserveTokens/);
    expect(native.prompts).toHaveLength(0);
    expect(llm.messageHistory).toHaveLength(0);
  });
});
