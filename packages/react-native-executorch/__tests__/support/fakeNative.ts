/**
 * A faithful test double of the native seam: it behaves like the JSI binding over the C++
 * runner. Tokens arrive over time on timers (the binding posts them from a worker thread),
 * interrupt stops after the current token and resolves with `interrupted`, a second generate on
 * a busy handle rejects with `busy`, released handles are invalid, errors are `Error` objects
 * with a native `code`, and the conversation is kept "in the KV cache": only the part of the
 * prompt that extends the previous prompt + everything the model generated (a cut-off stop
 * string included) counts as in the cache: like the runner, it reuses the longest common
 * (fake-)token prefix of that and the next prompt and prefills only the rest.
 * With `checkFiles` it reads the files as the runner does (missing, not a `.pte`, a tokenizer
 * with more tokens than the model). __tests__/e2e/ runs the same suite against this fake and
 * the real runner, so each of these claims is checked against the real thing.
 */
import { existsSync, readFileSync } from 'node:fs';

import type {
  Backend,
  GenerationStats,
  NativeExecutorch,
  NativeGenerationConfig,
  NativeLoadOptions,
  NativeModelHandle,
  NativePlatformInfo,
  StopReason,
} from '../../src';

export interface FakeNativeOptions {
  os?: 'ios' | 'android';
  isSimulator?: boolean;
  /** What the binary links; default: MLX + XNNPACK on iOS, Vulkan + XNNPACK on Android. */
  backends?: Backend[];
  /** The pieces the "model" answers with, given the prompt. */
  answer?: (prompt: string) => string[];
  /** Delay between tokens (the decode time). */
  tokenIntervalMs?: number;
  loadDelayMs?: number;
  /** Read the files at load like the runner (default: only the `.pte` extension is checked). */
  checkFiles?: { readonly modelVocabSize: number };
  /** KV-cache capacity in (fake) tokens, default 4096: a longer prompt rejects with `context_full`. */
  maxContext?: number;
}

interface Session {
  options: NativeLoadOptions;
  /** Prompt + generated text in the "KV cache", and how many fake tokens it occupies. */
  conversation: string;
  cacheTokens: number;
  running: boolean;
  interrupted: boolean;
  released: boolean;
  stats: GenerationStats | null;
}

export function nativeError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The fake's "tokenizer": every four characters are one token. */
const CHARS_PER_TOKEN = 4;
const countTokens = (text: string) => Math.ceil(text.length / CHARS_PER_TOKEN);

/** Whole fake tokens `a` and `b` share at their start. */
function commonTokens(a: string, b: string): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n += 1;
  return Math.floor(n / CHARS_PER_TOKEN);
}

/** What LlmRunner::load refuses, checked the same way (and with the same codes). */
function checkModelFiles({ modelPath, tokenizerPath }: NativeLoadOptions, modelVocabSize: number): void {
  for (const path of [modelPath, tokenizerPath]) {
    if (!existsSync(path)) throw nativeError('not_found', `${path}: no such file`);
  }
  // An ExecuTorch program is a flatbuffer with the file identifier "ET" + version at byte 4.
  if (readFileSync(modelPath).subarray(4, 6).toString('latin1') !== 'ET') {
    throw nativeError('invalid_model', `${modelPath} is not an ExecuTorch program`);
  }
  let tokenizer: { model?: { vocab?: object }; added_tokens?: { content: string }[] };
  try {
    tokenizer = JSON.parse(readFileSync(tokenizerPath, 'utf8'));
  } catch (error) {
    throw nativeError('tokenizer', `${tokenizerPath}: ${(error as Error).message}`);
  }
  const vocab = tokenizer.model?.vocab ?? {};
  const added = (tokenizer.added_tokens ?? []).filter((t) => !(t.content in vocab)).length;
  const size = Object.keys(vocab).length + added;
  if (size > modelVocabSize) {
    throw nativeError(
      'tokenizer',
      `${tokenizerPath} has ${size} tokens but ${modelPath} has a vocabulary of ${modelVocabSize}; ` +
        'they belong to different models',
    );
  }
}

export class FakeNative implements NativeExecutorch {
  readonly loads: NativeLoadOptions[] = [];
  readonly prompts: string[] = [];
  readonly configs: NativeGenerationConfig[] = [];
  readonly calls: string[] = [];
  /** The next loadLLM / generate rejects with this (once). */
  failNextLoad: Error | null = null;
  failNextGenerate: Error | null = null;
  private readonly sessions = new Map<NativeModelHandle, Session>();
  private nextHandle = 1;

  constructor(private readonly options: FakeNativeOptions = {}) {}

  availableBackends(): Backend[] {
    const linked: Backend[] = this.platformInfo().os === 'ios' ? ['mlx', 'xnnpack'] : ['vulkan', 'xnnpack'];
    return [...(this.options.backends ?? linked)];
  }

  platformInfo(): NativePlatformInfo {
    const os = this.options.os ?? 'ios';
    return { os, isSimulator: this.options.isSimulator ?? false, osVersion: os === 'ios' ? '17.4' : '34' };
  }

