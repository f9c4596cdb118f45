/**
 * The one seam between TypeScript and native code. The JSI binding (`cpp/jsi/`) installs an
 * object implementing {@link NativeExecutorch} as `globalThis.__RNExecutorch`; the Node-API addon
 * (`cpp/node/`, end-to-end tests) creates the same object over the same C++ core (`cpp/seam/`);
 * unit tests pass a double. Nothing else in the package talks to native code.
 */
import type { Backend, Platform } from '../models';

/** Facts about the device the binding runs on. */
export interface NativePlatformInfo {
  readonly os: Platform;
  /** True on the iOS simulator / Android emulator (MLX cannot run on the iOS simulator). */
  readonly isSimulator: boolean;
  /** OS version: "17.4" on iOS, the API level ("34") on Android. */
  readonly osVersion: string;
}

/**
 * The sampler's options, by the names the native side reads: one row each in the option table of
 * `cpp/seam/seam_core.cpp` (`kGenerationOptions`). The app's `GenerationConfig` is these,
 * each optional. A later option is optional here too: an absent field keeps the native default
 * (the option off).
 */
export interface SamplingOptions {
  /** 0 is greedy. */
  readonly temperature: number;
  /** Keep the k most likely tokens; 0 is off. */
  readonly topK: number;
  /** Nucleus sampling mass, in (0, 1]; 1 is off. */
  readonly topP: number;
  /** Drop tokens below minP * p(best), in [0, 1); 0 is off. */
  readonly minP: number;
  /** > 0; 1 is off. */
  readonly repetitionPenalty: number;
  /** Fixes the random draw: same seed + same conversation = same answer. Random when unset. */
  readonly seed: number;
}

/**
 * Sampling and stopping options of one native generate call, an object keyed by option name
 * (the native side reads each by name; unknown fields are ignored).
 */
export interface NativeGenerationConfig extends SamplingOptions {
  readonly maxNewTokens: number;
  /** Generation stops once the text contains one of these (the string itself is not emitted). */
  readonly stopStrings: readonly string[];
  /**
   * A JSON Schema as JSON text: the answer is one JSON document valid against it
   * (grammar-constrained sampling in the C++ sampler). Absent: free text.
   */
  readonly responseFormat?: string;
  /** `responseFormat`'s unknown keywords and formats refused instead of ignored (absent: false). */
  readonly responseStrict?: boolean;
  /** A regex (C++ regex.h's subset) the whole answer matches, sampled the same way. */
  readonly responseRegex?: string;
  /** A GBNF grammar (C++ gbnf.h) whose `root` the whole answer is a sentence of, sampled the same way. */
  readonly responseGrammar?: string;
  /**
   * The syntax `responseFormat`'s documents are written in: `'json'` (absent), or `'gemma4'`,
   * Gemma 4's tool-call arguments (`{key:<|"|>text<|"|>,n:3}`: bare keys in the template's sorted
   * order, strings quoted by the `<|"|>` token, which must then be in `keepSpecialTokens`).
   */
  readonly responseSyntax?: 'json' | 'gemma4';
  /**
   * Texts of the tokenizer's special tokens the streamed text keeps (a chat format's markers
   * that the TypeScript parsers read, e.g. Gemma 4's `<|channel>`, `<|tool_call>`, `<|"|>`);
   * every other special token adds no text. A text that is not a special token of the model
   * rejects with `invalid_argument`. Absent: none kept.
   */
  readonly keepSpecialTokens?: readonly string[];
  /**
   * Speculative decoding (`GenerationConfig.speculative`): the drafter proposes tokens that one
   * forward verifies; the answer is the one without it. Absent: off.
   */
  readonly drafter?: 'promptLookup' | 'assistant';
  /** Tokens drafted per verify forward, >= 1; absent or 0: as many as the model verifies. */
  readonly maxDraftTokens?: number;
  /** Prompt lookup's longest n-gram matched against the context (absent: the runner's default). */
  readonly ngramMax?: number;
  /** Prompt lookup's shortest n-gram, 1 <= ngramMin <= ngramMax (absent: the runner's default). */
  readonly ngramMin?: number;
}

/** Why a generation ended. */
export type StopReason = 'eos' | 'stop_string' | 'max_new_tokens' | 'context_full' | 'interrupted';

