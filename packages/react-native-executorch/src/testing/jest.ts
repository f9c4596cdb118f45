/**
 * `react-native-executorch/jest`: a stand-in for `useLLM` in an app's jest tests, driven by the
 * test (download progress, ready, streamed tokens, errors). It mocks the public hook, not the
 * native module, so app tests need neither model files nor native code:
 *
 * ```ts
 * jest.mock('react-native-executorch', () => require('react-native-executorch/jest').mockExecutorch());
 * import { llmMock } from 'react-native-executorch/jest';
 *
 * beforeEach(() => llmMock.reset());
 * test('answers', async () => {
 *   render(<Chat />);
 *   act(() => llmMock.setDownloadProgress(0.5));   // "Downloading 50%"
 *   act(() => llmMock.finishLoading());            // isReady
 *   llmMock.respondWith(['Paris', '.']);           // later generations stream these pieces
 *   ...
 * });
 * ```
 *
 * With `toolsConfig` configured, a generation's tool calls run through the app's
 * `executeToolCallback` and the conversation goes on, as in the real module (same loop).
 *
 * One model at a time: every mounted `useLLM` shows the same state.
 */
import { useEffect, useSyncExternalStore } from 'react';
import { Platform } from 'react-native';

import type { BackendOf } from '../backend';
import type { Message } from '../chat/template';
import { ExecutorchError } from '../errors';
import { initialHistoryOf, mergeConfig, type ResolvedConfig } from '../llm/LLMModule';
import { asExecutorchError, type LLMController, type UseLLMOptions } from '../llm/useLLM';
import type { AnyLLMDescriptor, Backend, Platform as OS } from '../models';
import type { GenerationStats } from '../native/seam';
import type { ModelFiles } from '../resources/fetcher';
import { runToolRounds, type Generated, type GenerateRound, type ToolTurn } from '../tools';

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

/** One generation (a round of a turn) that runs until the test finishes it (or the auto reply does). */
interface Round {
  readonly resolve: (generated: Generated) => void;
  readonly reject: (error: ExecutorchError) => void;
  text: string;
  pieces: number;
}

/**
 * A `sendMessage` / `generate` call: one round, or with tools configured, rounds until the model
 * answers without calling one (as the real module's tool loop).
 */
interface Turn {
  /** `response`: every round's pieces, the call markup included (the real `onToken` stream). */
  text: string;
  round: Round | null;
  /** Whether tools are configured: the rounds go through the tool loop. */
  readonly withTools: boolean;
  /**
   * Ends the turn (state, history, and stats of the last round), once; called synchronously
   * for a turn without tools.
   */
  readonly complete: (result: ToolTurn) => void;
  readonly fail: (error: ExecutorchError) => void;
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

/** The mock's "tokenizer": every four characters are one token (like the package's own test double). */
function mockTokenCount(input: string | readonly Message[]): number {
  const text = typeof input === 'string' ? input : input.map((m) => `${m.role}\n${m.content}\n`).join('');
  return Math.ceil(text.length / 4);
}

/** Resolves after the current macrotask (a fake-timers test advances it). */
function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => setTimeout(() => resolve(), 0));
}

/** Stats of a mocked generation: counts are real, timings zero unless given. */
function mockStats(generatedTokens: number, overrides: Partial<GenerationStats>): GenerationStats {
  return {
    promptTokens: 0,
    reusedTokens: 0,
    generatedTokens,
    cacheTokens: 0,
    timeToFirstTokenMs: 0,
    prefillMs: 0,
    decodeMs: 0,
    prefillTokensPerSecond: 0,
    tokensPerSecond: 0,
    stopReason: 'eos',
    ...overrides,
  };
}

/** Test-side control of the mocked `useLLM`. Loading and generation controls need `act()`. */
export class LLMMock {
  private snapshot: MockLLMState = INITIAL;
  private readonly listeners = new Set<() => void>();
  private mounted: MockedOptions | null = null;
  private config: ResolvedConfig = { chat: {}, generation: {}, tools: null };
  private reply: MockReply | null = null;
  /** Mock tokens of the running (else the last) round's conversation. */
  private promptTokens = 0;
  private turn: Turn | null = null;
  /** The last finished round: its pieces (`stats.generatedTokens`, per round as the real module counts) and stats. */
  private lastRound: { pieces: number; stats: Partial<GenerationStats> } = { pieces: 0, stats: {} };

