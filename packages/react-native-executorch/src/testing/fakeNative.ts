/**
 * A faithful test double of the native seam: it behaves like the JSI binding over the C++
 * runner. Tokens arrive over time on timers (the binding posts them from a worker thread),
 * interrupt stops after the current token and resolves with `interrupted`, a second generate on
 * a busy handle rejects with `busy`, released handles are invalid, errors are `Error` objects
 * with a native `code`, and the conversation is kept "in the KV cache": only the part of the
 * prompt that extends the previous prompt + everything the model generated (a cut-off stop
 * string included) counts as in the cache: like the runner, it reuses the longest common
 * (fake-)token prefix of that and the next prompt and prefills only the rest.
 *
 * Images and audio: a media part counts as {@link FAKE_MEDIA_TOKENS} fake tokens (its stand-in
 * text, {@link fakeMediaText}, is what `prompts` and `answer` see), and a model loaded without
 * the matching encoder rejects it with `invalid_argument`, as the runner does.
 *
 * A generation either plays the pieces `answer` returns, or, when `answer` returns null, waits
 * for the test to drive it ({@link FakeNative.running}: push pieces, finish, fail); the package's
 * jest mock (`react-native-executorch/jest`) drives it that way. The package's unit tests use
 * this fake, and __tests__/e2e/ runs the same suite against it and the real runner, so each of
 * these claims is checked against the real thing.
 */
import type { Backend } from '../models';
import type {
  GenerationStats,
  NativeExecutorch,
  NativeGenerationConfig,
  NativeLoadOptions,
  NativeMemoryNeed,
  NativeModelHandle,
  NativePlatformInfo,
  NativeSessionInfo,
  MediaPromptPart,
  NativePrompt,
  PromptPart,
  StopReason,
} from '../native/seam';
import { renderChatTemplateDouble } from './templateDouble';

export interface FakeNativeOptions {
  os?: 'ios' | 'android';
  isSimulator?: boolean;
  /** What the binary links; default: MLX + XNNPACK on iOS, Vulkan + XNNPACK on Android. */
  backends?: Backend[];
  /**
   * The pieces the "model" answers with, given the prompt; null: the generation waits for the
   * test to drive it through {@link FakeNative.running}.
   */
  answer?: (prompt: string) => readonly string[] | null;
  /** Delay between tokens (the decode time). */
  tokenIntervalMs?: number;
  /** Delay of a load; 0 resolves it without a timer (for tests on fake timers). */
  loadDelayMs?: number;
  /**
   * Checks the files at load as the runner does, throwing its native errors (default: only
   * the `.pte` extension is checked).
   */
  checkLoad?: (options: NativeLoadOptions) => void;
  /**
   * KV-cache capacity in (fake) tokens, default 4096, or a function of the load (a model's
   * capacity on its backend): a longer prompt rejects with `context_full`.
   */
  maxContext?: number | ((options: NativeLoadOptions) => number);
  /**
   * False: every timing and rate of the stats is 0, so a scripted test's stats do not depend on
   * the machine. Default true (wall-clock timings).
   */
  measureTime?: boolean;
  /**
   * The "encoder time" of each image or audio part the model had not encoded lately (as the
   * runner, the fake keeps the last {@link MEDIA_CACHE_ITEMS} encoded): reported as the stats'
   * `mediaEncodeMs` and counted in `timeToFirstTokenMs`. Default 5; 0 when `measureTime` is false.
   */
  mediaEncodeMs?: number;
  /**
   * What the "OS" says the app may still use, for `checkMemory` (a need's own
   * `availableMemoryBytes` wins). Absent: unknown, nothing is refused.
   */
  availableMemoryBytes?: number;
}

interface Session {
  readonly options: NativeLoadOptions;
  readonly maxContext: number;
  /** Prompt + generated text in the "KV cache", and how many fake tokens it occupies. */
  conversation: string;
  cacheTokens: number;
  generation: FakeGeneration | null;
  released: boolean;
  stats: GenerationStats | null;
  /** The media parts encoded last (their fake texts), oldest first. */
  encoded: string[];
}

