import type { ChatTemplate, Message } from '../chat/template';
import type { ToolCall, ToolDefinition } from '../llm/types';

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
 * Renders conversations that offer `tools`: through the model's own chat template when it
 * renders tools (its `tools` variable, `tool_calls` on assistant messages, `tool` messages),
 * else in the fallback format. Either way the answer is read by {@link parseToolCalls}.
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

  render(messages: readonly Message[]): string {
    if (this.native) return this.template.render(messages, { tools: this.tools });
    return this.template.render(toFallbackMessages(messages, this.tools));
  }
}
