import { useCallback, useEffect, useRef, useState } from 'react';

import type { BackendOf } from '../backend';
import type { Message, MessageInput } from '../chat/template';
import { ExecutorchError } from '../errors';
import type { AnyLLMDescriptor } from '../models';
import type { GenerationStats, SessionInfo } from '../native/seam';
import { DownloadControl, type DownloadStatus } from '../resources/fetcher';
import {
  initialHistoryOf,
  LLMModule,
  mergeConfig,
  userMessage,
  type GenerateOptions,
  type MediaOptions,
  type ResolvedConfig,
} from './LLMModule';
import { TokenBatcher } from './tokenBatcher';
import type { LLMConfig, LLMOptions } from './types';

/** Options of {@link useLLM}. */
export interface UseLLMOptions<M extends AnyLLMDescriptor = AnyLLMDescriptor> extends LLMOptions<M> {
  /** Do not download or load yet (e.g. until the user opts in). Default false. */
  readonly preventLoad?: boolean;
  /** Streamed text reaches React at most once per this many ms. Default 50. */
  readonly tokenBatchMs?: number;
}

/** What {@link useLLM} returns. */
export interface LLMController<M extends AnyLLMDescriptor = AnyLLMDescriptor> {
  /** True once the model is loaded and can generate. */
  readonly isReady: boolean;
  readonly isGenerating: boolean;
  /** 0..1 over all files of the model (1 when they were cached). */
  readonly downloadProgress: number;
  /** The download's bytes, rate and time left, and whether it is paused; null before it reports. */
  readonly downloadStatus: DownloadStatus | null;
  /** Pauses the model's download (the parts are kept, progress stays); see {@link DownloadControl}. */
  pauseDownload(): void;
  /** Continues a paused download from its parts. */
  resumeDownload(): void;
  /** The last failure (loading, or a generation), or null. */
  readonly error: ExecutorchError | null;
  /** The answer being generated (streamed), or the last one. */
  readonly response: string;
  /** The last text piece the model produced (streamed, batched like `response`). */
  readonly token: string;
  /**
   * The thought of the answer being generated, or of the last one, when `chatConfig.thinking`
   * is on and the model thinks (streamed, batched like `response`; '' otherwise).
   */
  readonly thought: string;
  /** The conversation `sendMessage` builds (the pending user message included while it runs). */
  readonly messageHistory: readonly Message[];
  /** Time to first token, tok/s, ... of the last generation. */
  readonly stats: GenerationStats | null;
  /** The backend chosen for this device, once resolved. */
  readonly backend: BackendOf<M> | null;
  /**
   * Sends a user message and resolves with the answer (also streamed into `response`). `media`
   * attaches an image and/or audio, for models whose capabilities include `vision` / `audio`
   * (see {@link LLMModule.sendMessage}).
   */
  sendMessage(content: string, media?: MediaOptions<M>): Promise<string>;
  /** Answers `messages` (content may be parts: text, image, audio) without touching `messageHistory`. */
  generate(messages: readonly MessageInput[]): Promise<string>;
  /** Stops the running generation (its promise resolves with the text so far). */
  interrupt(): void;
  /**
   * Settings for the following generations: `{ chatConfig, toolsConfig, generationConfig }`
   * (or the older flat `{ systemPrompt, generation }`); `chatConfig.initialMessageHistory`
   * replaces `messageHistory`.
   */
  configure(config: LLMConfig): void;
  /** Clears `messageHistory` and the native conversation. */
  clearHistory(): void;
  /** Deletes the message at `index` and every later one from `messageHistory`. */
  deleteMessage(index: number): void;
  /** Saves the conversation to a file ({@link LLMModule.saveSession}). */
  saveSession(path: string, options?: { readonly tokensOnly?: boolean }): Promise<SessionInfo>;
  /** Continues the conversation saved in a file ({@link LLMModule.loadSession}); updates `messageHistory`. */
  loadSession(path: string): Promise<SessionInfo>;
  /** Saves a branch ending at message `messageIndex` to a file ({@link LLMModule.fork}); load it to switch. */
  fork(messageIndex: number, path: string): Promise<SessionInfo>;
  /** Tokens of a text, or of the prompt messages render into (system prompt included). */
  countTokens(input: string | readonly MessageInput[]): number;
  /** The model's context length in tokens. */
  getMaxContextLength(): number;
  /** Tokens generated so far by the running generation, else by the last one. */
  getGeneratedTokenCount(): number;
  /** Prompt tokens of the running (else the last) generation, after the context strategy. */
  getPromptTokenCount(): number;
  /** Prompt + generated tokens of the running (else the last) generation. */
  getTotalTokenCount(): number;
}