/** Timings and counts of the last generate call. */
export interface GenerationStats {
  /** Tokens prefilled by this call (only the ones not already in the KV cache). */
  readonly promptTokens: number;
  /**
   * Prompt tokens that were already in the KV cache (the longest common token prefix of the
   * cached conversation and this prompt) and so were not prefilled again. The whole prompt is
   * `reusedTokens + promptTokens` tokens long.
   */
  readonly reusedTokens: number;
  readonly generatedTokens: number;
  /** Positions in use in the KV cache after the call (the last generated token enters it with the next call). */
  readonly cacheTokens: number;
  /** Time from the call to the first generated token (the media encoders' time included). */
  readonly timeToFirstTokenMs: number;
  /**
   * Time the prompt's images and audio spent in their encoders during this call; 0 without
   * media, and for media the native side had already encoded (it keeps the last few).
   */
  readonly mediaEncodeMs: number;
  readonly prefillMs: number;
  readonly decodeMs: number;
  readonly prefillTokensPerSecond: number;
  /** Decode rate: generated tokens (after the first) per second. */
  readonly tokensPerSecond: number;
  /** Tokens the speculative drafter proposed (0 without speculative decoding). */
  readonly draftedTokens: number;
  /** Drafted tokens the model kept: each saved a forward. */
  readonly acceptedTokens: number;
  /**
   * Forward calls of the decode (plain, or verifying a draft). The first token comes from the
   * prefill, so `(generatedTokens - 1) / decodeForwards` is the tokens per decode forward: 1
   * without speculative decoding, up to `maxDraftTokens + 1` with it.
   */
  readonly decodeForwards: number;
  /** `acceptedTokens / draftedTokens`, 0 without drafts. */
  readonly acceptanceRate: number;
  readonly stopReason: StopReason;
}

/** What `loadLLM` needs: local paths of verified files and the backend to run on. */
export interface NativeLoadOptions {
  readonly modelPath: string;
  readonly tokenizerPath: string;
  readonly backend: Backend;
  /**
   * The model's vision encoder program (a local verified file), for prompts with image parts.
   * Absent: the model takes no images; an image part rejects with `invalid_argument`.
   */
  readonly visionEncoderPath?: string;
  /**
   * The model's audio encoder program (a local verified file), for prompts with audio parts.
   * Absent: the model takes no audio; an audio part rejects with `invalid_argument`.
   */
  readonly audioEncoderPath?: string;
  /**
   * The variant's measured peak memory (the registry's `peakMemoryBytes`). When it exceeds what
   * the OS says the app may still use (iOS `os_proc_available_memory`, Linux/Android
   * `MemAvailable`; `RNE_AVAILABLE_MEMORY_BYTES` overrides it), `loadLLM` rejects with
   * `insufficient_memory` naming both numbers before loading anything. Absent: not checked.
   */
  readonly peakMemoryBytes?: number;
  /** The smallest other variant of the model this device runs ("xnnpack 8da4w"), named in that refusal when it fits. */
  readonly smallerVariant?: string;
  readonly smallerVariantPeakBytes?: number;
  /** Replaces the OS's available-memory figure for this load (tests). */
  readonly availableMemoryBytes?: number;
}

/** The memory fields of {@link NativeLoadOptions}: what `checkMemory` compares. */
export type NativeMemoryNeed = Pick<
  NativeLoadOptions,
  'peakMemoryBytes' | 'smallerVariant' | 'smallerVariantPeakBytes' | 'availableMemoryBytes'
>;

/**
 * One stretch of a prompt's text. Template text (`plain` unset or false) is read as the model's
 * chat format: the text of a special token (`<|im_end|>`, `<turn|>`) is that token. Plain text
 * (the content of user, system and tool messages) is read as ordinary text, special-token text
 * included (Hugging Face's `split_special_tokens=True`), so a message cannot end its turn early
 * or open a system turn. The text parts are encoded as one text otherwise: a prompt whose plain
 * parts hold no special-token text gets exactly the ids of its text in one string.
 */
export interface TextPromptPart {
  readonly text: string;
  readonly plain?: boolean;
  readonly media?: undefined;
}

/**
 * The fields a media part never has: `text`/`plain` (so code that joins a prompt's text still
 * type-checks and skips media) and the other media form's field.
 */
interface NoText {
  readonly text?: undefined;
  readonly plain?: undefined;
}

/** An image file (JPEG or PNG) at a local path. */
export interface ImagePromptPart extends NoText {
  readonly media: 'image';
  readonly path: string;
  readonly samples?: undefined;
}

/**
 * Audio: a WAV file at a local path, or `samples`, 16 kHz mono float PCM in [-1, 1] (the native
 * side reads the array; it does not keep it after the call).
 */
export type AudioPromptPart = NoText &
  (
    | { readonly media: 'audio'; readonly path: string; readonly samples?: undefined }
    | { readonly media: 'audio'; readonly samples: Float32Array; readonly path?: undefined }
  );