  /** The current state, as the hook returns it. */
  get state(): MockLLMState {
    return this.snapshot;
  }

  /** The options of the mounted `useLLM`, or null when none is mounted. */
  get options(): MockedOptions | null {
    return this.mounted;
  }

  /** The configuration `configure` accumulated (chat, generation and tools settings). */
  get chatConfig(): ResolvedConfig {
    return this.config;
  }

  /** Back to nothing mounted, no reply, no configuration. Call it in `beforeEach`. */
  reset(): void {
    this.mounted = null;
    this.config = { chat: {}, generation: {}, tools: null };
    this.reply = null;
    this.turn = null;
    this.set(INITIAL);
  }

  /** Download progress 0..1, as `downloadProgress`. */
  setDownloadProgress(progress: number): void {
    if (!(progress >= 0 && progress <= 1)) throw new Error(`llmMock: progress ${progress} is not in [0, 1]`);
    this.requireLoading('setDownloadProgress');
    this.set({ downloadProgress: progress });
  }

  /**
   * The model is loaded: `isReady`, progress 1 and `backend` (default: the explicit `backend`
   * option, else the model's default on `Platform.OS`).
   */
  finishLoading(backend?: Backend): void {
    const options = this.requireLoading('finishLoading');
    const os: OS = Platform.OS === 'android' ? 'android' : 'ios';
    this.set({
      isReady: true,
      downloadProgress: 1,
      backend: backend ?? options.backend ?? options.model.platformDefaults[os],
    });
  }

  /** Loading failed with `error` (as `useLLM().error`), e.g. `new ExecutorchError('download_failed', ...)`. */
  failLoading(error: ExecutorchError): void {
    this.requireLoading('failLoading');
    this.set({ error });
  }

  /**
   * Following generations answer by themselves: the pieces stream into `response` one per
   * macrotask (`setTimeout(0)`: with fake timers, advance them), then the generation ends with
   * `stopReason: 'eos'`. Without a reply, a generation runs until {@link streamToken} /
   * {@link finishGeneration} / {@link failGeneration}.
   */
  respondWith(reply: MockReply | null): void {
    this.reply = reply;
  }

  /** Appends a piece to the running generation's `response`. */
  streamToken(piece: string): void {
    const { turn, round } = this.requireRound('streamToken');
    round.text += piece;
    round.pieces += 1;
    turn.text += piece;
    this.set({ response: turn.text, token: piece });
  }

  /**
   * Ends the running generation with its text so far. Without tools its promise resolves with
   * it; with tools configured, the text's tool calls run through `executeToolCallback` and the
   * next round starts (answered by `respondWith`, or driven by hand again) until an answer
   * without calls.
   */
  finishGeneration(stats: Partial<GenerationStats> = {}): void {
    const { turn, round } = this.requireRound('finishGeneration');
    turn.round = null;
    this.lastRound = { pieces: round.pieces, stats };
    // Without tools the turn ends here, so the test sees the final state right after this call.
    if (!turn.withTools) {
      turn.complete({ answer: round.text, messages: [{ role: 'assistant', content: round.text }] });
    }
    round.resolve({ text: round.text, interrupted: stats.stopReason === 'interrupted' });
  }

  /** Fails the running generation: `error` is set and its promise rejects with it. */
  failGeneration(error: ExecutorchError): void {
    const { turn, round } = this.requireRound('failGeneration');
    turn.round = null;
    if (!turn.withTools) turn.fail(error);
    round.reject(error);
  }

  /** @internal The hook's subscription. */
  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  /** @internal A `useLLM` mounted (or its model, backend or preventLoad changed): loading starts over. */
  mount(options: MockedOptions): () => void {
    this.mounted = options;
    this.turn = null;
    this.set(INITIAL);
    return () => {
      if (this.mounted !== options) return;
      this.mounted = null;
      this.turn = null;
    };
  }

