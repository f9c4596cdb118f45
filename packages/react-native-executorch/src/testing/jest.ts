/**
 * `react-native-executorch/jest`: `useLLM` for an app's jest tests, driven by the test
 * (download progress, ready, streamed tokens, errors). It is the real hook and the real
 * `LLMModule` (backend resolution, history, context, tool loop, errors), running on a scripted
 * download and on the package's fake native module ({@link FakeNative}), so app tests need
 * neither model files nor native code, and the mock cannot drift from the hook it stands for:
 *
 * ```ts
 * jest.mock('react-native-executorch', () => require('react-native-executorch/jest').mockExecutorch());
 * import { llmMock } from 'react-native-executorch/jest';
 *
 * beforeEach(() => llmMock.reset());
 * test('answers', async () => {
 *   render(<Chat />);
 *   act(() => llmMock.setDownloadProgress(0.5));                 // "Downloading 50%"
 *   await act(async () => llmMock.finishLoading());              // isReady
 *   llmMock.respondWith(['Paris', '.']);                         // later generations stream these pieces
 *   ...
 * });
 * ```
 *
 * What the real module does after the native side answers (a load, the end of a generation)
 * runs in promise callbacks: wrap the controls that end something in `await act(async () => ...)`.
 */
import { useCallback, useEffect } from 'react';
import { Platform } from 'react-native';

import { normalizeMessage, type ContentPart, type Message } from '../chat/template';
import { ExecutorchError } from '../errors';
import { mergeConfig, type ResolvedConfig } from '../llm/LLMModule';
import type { LLMConfig } from '../llm/types';
import { useLLM as realUseLLM, type LLMController, type UseLLMOptions } from '../llm/useLLM';
import type { AnyLLMDescriptor, Backend, VariantDescriptor } from '../models';
import type { GenerationStats, NativeLoadOptions } from '../native/seam';
import type { FileSystemAdapter, HttpAdapter } from '../resources/adapters';
import { ResourceFetcher, type FetchOptions, type ModelFiles } from '../resources/fetcher';
import { FakeNative, type FakeGeneration } from './fakeNative';

export { FakeGeneration, FakeNative, nativeError, type FakeNativeOptions } from './fakeNative';

/** What the mock answers: text pieces, one string (one piece), or a function of the conversation. */
export type MockReply =
  | string
  | readonly string[]
  | ((messages: readonly Message[]) => string | readonly string[]);

/** The observable state of the mocked hook (the data fields of {@link LLMController}). */
export type MockLLMState = Pick<
  LLMController,
  | 'isReady'
  | 'isGenerating'
  | 'downloadProgress'
  | 'error'
  | 'response'
  | 'token'
  | 'messageHistory'
  | 'stats'
  | 'backend'
>;

/** What the mock keeps of the mounted `useLLM`'s options. */
export interface MockedOptions {
  readonly model: AnyLLMDescriptor;
  readonly backend?: Backend;
  readonly preventLoad?: boolean;
  readonly localFiles?: ModelFiles;
}

/** The device the mocked hook resolves its backend for (default: `Platform.OS`, not a simulator, its usual backends linked). */
export interface MockDevice {
  readonly os?: 'ios' | 'android';
  readonly isSimulator?: boolean;
  /** What the native build links; default: MLX + XNNPACK on iOS, Vulkan + XNNPACK on Android. */
  readonly backends?: Backend[];
}

const INITIAL: MockLLMState = {
  isReady: false,
  isGenerating: false,
  downloadProgress: 0,
  error: null,
  response: '',
  token: '',
  messageHistory: [],
  stats: null,
  backend: null,
};

const NO_CONFIG: ResolvedConfig = { chat: {}, generation: {}, tools: null };

/**
 * The mock model's chat template renders the conversation (and the tools, so the real module
 * passes them to the template as it does for models whose template shows tools) as JSON: a
 * reply function gets back the messages the real module rendered. Before the JSON it writes
 * Gemma 4's placeholder for each image and audio part, which the real module replaces with the
 * media (the fake native's stand-in text, `[image:...]`, holds no `{`).
 */
