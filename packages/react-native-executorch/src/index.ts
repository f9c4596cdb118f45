/**
 * react-native-executorch: run LLMs on the phone's GPU from React Native.
 *
 * Entry points: `models` (the registry), `useLLM` (React), `LLMModule` (everything else).
 */
export * from './models';
export {
  candidateBackends,
  resolveBackend,
  PLATFORM_PREFERENCE,
  type BackendOf,
  type DeviceCapabilities,
} from './backend';
export { BACKENDS, type BackendInfo, type SimulatorRule } from './backends.generated';
export {
  AssistantUnavailableError,
  ExecutorchError,
  isExecutorchError,
  UnsupportedInputError,
  type InputKind,
  type ExecutorchErrorCode,
  type ExecutorchErrorDetails,
  type NativeErrorCode,
  type VariantRef,
} from './errors';
export {
  ChatTemplate,
  normalizeMessage,
  type AudioContent,
  type ContentPart,
  type ImageContent,
  type MediaContent,
  type Message,
  type MessageInput,
  type TextContent,
  type RenderOptions,
  type Role,
  type ThoughtMarkers,
  type ToolCallSyntax,
} from './chat/template';
export { MEDIA_PLACEHOLDERS, mediaOf, spliceMedia, type MediaKind } from './chat/media';
export { DEFAULT_MAX_TOOL_ROUNDS, fallbackToolInstruction, parseToolCalls, type ParsedAnswer } from './tools';
export {
  LLMModule,
  AUDIO_SAMPLE_RATE,
  type AudioSamples,
  type GenerateOptions,
  type JsonSchema,
  type LoadOptions,
  type MediaOptions,
  type SendMessageOptions,
  type JsonSchemaFormat,
  type RegexFormat,
  type GrammarFormat,
} from './llm/LLMModule';
export { useLLM, type LLMController, type UseLLMOptions } from './llm/useLLM';
export type {
  ChatConfig,
  ContextBudget,
  ContextStrategy,
  ContextStrategyFunction,
  GenerationConfig,
  HasAssistant,
  LLMConfig,
  LLMOptions,
  SpeculativeConfig,
  ToolCall,
  ToolDefinition,
  ToolsConfig,
} from './llm/types';
export { slidingWindow } from './llm/context';
export {
  DownloadControl,
  ResourceFetcher,
  type CachedModel,
  type DownloadStatus,
  type FetchOptions,
  type ModelFiles,
  type RemoteFile,
  type ResourceFetcherOptions,
} from './resources/fetcher';
export type {
  FileInfo,
  FileSystemAdapter,
  HttpAdapter,
  HttpDownloadRequest,
  HttpDownloadResult,
  ResourceAdapters,
} from './resources/adapters';
export { blobUtilAdapters, type BlobUtilAdapterOptions, type BlobUtilModule } from './resources/blobUtil';
export { getResourceFetcher } from './resources/defaultFetcher';
export type {
  GenerationStats,
  NativeExecutorch,
  NativeGenerationConfig,
  NativeLoadOptions,
  NativeModelHandle,
  NativePlatformInfo,
  NativePrompt,
  PromptPart,
  TextPromptPart,
  MediaPromptPart,
  ImagePromptPart,
  AudioPromptPart,
  SamplingOptions,
  SessionInfo,
  NativeSessionInfo,
  StopReason,
} from './native/seam';
