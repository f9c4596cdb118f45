import type { Backend } from './models';

/**
 * What went wrong, as a stable machine-readable code.
 *
 * The codes below `// native` are the ones the native runner reports (its `ErrorCode` names);
 * the others come from the TypeScript layer.
 */
export type ExecutorchErrorCode =
  /** An explicitly requested backend cannot run here; `alternatives` lists those that can. */
  | 'backend_unavailable'
  /** The model ships no variant that this device and binary can run. */
  | 'no_backend'
  /** The variant or tokenizer has no published checksum yet, so it is never downloaded. */
  | 'model_unpublished'
  /** The server answered with an HTTP error or the connection kept failing. */
  | 'download_failed'
  /**
   * A model file is corrupt: its size or sha256 differs from the registry's. A download is
   * deleted (after one fresh download from zero when it had been resumed); a local file
   * (`localFiles`) is left in place.
   */
  | 'checksum_mismatch'
  /**
   * A repo id, revision or file path (from the registry or the caller) would leave the models
   * cache or is no file name: an empty, `.` or `..` segment, an absolute path, a backslash, a NUL
   * or another control character (a newline). Nothing was read, written or deleted.
   */
  | 'invalid_path'
  /** The download was cancelled by the caller. */
  | 'download_cancelled'
  /**
   * The server sent data too slowly: below `minBytesPerSecond` over `rateWindowMs` on every
   * attempt, or the file missed its overall deadline. The part is kept for a later resume.
   */
  | 'download_too_slow'
  /** No space left (or the quota is used up) for a download; its partial file was deleted. */
  | 'disk_full'
  /**
   * A filesystem operation on the models cache or a local file failed (permissions, an I/O
   * error, a cache folder that is not a folder); `details.path` names it, `details.cause` the
   * underlying error.
   */
  | 'storage_error'
  /** No filesystem/HTTP adapter is configured for downloads. */
  | 'no_resource_adapter'
  /** The JSI binding is not installed (the native part of the package is not linked). */
  | 'native_module_missing'
  /** The model is not loaded yet (or failed to load). */
  | 'model_not_loaded'
  /** The module was released; create a new one. */
  | 'released'
  /** The chat template could not be parsed or rendered. */
  | 'chat_template'
  /**
   * An image or audio input the model cannot take: the model has no such capability, its
   * encoder is not loaded, or the input's form is not one the SDK reads
   * ({@link UnsupportedInputError}).
   */
  | 'unsupported_input'
  /**
   * The assistant drafter was asked of a load without it: `assistant: true` on a variant that
   * has none, or `speculative: { drafter: 'assistant' }` on a model loaded without
   * `assistant: true` ({@link AssistantUnavailableError}).
   */
  | 'assistant_unavailable'
  // native
  | 'invalid_argument'
  | 'not_found'
  | 'invalid_model'
  | 'tokenizer'
  | 'context_full'
  | 'execution_failed'
  /** `generate` was called while another generation runs. */
  | 'busy'
  /** A load the device does not have the memory for (the numbers and a smaller variant in the message). */
  | 'insufficient_memory';

/** Codes the native runner reports on its errors (`error.code` of a rejected native call). */
export const NATIVE_ERROR_CODES = [
  'invalid_argument',
  'not_found',
  'invalid_model',
  'tokenizer',
  'context_full',
  'execution_failed',
  'busy',
  'insufficient_memory',
] as const satisfies readonly ExecutorchErrorCode[];

export type NativeErrorCode = (typeof NATIVE_ERROR_CODES)[number];

/** Extra facts attached to some errors. */
export interface ExecutorchErrorDetails {
  /** For `backend_unavailable`: the backends that would work for this model on this device. */
  readonly alternatives?: readonly Backend[];
  /** For `backend_unavailable` when the OS is too old for the variant: the registry's minimum ("17.0", "28"). */
  readonly requiredOsVersion?: string;
  /** For `backend_unavailable` when the OS is too old for the variant: the device's version. */
  readonly osVersion?: string;
  /** For `download_failed`: the HTTP status, when the server answered. */
  readonly status?: number;
  /** For download errors: the URL concerned. */
  readonly url?: string;
  /** For `invalid_path`: the rejected value; for a corrupt or missing local file: its path. */
  readonly path?: string;
  /** The underlying error, when this one wraps another. */
  readonly cause?: unknown;
}

/** A kind of input besides text. */
export type InputKind = 'image' | 'audio';

/** Every error this package throws or reports through `useLLM().error`. */
export class ExecutorchError extends Error {
  override readonly name = 'ExecutorchError';
  readonly code: ExecutorchErrorCode;
  readonly details: ExecutorchErrorDetails;

  constructor(code: ExecutorchErrorCode, message: string, details: ExecutorchErrorDetails = {}) {
    super(message);
    this.code = code;
    this.details = details;
  }
}

/**
 * An image or audio input the model cannot take (code `unsupported_input`): the model's registry
 * entry lacks the capability (`supportedModels` names those that have it), its encoder file was
 * not loaded, or the input is in a form the SDK does not read (audio other than a path or a
 * `Float32Array` of 16 kHz mono samples). Thrown before anything reaches the model, so the
 * conversation is unchanged.
 */
export class UnsupportedInputError extends ExecutorchError {
  /** What was sent. */
  readonly input: InputKind;
  /** Ids of the registry's models that take this input (empty when the form was the problem). */
  readonly supportedModels: readonly string[];

  constructor(input: InputKind, message: string, supportedModels: readonly string[] = []) {
    super('unsupported_input', message);
    this.input = input;
    this.supportedModels = supportedModels;
  }
}

/** A variant of the registry: a model id and one of its backends. */
export interface VariantRef {
  readonly model: string;
  readonly backend: Backend;
}

/**
 * The assistant drafter (`assistant: true`, `speculative: { drafter: 'assistant' }`) is not
 * available for this load (code `assistant_unavailable`): the variant has no assistant, or the
 * model was loaded without `assistant: true`. `variants` lists the registry's variants that
 * have one. Thrown before anything is downloaded or generated.
 */
export class AssistantUnavailableError extends ExecutorchError {
  readonly variants: readonly VariantRef[];

  constructor(message: string, variants: readonly VariantRef[]) {
    super('assistant_unavailable', message);
    this.variants = variants;
  }
}

/** True when `error` is an {@link ExecutorchError}, optionally with the given code. */
export function isExecutorchError(
  error: unknown,
  code?: ExecutorchErrorCode,
): error is ExecutorchError {
  return error instanceof ExecutorchError && (code === undefined || error.code === code);
}

/**
 * Turns whatever a native call rejected with into an ExecutorchError. The binding rejects with
 * `Error` objects carrying `code` (a {@link NativeErrorCode}); anything else is `execution_failed`.
 */
export function fromNativeError(error: unknown): ExecutorchError {
  if (error instanceof ExecutorchError) return error;
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  const known = (NATIVE_ERROR_CODES as readonly unknown[]).includes(code);
  return new ExecutorchError(known ? (code as NativeErrorCode) : 'execution_failed', message, {
    cause: error,
  });
}