const MOCK_TOKENIZER_CONFIG = JSON.stringify({
  chat_template:
    '{%- for m in messages %}{% if m.content is not string %}{% for p in m.content %}' +
    "{% if p.type == 'image' %}<|image|>{% elif p.type == 'audio' %}<|audio|>{% endif %}" +
    '{% endfor %}{% endif %}{% endfor -%}' +
    "{{ {'messages': messages, 'tools': tools if tools is defined else []} | tojson }}",
});

/** A content part as the mock template sees it (audio samples are not passed to templates). */
type TemplatePart =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'image' | 'audio'; readonly path?: string };

interface TemplateMessage {
  readonly role: Message['role'];
  readonly content: string | readonly TemplatePart[];
  readonly tool_calls?: readonly {
    readonly function: { readonly name: string; readonly arguments: Readonly<Record<string, unknown>> };
  }[];
}

/** The part a template part was rendered from; audio given as samples comes back as an empty array. */
function contentPartOf(part: TemplatePart): ContentPart {
  if (part.type === 'text') return part;
  if (part.type === 'image') return { type: 'image', path: part.path ?? '' };
  return part.path === undefined ? { type: 'audio', samples: new Float32Array(0) } : { type: 'audio', path: part.path };
}

/** The messages a prompt of {@link MOCK_TOKENIZER_CONFIG} was rendered from. */
function messagesOf(prompt: string): Message[] {
  const { messages } = JSON.parse(prompt.slice(prompt.indexOf('{'))) as { messages: readonly TemplateMessage[] };
  return messages.map(({ role, content, tool_calls: calls }) => {
    const message = normalizeMessage(
      typeof content === 'string' ? { role, content } : { role, content: content.map(contentPartOf) },
    );
    return calls
      ? { ...message, toolCalls: calls.map((c) => ({ toolName: c.function.name, arguments: c.function.arguments })) }
      : message;
  });
}

/** An adapter the scripted downloads never reach: every call says so. */
function unreachable<T extends object>(): T {
  return new Proxy({} as T, {
    get: (_target, key) => {
      if (key === 'documentDirectory') return '/llm-mock';
      return () => Promise.reject(new Error(`llmMock: the mock has no files (${String(key)})`));
    },
  });
}

interface PendingLoad {
  readonly files: ModelFiles;
  readonly onProgress: ((progress: number) => void) | undefined;
  readonly resolve: (files: ModelFiles) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * The mock's downloads: each load's download (or its check of `localFiles`) waits until the
 * test finishes or fails it; the chat template is the mock's.
 */
class ScriptedDownloads extends ResourceFetcher {
  readonly pending = new Set<PendingLoad>();

  constructor() {
    super({ fs: unreachable<FileSystemAdapter>(), http: unreachable<HttpAdapter>() });
  }

  override fetchModel(model: AnyLLMDescriptor, backend: string, options: FetchOptions = {}): Promise<ModelFiles> {
    const dir = `${this.cacheDirectory}/${model.id}/${backend}`;
    const declares = (capability: string) => (model.capabilities as readonly string[]).includes(capability);
    // Every encoder the model declares "downloads" with it, published or not, so an app's
    // tests can send images and audio to a multimodal model before its encoders ship.
    const files: ModelFiles = {
      modelPath: `${dir}/model.pte`,
      tokenizerPath: `${dir}/tokenizer.json`,
      chatTemplatePath: `${dir}/tokenizer_config.json`,
      ...(declares('vision') ? { visionEncoderPath: `${dir}/vision_encoder.pte` } : {}),
      ...(declares('audio') ? { audioEncoderPath: `${dir}/audio_encoder.pte` } : {}),
    };
    return this.wait(files, options);
  }

  override async verifyLocalFiles(_model: AnyLLMDescriptor, _backend: string, local: ModelFiles): Promise<void> {
    await this.wait(local, {});
  }

  override readText(): Promise<string> {
    return Promise.resolve(MOCK_TOKENIZER_CONFIG);
  }

