import { resolveBackend, type BackendOf } from '../backend';
import {
  ChatTemplate,
  normalizeMessage,
  type ContentPart,
  type Message,
  type MessageInput,
} from '../chat/template';
import type { ChatFormat, ForcedCallSyntax } from '../chat/formats';
import { loadChatTemplate } from '../chat/files';
import { ThoughtSplitter } from '../chat/thought';
import {
  AssistantUnavailableError,
  ExecutorchError,
  fromNativeError,
  UnsupportedInputError,
  type InputKind,
} from '../errors';
import {
  models,
  type AnyLLMDescriptor,
  type Backend,
  type HasCapability,
  type MediaCapability,
  type VariantDescriptor,
} from '../models';
import { getNativeExecutorch } from '../native';
import type {
  GenerationStats,
  NativeExecutorch,
  NativeGenerationConfig,
  NativeModelHandle,
  NativePrompt,
  PromptPart,
  SessionInfo,
} from '../native/seam';
import { resolveResourceFetcher } from '../resources/defaultFetcher';
import { ResourceFetcher, type DownloadControl, type DownloadStatus, type ModelFiles } from '../resources/fetcher';
import { runToolRounds, toolCallSchema, ToolPrompt, type GenerateRound, type ToolTurn } from '../tools';
import { fitContext, resolveContextSettings, type ContextSettings } from './context';
import { SAMPLING_OFF, samplingProblem } from './sampling';
import type {
  ChatConfig,
  GenerationConfig,
  LLMConfig,
  LLMOptions,
  SpeculativeConfig,
  ToolDefinition,
  ToolsConfig,
} from './types';

/** Options of {@link LLMModule.load}. */
export interface LoadOptions {
  /** Download progress 0..1 over all files of the model. */
  readonly onDownloadProgress?: (progress: number) => void;
  /** Cancels the download (the load rejects with `download_cancelled`). */
  readonly signal?: AbortSignal;
  /** Pauses and resumes the download ({@link DownloadControl}); the load stays pending while paused. */
  readonly download?: DownloadControl;
  /** The download's bytes, rate and time left, and whether it is paused. */
  readonly onDownloadStatus?: (status: DownloadStatus) => void;
}

/** Options of one generation. */
export interface GenerateOptions {
  /**
   * Each decoded text piece of the answer, in order, as the model produces it (a thinking
   * model's thought goes to `onThought` instead).
   */
  readonly onToken?: (piece: string) => void;
  /**
   * Each piece of a thinking model's thought (`chatConfig.thinking`), streamed before the
   * answer. The thought is kept on the assistant message (`thought`), apart from its `content`.
   */
  readonly onThought?: (piece: string) => void;
  /**
   * A JSON Schema (an object, or `true`): the answer is one JSON document that parses and
   * validates against it, enforced while sampling (keywords it cannot guarantee are an
   * `invalid_argument` error naming them). Or `{ regex }`: the whole answer matches the regex.
   * Or `{ grammar }`: the whole answer is a sentence of a GBNF grammar (llama.cpp's format).
   * Or `{ jsonSchema, strict: true }`: that schema, its unknown keywords and formats refused.
   * The answer closes within `maxNewTokens` (a string that runs long is cut short); a budget
   * below the shortest answer is an `invalid_argument` error. See the README's "Structured
   * output".
   */
  readonly responseFormat?: JsonSchema | JsonSchemaFormat | RegexFormat | GrammarFormat;
}

/**
 * The media {@link LLMModule.sendMessage} attaches to the user's message. Each type-checks only
 * for a model whose registry `capabilities` include it (`image`: `vision`, `audio`: `audio`);
 * for a model typed as any model, sending it to one without the capability throws
 * {@link UnsupportedInputError}.
 */
export type MediaOptions<M extends AnyLLMDescriptor = AnyLLMDescriptor> = (HasCapability<M, 'vision'> extends true
  ? {
      /** A JPEG or PNG file at a local path (a plain absolute path, as in `localFiles`). */
      readonly image?: string;
    }
  : { readonly image?: never }) &
  (HasCapability<M, 'audio'> extends true
    ? {
        /**
         * A WAV file at a local path, or 16 kHz mono float PCM samples in [-1, 1] (alone, or
         * with their `sampleRate`, which must then be 16000).
         */
        readonly audio?: string | Float32Array | AudioSamples;
      }
    : { readonly audio?: never });

/** Recorded audio with its rate, as recorders deliver it (the rate must be 16000). */
export interface AudioSamples {
  readonly samples: Float32Array;
  readonly sampleRate: number;
}

/** Options of {@link LLMModule.sendMessage}: a generation's, and the media to attach. */
export type SendMessageOptions<M extends AnyLLMDescriptor = AnyLLMDescriptor> = GenerateOptions & MediaOptions<M>;

/**
 * The user message {@link LLMModule.sendMessage} appends: `content` alone, or with `parts`, the
 * image, then the audio, then the text (Gemma 4's guidance puts media before the question).
 */
export function userMessage(content: string, media: { readonly image?: unknown; readonly audio?: unknown } = {}): Message {
  const parts: ContentPart[] = [];
  if (media.image !== undefined) parts.push({ type: 'image', path: media.image as string });
  const audio = media.audio;
  if (audio instanceof Float32Array) parts.push({ type: 'audio', samples: audio });
  else if (typeof audio === 'object' && audio !== null && 'samples' in audio) {
    const { samples, sampleRate } = audio as AudioSamples;
    parts.push({ type: 'audio', samples, sampleRate });
  } else if (audio !== undefined) parts.push({ type: 'audio', path: audio as string });
  if (parts.length === 0) return { role: 'user', content };
  return { role: 'user', content, parts: [...parts, { type: 'text', text: content }] };
}

