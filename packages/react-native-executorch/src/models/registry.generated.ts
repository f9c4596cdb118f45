// GENERATED FILE: do not edit. Source: model-registry/<family>.yaml.
// Regenerate with: .venv/bin/python tools/gen_registry.py
/* eslint-disable */

import type { Backend, Platform } from '../backends.generated';

export type { Backend, Platform };

/** A weight/activation quantization scheme of a variant. */
export type Quantization = 'fp32' | 'fp16' | 'bf16' | 'int4' | '8w' | '8da4w' | '8da8w';

/** A model capability. */
export type Capability = 'text-generation' | 'chat' | 'vision' | 'audio';

/** A file with the checksum and size the client verifies before first use. */
export interface PublishedFile {
  readonly path: string;
  readonly sha256: string;
  readonly size: number;
}

/** A file that is not published yet: it has no checksum, so clients refuse to download it. */
export interface UnpublishedFile {
  readonly path: string;
}

/** Files published together; `status` says whether they can be downloaded. */
export type FileSet =
  | { readonly status: 'published'; readonly files: readonly PublishedFile[] }
  | { readonly status: 'unpublished'; readonly files: readonly UnpublishedFile[] };

/** Minimum OS versions: iOS as "major.minor", Android as an API level. */
export interface MinPlatform {
  readonly ios?: string;
  readonly android?: number;
}

/** A media capability: the model takes images (`vision`) or audio (`audio`) through an encoder. */
export type MediaCapability = 'vision' | 'audio';

/**
 * An encoder program of a variant: published with its checksum and size, or not yet (then it is
 * never downloaded and the model loads without it).
 */
export type EncoderDescriptor =
  | ({ readonly status: 'published' } & PublishedFile)
  | ({ readonly status: 'unpublished' } & UnpublishedFile);

/**
 * The variant's program with the assistant drafter (Gemma 4's), exported from `sourceRepo`: it
 * is downloaded instead of the variant's program when the app loads with `assistant: true`, and
 * makes `speculative: { drafter: 'assistant' }` available. Unpublished: never downloaded.
 */
export type AssistantDescriptor = (
  | ({ readonly status: 'published' } & PublishedFile)
  | ({ readonly status: 'unpublished' } & UnpublishedFile)
) & {
  /** The Hugging Face repository of the assistant checkpoint it was exported from. */
  readonly sourceRepo: string;
  /** Tokens one verify call scores: the round's token and up to `verifyTokens - 1` drafts. */
  readonly verifyTokens: number;
  /**
   * The runner's measured peak resident memory with this program, in bytes (its verify method
   * packs its own copy of the weights). Absent: the variant's `peakMemoryBytes` is checked.
   */
  readonly peakMemoryBytes?: number;
};

/** One exported `.pte` variant of a model for one backend. */
export type VariantDescriptor<B extends Backend = Backend> = FileSet & {
  readonly backend: B;
  readonly quantization: Quantization;
  /** KV capacity the variant was exported with (prompt + generated tokens). */
  readonly maxContext: number;
  readonly minPlatform: MinPlatform;
  /**
   * The runner's measured peak resident memory with this variant, in bytes: LLMModule refuses
   * to load it (`insufficient_memory`) where the OS offers less. Absent: not measured.
   */
  readonly peakMemoryBytes?: number;
  /** The encoder of each media capability of the model (one for each it declares). */
  readonly encoders?: { readonly [C in MediaCapability]?: EncoderDescriptor };
  /** The program with the assistant drafter, where the variant has one. */
  readonly assistant?: AssistantDescriptor;
};

/** Default generation settings of a model (the model authors' recommendations). */
export interface GenerationDefaults {
  readonly temperature: number;
  readonly topK?: number;
  readonly topP?: number;
  readonly minP?: number;
  readonly repetitionPenalty?: number;
  readonly maxNewTokens: number;
}

/** Tokenizer files and which of them holds the chat template. */
export type TokenizerDescriptor = FileSet & {
  readonly chatTemplate: string;
};

/** A model of the registry. `B` is the union of the backends it ships. */
export interface LLMDescriptor<B extends Backend = Backend> {
  readonly kind: 'llm';
  readonly id: string;
  readonly name: string;
  readonly family: string;
  readonly architecture: string;
  readonly license: string;
  readonly hf: { readonly repo: string; readonly revision: string };
  readonly contextLength: number;
  readonly capabilities: readonly Capability[];
  readonly generation: GenerationDefaults;
  readonly tokenizer: TokenizerDescriptor;
  readonly platformDefaults: { readonly [P in Platform]: B };
  readonly variants: { readonly [K in B]: VariantDescriptor<K> };
}