  /** @internal */
  controller<M extends AnyLLMDescriptor>(state: MockLLMState): LLMController<M> {
    return {
      ...(state as LLMController<M>),
      backend: state.backend as BackendOf<M> | null,
      sendMessage: (content) => {
        const history = this.snapshot.messageHistory;
        const user: Message = { role: 'user', content };
        return this.start([...history, user], [...history, user], (turn) => {
          // Like the real module: the tool rounds stay in the history only with displayToolCalls.
          const kept = this.config.tools?.displayToolCalls
            ? turn.messages
            : [{ role: 'assistant', content: turn.answer } as const];
          return [...history, user, ...kept];
        });
      },
      generate: (messages) => {
        const history = this.snapshot.messageHistory;
        return this.start(messages, history, () => history);
      },
      interrupt: () => {
        if (this.turn?.round) this.finishGeneration({ stopReason: 'interrupted' });
      },
      configure: (config) => {
        this.config = mergeConfig(this.config, config);
        const history = initialHistoryOf(config);
        if (history !== undefined) this.set({ messageHistory: history });
      },
      clearHistory: () => {
        this.assertCanGenerate();
        this.set({ messageHistory: [], response: '', token: '' });
      },
      deleteMessage: (index) => {
        this.assertCanGenerate();
        const history = this.snapshot.messageHistory;
        if (!Number.isInteger(index) || index < 0 || index >= history.length) {
          throw new ExecutorchError('invalid_argument', `deleteMessage(${index}): no such message.`);
        }
        this.set({ messageHistory: history.slice(0, index) });
      },
      countTokens: (input) => mockTokenCount(input),
      getMaxContextLength: () => this.maxContextLength(),
      getGeneratedTokenCount: () => this.generatedTokens(),
      getPromptTokenCount: () => this.promptTokens,
      getTotalTokenCount: () => this.promptTokens + this.generatedTokens(),
    };
  }

  /**
   * Starts a turn answering `conversation`: one round, or the tool loop when tools are
   * configured. `pending` is the history shown while it runs, `historyAfter` the one after it
   * finished (a failure restores the one before).
   */
  private start(
    conversation: readonly Message[],
    pending: readonly Message[],
    historyAfter: (turn: ToolTurn) => readonly Message[],
  ): Promise<string> {
    try {
      this.assertCanGenerate();
    } catch (error) {
      return Promise.reject(error);
    }
    const historyBefore = this.snapshot.messageHistory;
    const tools = this.config.tools?.tools.length ? this.config.tools : null;
    let settle!: { resolve: (answer: string) => void; reject: (error: ExecutorchError) => void };
    const answer = new Promise<string>((resolve, reject) => {
      settle = { resolve, reject };
    });
    const turn: Turn = {
      text: '',
      round: null,
      withTools: tools !== null,
      complete: (result) => {
        if (this.turn === turn) {
          this.turn = null;
          this.set({
            isGenerating: false,
            messageHistory: historyAfter(result),
            stats: mockStats(this.lastRound.pieces, this.lastRound.stats),
          });
        }
        settle.resolve(result.answer);
      },
      fail: (error) => {
        if (this.turn === turn) {
          this.turn = null;
          this.set({ isGenerating: false, error, messageHistory: historyBefore });
        }
        settle.reject(error);
      },
    };
    this.turn = turn;
    this.set({ isGenerating: true, response: '', token: '', error: null, messageHistory: pending });
    const generate: GenerateRound = (messages) => this.startRound(turn, messages);
    if (tools) {
      runToolRounds(conversation, generate, tools, tools.maxRounds).then(
        (result) => turn.complete(result),
        (error: unknown) => turn.fail(asExecutorchError(error)),
      );
    } else {
      generate(conversation).catch(() => {}); // finishGeneration / failGeneration end the turn
    }
    return answer;
  }

