import type { Message } from '../chat/template';
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
  readonly text: string;
  readonly interrupted: boolean;
}

/** Runs one call: the app's callback for a known tool, an error text for an unknown one. */
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
 * first generation a call of that tool (grammar-constrained).
 */
export async function runToolRounds(
  conversation: readonly Message[],
  generate: GenerateRound,
  config: ToolsConfig,
  maxRounds: number = DEFAULT_MAX_TOOL_ROUNDS,
): Promise<ToolTurn> {
  const added: Message[] = [];
  for (let round = 0; ; round++) {
    const forced = round === 0 ? forcedTool(config) : undefined;
    const { text, interrupted } = await generate([...conversation, ...added], forced);
    if (interrupted) return { answer: text, messages: [...added, { role: 'assistant', content: text }] };
    const { calls, content, errors } = parseToolCalls(text);
    if ((calls.length === 0 && errors.length === 0) || round + 1 >= maxRounds) {
      const answer: Message = { role: 'assistant', content };
      return { answer: content, messages: [...added, answer] };
    }
    added.push({ role: 'assistant', content, toolCalls: calls });
    const results: Message[] = errors.map((e) => ({ role: 'tool', content: `Error: ${e}.` }));
    for (const call of calls) {
      const result = await execute(call, config);
      if (result !== null) results.push({ role: 'tool', content: result });
    }
    if (results.length === 0) return { answer: content, messages: added };
    added.push(...results);
  }
}