interface HookState<M extends AnyLLMDescriptor> {
  isReady: boolean;
  isGenerating: boolean;
  downloadProgress: number;
  downloadStatus: DownloadStatus | null;
  error: ExecutorchError | null;
  response: string;
  token: string;
  thought: string;
  messageHistory: readonly Message[];
  stats: GenerationStats | null;
  backend: BackendOf<M> | null;
}

function initialState<M extends AnyLLMDescriptor>(): HookState<M> {
  return {
    isReady: false,
    isGenerating: false,
    downloadProgress: 0,
    downloadStatus: null,
    error: null,
    response: '',
    token: '',
    thought: '',
    messageHistory: [],
    stats: null,
    backend: null,
  };
}

/** What the hook's `error` holds for a failure: an ExecutorchError as is, anything else wrapped. */
export function asExecutorchError(error: unknown): ExecutorchError {
  return error instanceof ExecutorchError
    ? error
    : new ExecutorchError('execution_failed', String(error), { cause: error });
}

/**
 * Runs an LLM of the registry on the device: picks the backend, downloads and verifies the
 * model (with progress), loads it and streams answers.
 *
 * ```tsx
 * const llm = useLLM({ model: models.llm.gemma4_e2b });
 * if (!llm.isReady) return <Text>Downloading {Math.round(llm.downloadProgress * 100)}%</Text>;
 * <Button title="Ask" onPress={() => llm.sendMessage('Hi!')} />
 * <Text>{llm.response}</Text>
 * ```
 *
 * Changing `model`, `backend`, `localFiles` or `preventLoad` releases the loaded model and
 * loads the new one; unmounting interrupts generation and releases the model.
 */
export function useLLM<M extends AnyLLMDescriptor>(options: UseLLMOptions<M>): LLMController<M> {
  const { preventLoad = false, tokenBatchMs = 50 } = options;
  const [state, setState] = useState<HookState<M>>(initialState);
  const shared = useShared<M>();
  const update = useCallback((patch: Partial<HookState<M>>) => {
    setState((s) => ({ ...s, ...patch }));
  }, []);
  useModuleLoad(options, shared, setState, update);
  const generation = useGeneration(shared, preventLoad, tokenBatchMs, update);
  const conversation = useConversation(shared, update);
  const queries = useModuleQueries(shared);
  return { ...state, ...generation, ...conversation, ...queries };
}

/**
 * What useLLM's pieces share across renders: one object for the hook's lifetime, read and
 * written by the callbacks (never a reason to re-render).
 */
interface Shared<M extends AnyLLMDescriptor> {
  /** The loaded (or loading) module; null before loading, after release, or with preventLoad. */
  module: LLMModule<M> | null;
  /** configure()'s settings, kept for the modules created later (model changes). */
  config: ResolvedConfig;
  /** The history set by configure() before the model was created. */
  initialHistory: readonly Message[] | undefined;
  /** The running generation's batchers, cancelled when another starts or the model goes. */
  batcher: TokenBatcher | null;
  thoughtBatcher: TokenBatcher | null;
  download: DownloadControl | null;
}

function useShared<M extends AnyLLMDescriptor>(): Shared<M> {
  return useRef<Shared<M>>({
    module: null,
    config: { chat: {}, generation: {}, tools: null },
    initialHistory: undefined,
    batcher: null,
    thoughtBatcher: null,
    download: null,
  }).current;
}

/**
 * Creates, configures and loads the module when the model (or how it is loaded) changes, and
 * releases it on the next change or on unmount.
 */
