import { resolveBackend, type BackendOf } from '../backend';
import { ChatTemplate, type Message } from '../chat/template';
import { ExecutorchError, fromNativeError } from '../errors';
import type { AnyLLMDescriptor } from '../models';
import { getNativeExecutorch } from '../native';
import type {
  GenerationStats,
  NativeExecutorch,
  NativeGenerationConfig,
  NativeModelHandle,
} from '../native/seam';
import { resolveResourceFetcher } from '../resources/defaultFetcher';
import type { ModelFiles, ResourceFetcher } from '../resources/fetcher';
import type { ChatConfig, GenerationConfig, LLMOptions } from './types';

/** Options of {@link LLMModule.load}. */
export interface LoadOptions {
  /** Download progress 0..1 over all files of the model. */
  readonly onDownloadProgress?: (progress: number) => void;
  /** Cancels the download (the load rejects with `download_cancelled`). */
  readonly signal?: AbortSignal;
}

/** Options of one generation. */
export interface GenerateOptions {
  /** Each decoded text piece, in order, as the model produces it. */
  readonly onToken?: (piece: string) => void;
}

/** Throws `invalid_argument` when a setting is out of range. */
export function validateChatConfig(config: ChatConfig): void {
  if (config.generation) checkGenerationConfig(config.generation);
}

function checkGenerationConfig(config: GenerationConfig): void {
  const bad = (what: string) => {
    throw new ExecutorchError('invalid_argument', `Invalid generation config: ${what}.`);
  };
  const { temperature, topK, topP, minP, repetitionPenalty, maxNewTokens } = config;
  if (temperature !== undefined && !(temperature >= 0)) bad(`temperature ${temperature} < 0`);
  if (topK !== undefined && !(Number.isInteger(topK) && topK >= 0)) bad(`topK ${topK} is not an integer >= 0`);
  if (topP !== undefined && !(topP > 0 && topP <= 1)) bad(`topP ${topP} is not in (0, 1]`);
  if (minP !== undefined && !(minP >= 0 && minP < 1)) bad(`minP ${minP} is not in [0, 1)`);
  if (repetitionPenalty !== undefined && !(repetitionPenalty > 0)) {
    bad(`repetitionPenalty ${repetitionPenalty} is not > 0`);
  }
  if (maxNewTokens !== undefined && !(Number.isInteger(maxNewTokens) && maxNewTokens > 0)) {
    bad(`maxNewTokens ${maxNewTokens} is not an integer > 0`);
  }
}

/**
 * An LLM for code outside React (the engine behind `useLLM`): resolves the backend, downloads
 * and verifies the files, loads them natively, keeps the chat history and streams generation.
 *
 * ```ts
 * const llm = new LLMModule({ model: models.llm.smollm2_135m });
 * await llm.load({ onDownloadProgress: (p) => console.log(p) });
 * const answer = await llm.sendMessage('Hi!', { onToken: (t) => process(t) });
 * llm.release();
 * ```
 */
export class LLMModule<M extends AnyLLMDescriptor = AnyLLMDescriptor> {
  readonly model: M;
  private readonly options: LLMOptions<M>;
  private native: NativeExecutorch | null = null;
  private handle: NativeModelHandle | null = null;
  private template: ChatTemplate | null = null;
  private chosenBackend: BackendOf<M> | null = null;
  private config: ChatConfig = {};
  private history: Message[] = [];
  private generating = false;
  private released = false;
  private loading: Promise<void> | null = null;
  private lastStats: GenerationStats | null = null;
  private cancelLoad: () => void = () => {};

  constructor(options: LLMOptions<M>) {
    this.model = options.model;
    this.options = options;
  }

  /** The backend the model runs on, once {@link load} resolved it. */
  get backend(): BackendOf<M> | null {
    return this.chosenBackend;
  }

  get isReady(): boolean {
    return this.handle !== null && !this.released;
  }

  get isGenerating(): boolean {
    return this.generating;
  }

  /** The conversation so far (without the configured system prompt). */
  get messageHistory(): readonly Message[] {
    return this.history;
  }

  /** Stats of the last finished generation. */
  get stats(): GenerationStats | null {
    return this.lastStats;
  }

  /**
   * Resolves the backend, downloads and verifies the files (or uses `localFiles`) and loads
   * the model. Calling it again while it runs returns the same promise.
   */
  load(options: LoadOptions = {}): Promise<void> {
    if (this.released) return Promise.reject(this.releasedError());
    this.loading ??= this.doLoad(options).catch((error: unknown) => {
      this.loading = null;
      throw error;
    });
    return this.loading;
  }

  private async doLoad(options: LoadOptions): Promise<void> {
    try {
      await this.loadOnce(options);
    } catch (error) {
      // Whatever failed after release() (a cancelled download, a late native load), the cause
      // is the release.
      if (this.released) throw this.releasedError();
      throw error;
    }
  }

