/**
 * useLLM end to end: the hook downloads the real SmolLM2 files from a 127.0.0.1 server and runs
 * them on the C++ runner through the Node-API addon; the same checks run on the fake native module.
 */
import { act, renderHook, waitFor } from '@testing-library/react-native';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  ResourceFetcher,
  models,
  useLLM,
  type AnyLLMDescriptor,
  type LLMDescriptor,
  type ModelFiles,
  type NativeExecutorch,
} from '../../src';
import { HfServer } from '../support/hfServer';
import { nodeAdapters } from '../support/nodeAdapters';
import { publishSmollm2, smollm2Files, TARGETS, type SeamTarget } from './support/targets';

const SLOW = { timeout: 60000 };
const GREEDY = { temperature: 0, maxNewTokens: 24 } as const;

let server: HfServer;
let docs: string;
let model: LLMDescriptor<'xnnpack'>;

beforeAll(async () => {
  server = new HfServer();
  await server.start();
  docs = mkdtempSync(join(tmpdir(), 'rne-e2e-hook-'));
  model = publishSmollm2(server, smollm2Files());
});

afterAll(async () => {
  await server.stop();
  rmSync(docs, { recursive: true, force: true });
});

describe.each(TARGETS.map((t) => [t.name, t] as const))('useLLM on %s', (_, target: SeamTarget) => {
  let native: NativeExecutorch;
  beforeEach(() => {
    native = target.create();
  });

  function render(options: { localFiles?: ModelFiles; model?: AnyLLMDescriptor } = {}) {
    const resources = new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl });
    return renderHook(() => useLLM({ model, resources, native, ...options }));
  }

  it('downloads, loads and chats: streamed response, history and cache reuse in the stats', async () => {
    const hook = render();
    await waitFor(() => expect(hook.result.current.isReady).toBe(true), SLOW);
    expect(hook.result.current.downloadProgress).toBe(1);
    expect(hook.result.current.error).toBeNull();
    act(() => hook.result.current.configure({ generation: GREEDY }));

    let first = '';
    await act(async () => {
      first = await hook.result.current.sendMessage('Hi! What is your name?');
    });
    expect(first).not.toBe('');
    expect(hook.result.current.response).toBe(first);
    const firstStats = hook.result.current.stats!;
    expect(firstStats.generatedTokens).toBeGreaterThan(0);

    let second = '';
    await act(async () => {
      second = await hook.result.current.sendMessage('What is 2 + 2?');
    });
    expect(hook.result.current.response).toBe(second);
    expect(hook.result.current.messageHistory).toEqual([
      { role: 'user', content: 'Hi! What is your name?' },
      { role: 'assistant', content: first },
      { role: 'user', content: 'What is 2 + 2?' },
      { role: 'assistant', content: second },
    ]);
    const stats = hook.result.current.stats!;
    expect(stats.promptTokens).toBeLessThan(firstStats.promptTokens);
    // Prefilled on top of the cache (the last generated token enters it with the next call).
    expect(stats.cacheTokens).toBe(firstStats.cacheTokens + stats.promptTokens + stats.generatedTokens - 1);
    expect(stats.reusedTokens).toBe(firstStats.cacheTokens);
    expect(hook.result.current.isGenerating).toBe(false);
    // token is the last piece; the token counts are the runner's.
    const llm = hook.result.current;
    expect(llm.token).not.toBe('');
    expect(second.endsWith(llm.token)).toBe(true);
    expect(llm.getGeneratedTokenCount()).toBe(stats.generatedTokens);
    expect(llm.getPromptTokenCount()).toBe(stats.reusedTokens + stats.promptTokens);
    expect(llm.getPromptTokenCount()).toBe(llm.countTokens(llm.messageHistory.slice(0, 3)));
    expect(llm.getTotalTokenCount()).toBe(llm.getPromptTokenCount() + stats.generatedTokens);
    expect(llm.getMaxContextLength()).toBe(models.llm.smollm2_135m.variants.xnnpack.maxContext);

    // Deleting the last exchange and asking again gives the same (greedy) answer from the
    // shorter conversation the cache shares a prefix with.
    act(() => hook.result.current.deleteMessage(2));
    expect(hook.result.current.messageHistory).toHaveLength(2);
    let again = '';
    await act(async () => {
      again = await hook.result.current.sendMessage('What is 2 + 2?');
    });
    expect(again).toBe(second);
    expect(hook.result.current.messageHistory).toHaveLength(4);
    hook.unmount();
  });

  it('interrupt() ends the streamed response where it got to', async () => {
    const hook = render();
    await waitFor(() => expect(hook.result.current.isReady).toBe(true), SLOW);
    act(() => hook.result.current.configure({ generation: { maxNewTokens: 200 } }));
    let answer: Promise<string> = Promise.resolve('');
    act(() => {
      answer = hook.result.current.sendMessage('Write a long story about a dragon and a knight.');
    });
    await waitFor(() => expect(hook.result.current.response.length).toBeGreaterThan(10), SLOW);
    act(() => hook.result.current.interrupt());
    let text = '';
    await act(async () => {
      text = await answer;
    });
    expect(hook.result.current.stats?.stopReason).toBe('interrupted');
    expect(hook.result.current.stats!.generatedTokens).toBeLessThan(200);
    expect(hook.result.current.response).toBe(text);
    expect(hook.result.current.messageHistory[1]).toEqual({ role: 'assistant', content: text });
    hook.unmount();
  });

  it('a corrupt .pte leaves the hook not ready with an invalid_model error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rne-e2e-hook-bad-'));
    try {
      const files = smollm2Files();
      const corrupt = join(dir, 'model.pte');
      writeFileSync(corrupt, Buffer.concat([Buffer.alloc(64, 0x5a), readFileSync(files.pte).subarray(64, 1 << 20)]));
      // The registry's entry has no checksums: the corrupt file reaches the native load.
      const hook = render({
        model: models.llm.smollm2_135m,
        localFiles: {
          modelPath: corrupt,
          tokenizerPath: join(files.tokenizerDir, 'tokenizer.json'),
          chatTemplatePath: join(files.tokenizerDir, 'tokenizer_config.json'),
        },
      });
      await waitFor(() => expect(hook.result.current.error).not.toBeNull(), SLOW);
      expect(hook.result.current.error?.code).toBe('invalid_model');
      expect(hook.result.current.isReady).toBe(false);
      hook.unmount();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