/**
 * An image or a stretch of audio, in the place of the chat template's placeholder for it
 * (Gemma 4: `<|image|>`, `<|audio|>`; TypeScript never sends the placeholder text). The native
 * side expands it into the model's begin marker, N soft tokens and end marker (Gemma 4's image:
 * 255999, 258880 x N, 258882; audio: 256000, 258881 x N, 258883), N known from the image's size
 * or the clip's length before prefill, and puts the encoder's N embeddings at those positions.
 * `countTokens` counts all N + 2. A model loaded without the matching encoder
 * ({@link NativeLoadOptions.visionEncoderPath}, `audioEncoderPath`) rejects it with
 * `invalid_argument`. Text around it keeps its own parts (the template's `\n\n` around an
 * image stay template text).
 */
export type MediaPromptPart = ImagePromptPart | AudioPromptPart;

/** One stretch of a prompt: text ({@link TextPromptPart}) or media ({@link MediaPromptPart}). */
export type PromptPart = TextPromptPart | MediaPromptPart;

/** A prompt: parts, or one string of template text (the same as `[{ text }]`). */
export type NativePrompt = string | readonly PromptPart[];

/** Handle of a loaded model inside the native module. */
export type NativeModelHandle = number;

/**
 * The native module. Asynchronous calls run off the JS thread; errors are `Error` objects whose
 * `code` is one of `NATIVE_ERROR_CODES` (see errors.ts).
 *
 * Conversation state lives in native memory: `generate` receives the whole rendered
 * conversation; the native side keeps the longest common token prefix of what its KV cache
 * holds and the new prompt (rewinding the cache to it) and prefills only the rest. Where a
 * model's sliding-window ring buffer no longer holds what a rewind needs, it prefills from 0.
 * The prompt is encoded as its parts say ({@link PromptPart}); nothing (no BOS) is added. A
 * media part is one unit of that comparison: its positions are reused only when the same media
 * (the same file, or equal samples) is at the same place as before.
 */
/** What a saved session file holds and how it came back (docs/design.md, "Session files"). */
export interface SessionInfo {
  /** Size of the session file in bytes. */
  readonly fileBytes: number;
  /** Positions of the conversation it holds. */
  readonly tokens: number;
  /**
   * `'cache'`: the KV caches were copied back, nothing was computed again. `'prefill'`: the
   * tokens were prefilled again (a tokens-only file, or a backend whose delegate keeps its
   * caches inside itself: Vulkan, MLX).
   */
  readonly restored: 'cache' | 'prefill';
  /** The whole save or load, in milliseconds. */
  readonly ms: number;
}

/** {@link SessionInfo} and the bytes the app stored with the session (`appData`). */
export interface NativeSessionInfo extends SessionInfo {
  readonly appData: string;
}