/** FakeNative's saved sessions by path (see FakeNative.saveSession). */
const FAKE_SESSION_FILES = new Map<
  string,
  { model: string; conversation: string; cacheTokens: number; appData: string; tokensOnly: boolean }
>();

export function nativeError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(() => resolve(), ms));
/** The fake's "tokenizer": every four characters are one token. */
const CHARS_PER_TOKEN = 4;
const countTokens = (text: string) => Math.ceil(text.length / CHARS_PER_TOKEN);

/**
 * Fake tokens of one image or audio part, whatever its size or length (the runner's count
 * depends on the picture and the clip; the fake's is fixed so tests can count).
 */
export const FAKE_MEDIA_TOKENS = 16;

/** FNV-1a over `units` (bytes, or a string's UTF-16 code units), as 8 hex digits. */
function fnv1a(units: ArrayLike<number>): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < units.length; i += 1) hash = Math.imul(hash ^ units[i]!, 0x01000193) >>> 0;
  return hash.toString(16).padStart(8, '0');
}

/**
 * The text a media part stands as in the fake's "tokenizer": {@link FAKE_MEDIA_TOKENS} tokens'
 * worth of characters naming its kind and content (its path, or a hash of its samples), so the
 * same media at the same place is reused from the "KV cache" and other media is not.
 */
export function fakeMediaText(part: MediaPromptPart): string {
  const content =
    part.samples === undefined
      ? fnv1a(Array.from({ length: part.path.length }, (_, i) => part.path.charCodeAt(i)))
      : fnv1a(new Uint8Array(part.samples.buffer, part.samples.byteOffset, part.samples.byteLength));
  return `[${part.media}:${content}]`.padEnd(FAKE_MEDIA_TOKENS * CHARS_PER_TOKEN, '.');
}

/** A prompt as parts (a string is one template part). */
const partsOf = (prompt: NativePrompt): readonly PromptPart[] =>
  typeof prompt === 'string' ? [{ text: prompt }] : prompt;
/** A prompt's text, as the fake "tokenizes" it (media parts as {@link fakeMediaText}). */
const textOf = (prompt: NativePrompt): string =>
  partsOf(prompt)
    .map((part) => (part.media === undefined ? part.text : fakeMediaText(part)))
    .join('');

/**
 * Rejects media the runner rejects: a kind whose encoder the model was loaded without, an empty
 * path, audio samples that are not a non-empty `Float32Array`.
 */
function checkMedia(options: NativeLoadOptions, prompt: NativePrompt): void {
  for (const part of partsOf(prompt)) {
    if (part.media === undefined) continue;
    const encoder = part.media === 'image' ? options.visionEncoderPath : options.audioEncoderPath;
    if (encoder === undefined) {
      throw nativeError(
        'invalid_argument',
        `The prompt has ${part.media === 'image' ? 'an image' : 'audio'} but the model was loaded without ` +
          `${part.media === 'image' ? 'a vision' : 'an audio'} encoder`,
      );
    }
    if (part.samples !== undefined) {
      if (!(part.samples instanceof Float32Array) || part.samples.length === 0) {
        throw nativeError('invalid_argument', 'Audio samples must be a non-empty Float32Array (16 kHz mono)');
      }
    } else if (typeof part.path !== 'string' || part.path === '') {
      throw nativeError('invalid_argument', `A ${part.media} part needs a file path`);
    }
  }
}

/** Media items whose encoding the native side keeps (cpp/media's MediaEmbedder cache). */
export const MEDIA_CACHE_ITEMS = 4;

/** How many media parts of `prompt` `session` has not encoded lately; remembers them. */
function encodeMedia(session: Session, prompt: NativePrompt): number {
  let fresh = 0;
  for (const part of partsOf(prompt)) {
    if (part.media === undefined) continue;
    const text = fakeMediaText(part);
    const at = session.encoded.indexOf(text);
    if (at >= 0) session.encoded.splice(at, 1);
    else fresh += 1;
    session.encoded.push(text);
    if (session.encoded.length > MEDIA_CACHE_ITEMS) session.encoded.shift();
  }
  return fresh;
}

