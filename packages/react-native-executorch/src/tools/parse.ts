import type { ToolCallSyntax } from '../chat/template';
import type { ToolCall } from '../llm/types';
import { GEMMA4_CALL_OPEN } from '../chat/formats/gemma4';
import { gemma4CallBlocks, parseGemma4Call } from './gemma4';

/** What a model's answer holds: its tool calls, the text around them, and calls it botched. */
export interface ParsedAnswer {
  readonly calls: readonly ToolCall[];
  /** The answer without the tool-call markup, trimmed. */
  readonly content: string;
  /** One line per call that could not be read (bad JSON, no name), to tell the model. */
  readonly errors: readonly string[];
  /** Per entry of `errors`: the tool the unreadable call named, when it named one. */
  readonly errorTools?: readonly (string | undefined)[];
}

/** Hermes / Qwen 2.5 / our fallback: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`. */
const TAGGED_CALL = /<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/g;
/** Llama 3.x may open a bare JSON call with this token. */
const PYTHON_TAG = '<|python_tag|>';

type CallOrError = { call: ToolCall } | { error: string };

/** A call object as the formats write it: `arguments` (Hermes, Qwen) or `parameters` (Llama 3). */
function callFromValue(value: unknown): CallOrError {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { error: 'a tool call must be a JSON object {"name": ..., "arguments": {...}}' };
  }
  const { name, arguments: args, parameters } = value as Record<string, unknown>;
  if (typeof name !== 'string' || name === '') {
    return { error: 'a tool call needs a "name" string' };
  }
  let argumentsValue = args ?? parameters ?? {};
  // Some models write the arguments as a JSON string (OpenAI's wire format).
  if (typeof argumentsValue === 'string') {
    try {
      argumentsValue = JSON.parse(argumentsValue);
    } catch {
      return { error: `the arguments of "${name}" are not a JSON object` };
    }
  }
  if (typeof argumentsValue !== 'object' || argumentsValue === null || Array.isArray(argumentsValue)) {
    return { error: `the arguments of "${name}" are not a JSON object` };
  }
  return { call: { toolName: name, arguments: argumentsValue as Record<string, unknown> } };
}

function callsFromJson(text: string): CallOrError[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return [{ error: `not valid JSON (${(error as Error).message}): ${text.slice(0, 200)}` }];
  }
  return (Array.isArray(value) ? value : [value]).map(callFromValue);
}

function collect(results: readonly CallOrError[], content: string): ParsedAnswer {
  const calls: ToolCall[] = [];
  const errors: string[] = [];
  for (const result of results) {
    if ('call' in result) calls.push(result.call);
    else errors.push(result.error);
  }
  return { calls, content, errors };
}

/**
 * Reads the tool calls out of a model's answer, in the syntax its chat template teaches
 * ({@link ChatTemplate.toolCallSyntax}):
 * - `'gemma4'`: Gemma 4's `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>`, any
 *   number, with text around them (a last call the answer ended inside still counts). An answer
 *   without that markup is read as below, so a call forced as JSON (`toolChoice`) still counts;
 * - tagged (Hermes, Qwen 2.5, and our fallback): `<tool_call>{"name": "f", "arguments": {...}}</tool_call>`,
 *   any number, with text around them; a last tag the answer ended inside still counts;
 * - bare JSON (Llama 3.x): the whole answer is `{"name": "f", "parameters": {...}}` (or a list
 *   of such), optionally after `<|python_tag|>`.
 * An answer that is neither has no calls; its text is the content.
 */
export function parseToolCalls(answer: string, syntax: ToolCallSyntax = 'json'): ParsedAnswer {
  if (syntax === 'gemma4' && answer.includes(GEMMA4_CALL_OPEN)) return parseGemma4Answer(answer);
  const tagged = [...answer.matchAll(TAGGED_CALL)];
  if (tagged.length > 0) {
    const results = tagged.flatMap((match) => callsFromJson((match[1] as string).trim()));
    return collect(results, answer.replace(TAGGED_CALL, '').trim());
  }
  const trimmed = answer.trim();
  const bare = trimmed.startsWith(PYTHON_TAG) ? trimmed.slice(PYTHON_TAG.length).trim() : trimmed;
  if (/^[{[]/.test(bare) && /"name"\s*:/.test(bare) && /"(?:parameters|arguments)"\s*:/.test(bare)) {
    const results = callsFromJson(bare);
    // A JSON answer that is not a call (e.g. structured output) stays an answer.
    if (results.some((r) => 'call' in r)) return collect(results, '');
  }
  return { calls: [], content: answer, errors: [] };
}

function parseGemma4Answer(answer: string): ParsedAnswer {
  const { bodies, rest } = gemma4CallBlocks(answer);
  const calls: ToolCall[] = [];
  const errors: string[] = [];
  const errorTools: (string | undefined)[] = [];
  for (const body of bodies) {
    const result = parseGemma4Call(body);
    if ('call' in result) {
      calls.push(result.call);
    } else {
      errors.push(result.error);
      errorTools.push(result.toolName);
    }
  }
  return { calls, content: rest.trim(), errors, errorTools };
}