/** The rate of the audio samples the encoders take (Gemma 4's feature extractor's). */
export const AUDIO_SAMPLE_RATE = 16_000;

/** The capability each kind of input needs, and how messages name it. */
const CAPABILITY: Readonly<Record<InputKind, MediaCapability>> = { image: 'vision', audio: 'audio' };

/** Ids of the registry's models with capability `capability`. */
function modelsWith(capability: MediaCapability): string[] {
  return Object.values(models.llm)
    .filter((model) => (model.capabilities as readonly string[]).includes(capability))
    .map((model) => model.id);
}

/**
 * Throws {@link UnsupportedInputError} for a media part in a form the SDK does not read (an
 * image that is not a non-empty path; audio that is neither a non-empty path nor a non-empty
 * `Float32Array`).
 */
function checkMediaForm(part: ContentPart): void {
  if (part.type === 'text') return;
  const { path, samples } = part as { path?: unknown; samples?: unknown };
  if (part.type === 'image') {
    if (typeof path === 'string' && path !== '') return;
    throw new UnsupportedInputError(
      'image',
      `An image must be the path of a JPEG or PNG file on the device (got ${describe(path)}). ` +
        'Save a picture to a file first (image pickers return one).',
    );
  }
  const { sampleRate } = part as { sampleRate?: unknown };
  if (samples instanceof Float32Array && sampleRate !== undefined && sampleRate !== AUDIO_SAMPLE_RATE) {
    throw new UnsupportedInputError(
      'audio',
      `Audio at ${String(sampleRate)} Hz: the model takes ${AUDIO_SAMPLE_RATE} Hz mono samples. Record at ` +
        `${AUDIO_SAMPLE_RATE} Hz or resample the clip to ${AUDIO_SAMPLE_RATE} Hz first.`,
    );
  }
  if (samples === undefined && typeof path === 'string' && path !== '') return;
  if (path === undefined && samples instanceof Float32Array && samples.length > 0) return;
  const given = samples === undefined ? path : samples;
  throw new UnsupportedInputError(
    'audio',
    `Audio must be the path of a WAV file or a non-empty Float32Array of 16 kHz mono samples in ` +
      `[-1, 1] (got ${describe(given)}). Convert other sample types (Int16Array: divide by 32768) ` +
      'and resample other rates to 16 kHz first.',
  );
}

/** What `value` is, for an error message. */
function describe(value: unknown): string {
  if (value instanceof Float32Array) return `a Float32Array of ${value.length} samples`;
  if (ArrayBuffer.isView(value)) return `${/^[AEIOU]/.test(value.constructor.name) ? 'an' : 'a'} ${value.constructor.name}`;
  if (value instanceof ArrayBuffer) return 'an ArrayBuffer';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return value === '' ? 'an empty string' : 'a string';
  return value === null ? 'null' : typeof value;
}

/** A JSON Schema document, as `JSON.stringify` writes it. */
export type JsonSchema = boolean | { readonly [keyword: string]: unknown };

/**
 * A whole answer constrained by a regular expression (an ECMA-262 subset: see the README's
 * "Structured output"), matched against the whole text. An object with only a string `regex`
 * is read as this, not as a JSON Schema.
 */
export interface RegexFormat {
  readonly regex: string;
}

/**
 * A whole answer constrained by a GBNF grammar (llama.cpp's format, as llama.rn takes it: rules
 * `name ::= ...`, generation starts at `root`; see the README's "Structured output"). An object
 * with only a string `grammar` is read as this, not as a JSON Schema.
 */
export interface GrammarFormat {
  readonly grammar: string;
}

/**
 * A JSON Schema with its options. `strict: true` refuses the schema's keywords and `format` values
 * the engine does not know (an `invalid_argument` error naming them) where by default they are
 * annotations and ignored, as JSON Schema says: nothing in the schema goes unenforced. An object
 * with only a `jsonSchema` (an object or a boolean) and a boolean `strict` is read as this, not
 * as a JSON Schema.
 */
export interface JsonSchemaFormat {
  readonly jsonSchema: JsonSchema;
  readonly strict?: boolean;
}

type ResponseFormat = JsonSchema | JsonSchemaFormat | RegexFormat | GrammarFormat;

function isOnly<K extends string>(format: ResponseFormat, key: K): format is ResponseFormat & Record<K, string> {
  return (
    typeof format === 'object' &&
    Object.keys(format).length === 1 &&
    typeof (format as Record<string, unknown>)[key] === 'string'
  );
}

function isSchemaFormat(format: ResponseFormat): format is JsonSchemaFormat {
  if (typeof format !== 'object' || !('jsonSchema' in format)) return false;
  const { jsonSchema, strict, ...rest } = format as Record<string, unknown>;
  return (
    Object.keys(rest).length === 0 &&
    (typeof jsonSchema === 'boolean' || (typeof jsonSchema === 'object' && jsonSchema !== null && !Array.isArray(jsonSchema))) &&
    (strict === undefined || typeof strict === 'boolean')
  );
}