/** Whole fake tokens `a` and `b` share at their start. */
function commonTokens(a: string, b: string): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n += 1;
  return Math.floor(n / CHARS_PER_TOKEN);
}

const DEFAULT_ANSWER = ['Hello', ',', ' world', '!'];

/** The stats' timing fields, zeroed (see {@link FakeNativeOptions.measureTime}). */
const NO_TIMINGS = {
  timeToFirstTokenMs: 0,
  mediaEncodeMs: 0,
  prefillMs: 0,
  decodeMs: 0,
  prefillTokensPerSecond: 0,
  tokensPerSecond: 0,
} as const satisfies Partial<GenerationStats>;

/** Where a generate call starts: its prompt split into cached and prefilled tokens. */
interface PromptPlan {
  readonly prompt: string;
  readonly reusedTokens: number;
  readonly promptTokens: number;
  /** The fake encoders' time for the prompt's media (counted before the prefill). */
  readonly mediaEncodeMs: number;
}

/**
 * One generate call: pieces go in (from the fake's player or the test) and come out through
 * `onToken` as the runner emits them, until a stop rule or the caller ends it; its end leaves
 * the conversation in the session's "KV cache" and resolves the call with its stats.
 */
export class FakeGeneration {
  readonly prompt: string;
  readonly config: NativeGenerationConfig;
  /** Pieces the generation emitted (a stop string's cut-off part excluded). */
  private text = '';
  /** Everything generated: `text` plus a stop string and what came with it. */
  private produced = '';
  private generated = 0;
  private readonly startedAt: number;
  private prefilledAt: number | null = null;
  private firstTokenAt = 0;
  private interruptRequested = false;
  private ended = false;
  private settle!: { resolve: (stats: GenerationStats) => void; reject: (error: Error) => void };
  /** Resolves with the call's stats when it ends, rejects when it fails. */
  readonly done: Promise<GenerationStats>;

  constructor(
    private readonly session: Session,
    private readonly plan: PromptPlan,
    config: NativeGenerationConfig,
    private readonly onToken: (piece: string, generatedTokens: number) => void,
    /** Driven by the test: an interrupt ends it at once (nothing else would push a piece). */
    private readonly byHand: boolean,
    /** False: the timings are zero (see {@link FakeNativeOptions.measureTime}). */
    private readonly measured: boolean,
  ) {
    this.prompt = plan.prompt;
    this.config = config;
    this.startedAt = this.now();
    this.done = new Promise((resolve, reject) => {
      this.settle = { resolve, reject };
    });
  }

  /** True until it finished or failed. */
  get isRunning(): boolean {
    return !this.ended;
  }

  /** The prompt is in the KV cache (the prefill's time ends here). */
  prefilled(): void {
    this.prefilledAt ??= this.now();
  }

  /**
   * Generates `piece`, unless a stop rule ends the generation first (an interrupt, the KV
   * cache is full, `maxNewTokens`, a stop string). Returns whether it goes on.
   */
  push(piece: string): boolean {
    if (this.ended) throw new Error('FakeGeneration.push: the generation has ended');
    this.prefilled();
    const total = this.plan.reusedTokens + this.plan.promptTokens;
    if (this.interruptRequested) return this.stop('interrupted');
    if (total + this.generated >= this.session.maxContext) return this.stop('context_full');
    if (this.generated >= this.config.maxNewTokens) return this.stop('max_new_tokens');
    const stop = this.config.stopStrings.find((s) => (this.text + piece).includes(s));
    if (stop !== undefined) {
      const cut = (this.text + piece).indexOf(stop);
      this.produced += piece;
      this.generated += 1;
      if (cut > this.text.length) this.onToken((this.text + piece).slice(this.text.length, cut), this.generated);
      return this.stop('stop_string');
    }
    this.text += piece;
    this.produced += piece;
    this.generated += 1;
    if (this.generated === 1) this.firstTokenAt = this.now();
    this.onToken(piece, this.generated);
    return true;
  }

