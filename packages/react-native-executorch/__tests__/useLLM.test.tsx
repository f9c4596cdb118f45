import { act, renderHook, waitFor } from '@testing-library/react-native';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  ChatTemplate,
  ExecutorchError,
  ResourceFetcher,
  models,
  useLLM,
  type LLMController,
  type ModelFiles,
  type UseLLMOptions,
} from '../src';
import { FakeNative, nativeError } from '../src/testing/fakeNative';
import smolConfig from './fixtures/smollm2_tokenizer_config.json';
import { HfServer } from './support/hfServer';
import { nodeAdapters } from './support/nodeAdapters';
import { publishOn } from './support/publishedModel';

const smol = models.llm.smollm2_135m;
const gemma = models.llm.gemma4_e2b;
let dir: string;
let files: ModelFiles;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'rne-hook-'));
  files = {
    modelPath: join(dir, 'model.pte'),
    tokenizerPath: join(dir, 'tokenizer.json'),
    chatTemplatePath: join(dir, 'tokenizer_config.json'),
  };
  writeFileSync(files.chatTemplatePath, JSON.stringify(smolConfig));
});

afterEach(() => rmSync(dir, { recursive: true, force: true }));

function words(n: number): string[] {
  return Array.from({ length: n }, (_, i) => ` w${i}`);
}

function setup<M extends typeof smol | typeof gemma>(
  native: FakeNative,
  options: Partial<UseLLMOptions<M>> & { model?: M } = {},
) {
  let renders = 0;
  const hook = renderHook(
    (props: Partial<UseLLMOptions<M>>) => {
      renders += 1;
      return useLLM({
        model: smol as M,
        localFiles: files,
        resources: nodeAdapters(dir),
        native,
        ...options,
        ...props,
      } as UseLLMOptions<M>);
    },
    { initialProps: {} },
  );
  return { ...hook, renders: () => renders };
}

async function ready(result: { current: LLMController<never> | LLMController<typeof smol> | LLMController<typeof gemma> }) {
  await waitFor(() => expect(result.current.isReady).toBe(true));
}

async function expectRejects(promise: Promise<unknown>, code: string): Promise<ExecutorchError> {
  let caught: unknown;
  await promise.then(
    () => undefined,
    (e: unknown) => {
      caught = e;
    },
  );
  expect(caught).toBeInstanceOf(ExecutorchError);
  expect((caught as ExecutorchError).code).toBe(code);
  return caught as ExecutorchError;
}

describe('useLLM lifecycle', () => {
  it('loads on mount with the resolved backend and the local files', async () => {
    const native = new FakeNative({ os: 'ios' });
    const { result } = setup(native);
    expect(result.current.isReady).toBe(false);
    expect(result.current.backend).toBeNull();
    await ready(result);
    expect(result.current.backend).toBe('xnnpack');
    expect(result.current.downloadProgress).toBe(1);
    expect(result.current.error).toBeNull();
    expect(native.loads).toEqual([
      // With the registry's measured peak, for the native memory check before the load.
      { modelPath: files.modelPath, tokenizerPath: files.tokenizerPath, backend: 'xnnpack', peakMemoryBytes: 235302502 },
    ]);
  });

  it('waits while preventLoad is set and loads when it is cleared', async () => {
    const native = new FakeNative();
    const { result, rerender } = setup(native, { preventLoad: true });
    await act(async () => {
      await new Promise((r) => setTimeout(r, 20));
    });
    expect(native.loads).toHaveLength(0);
    await expectRejects(result.current.sendMessage('Hi'), 'model_not_loaded');
    rerender({ preventLoad: false });
    await ready(result);
    expect(native.loads).toHaveLength(1);
  });

  it('releases the old model when the model changes', async () => {
    const native = new FakeNative({ os: 'android' });
    const { result, rerender } = setup<typeof smol | typeof gemma>(native);
    await ready(result);
    rerender({ model: gemma });
    await waitFor(() => expect(result.current.backend).toBe('vulkan'));
    await ready(result);
    expect(native.calls.filter((c) => c === 'release')).toHaveLength(1);
    expect(native.liveHandles()).toBe(1);
  });
});