/** The native options of a generation's `responseFormat`. */
function nativeFormat(
  format: ResponseFormat,
): Pick<NativeGenerationConfig, 'responseFormat' | 'responseStrict' | 'responseRegex' | 'responseGrammar'> {
  if (isOnly(format, 'regex')) return { responseRegex: format.regex };
  if (isOnly(format, 'grammar')) return { responseGrammar: format.grammar };
  if (isSchemaFormat(format)) {
    return { responseFormat: JSON.stringify(format.jsonSchema), ...(format.strict ? { responseStrict: true } : {}) };
  }
  return { responseFormat: JSON.stringify(format) };
}

/** The settings {@link LLMModule.configure} accumulated, in one normalised form. */
export interface ResolvedConfig {
  readonly chat: Omit<ChatConfig, 'generation' | 'initialMessageHistory'>;
  readonly generation: GenerationConfig;
  readonly tools: ToolsConfig | null;
}

const EMPTY_CONFIG: ResolvedConfig = { chat: {}, generation: {}, tools: null };

/**
 * Merges `config` (the `{ chatConfig, toolsConfig, generationConfig }` form, or the older flat
 * `{ systemPrompt, generation }` one, or both) into `base`. Throws `invalid_argument` when a
 * setting is out of range.
 */
export function mergeConfig(base: ResolvedConfig, config: LLMConfig): ResolvedConfig {
  const { chatConfig, toolsConfig, generationConfig, generation, initialMessageHistory, ...flatChat } = config;
  const { generation: chatGeneration, initialMessageHistory: _history, ...chat } = chatConfig ?? {};
  const merged: ResolvedConfig = {
    chat: { ...base.chat, ...flatChat, ...chat },
    generation: { ...base.generation, ...generation, ...chatGeneration, ...generationConfig },
    tools: toolsConfig ?? base.tools,
  };
  checkGenerationConfig(merged.generation);
  resolveContextSettings(merged.chat, merged.generation.maxNewTokens ?? 1);
  if (toolsConfig) checkToolsConfig(toolsConfig);
  return merged;
}

/** The message history `config` sets, if it sets one (array content read as parts). */
export function initialHistoryOf(config: LLMConfig): readonly Message[] | undefined {
  return (config.chatConfig?.initialMessageHistory ?? config.initialMessageHistory)?.map(normalizeMessage);
}

/** Throws `invalid_argument` when a setting is out of range. */
export function validateChatConfig(config: LLMConfig): void {
  mergeConfig(EMPTY_CONFIG, config);
}

function checkToolsConfig(config: ToolsConfig): void {
  if (!Array.isArray(config.tools) || typeof config.executeToolCallback !== 'function') {
    throw new ExecutorchError(
      'invalid_argument',
      'Invalid toolsConfig: `tools` must be an array and `executeToolCallback` a function.',
    );
  }
  const { maxRounds, toolChoice } = config;
  if (toolChoice !== undefined && toolChoice !== 'auto' && !config.tools.some((t) => t.name === toolChoice?.name)) {
    throw new ExecutorchError(
      'invalid_argument',
      `Invalid toolsConfig: toolChoice names "${toolChoice?.name}", which is not one of the tools ` +
        `(${config.tools.map((t) => t.name).join(', ')}).`,
    );
  }
  if (maxRounds !== undefined && !(Number.isInteger(maxRounds) && maxRounds > 0)) {
    throw new ExecutorchError('invalid_argument', `Invalid toolsConfig: maxRounds ${maxRounds} is not an integer > 0.`);
  }
}

/** How a forced tool call's round differs from a free one (a format's own call syntax). */
interface ForcedCallRound {
  readonly syntax: ForcedCallSyntax;
  /** Template text after the rendered prompt: the call's opening, which the model continues. */
  readonly promptSuffix: string;
}

/** `object` without its unset (undefined or null) fields, so spreading it keeps earlier values. */
function setFields<T extends object>(object: T): T {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value != null)) as T;
}

function checkGenerationConfig(config: GenerationConfig): void {
  const bad = (what: string) => {
    throw new ExecutorchError('invalid_argument', `Invalid generation config: ${what}.`);
  };
  const sampling = samplingProblem(config);
  if (sampling) bad(sampling);
  const { maxNewTokens } = config;
  if (maxNewTokens !== undefined && !(Number.isInteger(maxNewTokens) && maxNewTokens > 0)) {
    bad(`maxNewTokens ${maxNewTokens} is not an integer > 0`);
  }
  if (config.speculative !== undefined) checkSpeculative(config.speculative, bad);
}

const DRAFTERS: readonly SpeculativeConfig['drafter'][] = ['promptLookup', 'assistant'];

/**
 * The least value of each numeric speculative option (the native side refuses the same:
 * cpp/runner/include/rne/runner/speculative_options.h). An absent one keeps the native default.
 */
const SPECULATIVE_MINIMUMS = { maxDraftTokens: 1, ngramMax: 1, ngramMin: 1 } as const;