  private wait(files: ModelFiles, { signal, onProgress }: FetchOptions): Promise<ModelFiles> {
    return new Promise((resolve, reject) => {
      const load: PendingLoad = {
        files,
        onProgress,
        resolve: (value) => {
          this.pending.delete(load);
          resolve(value);
        },
        reject: (error) => {
          this.pending.delete(load);
          reject(error);
        },
      };
      this.pending.add(load);
      // release() (unmount, a new model) cancels the download, as the real fetcher does.
      signal?.addEventListener('abort', () =>
        load.reject(new ExecutorchError('download_cancelled', 'The download was cancelled.')),
      );
    });
  }
}

/**
 * Test-side control of the mocked `useLLM`. Loading and generation controls need `act()`;
 * `finishLoading`, `failLoading`, `finishGeneration` and `failGeneration` take effect in
 * promise callbacks: `await act(async () => ...)`.
 */
export class LLMMock {
  private native!: FakeNative;
  private downloads!: ScriptedDownloads;
  private latest: MockLLMState = INITIAL;
  private mounted: MockedOptions | null = null;
  private config: ResolvedConfig = NO_CONFIG;
  private reply: MockReply | null = null;

  constructor() {
    this.reset();
  }

  /** The current state, as the last rendered hook returned it. */
  get state(): MockLLMState {
    return this.latest;
  }

  /** The options of the mounted `useLLM`, or null when none is mounted. */
  get options(): MockedOptions | null {
    return this.mounted;
  }

  /** The configuration `configure` accumulated (chat, generation and tools settings). */
  get chatConfig(): ResolvedConfig {
    return this.config;
  }

  /** The fake native module the hook runs on (its `prompts`, `configs`, `calls` record what it was asked). */
  get nativeModule(): FakeNative {
    return this.native;
  }

  /**
   * Back to nothing mounted, no reply, no configuration, a fresh native module on `device`.
   * Call it in `beforeEach`.
   */
  reset(device: MockDevice = {}): void {
    this.native = new FakeNative({
      os: device.os ?? (Platform.OS === 'android' ? 'android' : 'ios'),
      isSimulator: device.isSimulator ?? false,
      ...(device.backends ? { backends: device.backends } : {}),
      answer: (prompt) => this.answer(prompt),
      tokenIntervalMs: 0,
      loadDelayMs: 0,
      measureTime: false,
      maxContext: (load) => this.maxContext(load),
    });
    this.downloads = new ScriptedDownloads();
    this.latest = INITIAL;
    this.mounted = null;
    this.config = NO_CONFIG;
    this.reply = null;
  }

  /** Download progress 0..1 of the running load, as `downloadProgress`. */
  setDownloadProgress(progress: number): void {
    if (!(progress >= 0 && progress <= 1)) throw new Error(`llmMock: progress ${progress} is not in [0, 1]`);
    for (const load of this.requireLoading('setDownloadProgress')) load.onProgress?.(progress);
  }

  /** The download is done: the model loads on the backend the hook resolved for the device (see {@link reset}). */
  finishLoading(): void {
    for (const load of this.requireLoading('finishLoading')) load.resolve(load.files);
  }

  /** Loading fails with `error` (as `useLLM().error`), e.g. `new ExecutorchError('download_failed', ...)`. */
  failLoading(error: ExecutorchError): void {
    for (const load of this.requireLoading('failLoading')) load.reject(error);
  }

  /**
   * Following generations answer by themselves: the pieces stream into `response` on timers
   * (with fake timers, advance them), then the generation ends with `stopReason: 'eos'`.
   * Without a reply, a generation runs until {@link streamToken} / {@link finishGeneration} /
   * {@link failGeneration}.
   */
  respondWith(reply: MockReply | null): void {
    this.reply = reply;
  }

  /** The running generation produces `piece` (unless a stop rule ends it first, e.g. a stop string). */
  streamToken(piece: string): void {
    this.requireGeneration('streamToken').push(piece);
  }