function useModuleLoad<M extends AnyLLMDescriptor>(
  options: UseLLMOptions<M>,
  shared: Shared<M>,
  setState: (state: HookState<M>) => void,
  update: (patch: Partial<HookState<M>>) => void,
): void {
  const { model, backend, preventLoad = false, localFiles, assistant = false } = options;
  // Adapters and native doubles are read when loading starts; they are not reload triggers.
  const optionsRef = useRef(options);
  optionsRef.current = options;

  useEffect(() => {
    setState(initialState<M>());
    if (preventLoad) return undefined;
    const module = new LLMModule<M>(optionsRef.current);
    const { chat, generation, tools } = shared.config;
    module.configure({
      chatConfig: { ...chat, initialMessageHistory: shared.initialHistory },
      generationConfig: generation,
      ...(tools ? { toolsConfig: tools } : {}),
    });
    shared.module = module;
    if (module.messageHistory.length > 0) update({ messageHistory: module.messageHistory });
    const controller = new AbortController();
    const download = new DownloadControl();
    shared.download = download;
    let live = true;
    module
      .load({
        signal: controller.signal,
        download,
        onDownloadProgress: (downloadProgress) => live && update({ downloadProgress }),
        onDownloadStatus: (downloadStatus) => live && update({ downloadStatus }),
      })
      .then(() => live && update({ isReady: true, backend: module.backend }))
      .catch((error: unknown) => live && update({ error: asExecutorchError(error), backend: module.backend }));
    return () => {
      live = false;
      controller.abort();
      shared.batcher?.cancel();
      shared.batcher = null;
      shared.thoughtBatcher?.cancel();
      shared.thoughtBatcher = null;
      module.release();
      shared.module = null;
    };
    // localFiles is compared by its paths so that an inline object literal does not reload;
    // shared and setState are the same object on every render, so they never re-run it.
  }, [
    model,
    backend,
    assistant,
    preventLoad,
    localFiles?.modelPath,
    localFiles?.tokenizerPath,
    localFiles?.chatTemplatePath,
    update,
    shared,
    setState,
  ]);
}

/** sendMessage, generate and interrupt: one generation at a time, streamed into the state. */
function useGeneration<M extends AnyLLMDescriptor>(
  shared: Shared<M>,
  preventLoad: boolean,
  tokenBatchMs: number,
  update: (patch: Partial<HookState<M>>) => void,
) {
  // Starts a generation and streams it into the state; the state is left alone when it is
  // refused, and when the model changed while it ran.
  const stream = useCallback(
    async (
      start: (module: LLMModule<M>, options: Pick<GenerateOptions, 'onToken' | 'onThought'>) => Promise<string>,
      pendingHistory: (module: LLMModule<M>) => readonly Message[],
    ): Promise<string> => {
      const module = shared.module;
      if (!module) {
        throw new ExecutorchError(
          'model_not_loaded',
          preventLoad ? 'Loading is prevented (preventLoad).' : 'The model is not loaded yet.',
        );
      }
      let token = '';
      const batcher = new TokenBatcher(tokenBatchMs, (response) => {
        if (shared.module === module) update({ response, token });
      });
      const thoughtBatcher = new TokenBatcher(tokenBatchMs, (thought) => {
        if (shared.module === module) update({ thought });
      });
      const wasGenerating = module.isGenerating;
      const promise = start(module, {
        onToken: (piece) => {
          token = piece;
          batcher.push(piece);
        },
        onThought: (piece) => thoughtBatcher.push(piece),
      });
      // Refused (busy, not loaded yet): the promise rejects with the typed error; the running
      // generation's state stays as it is.
      if (wasGenerating || !module.isGenerating) return promise;
      shared.batcher?.cancel();
      shared.batcher = batcher;
      shared.thoughtBatcher?.cancel();
      shared.thoughtBatcher = thoughtBatcher;
      update({
        isGenerating: true,
        response: '',
        token: '',
        thought: '',
        error: null,
        messageHistory: pendingHistory(module),
      });
      try {
        const answer = await promise;
        batcher.finish();
        thoughtBatcher.finish();
        if (shared.module === module) {
          update({ isGenerating: false, messageHistory: module.messageHistory, stats: module.stats });
        }
        return answer;
      } catch (error) {
        batcher.finish();
        thoughtBatcher.finish();
        const failure = asExecutorchError(error);
        if (shared.module === module) {
          update({ isGenerating: false, error: failure, messageHistory: module.messageHistory });
        }
        throw failure;
      }
    },
    [preventLoad, tokenBatchMs, update, shared],
  );

  const sendMessage = useCallback(
    (content: string, media?: MediaOptions<M>) =>
      stream(
        (module, callbacks) => module.sendMessage(content, { ...media, ...callbacks } as Parameters<typeof module.sendMessage>[1]),
        (module) => [...module.messageHistory, userMessage(content, media)],
      ),
    [stream],
  );

  const generate = useCallback(
    (messages: readonly MessageInput[]) =>
      stream(
        (module, callbacks) => module.generate(messages, callbacks),
        (module) => module.messageHistory,
      ),
    [stream],
  );

  const interrupt = useCallback(() => shared.module?.interrupt(), [shared]);

  return { sendMessage, generate, interrupt };
}

