import type { BackendOf } from '../backend';
import type { AnyLLMDescriptor } from '../models';
import type { NativeExecutorch } from '../native/seam';
import type { ResourceAdapters } from '../resources/adapters';
import type { ModelFiles, ResourceFetcher } from '../resources/fetcher';

/** Sampling and stopping settings; unset fields use the model's registry defaults. */
export interface GenerationConfig {
  /** 0 is greedy. */
  readonly temperature?: number;
  /** Keep the k most likely tokens; 0 is off. */
  readonly topK?: number;
  /** Nucleus sampling mass, in (0, 1]; 1 is off. */
  readonly topP?: number;
  /** Drop tokens below minP * p(best), in [0, 1); 0 is off. */
  readonly minP?: number;
  /** > 0; 1 is off. */
  readonly repetitionPenalty?: number;
  readonly maxNewTokens?: number;
  /** Fixes the random draw: same seed + same conversation = same answer. Random when unset. */
  readonly seed?: number;
  /** Generation stops at the first of these strings (which is not included in the response). */
  readonly stopStrings?: readonly string[];
}

/** What {@link LLMModule.configure} / `useLLM().configure` accept. */
export interface ChatConfig {
  /** Prepended as a `system` message to every conversation the module renders. */
  readonly systemPrompt?: string;
  readonly generation?: GenerationConfig;
}

/** Options shared by {@link LLMModule} and `useLLM`. */
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
  /** Where downloads go and how; default: `react-native-blob-util` adapters when installed. */
  readonly resources?: ResourceFetcher | ResourceAdapters;
  /** The native module; default: the installed JSI binding. Tests pass a double. */
  readonly native?: NativeExecutorch;
}