export interface NativeExecutorch {
  /** Backends the linked binary can run on this device. */
  availableBackends(): Backend[];
  platformInfo(): NativePlatformInfo;
  /**
   * The check `loadLLM` makes before loading, on its own: throws `insufficient_memory` naming
   * both numbers (and the smaller variant, when it fits) where the peak exceeds what the OS says
   * the app may still use. Called before a model is downloaded, so a phone that cannot hold it
   * does not fetch gigabytes first.
   */
  checkMemory(need: NativeMemoryNeed): void;
  /**
   * Loads a `.pte`, its tokenizer and the encoders named in `options`. Rejects with `not_found`,
   * `invalid_model`, `tokenizer`.
   */
  loadLLM(options: NativeLoadOptions): Promise<NativeModelHandle>;
  /**
   * Generates from `prompt`, calling `onToken` with each decoded text piece on the JS thread, in
   * order, before the promise resolves; `generatedTokens` is the number of tokens generated so
   * far (a piece can span several tokens, and special tokens produce no piece). Rejects with `busy` while another generate runs on the
   * same handle, `context_full` when the prompt does not fit, `invalid_argument` for a released
   * handle or a media part it cannot take (no encoder loaded for it, an unreadable or
   * unsupported image or clip); throws `invalid_argument` for malformed arguments.
   */
  generate(
    handle: NativeModelHandle,
    prompt: NativePrompt,
    config: NativeGenerationConfig,
    onToken: (piece: string, generatedTokens: number) => void,
  ): Promise<GenerationStats>;
  /**
   * Tokens `prompt` is encoded into, exactly as `generate` encodes it (nothing added); a media
   * part counts as its begin marker, soft tokens and end marker. Synchronous: tokenizing never
   * waits for a running generation. Throws `invalid_argument` for a media part `generate` would
   * reject.
   */
  countTokens(handle: NativeModelHandle, prompt: NativePrompt): number;
  /** The model's KV-cache capacity in tokens (prompt + answer must fit in it). */
  maxContextLength(handle: NativeModelHandle): number;
  /** Stops a running generate after the current step (it resolves with `interrupted`). */
  interrupt(handle: NativeModelHandle): void;
  /** Forgets the conversation held in the KV cache. */
  reset(handle: NativeModelHandle): void;
  /** Stats of the last finished generate, or null before the first. */
  stats(handle: NativeModelHandle): GenerationStats | null;
  /** Interrupts and frees the model; the handle is invalid afterwards. */
  release(handle: NativeModelHandle): void;
  /**
   * Renders a chat template with the C++ engine (`cpp/chat`, as transformers'
   * `apply_chat_template`): the one template engine of every host. Synchronous (about a
   * millisecond); JSON text in and out, see {@link ChatTemplateRequest} and
   * {@link ChatTemplateResponse}. A template error is a response, not a throw; throws
   * `invalid_argument` only when `request` is not a string.
   */
  renderChatTemplate(request: string): string;
  /**
   * Writes the conversation in the KV cache to `path` (atomically: the old file or the new one,
   * never half), with `appData` (at most 16 MiB). `tokensOnly` saves no cache (a small file
   * that loading prefills again). Rejects with `busy` while a generation runs, `not_found` when
   * the path cannot be written, `invalid_argument` for a directory at the path.
   */
  saveSession(
    handle: NativeModelHandle,
    path: string,
    tokensOnly: boolean,
    appData: string,
  ): Promise<NativeSessionInfo>;
  /**
   * Replaces the conversation in the KV cache with the one saved at `path`. Every check comes
   * first (the file's format version, checksum, the model it was saved with), so a rejection
   * leaves the conversation as it was: `busy` while a generation runs, `not_found` (missing, a
   * directory or FIFO), `invalid_argument` (truncated, damaged, a newer format, another model).
   */
  loadSession(handle: NativeModelHandle, path: string): Promise<NativeSessionInfo>;
  /**
   * Another conversation over the model `handle` holds: a new handle with its own KV cache,
   * stats and session files, sharing the weights (packed once: XNNPACK's weight cache), the
   * tokenizer and the encoders; every method takes it, and releasing one handle leaves the
   * others loaded. Generations of all handles run one at a time in the order they were asked
   * for. Rejects with `invalid_argument` (a released handle, or a model whose delegate keeps
   * its own weights: Vulkan, MLX) or `insufficient_memory` (its caches do not fit).
   */
  createSession(handle: NativeModelHandle): Promise<NativeModelHandle>;
}

/** What {@link NativeExecutorch.renderChatTemplate} takes, as JSON text. */
export interface ChatTemplateRequest {
  /** The Jinja source. Parsed templates are cached natively (the last few). */
  readonly template: string;
  /** `bos_token`, `eos_token`, ... as the template reads them. */
  readonly specialTokens?: Readonly<Record<string, string>>;
  /** True: only parse the template (the answer is `{ok: true}` or the syntax error). */
  readonly check?: boolean;
  /** Messages as templates read them (OpenAI-style `tool_calls`, content parts, ...). */
  readonly messages?: readonly Record<string, unknown>[];
  /** `apply_chat_template(tools=...)`; absent: the template sees None. */
  readonly tools?: readonly Record<string, unknown>[];
  readonly addGenerationPrompt?: boolean;
  /** Further template variables (`enable_thinking`, ...); they override the special tokens. */
  readonly extra?: Readonly<Record<string, unknown>>;
  /** True: also say which stretches of the prompt are message content (`parts`). */
  readonly parts?: boolean;
}

/** What {@link NativeExecutorch.renderChatTemplate} answers, as JSON text. */
export type ChatTemplateResponse =
  | { readonly ok: true }
  | {
      readonly prompt: string;
      /** With `parts`: the prompt in stretches, `plain` for message content. */
      readonly parts?: readonly { readonly text: string; readonly plain?: boolean }[];
      /** With `parts`: false when the template edits content so no stretch could be marked. */
      readonly plainSpansFound?: boolean;
    }
  | {
      readonly error: {
        /** Python's exception name (`UndefinedError`, `TemplateSyntaxError`, `TypeError`...) or `LimitError`. */
        readonly kind: string;
        readonly message: string;
        /** 1-based template line and column; 0 when unknown. */
        readonly line: number;
        readonly column: number;
      };
    };

declare global {
  // eslint-disable-next-line no-var
  var __RNExecutorch: NativeExecutorch | undefined;
}
