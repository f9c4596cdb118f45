import { ExecutorchError } from '../errors';
import type { ToolCall, ToolDefinition } from '../llm/types';
import { getNativeExecutorch } from '../native';
import type { ChatTemplateRequest, ChatTemplateResponse, NativeExecutorch, PromptPart } from '../native/seam';
import { formatWriting, THOUGHT_CHANNELS, type ChatFormat, type ThoughtChannel } from './formats';
import { mediaOf, spliceMedia } from './media';

/** Who wrote a message; `tool` carries the result of a tool call back to the model. */
export type Role = 'system' | 'user' | 'assistant' | 'tool';

/** A stretch of text in a multimodal message. */
export interface TextContent {
  readonly type: 'text';
  readonly text: string;
}

/** An image (a JPEG or PNG file at a local path) in a message. */
export interface ImageContent {
  readonly type: 'image';
  readonly path: string;
  readonly samples?: undefined;
}

/**
 * Audio in a message: a WAV file at a local path, or `samples`, 16 kHz mono float PCM in
 * [-1, 1]. `sampleRate`, when given, must be 16000: audio at another rate is refused with
 * `UnsupportedInputError` (resample it first).
 */
export type AudioContent =
  | { readonly type: 'audio'; readonly path: string; readonly samples?: undefined; readonly sampleRate?: undefined }
  | { readonly type: 'audio'; readonly samples: Float32Array; readonly sampleRate?: number; readonly path?: undefined };

/** An image or audio part of a message. */
export type MediaContent = ImageContent | AudioContent;

/**
 * One part of a multimodal message, as Hugging Face chat templates read content parts
 * (`item['type']`): the template writes the model's placeholder for a media part (Gemma 4:
 * `\n\n<|image|>\n\n`, `<|audio|>`) and the prompt carries the media in its place (see
 * `src/chat/media.ts`).
 */
export type ContentPart = TextContent | MediaContent;

/** One turn of a conversation. */
export interface Message {
  readonly role: Role;
  /** The text (for a message with `parts`: its text parts, joined by newlines). */
  readonly content: string;
  /**
   * Multimodal content: when set, the template renders these parts, in order, instead of
   * `content`. Images and audio need a model whose `capabilities` list `vision` / `audio`.
   */
  readonly parts?: readonly ContentPart[];
  /** On an assistant message: the tool calls the model made in it. */
  readonly toolCalls?: readonly ToolCall[];
  /** On a `tool` message: the tool whose result it is (Gemma 4's template names it). */
  readonly toolName?: string;
  /**
   * On an assistant message of a thinking model: its thought, kept apart from the answer in
   * `content`. Templates get it as `reasoning_content` and show it only where their own rules
   * say (Gemma 4's interleaved template: on tool-call turns after the last user message).
   */
  readonly thought?: string;
}

/**
 * A message as the SDK takes it in (`generate`, `countTokens`, `initialMessageHistory`): a
 * {@link Message}, or the same with Hugging Face's form of content, an array of parts
 * (`{ role: 'user', content: [{ type: 'image', path }, { type: 'text', text: 'What is it?' }] }`).
 * {@link normalizeMessage} turns it into a `Message`.
 */
export type MessageInput =
  | Message
  | (Omit<Message, 'content' | 'parts'> & { readonly content: readonly ContentPart[] });

/**
 * `message` as a {@link Message}: array content becomes `parts`, and `content` their text
 * joined by newlines.
 */
export function normalizeMessage(message: MessageInput): Message {
  if (typeof message.content === 'string') return message as Message;
  const parts = message.content;
  const content = parts.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('\n');
  return { ...message, content, parts };
}

/** Options of {@link ChatTemplate.render}. */
export interface RenderOptions {
  /** End with the header of an assistant turn, so the model answers next (default true). */
  readonly addGenerationPrompt?: boolean;
  /** Tools the model may call, passed to the template's `tools` variable. */
  readonly tools?: readonly ToolDefinition[];
  /**
   * The template's `enable_thinking` variable: true lets a thinking model think before it
   * answers; unset leaves the template's own default.
   */
  readonly thinking?: boolean;
  /** Further template variables. */
  readonly extra?: Record<string, unknown>;
}

