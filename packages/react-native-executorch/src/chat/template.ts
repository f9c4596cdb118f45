import { Template } from '@huggingface/jinja';

import { ExecutorchError } from '../errors';
import type { ToolCall, ToolDefinition } from '../llm/types';

/** Who wrote a message; `tool` carries the result of a tool call back to the model. */
export type Role = 'system' | 'user' | 'assistant' | 'tool';

/** One turn of a conversation. */
export interface Message {
  readonly role: Role;
  readonly content: string;
  /** On an assistant message: the tool calls the model made in it. */
  readonly toolCalls?: readonly ToolCall[];
}

/** Options of {@link ChatTemplate.render}. */
export interface RenderOptions {
  /** End with the header of an assistant turn, so the model answers next (default true). */
  readonly addGenerationPrompt?: boolean;
  /** Tools the model may call, passed to the template's `tools` variable. */
  readonly tools?: readonly ToolDefinition[];
  /** Further template variables. */
  readonly extra?: Record<string, unknown>;
}

/** A message in the form Hugging Face chat templates read (OpenAI-style `tool_calls`). */
function templateMessage(message: Message): Record<string, unknown> {
  const rendered: Record<string, unknown> = { role: message.role, content: message.content };
  // Only when present: some templates test `'tool_calls' in message`.
  if (message.toolCalls?.length) {
    rendered.tool_calls = message.toolCalls.map((call) => ({
      type: 'function',
      function: { name: call.toolName, arguments: call.arguments },
    }));
  }
  return rendered;
}

/** A tool in the form `apply_chat_template(tools=...)` passes it (OpenAI-style function). */
function templateTool(tool: ToolDefinition): Record<string, unknown> {
  return {
    type: 'function',
    function: { name: tool.name, description: tool.description, parameters: tool.parameters },
  };
}

/** A tool name no conversation uses: rendered to see whether a template shows its tools. */
const PROBE_TOOL: ToolDefinition = {
  name: 'rne_probe_tool_5c1f',
  description: 'probe',
  parameters: { type: 'object', properties: {} },
};

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
  private toolSupport: boolean | undefined;

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
   * Whether the template renders the `tools` it is given (Qwen 2.5, Llama 3.x, Hermes, ...).
   * Templates that ignore them (SmolLM2, Gemma 3) get tools through the fallback format of
   * `src/tools`.
   */
  get supportsTools(): boolean {
    this.toolSupport ??= this.renders(PROBE_TOOL.name, { tools: [PROBE_TOOL] });
    return this.toolSupport;
  }

  private renders(text: string, options: RenderOptions): boolean {
    try {
      return this.render([{ role: 'user', content: 'Hi' }], options).includes(text);
    } catch {
      return false;
    }
  }

  /**
   * Renders `messages` into a prompt, as `apply_chat_template(messages, tools=...,
   * add_generation_prompt=..., tokenize=False)` does.
   */
  render(messages: readonly Message[], options: RenderOptions = {}): string {
    try {
      return this.template.render({
        ...this.specialTokens,
        ...options.extra,
        messages: messages.map(templateMessage),
        ...(options.tools?.length ? { tools: options.tools.map(templateTool) } : {}),
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
