export { models } from './registry.generated';
export type {
  AssistantDescriptor,
  Backend,
  Capability,
  EncoderDescriptor,
  FileSet,
  GenerationDefaults,
  LLMDescriptor,
  LLMModelId,
  MediaCapability,
  MinPlatform,
  Platform,
  PublishedFile,
  Quantization,
  TokenizerDescriptor,
  UnpublishedFile,
  VariantDescriptor,
} from './registry.generated';

import type { LLMDescriptor as Descriptor } from './registry.generated';

/**
 * Any model of the registry, whatever backends it ships. (`LLMDescriptor` alone means a model
 * that ships every backend, which SmolLM2 for instance does not.)
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyLLMDescriptor = Descriptor<any>;

/**
 * True when model `M` declares capability `C` (`'vision'`, `'audio'`). For a model whose
 * capabilities are not known at compile time (`AnyLLMDescriptor`) it is true, and the check
 * happens when the input is sent.
 */
export type HasCapability<M extends AnyLLMDescriptor, C extends string> = C extends M['capabilities'][number]
  ? true
  : false;