  /**
   * Ends the running generation with its text so far; `stats` replace fields of its stats
   * (timings are 0 unless given). With tools configured, the text's tool calls then run through
   * `executeToolCallback` and the next generation starts, answered by `respondWith` or driven
   * by hand again.
   */
  finishGeneration(stats: Partial<GenerationStats> = {}): void {
    this.requireGeneration('finishGeneration').finish(stats.stopReason ?? 'eos', stats);
  }

  /** Fails the running generation: `error` is set and its promise rejects with it. */
  failGeneration(error: ExecutorchError): void {
    this.requireGeneration('failGeneration').fail(error);
  }

  /** @internal A `useLLM` mounted (or its model, backend or preventLoad changed). */
  mount(options: MockedOptions): () => void {
    this.mounted = options;
    return () => {
      if (this.mounted === options) this.mounted = null;
    };
  }

  /** @internal What the mounted hook renders. */
  observe(state: MockLLMState): void {
    this.latest = state;
  }

  /** @internal The hook's options for the real `useLLM`: the mock's native module and downloads. */
  wire<M extends AnyLLMDescriptor>(options: UseLLMOptions<M>): UseLLMOptions<M> {
    // Each piece reaches `response` at once, so a test sees what it streamed.
    return { ...options, native: this.native, resources: this.downloads, tokenBatchMs: 0 };
  }

  /** @internal Records what `configure` accepted. */
  configured(config: LLMConfig): void {
    this.config = mergeConfig(this.config, config);
  }

  private answer(prompt: string): readonly string[] | null {
    const reply = typeof this.reply === 'function' ? this.reply(messagesOf(prompt)) : this.reply;
    return typeof reply === 'string' ? [reply] : reply;
  }

  /** The mounted model's context length on the loaded backend, as its `.pte` declares it. */
  private maxContext({ backend }: NativeLoadOptions): number {
    const variants = (this.mounted?.model.variants ?? {}) as Partial<Record<Backend, VariantDescriptor>>;
    return variants[backend]?.maxContext ?? 4096;
  }

  private requireLoading(what: string): PendingLoad[] {
    if (!this.mounted) throw new Error(`llmMock.${what}: no useLLM is mounted (render first)`);
    if (this.mounted.preventLoad) throw new Error(`llmMock.${what}: useLLM has preventLoad set`);
    const loads = [...this.downloads.pending];
    if (loads.length === 0) throw new Error(`llmMock.${what}: no load is waiting (it finished or failed)`);
    return loads;
  }

  private requireGeneration(what: string): FakeGeneration {
    const generation = this.native.running;
    if (!generation) throw new Error(`llmMock.${what}: no generation is running`);
    return generation;
  }
}

/** The mock's controls, shared by every test of a file (call `llmMock.reset()` in `beforeEach`). */
export const llmMock = new LLMMock();

/** The mocked `useLLM`: the real hook on {@link llmMock}'s downloads and native module. */
export function useLLM<M extends AnyLLMDescriptor>(options: UseLLMOptions<M>): LLMController<M> {
  const { model, backend, preventLoad, localFiles } = options;
  useEffect(
    () => llmMock.mount({ model, backend, preventLoad, localFiles }),
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [model, backend, preventLoad],
  );
  const llm = realUseLLM(llmMock.wire(options));
  const { isReady, isGenerating, downloadProgress, error, response, token, messageHistory, stats } = llm;
  useEffect(() =>
    llmMock.observe({
      isReady,
      isGenerating,
      downloadProgress,
      error,
      response,
      token,
      messageHistory,
      stats,
      backend: llm.backend,
    }),
  );
  const realConfigure = llm.configure;
  const configure = useCallback(
    (config: LLMConfig) => {
      realConfigure(config);
      llmMock.configured(config);
    },
    [realConfigure],
  );
  return { ...llm, configure };
}

declare const jest: { requireActual<T>(moduleName: string): T };

/**
 * The package with `useLLM` replaced by the mock; everything else (models, errors, backend
 * resolution, ChatTemplate) is the real thing. For `jest.mock('react-native-executorch', ...)`.
 */
export function mockExecutorch(): Record<string, unknown> {
  return { ...jest.requireActual<Record<string, unknown>>('react-native-executorch'), useLLM };
}