/** A message in the form Hugging Face chat templates read (OpenAI-style `tool_calls`). */
export function templateMessage(message: Message): Record<string, unknown> {
  const content = message.parts ? message.parts.map(templatePart) : message.content;
  const rendered: Record<string, unknown> = { role: message.role, content };
  // Only when present: some templates test `'tool_calls' in message`.
  if (message.toolCalls?.length) rendered.tool_calls = message.toolCalls.map(templateToolCall);
  if (message.thought) rendered.reasoning_content = message.thought;
  return rendered;
}

/**
 * A content part as templates read it. Templates read only `type` (and `text`); an audio
 * clip's samples are left out, so the template never walks a large array.
 */
function templatePart(part: ContentPart): Record<string, unknown> {
  if (part.type === 'text') return { type: 'text', text: part.text };
  return part.path === undefined ? { type: part.type } : { type: part.type, path: part.path };
}

/** A tool call in the form templates read (OpenAI-style). */
export function templateToolCall(call: ToolCall): Record<string, unknown> {
  return { type: 'function', function: { name: call.toolName, arguments: call.arguments } };
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

/**
 * How a template writes tool calls: `'gemma4'` is Gemma 4's own
 * `<|tool_call>call:NAME{key:<|"|>text<|"|>}<tool_call|>`; `'json'` is every other format
 * (JSON objects in tags, or bare).
 */
export type ToolCallSyntax = 'gemma4' | 'json';

/** The markers around a thinking model's thought (Gemma 4: `<|channel>thought\n` ... `<channel|>`). */
export interface ThoughtMarkers {
  readonly open: string;
  readonly close: string;
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
 * What renders chat templates: the native seam's C++ engine (`cpp/chat`, through JSI on a
 * device, the Node addon in end-to-end tests), so every host renders a template the same way.
 */
export type ChatTemplateEngine = Pick<NativeExecutorch, 'renderChatTemplate'>;

let testEngine: ChatTemplateEngine | undefined;

/**
 * @internal For test harnesses only: the engine of templates built without one, instead of the
 * installed native module (jest: the C++ engine's double, src/testing/templateDouble.ts; the e2e
 * suites: the Node addon). undefined restores the native module.
 */
export function setTestChatTemplateEngine(engine: ChatTemplateEngine | undefined): void {
  testEngine = engine;
}

/**
 * A model's chat template (Jinja, as in Hugging Face's `apply_chat_template`), rendered by the
 * native C++ engine ({@link ChatTemplateEngine}). The output is the exact prompt text the model
 * was trained on, special tokens included.
 */
export class ChatTemplate {
  private readonly source: string;
  private readonly specialTokens: Readonly<Record<string, string>>;
  private readonly givenEngine: ChatTemplateEngine | undefined;
  private toolSupport: boolean | undefined;
  private format: ChatFormat | undefined;
  private thought: ThoughtChannel | null | undefined;

  private constructor(source: string, specialTokens: Record<string, string>, engine?: ChatTemplateEngine) {
    this.source = source;
    this.specialTokens = specialTokens;
    this.givenEngine = engine;
    const checked = this.call({ template: source, specialTokens, check: true });
    if ('error' in checked) {
      throw new ExecutorchError('chat_template', `The chat template does not parse: ${describe(checked.error)}`);
    }
  }

  /**
   * From a Jinja template string and the special tokens it refers to. `engine`: what renders it
   * (default: the installed native module).
   */
  static fromString(
    source: string,
    specialTokens: Record<string, string> = {},
    engine?: ChatTemplateEngine,
  ): ChatTemplate {
    return new ChatTemplate(source, specialTokens, engine);
  }

  /**
   * From the contents of `tokenizer_config.json` (text or parsed). Uses its `chat_template`
   * (the one named "default" when it holds several) and its special tokens.
   */
  static fromTokenizerConfig(config: string | object, engine?: ChatTemplateEngine): ChatTemplate {
    const parsed = parseConfig(config);
    const source = templateOf(parsed);
    if (source === undefined) {
      throw new ExecutorchError(
        'chat_template',
        'tokenizer_config.json has no `chat_template`: this model has no chat format. Use ' +
          '`generate` with a raw prompt, or a chat (instruct) model.',
      );
    }
    return new ChatTemplate(source, specialTokensOf(parsed), engine);
  }

  /**
   * From a model's Hugging Face files, found the way transformers finds them: the template of
   * `chat_template.jinja` when there is one, else the `chat_template` of
   * `tokenizer_config.json`; the special tokens (`bos_token`, ...) from `tokenizer_config.json`.
   */
  static fromFiles(
    files: {
      readonly chatTemplateJinja?: string | null;
      readonly tokenizerConfig?: string | object | null;
    },
    engine?: ChatTemplateEngine,
  ): ChatTemplate {
    const { chatTemplateJinja, tokenizerConfig } = files;
    if (chatTemplateJinja == null) {
      if (tokenizerConfig == null) {
        throw new ExecutorchError(
          'chat_template',
          'Neither chat_template.jinja nor tokenizer_config.json was given: no chat format.',
        );
      }
      return ChatTemplate.fromTokenizerConfig(tokenizerConfig, engine);
    }
    const special = tokenizerConfig == null ? {} : specialTokensOf(parseConfig(tokenizerConfig));
    return new ChatTemplate(chatTemplateJinja, special, engine);
  }

  /**
   * Whether the template renders the `tools` it is given (Qwen 2.5, Llama 3.x, Hermes, Gemma 4,
   * ...). Templates that ignore them (SmolLM2, Gemma 3) get tools through the fallback format
   * of `src/tools`.
   */
  get supportsTools(): boolean {
    this.toolSupport ??= this.renders(PROBE_TOOL.name, { tools: [PROBE_TOOL] });
    return this.toolSupport;
  }

  /**
   * How the template writes an assistant's tool calls, found by rendering one (not from the
   * model's name): Gemma 4's templates write `<|tool_call>call:NAME{...}<tool_call|>`.
   */
  get toolCallSyntax(): ToolCallSyntax {
    return this.chatFormat.toolCallSyntax;
  }

  /** The template's chat format ({@link ChatFormat}), found by rendering a call as {@link toolCallSyntax} says. */
  get chatFormat(): ChatFormat {
    if (this.format === undefined) {
      const call: ToolCall = { toolName: PROBE_TOOL.name, arguments: { n: 1 } };
      const messages: Message[] = [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: '', toolCalls: [call] },
      ];
      let text = '';
      try {
        text = this.render(messages, { tools: [PROBE_TOOL], addGenerationPrompt: false });
      } catch {
        // A template that cannot render a call has no native syntax for one.
      }
      this.format = formatWriting(text, PROBE_TOOL.name);
    }
    return this.format;
  }

  /**
   * The markers around the model's thought when the template has Gemma 4's thought channel
   * (found by rendering: without thinking, its generation prompt ends with an empty channel),
   * else null.
   */
  get thoughtChannel(): ThoughtMarkers | null {
    return this.foundThoughtChannel()?.markers ?? null;
  }

  /** The special tokens the thought channel's markers are made of (none without a channel). */
  get thoughtTokens(): readonly string[] {
    return this.foundThoughtChannel()?.tokens ?? [];
  }

  private foundThoughtChannel(): ThoughtChannel | null {
    if (this.thought === undefined) {
      let text = '';
      try {
        text = this.render([{ role: 'user', content: 'Hi' }], { thinking: false });
      } catch {
        // No channel can be seen in a template that fails on a plain conversation.
      }
      this.thought = THOUGHT_CHANNELS.find(({ markers }) => text.endsWith(markers.open + markers.close)) ?? null;
    }
    return this.thought;
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
   * add_generation_prompt=..., enable_thinking=..., tokenize=False)` does.
   */
  render(messages: readonly Message[], options: RenderOptions = {}): string {
    return this.renderTemplateMessages(messages.map(templateMessage), options);
  }

  /**
   * Renders `messages` as {@link render} does, in parts: the content of user, system and tool
   * messages (text parts and tool results included) is plain text; everything else, the
   * template's markers and assistant messages, is template text. The native side encodes plain
   * text with special-token text as ordinary text, so a message cannot end its turn or open a
   * system turn. See {@link renderTemplateMessagesParts} for how the spans are found. Each media
   * placeholder the template writes is replaced by the media part it stands for
   * ({@link spliceMedia}).
   */
  renderParts(messages: readonly Message[], options: RenderOptions = {}): PromptPart[] {
    return spliceMedia(this.renderTemplateMessagesParts(messages.map(templateMessage), options), mediaOf(messages));
  }

  /**
   * {@link renderTemplateMessages} in parts: the native engine renders each content string
   * again between two private-use characters (inside its leading and trailing whitespace, so a
   * template's `trim` still applies), and the spans they mark are the plain parts; the parts'
   * text is the render byte for byte. Where the marked render is not the render with marks
   * added (a template that compares, cuts or reorders content) or the marks are not balanced
   * pairs, the whole prompt is template text: then special-token text in content is read as
   * those tokens. Assistant content stays template text: it is the model's own output, and
   * re-encoding it to the ids it was generated as keeps the KV cache reusable. Object keys of
   * tool results (Gemma 4's `tool_responses`) stay template text, since templates sort by them.
   */
  renderTemplateMessagesParts(
    messages: readonly Record<string, unknown>[],
    options: RenderOptions = {},
  ): PromptPart[] {
    const answer = this.renderRequest(messages, options, true);
    return (answer.parts ?? [{ text: answer.prompt }]).map((part) =>
      part.plain ? { text: part.text, plain: true } : { text: part.text },
    );
  }

  /**
   * Renders messages already in the form Hugging Face templates read (OpenAI-style
   * `tool_calls`, content parts, and whatever fields the template itself reads, such as Gemma
   * 4's `tool_responses`).
   */
  renderTemplateMessages(messages: readonly Record<string, unknown>[], options: RenderOptions = {}): string {
    return this.renderRequest(messages, options, false).prompt;
  }

  private renderRequest(
    messages: readonly Record<string, unknown>[],
    options: RenderOptions,
    parts: boolean,
  ): { readonly prompt: string; readonly parts?: readonly { readonly text: string; readonly plain?: boolean }[] } {
    const extra: Record<string, unknown> = { ...options.extra };
    if (options.thinking !== undefined) extra.enable_thinking = options.thinking;
    let tools: Record<string, unknown>[] | undefined;
    try {
      tools = options.tools?.length ? options.tools.map(templateTool) : undefined;
    } catch (error) {
      throw new ExecutorchError('chat_template', `The chat template failed on these tools: ${(error as Error).message}`, {
        cause: error,
      });
    }
    const answer = this.call({
      template: this.source,
      specialTokens: this.specialTokens,
      messages,
      ...(tools ? { tools } : {}),
      addGenerationPrompt: options.addGenerationPrompt ?? true,
      extra,
      parts,
    });
    if ('error' in answer) {
      throw new ExecutorchError('chat_template', `The chat template failed on these messages: ${describe(answer.error)}`);
    }
    if (!('prompt' in answer)) throw new ExecutorchError('chat_template', 'The template engine answered without a prompt.');
    return answer;
  }

  private call(request: ChatTemplateRequest): ChatTemplateResponse {
    const engine = this.givenEngine ?? testEngine ?? getNativeExecutorch();
    return JSON.parse(engine.renderChatTemplate(JSON.stringify(request))) as ChatTemplateResponse;
  }
}

/** "UndefinedError: 'x' is undefined (template line 3, column 7)", as the C++ engine names errors. */
function describe(error: { readonly kind: string; readonly message: string; readonly line: number; readonly column: number }): string {
  const where = error.line > 0 ? ` (template line ${error.line}, column ${error.column})` : '';
  return `${error.kind}: ${error.message}${where}`;
}

function parseConfig(config: string | object): TokenizerConfig {
  try {
    return (typeof config === 'string' ? JSON.parse(config) : config) as TokenizerConfig;
  } catch (error) {
    throw new ExecutorchError(
      'chat_template',
      `tokenizer_config.json is not valid JSON: ${(error as Error).message}`,
      { cause: error },
    );
  }
}

/** The template of a tokenizer config: its `chat_template`, the one named "default" of several. */
function templateOf(config: TokenizerConfig): string | undefined {
  const raw = config.chat_template;
  return typeof raw === 'string' ? raw : (raw?.find((t) => t.name === 'default') ?? raw?.[0])?.template;
}

function specialTokensOf(config: TokenizerConfig): Record<string, string> {
  const specialTokens: Record<string, string> = {};
  for (const key of SPECIAL_TOKENS) {
    const text = tokenText(config[key]);
    if (text !== undefined) specialTokens[key] = text;
  }
  return specialTokens;
}