describe('useLLM downloads', () => {
  it('reports download progress from 0 to 1 and becomes ready', async () => {
    const server = new HfServer();
    await server.start();
    try {
      const model = publishOn(server);
      const native = new FakeNative({ os: 'ios' });
      const progress: number[] = [];
      const resources = new ResourceFetcher({ ...nodeAdapters(dir), baseUrl: server.baseUrl });
      const { result } = renderHook(() => {
        const llm = useLLM({ model, resources, native });
        progress.push(llm.downloadProgress);
        return llm;
      });
      // The download goes over real HTTP: on a loaded 2-core machine it can take seconds.
      await waitFor(() => expect(result.current.isReady).toBe(true), { interval: 2, timeout: 10_000 });
      expect(progress[0]).toBe(0);
      expect(progress.some((p) => p > 0 && p < 1)).toBe(true);
      expect(result.current.downloadProgress).toBe(1);
      expect(native.loads[0]!.modelPath).toBe(
        join(dir, 'react-native-executorch/models/acme/smol-published/r1/xnnpack/smol.pte'),
      );
    } finally {
      await server.stop();
    }
  });
});

describe('useLLM paused downloads', () => {
  it('pauseDownload keeps the progress and the part; resumeDownload finishes the load', async () => {
    const server = new HfServer();
    await server.start();
    try {
      const model = publishOn(server);
      const resources = new ResourceFetcher({ ...nodeAdapters(dir), baseUrl: server.baseUrl });
      const { result } = renderHook(() => useLLM({ model, resources, native: new FakeNative({ os: 'ios' }) }));
      await waitFor(() => expect(result.current.downloadProgress).toBeGreaterThan(0.2), { interval: 2, timeout: 10_000 });
      act(() => result.current.pauseDownload());
      await waitFor(() => expect(result.current.downloadStatus?.paused).toBe(true), { timeout: 10_000 });
      const atPause = result.current.downloadProgress;
      const requests = server.requests.length;
      await act(() => new Promise((r) => setTimeout(r, 300)));
      expect([result.current.isReady, result.current.downloadProgress, server.requests.length]).toEqual([false, atPause, requests]);
      expect(result.current.downloadStatus).toMatchObject({ bytesPerSecond: 0, secondsLeft: null });
      act(() => result.current.resumeDownload());
      await waitFor(() => expect(result.current.isReady).toBe(true), { interval: 2, timeout: 10_000 });
      expect(result.current.downloadProgress).toBe(1);
      expect(server.requests.some((r) => r.range !== undefined)).toBe(true);
    } finally {
      await server.stop();
    }
  });
});

describe('useLLM backend matrix (through the hook)', () => {
  it.each([
    ['iOS device, default', { os: 'ios', isSimulator: false }, undefined, 'mlx'],
    ['iOS simulator, default', { os: 'ios', isSimulator: true }, undefined, 'xnnpack'],
    ['Android, default', { os: 'android', isSimulator: false }, undefined, 'vulkan'],
    ['iOS device, explicit xnnpack', { os: 'ios', isSimulator: false }, 'xnnpack', 'xnnpack'],
    ['Android, explicit xnnpack', { os: 'android', isSimulator: false }, 'xnnpack', 'xnnpack'],
  ] as const)('%s loads Gemma on %s', async (_, device, backend, expected) => {
    const native = new FakeNative(device);
    const { result } = setup<typeof gemma>(native, { model: gemma, ...(backend ? { backend } : {}) });
    await ready(result);
    expect(result.current.backend).toBe(expected);
    expect(native.loads[0]!.backend).toBe(expected);
  });

  it('reports explicit MLX on the simulator as a typed error with alternatives, loading nothing', async () => {
    const native = new FakeNative({ os: 'ios', isSimulator: true });
    const { result } = setup<typeof gemma>(native, { model: gemma, backend: 'mlx' });
    await waitFor(() => expect(result.current.error).not.toBeNull());
    expect(result.current.error!.code).toBe('backend_unavailable');
    expect(result.current.error!.details.alternatives).toEqual(['xnnpack']);
    expect(result.current.isReady).toBe(false);
    expect(native.loads).toHaveLength(0);
  });
});