  private async loadOnce({ onDownloadProgress, signal }: LoadOptions): Promise<void> {
    const native = this.options.native ?? getNativeExecutorch();
    const info = native.platformInfo();
    const backend = resolveBackend(
      this.model,
      { ...info, availableBackends: native.availableBackends() },
      this.options.backend,
    );
    this.chosenBackend = backend;
    const fetcher = this.fetcher();
    // release() cancels the download too, not only the caller's signal.
    const controller = new AbortController();
    this.cancelLoad = () => controller.abort();
    signal?.addEventListener('abort', () => controller.abort());
    if (signal?.aborted) controller.abort();
    const files: ModelFiles =
      this.options.localFiles ??
      (await fetcher.fetchModel(this.model, backend, {
        signal: controller.signal,
        ...(onDownloadProgress ? { onProgress: onDownloadProgress } : {}),
      }));
    if (this.options.localFiles) {
      // A file the registry has a checksum for is verified before its first load.
      await fetcher.verifyLocalFiles(this.model, backend, this.options.localFiles);
      onDownloadProgress?.(1);
    }
    this.assertLive();
    const template = ChatTemplate.fromTokenizerConfig(await fetcher.readText(files.chatTemplatePath));
    let handle: NativeModelHandle;
    try {
      handle = await native.loadLLM({
        modelPath: files.modelPath,
        tokenizerPath: files.tokenizerPath,
        backend,
      });
    } catch (error) {
      throw fromNativeError(error);
    }
    if (this.released) {
      // Released while the native load ran: nobody will ever use this handle.
      native.release(handle);
      this.assertLive();
    }
    this.native = native;
    this.handle = handle;
    this.template = template;
  }

  private fetcher(): ResourceFetcher {
    return resolveResourceFetcher(this.options.resources);
  }

  /** Sets the system prompt and generation settings for the following generations. */
  configure(config: ChatConfig): void {
    validateChatConfig(config);
    this.config = {
      ...this.config,
      ...config,
      generation: { ...this.config.generation, ...config.generation },
    };
  }

  /**
   * Appends a user message to the history, generates the answer (streamed to `onToken`) and
   * appends it too. Resolves with the answer; an interrupted answer is kept as far as it got.
   */
  async sendMessage(content: string, options: GenerateOptions = {}): Promise<string> {
    this.assertCanGenerate();
    const user: Message = { role: 'user', content };
    const answer = await this.run([...this.history, user], options);
    this.history = [...this.history, user, { role: 'assistant', content: answer }];
    return answer;
  }

  /**
   * Generates the next assistant message for `messages` without touching the history
   * (the configured system prompt still applies).
   */
  generate(messages: readonly Message[], options: GenerateOptions = {}): Promise<string> {
    this.assertCanGenerate();
    return this.run(messages, options);
  }

  /** Forgets the message history (and the native KV cache). */
  clearHistory(): void {
    this.assertCanGenerate();
    this.history = [];
    this.native?.reset(this.handle as NativeModelHandle);
  }

  /** Stops the running generation; its promise resolves with the text so far. */
  interrupt(): void {
    if (this.handle !== null && this.native && this.generating) this.native.interrupt(this.handle);
  }

  /** Interrupts any generation and frees the native model. The module is unusable after. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.cancelLoad();
    if (this.handle !== null && this.native) {
      this.native.release(this.handle);
    }
    this.handle = null;
  }

  private releasedError(): ExecutorchError {
    return new ExecutorchError('released', 'This LLMModule was released; create a new one.');
  }

  private assertLive(): void {
    if (this.released) throw this.releasedError();
  }

  private assertCanGenerate(): void {
    this.assertLive();
    if (this.handle === null) {
      throw new ExecutorchError('model_not_loaded', 'The model is not loaded yet; await load().');
    }
    if (this.generating) {
      throw new ExecutorchError(
        'busy',
        'A generation is already running; await it or call interrupt() first.',
      );
    }
  }

  private nativeConfig(): NativeGenerationConfig {
    const defaults = this.model.generation;
    const g = this.config.generation ?? {};
    return {
      maxNewTokens: g.maxNewTokens ?? defaults.maxNewTokens,
      temperature: g.temperature ?? defaults.temperature,
      topK: g.topK ?? defaults.topK ?? 0,
      topP: g.topP ?? defaults.topP ?? 1,
      minP: g.minP ?? defaults.minP ?? 0,
      repetitionPenalty: g.repetitionPenalty ?? defaults.repetitionPenalty ?? 1,
      seed: g.seed ?? Math.floor(Math.random() * 2 ** 31),
      stopStrings: g.stopStrings ?? [],
    };
  }

  private async run(messages: readonly Message[], { onToken }: GenerateOptions): Promise<string> {
    const system = this.config.systemPrompt;
    const all: Message[] = system ? [{ role: 'system', content: system }, ...messages] : [...messages];
    const prompt = (this.template as ChatTemplate).render(all);
    const native = this.native as NativeExecutorch;
    const handle = this.handle as NativeModelHandle;
    this.generating = true;
    let answer = '';
    try {
      this.lastStats = await native.generate(handle, prompt, this.nativeConfig(), (piece) => {
        answer += piece;
        onToken?.(piece);
      });
    } catch (error) {
      throw fromNativeError(error);
    } finally {
      this.generating = false;
    }
    return answer;
  }
}
