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