function checkSpeculative(speculative: SpeculativeConfig, bad: (what: string) => never): void {
  if (typeof speculative !== 'object' || speculative === null) {
    bad(`speculative must be an object like { drafter: 'promptLookup' }, got ${JSON.stringify(speculative)}`);
  }
  const { drafter, ...numbers } = speculative;
  if (!DRAFTERS.includes(drafter)) {
    bad(`speculative.drafter ${JSON.stringify(drafter)} is not one of ${DRAFTERS.map((d) => `'${d}'`).join(', ')}`);
  }
  for (const [name, value] of Object.entries(numbers)) {
    if (!(name in SPECULATIVE_MINIMUMS)) {
      bad(`speculative.${name} is not an option (${['drafter', ...Object.keys(SPECULATIVE_MINIMUMS)].join(', ')})`);
    }
    const minimum = SPECULATIVE_MINIMUMS[name as keyof typeof SPECULATIVE_MINIMUMS];
    if (value !== undefined && !(Number.isInteger(value) && value >= minimum)) {
      bad(`speculative.${name} ${value} is not an integer >= ${minimum}`);
    }
  }
  const { ngramMin, ngramMax } = numbers;
  if (ngramMin !== undefined && ngramMax !== undefined && ngramMin > ngramMax) {
    bad(`speculative.ngramMin ${ngramMin} is above ngramMax ${ngramMax}`);
  }
}

