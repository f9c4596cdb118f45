import type { BackendOf } from '../backend';
import type { Message, MessageInput } from '../chat/template';
import type { AnyLLMDescriptor } from '../models';
import type { NativeExecutorch, SamplingOptions } from '../native/seam';
import type { ResourceAdapters } from '../resources/adapters';
import type { ModelFiles, ResourceFetcher } from '../resources/fetcher';

/**
 * Sampling and stopping settings; unset fields use the model's registry defaults. The sampling
 * options are those of {@link SamplingOptions}, each optional.
 */
export interface GenerationConfig extends Partial<SamplingOptions> {
  readonly maxNewTokens?: number;
  /** Generation stops at the first of these strings (which is not included in the response). */
  readonly stopStrings?: readonly string[];
  /** Speculative decoding; off when absent (set it to `undefined` to turn it off again). */
  readonly speculative?: SpeculativeConfig;
}

/**
 * Speculative decoding: a drafter proposes the next few tokens and one forward of the model
 * checks them all, keeping those the model would have produced itself, so the answer is the one
 * without it (token for token when greedy, the same distribution when sampling) and comes in
 * fewer forwards. How much it gains shows in the stats: `acceptanceRate` and `decodeForwards`.
 */
export interface SpeculativeConfig {
  /**
   * `'promptLookup'`: drafts by copying what followed the latest n-gram's earlier occurrence in
   * the conversation; any model, no extra files; gains where the answer repeats its input
   * (summaries, extraction, edits, questions about a given text). `'assistant'`: a small drafter
   * model made for the model (Gemma 4's), loaded with `LLMOptions.assistant: true`; a model
   * loaded without it, or whose variant has none, rejects with `AssistantUnavailableError`.
   */
  readonly drafter: 'promptLookup' | 'assistant';
  /** Tokens drafted per forward, an integer >= 1. Default: as many as the model verifies at once. */
  readonly maxDraftTokens?: number;
  /** Prompt lookup: the longest n-gram matched, an integer >= ngramMin. Default: the runner's. */
  readonly ngramMax?: number;
  /** Prompt lookup: the shortest n-gram matched, an integer >= 1. Default: the runner's. */
  readonly ngramMin?: number;
}

/** The token budget a {@link ContextStrategyFunction} must fit the conversation into. */
export interface ContextBudget {
  /**
   * Tokens the rendered prompt may use: the model's context length minus the room kept for
   * the answer (`contextReserveTokens`, else the generation's `maxNewTokens`).
   */
  readonly maxPromptTokens: number;
  /** The model's KV-cache capacity in tokens. */
  readonly maxContextLength: number;
  /** Tokens of the prompt `messages` render into (chat template + assistant header included). */
  countTokens(messages: readonly Message[]): number;
}

/**
 * Chooses the messages to send from the whole conversation (the system prompt, if any, first).
 * Must return a list the chat template accepts; it may drop, shorten or summarise messages.
 */
export type ContextStrategyFunction = (
  messages: readonly Message[],
  budget: ContextBudget,
) => readonly Message[];

/**
 * What happens when the conversation no longer fits in the model's context:
 * - `'slidingWindow'` (default): keep the system prompt and the newest messages that fit,
 *   leaving room for the answer. The first message kept stays the same from turn to turn
 *   until it has to move, so the native KV cache keeps being reused.
 * - `'error'`: send everything; a prompt that does not fit rejects with `context_full`.
 * - a {@link ContextStrategyFunction}.
 */
export type ContextStrategy = 'slidingWindow' | 'error' | ContextStrategyFunction;

/** The conversation part of {@link LLMConfig}. */
export interface ChatConfig {
  /** Prepended as a `system` message to every conversation the module renders. */
  readonly systemPrompt?: string;
  /**
   * Replaces the message history (e.g. a saved conversation, few-shot examples). Content given
   * as an array of parts is kept as `parts` (see {@link MessageInput}).
   */
  readonly initialMessageHistory?: readonly MessageInput[];
  /** Default `'slidingWindow'`. */
  readonly contextStrategy?: ContextStrategy;
  /**
   * Tokens kept free for the answer when fitting the conversation into the context.
   * Default: the generation's `maxNewTokens`.
   */
  readonly contextReserveTokens?: number;
  /**
   * Let a thinking model think before it answers (the template's `enable_thinking`; Gemma 4,
   * Qwen 3). Default false. The thought streams to `onThought` (`useLLM().thought`), apart from
   * the answer, and is kept on the assistant message as `thought`; the chat template decides
   * whether earlier thoughts are shown to the model again (Gemma 4 drops them).
   */
  readonly thinking?: boolean;
  /** @deprecated Use `generationConfig` of {@link LLMConfig}; still applied. */
  readonly generation?: GenerationConfig;
}