  /** Asks it to stop after the current token (at once when the test drives it). */
  interrupt(): void {
    this.interruptRequested = true;
    if (this.byHand && !this.ended) this.finish('interrupted');
  }

  /** Ends it with `stopReason`; `overrides` replace fields of its stats. */
  finish(stopReason: StopReason = 'eos', overrides: Partial<GenerationStats> = {}): void {
    if (this.ended) throw new Error('FakeGeneration.finish: the generation has ended');
    this.prefilled();
    this.ended = true;
    const { session, plan, generated } = this;
    session.generation = null;
    session.conversation = plan.prompt + this.produced;
    // Like the runner: the last generated token is fed (enters the cache) with the next call.
    session.cacheTokens = plan.reusedTokens + plan.promptTokens + Math.max(generated - 1, 0);
    const end = this.now();
    const prefillMs = (this.prefilledAt as number) - this.startedAt;
    const decodeMs = generated ? end - this.firstTokenAt : 0;
    session.stats = {
      promptTokens: plan.promptTokens,
      reusedTokens: plan.reusedTokens,
      generatedTokens: generated,
      cacheTokens: session.cacheTokens,
      timeToFirstTokenMs: plan.mediaEncodeMs + (generated ? this.firstTokenAt - this.startedAt : end - this.startedAt),
      mediaEncodeMs: plan.mediaEncodeMs,
      prefillMs,
      decodeMs,
      prefillTokensPerSecond: prefillMs > 0 ? (plan.promptTokens * 1000) / prefillMs : plan.promptTokens * 1000,
      tokensPerSecond: decodeMs > 0 ? ((generated - 1) * 1000) / decodeMs : 0,
      // The fake decodes one token per forward, as the runner does without speculative decoding.
      draftedTokens: 0,
      acceptedTokens: 0,
      decodeForwards: Math.max(generated - 1, 0),
      acceptanceRate: 0,
      stopReason,
      ...(this.measured ? {} : NO_TIMINGS),
      ...overrides,
    };
    this.settle.resolve(session.stats);
  }

  /** Fails the call with `error` (e.g. {@link nativeError}); nothing of it stays in the cache. */
  fail(error: Error): void {
    if (this.ended) throw new Error('FakeGeneration.fail: the generation has ended');
    this.ended = true;
    this.session.generation = null;
    this.session.conversation = '';
    this.session.cacheTokens = 0;
    this.settle.reject(error);
  }

  private now(): number {
    return this.measured ? Date.now() : 0;
  }

  private stop(reason: StopReason): false {
    this.finish(reason);
    return false;
  }
}

export class FakeNative implements NativeExecutorch {
  readonly loads: NativeLoadOptions[] = [];
  /** Each generate call's prompt text (its parts joined). */
  readonly prompts: string[] = [];
  /** Each generate call's prompt as parts (a string prompt is one template part). */
  readonly promptParts: (readonly PromptPart[])[] = [];
  readonly configs: NativeGenerationConfig[] = [];
  readonly calls: string[] = [];
  /** The next loadLLM / generate rejects with this (once). */
  failNextLoad: Error | null = null;
  failNextGenerate: Error | null = null;
  private readonly sessions = new Map<NativeModelHandle, Session>();
  private latest: FakeGeneration | null = null;
  private nextHandle = 1;

  constructor(private readonly options: FakeNativeOptions = {}) {}

  /** The generation started last, while it runs (null once it ended). */
  get running(): FakeGeneration | null {
    return this.latest?.isRunning ? this.latest : null;
  }

  availableBackends(): Backend[] {
    const linked: Backend[] = this.platformInfo().os === 'ios' ? ['mlx', 'xnnpack'] : ['vulkan', 'xnnpack'];
    return [...(this.options.backends ?? linked)];
  }

  platformInfo(): NativePlatformInfo {
    const os = this.options.os ?? 'ios';
    return { os, isSimulator: this.options.isSimulator ?? false, osVersion: os === 'ios' ? '17.4' : '34' };
  }

