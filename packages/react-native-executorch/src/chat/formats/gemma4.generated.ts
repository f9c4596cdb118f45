// GENERATED FILE: do not edit. Source: model-registry/chat_formats/gemma4.yaml.
// Regenerate with: .venv/bin/python tools/gen_registry.py
/* eslint-disable */

/** The markers Gemma 4's chat template writes (special tokens of its tokenizer). */
export const GEMMA4_SYNTAX = {
  toolCall: {
    open: '<|tool_call>',
    close: '<tool_call|>',
    quote: '<|"|>',
    responseOpen: '<|tool_response>',
  },
  thought: {
    open: '<|channel>thought\n',
    close: '<channel|>',
    tokens: [
      '<|channel>',
      '<channel|>',
    ],
  },
  mediaPlaceholders: {
    image: '<|image|>',
    audio: '<|audio|>',
  },
} as const;