  async loadLLM(options: NativeLoadOptions): Promise<NativeModelHandle> {
    this.calls.push('loadLLM');
    this.loads.push(options);
    await sleep(this.options.loadDelayMs ?? 1);
    const failure = this.failNextLoad;
    this.failNextLoad = null;
    if (failure) throw failure;
    if (this.options.checkFiles) {
      checkModelFiles(options, this.options.checkFiles.modelVocabSize);
    } else if (!options.modelPath.endsWith('.pte')) {
      throw nativeError('invalid_model', `${options.modelPath} is not a .pte file`);
    }
    const handle = this.nextHandle++;
    this.sessions.set(handle, {
      options,
      conversation: '',
      cacheTokens: 0,
      running: false,
      interrupted: false,
      released: false,
      stats: null,
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
    prompt: string,
    config: NativeGenerationConfig,
    onToken: (piece: string, generatedTokens: number) => void,
  ): Promise<GenerationStats> {
    this.calls.push('generate');
    const session = this.session(handle);
    if (session.running) throw nativeError('busy', 'generate() is already running on this model');
    const failure = this.failNextGenerate;
    this.failNextGenerate = null;
    if (failure) throw failure;
    this.prompts.push(prompt);
    this.configs.push(config);
    session.interrupted = false;
    // Like the runner: keep the longest common token prefix (at least one token is prefilled).
    const total = countTokens(prompt);
    const reusedTokens = Math.min(commonTokens(session.conversation, prompt), session.cacheTokens, total - 1);
    const promptTokens = total - reusedTokens;
    const maxContext = this.maxContext();
    if (total > maxContext) {
      session.conversation = '';
      session.cacheTokens = 0;
      throw nativeError(
        'context_full',
        `The prompt needs ${total} positions but the KV cache holds ${maxContext}`,
      );
    }
    session.running = true;
    const start = Date.now();
    await sleep(1); // prefill
    const prefillMs = Date.now() - start;
    const pieces = (this.options.answer ?? (() => ['Hello', ',', ' world', '!']))(prompt);
    let text = '';
    /** Everything generated: `text` plus a stop string and what came with it. */
    let produced = '';
    let generated = 0;
    let firstTokenAt = 0;
    let stopReason: StopReason = 'eos';
    for (const piece of pieces) {
      if (session.interrupted || session.released) {
        stopReason = 'interrupted';
        break;
      }
      if (total + generated >= maxContext) {
        stopReason = 'context_full';
        break;
      }
      if (generated >= config.maxNewTokens) {
        stopReason = 'max_new_tokens';
        break;
      }
      const stop = config.stopStrings.find((s) => (text + piece).includes(s));
      if (stop !== undefined) {
        const cut = (text + piece).indexOf(stop);
        produced += piece;
        generated += 1;
        if (cut > text.length) onToken((text + piece).slice(text.length, cut), generated);
        stopReason = 'stop_string';
        break;
      }
      text += piece;
      produced += piece;
      generated += 1;
      if (generated === 1) firstTokenAt = Date.now();
      onToken(piece, generated);
      await sleep(this.options.tokenIntervalMs ?? 2);
    }
    session.running = false;
    session.conversation = prompt + produced;
    // Like the runner: the last generated token is fed (enters the cache) with the next call.
    session.cacheTokens = reusedTokens + promptTokens + Math.max(generated - 1, 0);
    const end = Date.now();
    const decodeMs = generated ? end - firstTokenAt : 0;
    session.stats = {
      promptTokens,
      reusedTokens,
      generatedTokens: generated,
      cacheTokens: session.cacheTokens,
      timeToFirstTokenMs: generated ? firstTokenAt - start : end - start,
      prefillMs,
      decodeMs,
      prefillTokensPerSecond: prefillMs > 0 ? (promptTokens * 1000) / prefillMs : promptTokens * 1000,
      tokensPerSecond: decodeMs > 0 ? ((generated - 1) * 1000) / decodeMs : 0,
      stopReason,
    };
    return session.stats as GenerationStats;
  }

  interrupt(handle: NativeModelHandle): void {
    this.calls.push('interrupt');
    this.session(handle).interrupted = true;
  }

  reset(handle: NativeModelHandle): void {
    this.calls.push('reset');
    const session = this.session(handle);
    if (session.running) throw nativeError('busy', 'reset() while generating; interrupt() first');
    session.conversation = '';
    session.cacheTokens = 0;
  }

  countTokens(handle: NativeModelHandle, text: string): number {
    this.session(handle);
    return countTokens(text);
  }

  maxContextLength(handle: NativeModelHandle): number {
    this.session(handle);
    return this.maxContext();
  }

  private maxContext(): number {
    return this.options.maxContext ?? 4096;
  }

  stats(handle: NativeModelHandle): GenerationStats | null {
    return this.session(handle).stats;
  }

  release(handle: NativeModelHandle): void {
    this.calls.push('release');
    const session = this.session(handle);
    session.interrupted = true;
    session.released = true;
  }

  /** Handles loaded and not released. */
  liveHandles(): number {
    return [...this.sessions.values()].filter((s) => !s.released).length;
  }
}
