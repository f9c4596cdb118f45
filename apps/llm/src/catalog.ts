import {
  candidateBackends,
  isExecutorchError,
  models,
  ResourceFetcher,
  type AnyLLMDescriptor,
  type AssistantDescriptor,
  type Backend,
  type DeviceCapabilities,
  type FileSystemAdapter,
  type ModelFiles,
} from 'react-native-executorch';

/** Every model of the registry, in registry order. */
export const registryModels: readonly AnyLLMDescriptor[] = Object.values(models.llm);

/** The backends a model ships, in the registry's order. */
export function shippedBackends(model: AnyLLMDescriptor): Backend[] {
  return Object.keys(model.variants) as Backend[];
}

/**
 * The backends of `model` this device can run, best first (the first is what loading picks
 * without an override). Empty when none can run or the native module is missing.
 */
export function runnableBackends(model: AnyLLMDescriptor, device: DeviceCapabilities | null): Backend[] {
  return device ? candidateBackends(model, device) : [];
}

/**
 * The program with the assistant drafter (Gemma 4's) of `model`'s `backend` variant, which
 * `useLLM({ assistant: true })` loads instead of the plain one; null where the variant has none.
 */
export function assistantProgram(model: AnyLLMDescriptor, backend: Backend): AssistantDescriptor | null {
  return model.variants[backend]?.assistant ?? null;
}

/**
 * Bytes to download for `backend` (the files the SDK fetches: variant, or its program with the
 * assistant drafter with `assistant`, tokenizer and the published image/audio encoders), or null
 * while unpublished.
 */
export function downloadSize(model: AnyLLMDescriptor, backend: Backend, assistant = false): number | null {
  try {
    return ResourceFetcher.filesOf(model, backend, { assistant }).reduce((n, f) => n + f.size, 0);
  } catch (error) {
    if (isExecutorchError(error, 'model_unpublished') || isExecutorchError(error, 'backend_unavailable')) return null;
    throw error;
  }
}

/** Where a developer puts a model's files by hand (README: "Sideloading"). */
export function sideloadDirectory(fs: FileSystemAdapter, model: AnyLLMDescriptor): string {
  return `${fs.documentDirectory.replace(/\/+$/, '')}/sideload/${model.id}`;
}

/**
 * The sideloaded files of `model` for `backend`: `<backend>.pte` (`<backend>_assistant.pte`, the
 * program with the assistant drafter, with `assistant`), `tokenizer.json` and the chat
 * template file, all present in {@link sideloadDirectory}; null when any is missing. The
 * encoders, `vision_encoder.pte` and `audio_encoder.pte`, are optional: without one the model
 * loads without that input.
 */
export async function findSideloaded(
  fs: FileSystemAdapter,
  model: AnyLLMDescriptor,
  backend: Backend,
  assistant = false,
): Promise<ModelFiles | null> {
  const dir = sideloadDirectory(fs, model);
  const isFile = async (path: string) => {
    const info = await fs.stat(path);
    return info !== null && !info.isDirectory;
  };
  const files: ModelFiles = {
    modelPath: `${dir}/${backend}${assistant ? '_assistant' : ''}.pte`,
    tokenizerPath: `${dir}/tokenizer.json`,
    chatTemplatePath: `${dir}/${model.tokenizer.chatTemplate}`,
  };
  const found = await Promise.all(Object.values(files).map(isFile));
  if (!found.every(Boolean)) return null;
  const vision = `${dir}/vision_encoder.pte`;
  const audio = `${dir}/audio_encoder.pte`;
  const [hasVision, hasAudio] = await Promise.all([isFile(vision), isFile(audio)]);
  return {
    ...files,
    ...(hasVision && model.capabilities.includes('vision') ? { visionEncoderPath: vision } : {}),
    ...(hasAudio && model.capabilities.includes('audio') ? { audioEncoderPath: audio } : {}),
  };
}