/** `speculative` as the native side's flat options; absent ones keep the runner's defaults. */
function nativeSpeculative({
  drafter,
  ...tuning
}: SpeculativeConfig): Pick<NativeGenerationConfig, 'drafter' | 'maxDraftTokens' | 'ngramMax' | 'ngramMin'> {
  return { drafter, ...setFields(tuning) };
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
  private config: ResolvedConfig = EMPTY_CONFIG;
  private history: Message[] = [];
  /** Token counts of the running generation, or of the last one (see getPromptTokenCount). */
  private promptTokenCount = 0;
  private generatedTokenCount = 0;
  private generating = false;
  private released = false;
  private loading: Promise<void> | null = null;
  private lastStats: GenerationStats | null = null;
  private lastThought = '';
  private lastThoughtUnfinished = false;
  /** The media capabilities whose encoder was loaded with the model. */
  private encoders: ReadonlySet<MediaCapability> = new Set();
  /** Whether the program loaded is the variant's with the assistant drafter. */
  private assistantLoaded = false;
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

  /** The thought of the last generation of a thinking model ('' when it did not think). */
  get thought(): string {
    return this.lastThought;
  }

  /**
   * True when the last generation stopped inside its thought (`maxNewTokens` reached, or
   * interrupted): the recovery is that the whole text is kept as the thought and the answer is
   * empty (the history gets an assistant message with `content: ''` and the `thought`); raise
   * `maxNewTokens` or turn `thinking` off to get an answer.
   */
  get thoughtUnfinished(): boolean {
    return this.lastThoughtUnfinished;
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

  private async loadOnce({ onDownloadProgress, signal, download, onDownloadStatus }: LoadOptions): Promise<void> {
    const native = this.options.native ?? getNativeExecutorch();
    const info = native.platformInfo();
    const backend = resolveBackend(
      this.model,
      { ...info, availableBackends: native.availableBackends() },
      this.options.backend,
    );
    this.chosenBackend = backend;
    const assistant = this.options.assistant === true;
    // Before anything is downloaded: a variant without an assistant is refused at once.
    if (assistant) ResourceFetcher.assistantOf(this.model, backend);
    const memory = this.memoryNeed(backend, native.availableBackends(), assistant);
    if (!this.options.localFiles) {
      // Before the download: a phone that cannot hold the model should not fetch it first.
      try {
        native.checkMemory(memory);
      } catch (error) {
        throw fromNativeError(error);
      }
    }
    const fetcher = this.fetcher();
    // release() cancels the download too, not only the caller's signal.
    const controller = new AbortController();
    this.cancelLoad = () => controller.abort();
    signal?.addEventListener('abort', () => controller.abort());
    if (signal?.aborted) controller.abort();
    const files: ModelFiles =
      this.options.localFiles ??
      (await fetcher.fetchModel(this.model, backend, {
        assistant,
        signal: controller.signal,
        ...(onDownloadProgress ? { onProgress: onDownloadProgress } : {}),
        ...(download ? { control: download } : {}),
        ...(onDownloadStatus ? { onStatus: onDownloadStatus } : {}),
      }));
    if (this.options.localFiles) {
      // A file the registry has a checksum for is verified before its first load.
      await fetcher.verifyLocalFiles(this.model, backend, this.options.localFiles, { assistant });
      onDownloadProgress?.(1);
    }
    this.assertLive();
    // Rendered by the native engine the model runs on (the C++ one of every host).
    const template = await loadChatTemplate((path) => fetcher.readText(path), files.chatTemplatePath, native);
    let handle: NativeModelHandle;
    try {
      handle = await native.loadLLM({
        modelPath: files.modelPath,
        tokenizerPath: files.tokenizerPath,
        backend,
        // Only the encoders of capabilities the model declares (a stray local path is not loaded).
        ...(files.visionEncoderPath && this.declares('vision') ? { visionEncoderPath: files.visionEncoderPath } : {}),
        ...(files.audioEncoderPath && this.declares('audio') ? { audioEncoderPath: files.audioEncoderPath } : {}),
        ...memory,
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
    this.assistantLoaded = assistant;
    this.encoders = new Set(
      (['vision', 'audio'] as const).filter(
        (c) => this.declares(c) && (c === 'vision' ? files.visionEncoderPath : files.audioEncoderPath),
      ),
    );
  }

  /**
   * The registry's measured peak memory of the `backend` variant (of its assistant program with
   * `assistant`, where measured; the variant's is a lower bound), for the native check before
   * the load, and the smallest other variant this device can run, which the refusal names.
   */
  private memoryNeed(
    backend: Backend,
    runnable: readonly Backend[],
    assistant: boolean,
  ): { peakMemoryBytes?: number; smallerVariant?: string; smallerVariantPeakBytes?: number } {
    const variants = Object.values(this.model.variants) as VariantDescriptor[];
    const chosen = variants.find((v) => v.backend === backend);
    const peak = (assistant ? chosen?.assistant?.peakMemoryBytes : undefined) ?? chosen?.peakMemoryBytes;
    if (peak === undefined) return {};
    const smaller = variants
      .filter((v) => v.backend !== backend && runnable.includes(v.backend) && (v.peakMemoryBytes ?? peak) < peak)
      .sort((a, b) => (a.peakMemoryBytes ?? 0) - (b.peakMemoryBytes ?? 0))[0];
    return smaller?.peakMemoryBytes === undefined
      ? { peakMemoryBytes: peak }
      : {
          peakMemoryBytes: peak,
          smallerVariant: `${smaller.backend} ${smaller.quantization}`,
          smallerVariantPeakBytes: smaller.peakMemoryBytes,
        };
  }

  private declares(capability: MediaCapability): boolean {
    return (this.model.capabilities as readonly string[]).includes(capability);
  }

  /**
   * Throws {@link UnsupportedInputError} unless every image and audio part of `messages` is in
   * a form the SDK reads and the model takes it: its registry entry has the capability and its
   * encoder was loaded.
   */
  private checkMedia(messages: readonly Message[]): void {
    for (const part of messages.flatMap((m) => m.parts ?? [])) {
      if (part.type === 'text') continue;
      const kind: InputKind = part.type;
      const capability = CAPABILITY[kind];
      const what = kind === 'image' ? 'images' : 'audio';
      if (!this.declares(capability)) {
        const others = modelsWith(capability);
        throw new UnsupportedInputError(
          kind,
          `${this.model.name} does not take ${what} (its capabilities: ${this.model.capabilities.join(', ')}). ` +
            (others.length
              ? `Models that do: ${others.join(', ')}. Send text only, or use one of those.`
              : `No model of this registry takes ${what} yet; send text only.`),
          others,
        );
      }
      checkMediaForm(part);
      if (!this.encoders.has(capability)) {
        const field = capability === 'vision' ? 'visionEncoderPath' : 'audioEncoderPath';
        throw new UnsupportedInputError(
          kind,
          `${this.model.name} was loaded without its ${capability} encoder, so it cannot take ${what}: ` +
            (this.options.localFiles
              ? `pass localFiles.${field}.`
              : `the registry has not published the encoder for the ${String(this.chosenBackend)} variant yet.`),
          modelsWith(capability),
        );
      }
    }
  }

  private fetcher(): ResourceFetcher {
    return resolveResourceFetcher(this.options.resources);
  }

  /**
   * Settings for the following generations: `chatConfig` (system prompt, initial message
   * history, context strategy), `toolsConfig`, `generationConfig` (sampling, maxNewTokens).
   * Each merges into what was configured before; `initialMessageHistory` replaces the history.
   * The older flat form `configure({ systemPrompt, generation })` still works.
   */
  configure(config: LLMConfig): void {
    this.config = mergeConfig(this.config, config);
    const history = initialHistoryOf(config);
    if (history !== undefined) {
      if (this.generating) {
        throw new ExecutorchError('busy', 'Cannot replace the message history while generating.');
      }
      this.history = [...history];
    }
  }

  /** The tools configuration (`configure({ toolsConfig })`), or null. */
  get toolsConfig(): ToolsConfig | null {
    return this.config.tools;
  }

  /**
   * Deletes the message at `index` of the history and every message after it (as upstream
   * react-native-executorch does: the later turns answered the deleted one). The native KV
   * cache keeps what the shorter conversation still shares with it.
   */
  deleteMessage(index: number): void {
    this.assertCanGenerate();
    this.checkMessageIndex('deleteMessage', index);
    this.history = this.history.slice(0, index);
  }

  /**
   * Tokens of `input`: a text as is (as template text, its special-token text read as those
   * tokens), or messages rendered as a prompt the way `generate` would send them (the configured
   * system prompt, unless the messages start with one, and the assistant header included).
   */
  countTokens(input: string | readonly MessageInput[]): number {
    if (typeof input === 'string') return this.nativeCount(input);
    const messages = input.map(normalizeMessage);
    this.checkMedia(messages);
    return this.nativeCount(this.renderPrompt(this.withSystemPrompt(messages)));
  }

  /**
   * The native token count of `prompt`, its errors as {@link ExecutorchError}s: a media part the
   * runner cannot read (a damaged picture, a clip too long) fails here, before generating.
   */
  private nativeCount(prompt: NativePrompt): number {
    const { native, handle } = this.loaded();
    try {
      return native.countTokens(handle, prompt);
    } catch (error) {
      throw fromNativeError(error);
    }
  }

  /** The model's context length in tokens (the prompt and the answer must fit in it). */
  getMaxContextLength(): number {
    const { native, handle } = this.loaded();
    return native.maxContextLength(handle);
  }

  /** Tokens generated so far by the running generation, else by the last one. */
  getGeneratedTokenCount(): number {
    return this.generatedTokenCount;
  }

  /** Tokens of the prompt of the running generation (after the context strategy), else the last one's. */
  getPromptTokenCount(): number {
    return this.promptTokenCount;
  }

  /** Prompt + generated tokens of the running generation, else of the last one. */
  getTotalTokenCount(): number {
    return this.promptTokenCount + this.generatedTokenCount;
  }

  /**
   * Appends a user message to the history, generates the answer (streamed to `onToken`) and
   * appends it too. Resolves with the answer; an interrupted answer is kept as far as it got.
   * `image` / `audio` attach media to the message (before its text), for models whose
   * capabilities include `vision` / `audio`; otherwise it throws {@link UnsupportedInputError}
   * and the history is unchanged.
   */
  async sendMessage(content: string, options: SendMessageOptions<M> = {} as SendMessageOptions<M>): Promise<string> {
    this.assertCanGenerate();
    const { image, audio, ...generateOptions } = options as GenerateOptions & { image?: unknown; audio?: unknown };
    const user = userMessage(content, { image, audio });
    const turn = await this.run([...this.history, user], generateOptions);
    const thought = turn.messages[turn.messages.length - 1]?.thought;
    const kept: readonly Message[] = this.config.tools?.displayToolCalls
      ? turn.messages
      : [{ role: 'assistant', content: turn.answer, ...(thought ? { thought } : {}) }];
    this.history = [...this.history, user, ...kept];
    return turn.answer;
  }

  /**
   * Generates the next assistant message for `messages` without touching the history
   * (the configured system prompt still applies). A message's content may be parts (text,
   * image, audio; see {@link MessageInput}).
   */
  async generate(messages: readonly MessageInput[], options: GenerateOptions = {}): Promise<string> {
    this.assertCanGenerate();
    return (await this.run(messages.map(normalizeMessage), options)).answer;
  }

  /** Forgets the message history (and the native KV cache). */
  clearHistory(): void {
    this.assertCanGenerate();
    this.history = [];
    this.native?.reset(this.handle as NativeModelHandle);
  }

  /**
   * Saves the conversation to `path` (a file the app owns, e.g. in its documents directory):
   * the native KV cache up to its fill and the message history, so that after the app is
   * killed, {@link loadSession} in a new process continues it with only the new message to
   * prefill. `tokensOnly` writes the token ids but no cache: a file a few KB long whose load
   * prefills them again. Rejects with `busy` while a generation runs.
   */
  async saveSession(path: string, options: { readonly tokensOnly?: boolean } = {}): Promise<SessionInfo> {
    this.assertCanGenerate();
    return this.writeSession(path, this.history, options.tokensOnly ?? false);
  }

  /**
   * A branch of the conversation that ends at message `messageIndex` (e.g. to regenerate an
   * answer or ask something else from there), saved to `path` without changing the current
   * conversation. {@link loadSession} of `path` switches to it: the history becomes messages
   * 0..messageIndex, and the next message prefills only itself, since the cache (copied with
   * its filled span) keeps every token the branch shares with it. On models with sliding-window
   * ring caches whose rings have turned since that message, the shared part is prefilled again
   * (a ring keeps no older keys; docs/design.md, "Session files"). Rejects with
   * `invalid_argument` for a message that does not exist.
   */
  async fork(messageIndex: number, path: string): Promise<SessionInfo> {
    this.assertCanGenerate();
    this.checkMessageIndex('fork', messageIndex);
    return this.writeSession(path, this.history.slice(0, messageIndex + 1), false);
  }

  private async writeSession(path: string, history: readonly Message[], tokensOnly: boolean): Promise<SessionInfo> {
    const { native, handle } = this.loaded();
    const appData = JSON.stringify({ history });
    try {
      const info = await native.saveSession(handle, path, tokensOnly, appData);
      return { fileBytes: info.fileBytes, tokens: info.tokens, restored: info.restored, ms: info.ms };
    } catch (error) {
      throw fromNativeError(error);
    }
  }

  /**
   * Replaces the conversation (the native KV cache and {@link messageHistory}) with the one
   * saved at `path` by {@link saveSession}, with this model. `restored` says whether the caches
   * were copied back (`'cache'`) or the tokens prefilled again (`'prefill'`: a tokens-only file,
   * or a backend that keeps its caches inside its delegate, Vulkan and MLX). A file of another
   * model, a damaged, truncated or newer-format one rejects (`invalid_argument`, `not_found`)
   * and the current conversation stays as it was; `busy` while a generation runs.
   */
  async loadSession(path: string): Promise<SessionInfo> {
    this.assertCanGenerate();
    const { native, handle } = this.loaded();
    let loaded;
    try {
      loaded = await native.loadSession(handle, path);
    } catch (error) {
      throw fromNativeError(error);
    }
    const { appData, ...info } = loaded;
    // A file written without a history (rne_llm) continues with an empty one: the next turn's
    // prompt keeps what it shares with the cache.
    const history = appData === '' ? [] : (JSON.parse(appData) as { history?: unknown }).history;
    if (!Array.isArray(history)) {
      native.reset(handle);
      this.history = [];
      throw new ExecutorchError(
        'invalid_argument',
        `${path} holds no message history LLMModule can read; the conversation was cleared.`,
      );
    }
    this.history = history as Message[];
    return info;
  }

  /**
   * Another conversation over this loaded model: a module with its own history, generations,
   * interrupt, session files and release, and this one's configuration. The weights are loaded
   * and packed once (XNNPACK's weight cache): a session costs its KV cache and activations.
   * Generations of the sessions of a model run one at a time, in the order they were asked for;
   * each session reuses its own cache across turns. Releasing one leaves the others usable.
   * Rejects with an {@link ExecutorchError}: `invalid_argument` on a backend whose delegate keeps
   * its own weights (Vulkan, MLX: switch conversations with saveSession/loadSession instead),
   * `insufficient_memory` when the cache does not fit, `released`, `model_not_loaded`.
   */
  async createSession(): Promise<LLMModule<M>> {
    const { native, handle } = this.loaded();
    let created: NativeModelHandle;
    try {
      created = await native.createSession(handle);
    } catch (error) {
      throw fromNativeError(error);
    }
    const session = new LLMModule<M>(this.options);
    session.native = native;
    session.handle = created;
    session.template = this.template;
    session.chosenBackend = this.chosenBackend;
    session.config = this.config;
    session.encoders = this.encoders;
    session.loading = Promise.resolve();
    return session;
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

  private loaded(): { native: NativeExecutorch; handle: NativeModelHandle } {
    this.assertLive();
    if (this.handle === null || this.native === null) {
      throw new ExecutorchError('model_not_loaded', 'The model is not loaded yet; await load().');
    }
    return { native: this.native, handle: this.handle };
  }

  /** `invalid_argument` unless `index` names a message of the history (`method` says who asked). */
  private checkMessageIndex(method: string, index: number): void {
    if (!Number.isInteger(index) || index < 0 || index >= this.history.length) {
      throw new ExecutorchError(
        'invalid_argument',
        `${method}(${index}): no such message; the history has ${this.history.length} ` +
          `(indices 0..${this.history.length - 1}).`,
      );
    }
  }

  /**
   * Throws {@link AssistantUnavailableError} unless the program loaded carries the assistant
   * drafter: its variant has none, or the module was created without `assistant: true`.
   */
  private checkAssistantLoaded(): void {
    if (this.assistantLoaded) return;
    const backend = String(this.chosenBackend);
    ResourceFetcher.assistantOf(this.model, backend, "draft with speculative: { drafter: 'assistant' }");
    throw new AssistantUnavailableError(
      `${this.model.name} was loaded without its assistant drafter, so it cannot draft with ` +
        "speculative: { drafter: 'assistant' }. Create the module with assistant: true " +
        `(useLLM({ model, assistant: true })): the ${backend} variant's program with the drafter ` +
        "is then downloaded and loaded instead of the plain one. Or use speculative: " +
        "{ drafter: 'promptLookup' }, which needs no other file.",
      ResourceFetcher.variantsWithAssistant(this.model),
    );
  }

  private assertCanGenerate(): void {
    this.loaded();
    if (this.generating) {
      throw new ExecutorchError(
        'busy',
        'A generation is already running; await it or call interrupt() first.',
      );
    }
  }

  /**
   * The native options, keyed by name: the app's settings over the model's defaults over
   * "off". Every option flows through by name, so a new one needs no line here.
   */
  private nativeConfig(): NativeGenerationConfig {
    const { seed, stopStrings, speculative, ...options } = {
      ...SAMPLING_OFF,
      ...setFields(this.model.generation),
      ...setFields(this.config.generation),
    };
    if (speculative?.drafter === 'assistant') this.checkAssistantLoaded();
    const randomSeed = () => Math.floor(Math.random() * 2 ** 31);
    return {
      ...options,
      seed: seed ?? randomSeed(),
      stopStrings: stopStrings ?? [],
      ...(speculative ? nativeSpeculative(speculative) : {}),
    };
  }

  private withSystemPrompt(messages: readonly Message[]): Message[] {
    const system = this.config.chat.systemPrompt;
    return system && messages[0]?.role !== 'system'
      ? [{ role: 'system', content: system }, ...messages]
      : [...messages];
  }

  /** The prompt in parts: message content is plain text, so it cannot forge the template's markers. */
  private renderPrompt(messages: readonly Message[]): PromptPart[] {
    const template = this.template as ChatTemplate;
    const tools = this.config.tools?.tools;
    // Always said, so a template whose own default is to think (Qwen 3) stays off by default.
    const options = { thinking: this.config.chat.thinking ?? false };
    return tools?.length
      ? new ToolPrompt(template, tools).renderParts(messages, options)
      : template.renderParts(messages, options);
  }

  /** The messages to send: the whole conversation, fitted into the context by the strategy. */
  private fittedMessages(
    messages: readonly Message[],
    maxNewTokens: number,
    suffix: readonly PromptPart[] = [],
  ): readonly Message[] {
    const { native, handle } = this.loaded();
    const settings: ContextSettings = resolveContextSettings(this.config.chat, maxNewTokens);
    return fitContext(this.withSystemPrompt(messages), settings, {
      maxContextLength: native.maxContextLength(handle),
      countTokens: (list) => this.nativeCount([...this.renderPrompt(list), ...suffix]),
    });
  }

  /** Generates the answer; with tools configured, runs the model's tool calls and continues. */
  private async run(messages: readonly Message[], options: GenerateOptions): Promise<ToolTurn> {
    this.checkMedia(messages);
    const tools = this.config.tools;
    if (!tools?.tools.length) {
      const { text: answer, thought } = await this.generateOnce(messages, options);
      return { answer, messages: [{ role: 'assistant', content: answer, ...(thought ? { thought } : {}) }] };
    }
    const format: ChatFormat = (this.template as ChatTemplate).chatFormat;
    const generate: GenerateRound = async (conversation, forcedTool) => {
      if (forcedTool && format.forcedCall) {
        return this.generateNativeCall(conversation, forcedTool, format.forcedCall, options);
      }
      // Other templates get a forced call as a JSON document; the parser reads it in any
      // template's syntax and the history re-renders it in the template's own.
      const round = forcedTool ? { ...options, responseFormat: toolCallSchema(forcedTool) } : options;
      const { text, thought } = await this.generateOnce(conversation, round);
      return { text, thought, interrupted: this.lastStats?.stopReason === 'interrupted' };
    };
    return runToolRounds(messages, generate, tools, tools.maxRounds, format.toolCallSyntax);
  }

  /**
   * A forced call of `tool` in the chat format's own syntax: the prompt ends with
   * the call's opening, as the template writes it, and the model writes only the arguments,
   * constrained by the tool's schema in the format's argument syntax. So the generated bytes are
   * the ones the template re-renders for the history, and the next round reuses the KV cache up
   * to them.
   */
  private async generateNativeCall(
    conversation: readonly Message[],
    tool: ToolDefinition,
    syntax: ForcedCallSyntax,
    { onToken }: GenerateOptions,
  ): Promise<{ text: string; thought: string; interrupted: boolean }> {
    const open = syntax.opening(tool.name);
    onToken?.(open);
    const { text: args } = await this.generateOnce(
      conversation,
      { onToken, responseFormat: { type: 'object', ...tool.parameters } },
      { syntax, promptSuffix: open },
    );
    const interrupted = this.lastStats?.stopReason === 'interrupted';
    if (!interrupted) onToken?.(syntax.closing);
    return { text: open + args + (interrupted ? '' : syntax.closing), thought: '', interrupted };
  }

  private async generateOnce(
    messages: readonly Message[],
    { onToken, onThought, responseFormat }: GenerateOptions,
    forcedCall?: ForcedCallRound,
  ): Promise<{ text: string; thought: string }> {
    const template = this.template as ChatTemplate;
    // An empty constraint would constrain nothing: refused, as rne_llm refuses it.
    if (responseFormat !== undefined && isOnly(responseFormat, 'regex') && responseFormat.regex === '') {
      throw new ExecutorchError('invalid_argument', 'responseFormat.regex is empty; give a pattern or leave responseFormat out.');
    }
    if (responseFormat !== undefined && isOnly(responseFormat, 'grammar') && responseFormat.grammar.trim() === '') {
      throw new ExecutorchError('invalid_argument', 'responseFormat.grammar is empty; give a GBNF grammar with a root rule or leave responseFormat out.');
    }
    // A constrained answer (a forced call included) has no thought channel in front of it.
    const thoughtMarkers = responseFormat === undefined ? template.thoughtChannel : null;
    // The special tokens the runner keeps in the text: those the thought splitter and the call
    // parser read. A forced call's arguments keep only what its grammar writes; the call's other
    // markers are the prompt's and the caller's.
    const callFormat = this.config.tools?.tools.length ? template.chatFormat : null;
    const keepSpecialTokens = forcedCall
      ? [...forcedCall.syntax.keepSpecialTokens]
      : [...(thoughtMarkers ? template.thoughtTokens : []), ...(callFormat?.callTokens ?? [])];
    const base = this.nativeConfig();
    const config: NativeGenerationConfig = {
      ...base,
      ...(callFormat?.callStops.length ? { stopStrings: [...base.stopStrings, ...callFormat.callStops] } : {}),
      ...(responseFormat === undefined ? {} : nativeFormat(responseFormat)),
      ...(forcedCall ? { responseSyntax: forcedCall.syntax.argumentSyntax } : {}),
      ...(keepSpecialTokens.length ? { keepSpecialTokens } : {}),
    };
    const suffix = forcedCall ? [{ text: forcedCall.promptSuffix }] : [];
    const prompt = [...this.renderPrompt(this.fittedMessages(messages, config.maxNewTokens, suffix)), ...suffix];
    const native = this.native as NativeExecutorch;
    const handle = this.handle as NativeModelHandle;
    this.promptTokenCount = this.nativeCount(prompt);
    this.generatedTokenCount = 0;
    this.generating = true;
    const splitter = new ThoughtSplitter(thoughtMarkers);
    this.lastThought = '';
    this.lastThoughtUnfinished = false;
    try {
      this.lastStats = await native.generate(handle, prompt, config, (piece, generatedTokens) => {
        this.generatedTokenCount = generatedTokens;
        const split = splitter.push(piece);
        if (split.thought) onThought?.(split.thought);
        if (split.answer) onToken?.(split.answer);
      });
      this.generatedTokenCount = this.lastStats.generatedTokens;
      this.promptTokenCount = this.lastStats.reusedTokens + this.lastStats.promptTokens;
    } catch (error) {
      throw fromNativeError(error);
    } finally {
      this.generating = false;
    }
    const { answer, thought, thoughtUnfinished } = splitter.finish();
    this.lastThought = thought;
    this.lastThoughtUnfinished = thoughtUnfinished;
    return { text: answer, thought };
  }
}
