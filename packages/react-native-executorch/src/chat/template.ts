import { Template } from '@huggingface/jinja';

import { ExecutorchError } from '../errors';

/** Who wrote a message. */
export type Role = 'system' | 'user' | 'assistant';

/** One turn of a conversation. */
export interface Message {
  readonly role: Role;
  readonly content: string;
}

type TokenSpec = string | { readonly content?: string } | null | undefined;

/** The fields of a Hugging Face `tokenizer_config.json` that chat rendering uses. */
interface TokenizerConfig {
  readonly chat_template?: string | readonly { readonly name: string; readonly template: string }[];
  readonly bos_token?: TokenSpec;
  readonly eos_token?: TokenSpec;
  readonly pad_token?: TokenSpec;
  readonly unk_token?: TokenSpec;
}

const SPECIAL_TOKENS = ['bos_token', 'eos_token', 'pad_token', 'unk_token'] as const;

function tokenText(spec: TokenSpec): string | undefined {
  if (typeof spec === 'string') return spec;
  return spec?.content ?? undefined;
}

/**
 * A model's chat template (Jinja, as in Hugging Face's `apply_chat_template`), rendered with
 * `@huggingface/jinja`. The output is the exact prompt text the model was trained on, special
 * tokens included.
 */
export class ChatTemplate {
  private readonly template: Template;
  private readonly specialTokens: Readonly<Record<string, string>>;

  private constructor(source: string, specialTokens: Record<string, string>) {
    try {
      this.template = new Template(source);
    } catch (error) {
      throw new ExecutorchError(
        'chat_template',
        `The chat template does not parse: ${(error as Error).message}`,
        { cause: error },
      );
    }
    this.specialTokens = specialTokens;
  }

  /** From a Jinja template string and the special tokens it refers to. */
  static fromString(source: string, specialTokens: Record<string, string> = {}): ChatTemplate {
    return new ChatTemplate(source, specialTokens);
  }

  /**
   * From the contents of `tokenizer_config.json` (text or parsed). Uses its `chat_template`
   * (the one named "default" when it holds several) and its special tokens.
   */
  static fromTokenizerConfig(config: string | object): ChatTemplate {
    let parsed: TokenizerConfig;
    try {
      parsed = (typeof config === 'string' ? JSON.parse(config) : config) as TokenizerConfig;
    } catch (error) {
      throw new ExecutorchError(
        'chat_template',
        `tokenizer_config.json is not valid JSON: ${(error as Error).message}`,
        { cause: error },
      );
    }
    const raw = parsed.chat_template;
    const source =
      typeof raw === 'string'
        ? raw
        : (raw?.find((t) => t.name === 'default') ?? raw?.[0])?.template;
    if (source === undefined) {
      throw new ExecutorchError(
        'chat_template',
        'tokenizer_config.json has no `chat_template`: this model has no chat format. Use ' +
          '`generate` with a raw prompt, or a chat (instruct) model.',
      );
    }
    const specialTokens: Record<string, string> = {};
    for (const key of SPECIAL_TOKENS) {
      const text = tokenText(parsed[key]);
      if (text !== undefined) specialTokens[key] = text;
    }
    return new ChatTemplate(source, specialTokens);
  }

  /**
   * Renders `messages` into a prompt. With `addGenerationPrompt` (the default) the prompt ends
   * with the header of an assistant turn, so the model answers next.
   */
  render(
    messages: readonly Message[],
    options: { addGenerationPrompt?: boolean; extra?: Record<string, unknown> } = {},
  ): string {
    try {
      return this.template.render({
        ...this.specialTokens,
        ...options.extra,
        messages: messages.map((m) => ({ role: m.role, content: m.content })),
        add_generation_prompt: options.addGenerationPrompt ?? true,
      });
    } catch (error) {
      throw new ExecutorchError(
        'chat_template',
        `The chat template failed on these messages: ${(error as Error).message}`,
        { cause: error },
      );
    }
  }
}