/** configure and the history: clear, delete, sessions (save, load, fork). */
function useConversation<M extends AnyLLMDescriptor>(
  shared: Shared<M>,
  update: (patch: Partial<HookState<M>>) => void,
) {
  const configure = useCallback(
    (config: LLMConfig) => {
      // Validate now, and keep it for modules created later (model changes).
      shared.config = mergeConfig(shared.config, config);
      const history = initialHistoryOf(config);
      if (history !== undefined) shared.initialHistory = history;
      const module = shared.module;
      if (!module) {
        if (history !== undefined) update({ messageHistory: history });
        return;
      }
      module.configure(config);
      if (history !== undefined) update({ messageHistory: module.messageHistory });
    },
    [update, shared],
  );

  const clearHistory = useCallback(() => {
    const module = shared.module;
    if (!module) return;
    module.clearHistory();
    update({ messageHistory: [], response: '', token: '', thought: '' });
  }, [update, shared]);

  const deleteMessage = useCallback(
    (index: number) => {
      const module = requireModule(shared.module);
      module.deleteMessage(index);
      update({ messageHistory: module.messageHistory });
    },
    [update, shared],
  );

  const saveSession = useCallback(
    (path: string, options?: { readonly tokensOnly?: boolean }) =>
      requireModule(shared.module).saveSession(path, options),
    [shared],
  );

  const loadSession = useCallback(
    async (path: string) => {
      const module = requireModule(shared.module);
      const info = await module.loadSession(path);
      update({ messageHistory: module.messageHistory, response: '', token: '', thought: '' });
      return info;
    },
    [update, shared],
  );

  const fork = useCallback(
    (messageIndex: number, path: string) => requireModule(shared.module).fork(messageIndex, path),
    [shared],
  );

  return { configure, clearHistory, deleteMessage, saveSession, loadSession, fork };
}

/** Token counts and the download's pause and resume: read from the module, no state. */
function useModuleQueries<M extends AnyLLMDescriptor>(shared: Shared<M>) {
  const countTokens = useCallback(
    (input: string | readonly MessageInput[]) => requireModule(shared.module).countTokens(input),
    [shared],
  );
  const getMaxContextLength = useCallback(() => requireModule(shared.module).getMaxContextLength(), [shared]);
  const getGeneratedTokenCount = useCallback(() => shared.module?.getGeneratedTokenCount() ?? 0, [shared]);
  const getPromptTokenCount = useCallback(() => shared.module?.getPromptTokenCount() ?? 0, [shared]);
  const getTotalTokenCount = useCallback(() => shared.module?.getTotalTokenCount() ?? 0, [shared]);
  const pauseDownload = useCallback(() => shared.download?.pause(), [shared]);
  const resumeDownload = useCallback(() => shared.download?.resume(), [shared]);

  return {
    countTokens,
    getMaxContextLength,
    getGeneratedTokenCount,
    getPromptTokenCount,
    getTotalTokenCount,
    pauseDownload,
    resumeDownload,
  };
}

function requireModule<M extends AnyLLMDescriptor>(module: LLMModule<M> | null): LLMModule<M> {
  if (!module) throw new ExecutorchError('model_not_loaded', 'The model is not loaded yet.');
  return module;
}
