import type { Message, ToolCallSyntax } from '../chat/template';
import type { ToolCall, ToolDefinition, ToolsConfig } from '../llm/types';
import { parseToolCalls } from './parse';

/** Rounds of (answer, run its tool calls) after which the last answer stands, calls or not. */
export const DEFAULT_MAX_TOOL_ROUNDS = 4;

/** The outcome of {@link runToolRounds}. */
export interface ToolTurn {
  /** The model's final answer (tool-call markup removed). */
  readonly answer: string;
  /**
   * Every message the turn added, in order: assistant messages with their `toolCalls`, the
   * `tool` results, and the final assistant answer (last).
   */
  readonly messages: readonly Message[];
}

/**
 * Generates the next answer to `messages`; with `forcedTool`, the answer must be a call of that
 * tool, `{"name": ..., "arguments": ...}` with arguments valid for its schema
 * ({@link toolCallSchema}, enforced while sampling).
 */
export type GenerateRound = (messages: readonly Message[], forcedTool?: ToolDefinition) => Promise<Generated>;

/** The tool `config.toolChoice` forces on the first round, if any. */
function forcedTool(config: ToolsConfig): ToolDefinition | undefined {
  const choice = config.toolChoice;
  return choice && choice !== 'auto' ? config.tools.find((tool) => tool.name === choice.name) : undefined;
}

/** One generation: its text, and whether it was interrupted (which ends the turn). */
export interface Generated {
  /** The answer (a thinking model's thought excluded). */
  readonly text: string;
  readonly interrupted: boolean;
  /** A thinking model's thought before the answer, kept on the assistant message. */
  readonly thought?: string;
}

/** An assistant message with its thought, when there was one. */
function assistant(content: string, thought: string | undefined, toolCalls?: readonly ToolCall[]): Message {
  return {
    role: 'assistant',
    content,
    ...(toolCalls ? { toolCalls } : {}),
    ...(thought ? { thought } : {}),
  };
}

/**
 * Runs one call: the app's callback for a known tool; for an unknown one, an error result
 * naming the tools there are, so the model can correct itself (the app's callback is not called).
 */
async function execute(call: ToolCall, config: ToolsConfig): Promise<string | null> {
  if (!config.tools.some((tool) => tool.name === call.toolName)) {
    const names = config.tools.map((tool) => tool.name).join(', ');
    return `Error: there is no tool named "${call.toolName}". Available tools: ${names}.`;
  }
  return config.executeToolCallback(call);
}

/**
 * Generates an answer to `conversation`; while it calls tools, runs them through
 * `config.executeToolCallback`, appends the calls and their results (`tool` messages) and
 * generates again, at most `maxRounds` times. A callback result of null adds no message; a round
 * whose calls all return null ends the turn (there is nothing new to tell the model), and so does
 * an interrupted generation (its calls are not run). Calls the parser could not read are answered
 * with an error result so the model can correct itself. `config.toolChoice` `{ name }` makes the
 * first generation a call of that tool (grammar-constrained). Answers are read in `syntax`, the
 * chat template's ({@link ChatTemplate.toolCallSyntax}); each result names its tool.
 */
export async function runToolRounds(
  conversation: readonly Message[],
  generate: GenerateRound,
  config: ToolsConfig,
  maxRounds: number = DEFAULT_MAX_TOOL_ROUNDS,
  syntax: ToolCallSyntax = 'json',
): Promise<ToolTurn> {
  const added: Message[] = [];
  for (let round = 0; ; round++) {
    const forced = round === 0 ? forcedTool(config) : undefined;
    const { text, interrupted, thought } = await generate([...conversation, ...added], forced);
    if (interrupted) return { answer: text, messages: [...added, assistant(text, thought)] };
    const { calls, content, errors, errorTools } = parseToolCalls(text, syntax);
    if ((calls.length === 0 && errors.length === 0) || round + 1 >= maxRounds) {
      return { answer: content, messages: [...added, assistant(content, thought)] };
    }
    added.push(assistant(content, thought, calls));
    const results: Message[] = errors.map((e, i) => {
      const toolName = errorTools?.[i];
      return { role: 'tool', content: `Error: ${e}.`, ...(toolName ? { toolName } : {}) };
    });
    for (const call of calls) {
      const result = await execute(call, config);
      if (result !== null) results.push({ role: 'tool', content: result, toolName: call.toolName });
    }
    if (results.length === 0) return { answer: content, messages: added };
    added.push(...results);
  }
}