  /** One round of `turn`: a generation answering `messages`, auto-played when a reply is set. */
  private startRound(turn: Turn, messages: readonly Message[]): Promise<Generated> {
    if (this.turn !== turn) return Promise.resolve({ text: '', interrupted: true });
    let round!: Round;
    const generated = new Promise<Generated>((resolve, reject) => {
      round = { resolve, reject, text: '', pieces: 0 };
    });
    turn.round = round;
    this.promptTokens = mockTokenCount(messages);
    if (this.reply !== null) void this.play(this.reply, turn, round, messages);
    return generated;
  }

  /** Streams the reply's pieces one per macrotask, as long as this round runs. */
  private async play(reply: MockReply, turn: Turn, round: Round, conversation: readonly Message[]): Promise<void> {
    const system = this.config.chat.systemPrompt;
    const rendered: Message[] = system ? [{ role: 'system', content: system }, ...conversation] : [...conversation];
    const answer = typeof reply === 'function' ? reply(rendered) : reply;
    const running = () => this.turn === turn && turn.round === round;
    for (const piece of typeof answer === 'string' ? [answer] : answer) {
      await nextMacrotask();
      if (!running()) return;
      this.streamToken(piece);
    }
    await nextMacrotask();
    if (running()) this.finishGeneration();
  }

  private generatedTokens(): number {
    return this.turn?.round?.pieces ?? this.snapshot.stats?.generatedTokens ?? 0;
  }

  /** The mounted model's context length on its backend (its first variant's without one). */
  private maxContextLength(): number {
    if (!this.mounted || !this.snapshot.isReady) {
      throw new ExecutorchError('model_not_loaded', 'The model is not loaded yet.');
    }
    const model = this.mounted.model;
    const backend = (this.snapshot.backend ?? Object.keys(model.variants)[0]) as keyof typeof model.variants;
    return (model.variants[backend] as { maxContext: number }).maxContext;
  }

  private assertCanGenerate(): void {
    if (this.mounted?.preventLoad) {
      throw new ExecutorchError('model_not_loaded', 'Loading is prevented (preventLoad).');
    }
    if (!this.snapshot.isReady) throw new ExecutorchError('model_not_loaded', 'The model is not loaded yet.');
    if (this.turn) {
      throw new ExecutorchError('busy', 'A generation is already running; await it or call interrupt() first.');
    }
  }

  private requireLoading(what: string): MockedOptions {
    if (!this.mounted) throw new Error(`llmMock.${what}: no useLLM is mounted (render first)`);
    if (this.mounted.preventLoad) throw new Error(`llmMock.${what}: useLLM has preventLoad set`);
    return this.mounted;
  }

  private requireRound(what: string): { turn: Turn; round: Round } {
    const turn = this.turn;
    if (!turn?.round) throw new Error(`llmMock.${what}: no generation is running`);
    return { turn, round: turn.round };
  }

  private set(patch: Partial<MockLLMState>): void {
    this.snapshot = { ...this.snapshot, ...patch };
    this.listeners.forEach((listener) => listener());
  }
}

/** The mock's controls, shared by every test of a file (call `llmMock.reset()` in `beforeEach`). */
export const llmMock = new LLMMock();

/** The mocked `useLLM`: the state {@link llmMock} sets, and its actions. */
export function useLLM<M extends AnyLLMDescriptor>(options: UseLLMOptions<M>): LLMController<M> {
  const { model, backend, preventLoad, localFiles } = options;
  // Like the real hook: a new model, backend or preventLoad starts loading over.
  useEffect(
    () => llmMock.mount({ model, backend, preventLoad, localFiles }),
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [model, backend, preventLoad],
  );
  const state = useSyncExternalStore(llmMock.subscribe, () => llmMock.state);
  return llmMock.controller<M>(preventLoad ? INITIAL : state);
}

declare const jest: { requireActual<T>(moduleName: string): T };

/**
 * The package with `useLLM` replaced by the mock; everything else (models, errors, backend
 * resolution, ChatTemplate) is the real thing. For `jest.mock('react-native-executorch', ...)`.
 */
export function mockExecutorch(): Record<string, unknown> {
  return { ...jest.requireActual<Record<string, unknown>>('react-native-executorch'), useLLM };
}
