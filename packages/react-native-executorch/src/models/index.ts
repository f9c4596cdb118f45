export { models } from './registry.generated';
export type {
  Backend,
  Capability,
  FileSet,
  GenerationDefaults,
  LLMDescriptor,
  LLMModelId,
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