/** The encoders 3 of gemma4_e2b's variants share. */
const gemma4_e2b_encoders = {
  vision: {
    status: 'unpublished',
    path: 'xnnpack/gemma4_e2b_vision_xnnpack_8w.pte',
  },
  audio: {
    status: 'unpublished',
    path: 'xnnpack/gemma4_e2b_audio_xnnpack_fp32.pte',
  },
} as const;

/** Every LLM of the registry, by id. */
const llm = {
  /** Gemma 4 E2B (gemma4); ships: mlx, xnnpack, vulkan. */
  gemma4_e2b: {
    kind: 'llm',
    id: 'gemma4_e2b',
    name: 'Gemma 4 E2B',
    family: 'gemma4',
    architecture: 'gemma4',
    license: 'gemma',
    hf: {
      repo: 'software-mansion/react-native-executorch-gemma-4',
      revision: 'v0.1.0',
    },
    contextLength: 4096,
    capabilities: [
      'text-generation',
      'chat',
      'vision',
      'audio',
    ],
    generation: {
      temperature: 1.0,
      topK: 64,
      topP: 0.95,
      maxNewTokens: 1024,
    },
    tokenizer: {
      status: 'unpublished',
      chatTemplate: 'chat_template.jinja',
      files: [
        {
          path: 'tokenizer.json',
        },
        {
          path: 'tokenizer_config.json',
        },
        {
          path: 'chat_template.jinja',
        },
      ],
    },
    platformDefaults: {
      ios: 'mlx',
      android: 'vulkan',
    },
    variants: {
      mlx: {
        backend: 'mlx',
        quantization: 'int4',
        status: 'unpublished',
        maxContext: 4096,
        minPlatform: {
          ios: '17.0',
        },
        files: [
          {
            path: 'mlx/gemma4_e2b_mlx_int4.pte',
          },
        ],
        encoders: gemma4_e2b_encoders,
      },
      xnnpack: {
        backend: 'xnnpack',
        quantization: '8da4w',
        status: 'unpublished',
        maxContext: 4096,
        minPlatform: {
          android: 26,
          ios: '17.0',
        },
        files: [
          {
            path: 'xnnpack/gemma4_e2b_xnnpack_8da4w.pte',
          },
        ],
        peakMemoryBytes: 1477443584,
        encoders: gemma4_e2b_encoders,
        assistant: {
          status: 'unpublished',
          path: 'xnnpack/gemma4_e2b_xnnpack_8da4w_assistant.pte',
          sourceRepo: 'google/gemma-4-E2B-it-assistant',
          verifyTokens: 5,
        },
      },
      vulkan: {
        backend: 'vulkan',
        quantization: '8da4w',
        status: 'unpublished',
        maxContext: 4096,
        minPlatform: {
          android: 28,
        },
        files: [
          {
            path: 'vulkan/gemma4_e2b_vulkan_8da4w.pte',
          },
        ],
        encoders: gemma4_e2b_encoders,
      },
    },
  } as const satisfies LLMDescriptor<'mlx' | 'xnnpack' | 'vulkan'>,
  /** SmolLM2 135M Instruct (smollm2); ships: xnnpack. */
  smollm2_135m: {
    kind: 'llm',
    id: 'smollm2_135m',
    name: 'SmolLM2 135M Instruct',
    family: 'smollm2',
    architecture: 'llama',
    license: 'apache-2.0',
    hf: {
      repo: 'software-mansion/react-native-executorch-smollm2',
      revision: 'v0.1.0',
    },
    contextLength: 2048,
    capabilities: [
      'text-generation',
      'chat',
    ],
    generation: {
      temperature: 0.2,
      topP: 0.9,
      maxNewTokens: 256,
    },
    tokenizer: {
      status: 'unpublished',
      chatTemplate: 'tokenizer_config.json',
      files: [
        {
          path: 'tokenizer.json',
        },
        {
          path: 'tokenizer_config.json',
        },
      ],
    },
    platformDefaults: {
      ios: 'xnnpack',
      android: 'xnnpack',
    },
    variants: {
      xnnpack: {
        backend: 'xnnpack',
        quantization: '8w',
        status: 'unpublished',
        maxContext: 2048,
        minPlatform: {
          android: 26,
          ios: '15.1',
        },
        files: [
          {
            path: 'xnnpack/smollm2_135m_xnnpack_8w.pte',
          },
        ],
        peakMemoryBytes: 235302502,
      },
    },
  } as const satisfies LLMDescriptor<'xnnpack'>,
};

/** The model registry: `models.llm.<id>`. */
export const models = { llm } as const;

/** Id of a model in the registry. */
export type LLMModelId = keyof typeof llm;