/** A tool the model may call: a name, what it does and its parameters as a JSON Schema. */
export interface ToolDefinition {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments object. */
  readonly parameters: Readonly<Record<string, unknown>>;
}

/** A tool call the model made. */
export interface ToolCall {
  readonly toolName: string;
  readonly arguments: Readonly<Record<string, unknown>>;
}

/** Tool calling settings. */
export interface ToolsConfig {
  readonly tools: readonly ToolDefinition[];
  /** Runs a call; its result (null: no result) is fed back to the model. */
  readonly executeToolCallback: (call: ToolCall) => Promise<string | null>;
  /** Keep the tool-call messages in `messageHistory` (default false). */
  readonly displayToolCalls?: boolean;
  /** Generations per message at most, tool rounds included (default 4): bounds a model that keeps calling. */
  readonly maxRounds?: number;
  /**
   * `'auto'` (default): the model decides whether to call. `{ name }`: the first generation of
   * each message is a call of that tool, its arguments valid for the tool's schema (enforced by
   * grammar-constrained sampling, so the schema may use only the keywords `responseFormat`
   * supports); later rounds are `'auto'`.
   */
  readonly toolChoice?: 'auto' | { readonly name: string };
}

/**
 * What {@link LLMModule.configure} / `useLLM().configure` accept. Each part merges into what
 * was configured before. The older flat form `{ systemPrompt, generation }` still works.
 */
export interface LLMConfig extends ChatConfig {
  readonly chatConfig?: ChatConfig;
  readonly toolsConfig?: ToolsConfig;
  readonly generationConfig?: GenerationConfig;
}

/** Options shared by {@link LLMModule} and `useLLM`. */
/**
 * True when some variant of model `M` declares an assistant drafter (for a model whose variants
 * are not known at compile time, `AnyLLMDescriptor`, it is true and the load checks).
 */
export type HasAssistant<M extends AnyLLMDescriptor> = [
  M['variants'][keyof M['variants']] extends infer V ? (V extends unknown ? ('assistant' extends keyof V ? true : never) : never) : never,
] extends [never]
  ? false
  : true;

export interface LLMOptions<M extends AnyLLMDescriptor = AnyLLMDescriptor> {
  /** A model of the registry, e.g. `models.llm.gemma4_e2b`. */
  readonly model: M;
  /**
   * Force a backend the model ships. When it cannot run on this device, loading fails with
   * `backend_unavailable` naming the alternatives. Default: chosen for the device.
   */
  readonly backend?: BackendOf<M>;
  /**
   * Use files already on the device instead of downloading (development builds, models bundled
   * with the app). Paths are plain absolute paths.
   */
  readonly localFiles?: ModelFiles;
  /**
   * Load the variant's program with its assistant drafter (Gemma 4's, `variants.<backend>.
   * assistant` in the registry) instead of its plain program, so that
   * `generationConfig.speculative = { drafter: 'assistant' }` can be used. That program is a
   * little larger (the drafter's weights) and is downloaded only when this is true; with
   * `localFiles`, `modelPath` is that program. `true` type-checks only for a model with an
   * assistant in some variant; a variant without one rejects the load with
   * `AssistantUnavailableError` naming the variants that have one. Default: false.
   */
  readonly assistant?: HasAssistant<M> extends true ? boolean : false;
  /** Where downloads go and how; default: `react-native-blob-util` adapters when installed. */
  readonly resources?: ResourceFetcher | ResourceAdapters;
  /** The native module; default: the installed JSI binding. Tests pass a double. */
  readonly native?: NativeExecutorch;
}