  checkMemory(need: NativeMemoryNeed): void {
    this.calls.push('checkMemory');
    const available = need.availableMemoryBytes ?? this.options.availableMemoryBytes;
    const peak = need.peakMemoryBytes ?? 0;
    if (available === undefined || peak <= available) return;
    const mib = (bytes: number) => `${Math.round(bytes / 2 ** 20)} MiB`;
    const smaller =
      need.smallerVariant !== undefined && (need.smallerVariantPeakBytes ?? Infinity) <= available
        ? ` ${need.smallerVariant} (${mib(need.smallerVariantPeakBytes!)}) would fit.`
        : '';
    throw nativeError(
      'insufficient_memory',
      `This model needs ${mib(peak)} at its peak; the system leaves this app ${mib(available)}.${smaller}`,
    );
  }

  async loadLLM(options: NativeLoadOptions): Promise<NativeModelHandle> {
    this.calls.push('loadLLM');
    this.loads.push(options);
    const delay = this.options.loadDelayMs ?? 1;
    if (delay > 0) await sleep(delay);
    const failure = this.failNextLoad;
    this.failNextLoad = null;
    if (failure) throw failure;
    if (this.options.checkLoad) {
      this.options.checkLoad(options);
    } else if (!options.modelPath.endsWith('.pte')) {
      throw nativeError('invalid_model', `${options.modelPath} is not a .pte file`);
    }
    const handle = this.nextHandle++;
    const { maxContext = 4096 } = this.options;
    this.sessions.set(handle, {
      options,
      maxContext: typeof maxContext === 'function' ? maxContext(options) : maxContext,
      conversation: '',
      cacheTokens: 0,
      generation: null,
      released: false,
      stats: null,
      encoded: [],
    });
    return handle;
  }

  private session(handle: NativeModelHandle): Session {
    const session = this.sessions.get(handle);
    if (!session || session.released) {
      throw nativeError('invalid_argument', `Model handle ${handle} is not loaded (released?)`);
    }
    return session;
  }

  async generate(
    handle: NativeModelHandle,
    nativePrompt: NativePrompt,
    config: NativeGenerationConfig,
    onToken: (piece: string, generatedTokens: number) => void,
  ): Promise<GenerationStats> {
    this.calls.push('generate');
    const session = this.session(handle);
    if (session.generation) throw nativeError('busy', 'generate() is already running on this model');
    const failure = this.failNextGenerate;
    this.failNextGenerate = null;
    if (failure) throw failure;
    checkMedia(session.options, nativePrompt);
    const prompt = textOf(nativePrompt);
    this.prompts.push(prompt);
    this.promptParts.push(partsOf(nativePrompt));
    this.configs.push(config);
    // Like the runner: keep the longest common token prefix (at least one token is prefilled).
    const total = countTokens(prompt);
    const reusedTokens = Math.min(commonTokens(session.conversation, prompt), session.cacheTokens, total - 1);
    if (total > session.maxContext) {
      session.conversation = '';
      session.cacheTokens = 0;
      throw nativeError(
        'context_full',
        `The prompt needs ${total} positions but the KV cache holds ${session.maxContext}`,
      );
    }
    const pieces = (this.options.answer ?? (() => DEFAULT_ANSWER))(prompt);
    const measured = this.options.measureTime ?? true;
    const mediaEncodeMs = encodeMedia(session, nativePrompt) * (measured ? (this.options.mediaEncodeMs ?? 5) : 0);
    const generation = new FakeGeneration(
      session,
      { prompt, reusedTokens, promptTokens: total - reusedTokens, mediaEncodeMs },
      config,
      onToken,
      pieces === null,
      measured,
    );
    session.generation = generation;
    this.latest = generation;
    if (pieces !== null) void this.play(generation, pieces);
    return generation.done;
  }

