/**
 * A faithful test double of the native seam: it behaves like the JSI binding over the C++
 * runner. Tokens arrive over time on timers (the binding posts them from a worker thread),
 * interrupt stops after the current token and resolves with `interrupted`, a second generate on
 * a busy handle rejects with `busy`, released handles are invalid, errors are `Error` objects
 * with a native `code`, and the conversation is kept "in the KV cache": only the part of the
 * prompt that extends the previous prompt + answer counts as prefilled.
 */
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
}

interface Session {
  options: NativeLoadOptions;
  conversation: string;
  running: boolean;
  interrupted: boolean;
  released: boolean;
  stats: GenerationStats | null;
}

export function nativeError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The fake's "tokenizer": about four characters per token. */
const countTokens = (text: string) => Math.ceil(text.length / 4);

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
    if (!options.modelPath.endsWith('.pte')) {
      throw nativeError('invalid_model', `${options.modelPath} is not a .pte file`);
    }
    const handle = this.nextHandle++;
    this.sessions.set(handle, {
      options,
      conversation: '',
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
    onToken: (piece: string) => void,
  ): Promise<GenerationStats> {
    this.calls.push('generate');
    const session = this.session(handle);
    if (session.running) throw nativeError('busy', 'generate() is already running on this model');
    const failure = this.failNextGenerate;
    this.failNextGenerate = null;
    if (failure) throw failure;
    this.prompts.push(prompt);
    this.configs.push(config);
    session.running = true;
    session.interrupted = false;
    const reused = prompt.startsWith(session.conversation) ? session.conversation : '';
    const promptTokens = countTokens(prompt.slice(reused.length));
    const start = Date.now();
    await sleep(1); // prefill
    const prefillMs = Date.now() - start;
    const pieces = (this.options.answer ?? (() => ['Hello', ',', ' world', '!']))(prompt);
    let text = '';
    let generated = 0;
    let firstTokenAt = 0;
    let stopReason: StopReason = 'eos';
    for (const piece of pieces) {
      if (session.interrupted || session.released) {
        stopReason = 'interrupted';
        break;
      }
      if (generated >= config.maxNewTokens) {
        stopReason = 'max_new_tokens';
        break;
      }
      const stop = config.stopStrings.find((s) => (text + piece).includes(s));
      if (stop !== undefined) {
        const cut = (text + piece).indexOf(stop);
        if (cut > text.length) onToken((text + piece).slice(text.length, cut));
        stopReason = 'stop_string';
        break;
      }
      text += piece;
      generated += 1;
      if (generated === 1) firstTokenAt = Date.now();
      onToken(piece);
      await sleep(this.options.tokenIntervalMs ?? 2);
    }
    session.running = false;
    session.conversation = prompt + text;
    const end = Date.now();
    const decodeMs = generated ? end - firstTokenAt : 0;
    session.stats = {
      promptTokens,
      generatedTokens: generated,
      cacheTokens: countTokens(session.conversation),
      timeToFirstTokenMs: generated ? firstTokenAt - start : end - start,
      prefillMs,
      decodeMs,
      prefillTokensPerSecond: prefillMs > 0 ? (promptTokens * 1000) / prefillMs : promptTokens * 1000,
      tokensPerSecond: decodeMs > 0 ? ((generated - 1) * 1000) / decodeMs : 0,
      stopReason,
    };
    return session.stats;
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
