import { templateMessage, type ChatTemplate, type Message, type RenderOptions } from '../chat/template';
import { mediaOf, spliceMedia } from '../chat/media';
import type { ToolCall, ToolDefinition } from '../llm/types';
import type { PromptPart } from '../native/seam';

/**
 * The fallback format for templates that do not render tools (SmolLM2, Gemma 3): this text,
 * appended to the system prompt, lists the tools and asks for calls in the tagged form
 * {@link parseToolCalls} reads. Calls and results then travel as plain assistant / user text.
 */
export function fallbackToolInstruction(tools: readonly ToolDefinition[]): string {
  const signatures = tools.map((tool) =>
    JSON.stringify({ name: tool.name, description: tool.description, parameters: tool.parameters }),
  );
  return (
    '# Tools\n\nYou may call one or more of these tools to answer the user:\n<tools>\n' +
    `${signatures.join('\n')}\n</tools>\n\n` +
    'To call a tool, answer with nothing but one line per call:\n' +
    '<tool_call>{"name": <tool-name>, "arguments": <arguments-json-object>}</tool_call>\n' +
    'The results come back inside <tool_response></tool_response>; then answer the user.'
  );
}

/** A tool call as the fallback format writes it (and as the model is asked to). */
export function fallbackCallText(call: ToolCall): string {
  return `<tool_call>${JSON.stringify({ name: call.toolName, arguments: call.arguments })}</tool_call>`;
}

/** Tool results as the fallback format feeds them back: one user turn. */
function fallbackResultsText(results: readonly Message[]): string {
  return results.map((r) => `<tool_response>\n${r.content}\n</tool_response>`).join('\n');
}

/**
 * The conversation in the fallback format: the instruction joins the system prompt (or becomes
 * it), calls become assistant text, and each run of tool results one user message, so templates
 * that only know system/user/assistant (and those that insist on alternating) accept it.
 */
export function toFallbackMessages(
  messages: readonly Message[],
  tools: readonly ToolDefinition[],
): Message[] {
  const instruction = fallbackToolInstruction(tools);
  const [first, ...rest] = messages;
  const head: Message =
    first?.role === 'system'
      ? { role: 'system', content: `${first.content}\n\n${instruction}` }
      : { role: 'system', content: instruction };
  const body = first?.role === 'system' ? rest : messages;
  const out: Message[] = [head];
  let pendingResults: Message[] = [];
  const flushResults = () => {
    if (pendingResults.length) out.push({ role: 'user', content: fallbackResultsText(pendingResults) });
    pendingResults = [];
  };
  for (const message of body) {
    if (message.role === 'tool') {
      pendingResults.push(message);
      continue;
    }
    flushResults();
    if (message.role === 'assistant' && message.toolCalls?.length) {
      const calls = message.toolCalls.map(fallbackCallText).join('\n');
      out.push({ role: 'assistant', content: message.content ? `${message.content}\n${calls}` : calls });
    } else {
      out.push({ role: message.role, content: message.content });
    }
  }
  flushResults();
  return out;
}

/**
 * A tool's result as Gemma 4's template takes it (`response:NAME{...}`): a result that is a JSON
 * object is given as that object (its fields become the response's), anything else as its text
 * (`response:NAME{value:<|"|>text<|"|>}`).
 */
function gemma4Response(result: Message): Record<string, unknown> {
  let response: unknown = result.content;
  try {
    const parsed: unknown = JSON.parse(result.content);
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) response = parsed;
  } catch {
    // Plain text stays text.
  }
  return result.toolName ? { name: result.toolName, response } : { response };
}

/**
 * The conversation in Gemma 4's own tool form: the tool results after an assistant message
 * with calls become that message's `tool_responses`, and an answer that follows them joins it as
 * its content, so the template renders one model turn
 * `<|tool_call>...<tool_call|><|tool_response>...<tool_response|>answer<turn|>`, as the model
 * wrote it. (Gemma 4's template has no `tool` role.) A result with no call before it is given to
 * the model as a user turn holding the response.
 */
export function toGemma4Messages(messages: readonly Message[]): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  // The assistant message whose calls the next results answer, and whether an answer joined it.
  let open: { message: Record<string, unknown>; responses: Record<string, unknown>[] } | null = null;
  for (const message of messages) {
    if (message.role === 'tool') {
      if (open === null) {
        const responses: Record<string, unknown>[] = [];
        open = { message: { role: 'user', content: '', tool_responses: responses }, responses };
        out.push(open.message);
      }
      open.responses.push(gemma4Response(message));
      continue;
    }
    const answersOpen =
      open !== null && open.responses.length > 0 && message.role === 'assistant' && !message.toolCalls?.length;
    if (answersOpen && open !== null && !open.message.content) {
      open.message.content = message.content;
      if (message.thought && !open.message.reasoning_content) open.message.reasoning_content = message.thought;
      open = null;
      continue;
    }
    const rendered = templateMessage(message);
    out.push(rendered);
    open = null;
    if (message.role === 'assistant' && message.toolCalls?.length) {
      const responses: Record<string, unknown>[] = [];
      rendered.tool_responses = responses;
      open = { message: rendered, responses };
    }
  }
  for (const message of out) {
    if (Array.isArray(message.tool_responses) && message.tool_responses.length === 0) delete message.tool_responses;
  }
  return out;
}

/**
 * Renders conversations that offer `tools`: through the model's own chat template when it
 * renders tools (its `tools` variable, `tool_calls` on assistant messages, `tool` messages; in
 * Gemma 4's own form for its templates), else in the fallback format. Either way the answer is
 * read by {@link parseToolCalls} in the template's {@link ChatTemplate.toolCallSyntax}.
 */
export class ToolPrompt {
  /** True when the model's own template renders the tools. */
  readonly native: boolean;

  constructor(
    private readonly template: ChatTemplate,
    readonly tools: readonly ToolDefinition[],
  ) {
    this.native = template.supportsTools;
  }

  render(messages: readonly Message[], options: Omit<RenderOptions, 'tools'> = {}): string {
    return this.template.renderTemplateMessages(...this.templateInput(messages, options));
  }

  /**
   * {@link render} in parts ({@link ChatTemplate.renderTemplateMessagesParts}), media
   * placeholders replaced by the media parts ({@link spliceMedia}).
   */
  renderParts(messages: readonly Message[], options: Omit<RenderOptions, 'tools'> = {}): PromptPart[] {
    return spliceMedia(this.template.renderTemplateMessagesParts(...this.templateInput(messages, options)), mediaOf(messages));
  }

  /** The messages, in the form the template reads, and the options it renders them with. */
  private templateInput(
    messages: readonly Message[],
    options: Omit<RenderOptions, 'tools'>,
  ): [Record<string, unknown>[], RenderOptions] {
    if (!this.native) return [toFallbackMessages(messages, this.tools).map(templateMessage), options];
    const withTools = { ...options, tools: this.tools };
    if (this.template.toolCallSyntax === 'gemma4') return [toGemma4Messages(messages), withTools];
    return [messages.map(templateMessage), withTools];
  }
}