  /** Plays `pieces` into `generation` on timers, as the runner's decode loop posts them. */
  private async play(generation: FakeGeneration, pieces: readonly string[]): Promise<void> {
    await sleep(1); // prefill
    generation.prefilled();
    for (const piece of pieces) {
      if (!generation.push(piece)) return;
      await sleep(this.options.tokenIntervalMs ?? 2);
    }
    generation.finish();
  }

  interrupt(handle: NativeModelHandle): void {
    this.calls.push('interrupt');
    this.session(handle).generation?.interrupt();
  }

  reset(handle: NativeModelHandle): void {
    this.calls.push('reset');
    const session = this.session(handle);
    if (session.generation) throw nativeError('busy', 'reset() while generating; interrupt() first');
    session.conversation = '';
    session.cacheTokens = 0;
  }

  countTokens(handle: NativeModelHandle, prompt: NativePrompt): number {
    checkMedia(this.session(handle).options, prompt);
    return countTokens(textOf(prompt));
  }

  maxContextLength(handle: NativeModelHandle): number {
    return this.session(handle).maxContext;
  }

  stats(handle: NativeModelHandle): GenerationStats | null {
    return this.session(handle).stats;
  }

  release(handle: NativeModelHandle): void {
    this.calls.push('release');
    const session = this.session(handle);
    session.released = true;
    session.generation?.interrupt();
  }

  /**
   * The template engine's JSON in and out, rendered by the jest double of the C++ engine
   * (`./templateDouble`; why a double: see there).
   */
  renderChatTemplate(request: string): string {
    if (typeof request !== 'string') {
      throw nativeError('invalid_argument', 'renderChatTemplate(request) takes a JSON string');
    }
    return renderChatTemplateDouble(request);
  }

  /**
   * A session "file" in memory, shared by every FakeNative (a new instance plays a new process):
   * the fake conversation and the app's data, keyed by path.
   */
  async saveSession(
    handle: NativeModelHandle,
    path: string,
    tokensOnly: boolean,
    appData: string,
  ): Promise<NativeSessionInfo> {
    this.calls.push('saveSession');
    const session = this.session(handle);
    if (session.generation) throw nativeError('busy', 'saveSession() while generating; await it or interrupt() first');
    await sleep(1);
    const saved = { model: session.options.modelPath, conversation: session.conversation, cacheTokens: session.cacheTokens, appData, tokensOnly };
    FAKE_SESSION_FILES.set(path, saved);
    return { fileBytes: JSON.stringify(saved).length, tokens: saved.cacheTokens, restored: tokensOnly ? 'prefill' : 'cache', ms: 1, appData };
  }

  async loadSession(handle: NativeModelHandle, path: string): Promise<NativeSessionInfo> {
    this.calls.push('loadSession');
    const session = this.session(handle);
    if (session.generation) throw nativeError('busy', 'loadSession() while generating; await it or interrupt() first');
    await sleep(1);
    const saved = FAKE_SESSION_FILES.get(path);
    if (!saved) throw nativeError('not_found', `cannot open the session file ${path}`);
    if (saved.model !== session.options.modelPath) {
      throw nativeError('invalid_argument', `${path}: was saved with another model; the current conversation is unchanged`);
    }
    session.conversation = saved.conversation;
    session.cacheTokens = saved.cacheTokens;
    return { fileBytes: JSON.stringify(saved).length, tokens: saved.cacheTokens, restored: saved.tokensOnly ? 'prefill' : 'cache', ms: 1, appData: saved.appData };
  }

  /** A new handle over `handle`'s model (its options), with an empty conversation of its own. */
  async createSession(handle: NativeModelHandle): Promise<NativeModelHandle> {
    this.calls.push('createSession');
    const parent = this.session(handle);
    await sleep(1);
    if (parent.released) throw nativeError('invalid_argument', 'The model was released before the session was created');
    const created = this.nextHandle++;
    this.sessions.set(created, { ...parent, conversation: '', cacheTokens: 0, generation: null, stats: null, encoded: [] });
    return created;
  }

  /** Handles loaded and not released. */
  liveHandles(): number {
    return [...this.sessions.values()].filter((s) => !s.released).length;
  }
}