describe('useLLM streaming', () => {
  it('streams the answer into response, then records history and stats', async () => {
    const native = new FakeNative({ answer: () => ['The', ' capital', ' of', ' France', ' is', ' Paris', '.'], tokenIntervalMs: 15 });
    const { result } = setup(native, { tokenBatchMs: 1 });
    await ready(result);
    const seen = new Set<string>();
    let answer: Promise<string> = Promise.resolve('');
    act(() => {
      answer = result.current.sendMessage('What is the capital of France?');
    });
    expect(result.current.isGenerating).toBe(true);
    expect(result.current.messageHistory).toEqual([{ role: 'user', content: 'What is the capital of France?' }]);
    await waitFor(() => {
      seen.add(result.current.response);
      expect(result.current.isGenerating).toBe(false);
    }, { interval: 5 });
    await expect(answer).resolves.toBe('The capital of France is Paris.');
    // Partial responses were visible before the end.
    expect([...seen].some((r) => r.length > 0 && r !== 'The capital of France is Paris.')).toBe(true);
    expect(result.current.response).toBe('The capital of France is Paris.');
    expect(result.current.messageHistory).toEqual([
      { role: 'user', content: 'What is the capital of France?' },
      { role: 'assistant', content: 'The capital of France is Paris.' },
    ]);
    const stats = result.current.stats!;
    expect(stats.generatedTokens).toBe(7);
    expect(stats.stopReason).toBe('eos');
    expect(stats.timeToFirstTokenMs).toBeGreaterThanOrEqual(0);
    expect(stats.tokensPerSecond).toBeGreaterThan(0);
    // The native side got the conversation rendered by the model's own chat template.
    const template = ChatTemplate.fromTokenizerConfig(smolConfig);
    expect(native.prompts[0]).toBe(template.render([{ role: 'user', content: 'What is the capital of France?' }]));
  });

  it('sends the whole conversation with the system prompt and config; the cache reuses the prefix', async () => {
    const native = new FakeNative({ answer: () => ['ok'] });
    const { result } = setup(native);
    await ready(result);
    act(() => result.current.configure({ systemPrompt: 'Be brief.', generation: { temperature: 0, maxNewTokens: 5, seed: 7 } }));
    await act(async () => {
      await result.current.sendMessage('One');
    });
    const firstPromptTokens = result.current.stats!.promptTokens;
    await act(async () => {
      await result.current.sendMessage('Two');
    });
    const template = ChatTemplate.fromTokenizerConfig(smolConfig);
    expect(native.prompts[1]).toBe(
      template.render([
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'One' },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: 'Two' },
      ]),
    );
    expect(native.prompts[1]!.startsWith(native.prompts[0]!)).toBe(true);
    // Only the new turn was prefilled the second time.
    expect(result.current.stats!.promptTokens).toBeLessThan(firstPromptTokens);
    expect(native.configs[1]).toEqual({
      maxNewTokens: 5,
      temperature: 0,
      topK: 0,
      topP: 0.9,
      minP: 0,
      repetitionPenalty: 1,
      seed: 7,
      stopStrings: [],
    });
  });

  it('generate answers given messages without touching the history', async () => {
    const native = new FakeNative({ answer: () => ['4'] });
    const { result } = setup(native);
    await ready(result);
    let answer = '';
    await act(async () => {
      answer = await result.current.generate([{ role: 'user', content: '2+2?' }]);
    });
    expect(answer).toBe('4');
    expect(result.current.response).toBe('4');
    expect(result.current.messageHistory).toEqual([]);
  });

  it('batches tokens so a fast model does not re-render per token', async () => {
    const native = new FakeNative({ answer: () => words(400), tokenIntervalMs: 0 });
    const { result, renders } = setup(native, { tokenBatchMs: 50 });
    await ready(result);
    act(() => result.current.configure({ generation: { maxNewTokens: 1000 } }));
    // Outside act() React renders as it would in an app (act() would merge every update into
    // one render and hide the batching under test).
    const actEnvironment = (globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT;
    (globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = false;
    const before = renders();
    const started = Date.now();
    let elapsed = 0;
    try {
      await result.current.sendMessage('Count');
      elapsed = Date.now() - started;
      await new Promise((r) => setTimeout(r, 30));
    } finally {
      (globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = actEnvironment;
    }
    expect(result.current.response).toBe(words(400).join(''));
    expect(result.current.isGenerating).toBe(false);
    const during = renders() - before;
    // Start + one render per 50 ms batch + end (however slow the machine); one per token
    // would be 400+.
    expect(during).toBeGreaterThanOrEqual(3);
    expect(during).toBeLessThanOrEqual(Math.ceil(elapsed / 50) + 4);
    expect(during).toBeLessThan(400 / 4);
  });

  it('applies stop strings and maxNewTokens like the runner', async () => {
    const native = new FakeNative({ answer: () => ['a', 'b', 'xSTOPy', 'c'] });
    const { result } = setup(native);
    await ready(result);
    act(() => result.current.configure({ generation: { stopStrings: ['STOP'] } }));
    await act(async () => {
      await result.current.sendMessage('x');
    });
    expect(result.current.response).toBe('abx');
    expect(result.current.stats!.stopReason).toBe('stop_string');
    act(() => result.current.configure({ generation: { stopStrings: [], maxNewTokens: 2 } }));
    await act(async () => {
      await result.current.sendMessage('y');
    });
    expect(result.current.response).toBe('ab');
    expect(result.current.stats!.stopReason).toBe('max_new_tokens');
  });
});

describe('useLLM interrupt, busy and unmount', () => {
  it('interrupt stops the generation and keeps the partial answer', async () => {
    const native = new FakeNative({ answer: () => words(1000), tokenIntervalMs: 2 });
    const { result } = setup(native, { tokenBatchMs: 1 });
    await ready(result);
    let answer: Promise<string> = Promise.resolve('');
    act(() => {
      answer = result.current.sendMessage('Go');
    });
    await waitFor(() => expect(result.current.response.length).toBeGreaterThan(10));
    act(() => result.current.interrupt());
    await waitFor(() => expect(result.current.isGenerating).toBe(false));
    const text = await answer;
    expect(text.length).toBeGreaterThan(0);
    expect(text.length).toBeLessThan(words(1000).join('').length);
    expect(result.current.stats!.stopReason).toBe('interrupted');
    expect(result.current.messageHistory[1]).toEqual({ role: 'assistant', content: text });
  });

  it('rejects a second generation while one runs with a typed busy error', async () => {
    const native = new FakeNative({ answer: () => words(200), tokenIntervalMs: 3 });
    const { result } = setup(native);
    await ready(result);
    let first: Promise<string> = Promise.resolve('');
    act(() => {
      first = result.current.sendMessage('First');
    });
    const error = await expectRejects(result.current.sendMessage('Second'), 'busy');
    expect(error.message).toContain('already running');
    await expectRejects(result.current.generate([{ role: 'user', content: 'x' }]), 'busy');
    expect(result.current.isGenerating).toBe(true);
    await act(async () => {
      await expect(first).resolves.toBe(words(200).join(''));
    });
    expect(result.current.error).toBeNull();
    expect(native.prompts).toHaveLength(1);
  });

  it('unmount interrupts the generation and releases the model', async () => {
    const native = new FakeNative({ answer: () => words(1000), tokenIntervalMs: 2 });
    const { result, unmount } = setup(native);
    await ready(result);
    let answer: Promise<string> = Promise.resolve('');
    act(() => {
      answer = result.current.sendMessage('Go');
    });
    await act(async () => {
      await new Promise((r) => setTimeout(r, 20));
    });
    unmount();
    const text = await answer;
    expect(text.length).toBeLessThan(words(1000).join('').length);
    expect(native.calls).toContain('release');
    expect(native.liveHandles()).toBe(0);
  });

  it('unmount during loading releases the model once the native load finishes', async () => {
    const native = new FakeNative({ loadDelayMs: 30 });
    const { unmount } = setup(native);
    // Unmount while the native load is in flight.
    await waitFor(() => expect(native.loads).toHaveLength(1), { interval: 1 });
    unmount();
    expect(native.calls).not.toContain('release');
    await waitFor(() => expect(native.calls).toContain('release'));
    expect(native.liveHandles()).toBe(0);
  });
});

describe('useLLM errors', () => {
  it('surfaces a native load failure with its native code', async () => {
    const native = new FakeNative();
    native.failNextLoad = nativeError('not_found', '/x/model.pte: No such file or directory');
    const { result } = setup(native);
    await waitFor(() => expect(result.current.error).not.toBeNull());
    expect(result.current.error!.code).toBe('not_found');
    expect(result.current.error!.message).toContain('No such file');
    expect(result.current.isReady).toBe(false);
  });

  it('surfaces a generation failure in error and rejects the call', async () => {
    const native = new FakeNative();
    const { result } = setup(native);
    await ready(result);
    native.failNextGenerate = nativeError('context_full', 'The prompt needs 2100 positions; 2048 fit.');
    await act(async () => {
      await expectRejects(result.current.sendMessage('long'), 'context_full');
    });
    expect(result.current.error!.code).toBe('context_full');
    expect(result.current.isGenerating).toBe(false);
    expect(result.current.messageHistory).toEqual([]);
    // The hook recovers: the next message works and clears the error.
    await act(async () => {
      await result.current.sendMessage('short');
    });
    expect(result.current.error).toBeNull();
  });

  it('refuses to download an unpublished registry model with a typed error', async () => {
    const native = new FakeNative();
    const { result } = setup<typeof smol>(native, { localFiles: undefined });
    await waitFor(() => expect(result.current.error).not.toBeNull());
    expect(result.current.error!.code).toBe('model_unpublished');
    expect(native.loads).toHaveLength(0);
  });

  it('rejects an invalid generation config', async () => {
    const { result } = setup(new FakeNative());
    // Loaded first: a load finishing after the test would update the hook outside act().
    await ready(result);
    expect(() => result.current.configure({ generation: { topP: 1.5 } })).toThrow(
      expect.objectContaining({ code: 'invalid_argument', message: expect.stringContaining('topP 1.5') }),
    );
  });

  it('reports a missing native module clearly', async () => {
    const { result } = renderHook(() => useLLM({ model: smol, localFiles: files, resources: nodeAdapters(dir) }));
    await waitFor(() => expect(result.current.error).not.toBeNull());
    expect(result.current.error!.code).toBe('native_module_missing');
  });
});

describe('useLLM conversation API', () => {
  it('exposes the last piece as token and the token counts of the generation', async () => {
    const native = new FakeNative({ answer: () => ['Par', 'is', '.'], tokenIntervalMs: 20 });
    const { result } = setup(native, { tokenBatchMs: 1 });
    await ready(result);
    const tokens = new Set<string>();
    let answer: Promise<string> = Promise.resolve('');
    act(() => {
      answer = result.current.sendMessage('Capital of France?');
    });
    await waitFor(() => {
      tokens.add(result.current.token);
      expect(result.current.isGenerating).toBe(false);
    }, { interval: 5 });
    await act(async () => {
      await answer;
    });
    expect([...tokens].filter((t) => t !== '')).toEqual(expect.arrayContaining(['Par', 'is']));
    expect(result.current.token).toBe('.');
    expect(result.current.getGeneratedTokenCount()).toBe(3);
    const prompt = native.prompts[0]!;
    expect(result.current.getPromptTokenCount()).toBe(result.current.countTokens(prompt));
    expect(result.current.getTotalTokenCount()).toBe(result.current.countTokens(prompt) + 3);
    expect(result.current.getMaxContextLength()).toBe(4096);
  });

  it('configure({ chatConfig: { initialMessageHistory } }) before loading seeds messageHistory; deleteMessage trims it', async () => {
    const native = new FakeNative({ answer: () => ['ok'] });
    const { result } = setup(native);
    const saved = [
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello!' },
    ] as const;
    act(() => result.current.configure({ chatConfig: { initialMessageHistory: saved, systemPrompt: 'Be brief.' } }));
    expect(result.current.messageHistory).toEqual(saved);
    await ready(result);
    expect(result.current.messageHistory).toEqual(saved);
    await act(async () => {
      await result.current.sendMessage('Bye');
    });
    expect(native.prompts[0]).toContain('<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>');
    expect(result.current.messageHistory).toHaveLength(4);
    act(() => result.current.deleteMessage(1));
    expect(result.current.messageHistory).toEqual([saved[0]]);
    expect(() => result.current.deleteMessage(5)).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
  });
});
