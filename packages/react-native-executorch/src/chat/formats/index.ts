/**
 * What the SDK knows of a chat format beyond its Jinja template: the special tokens its parsers
 * read, where a turn with tool calls ends, and how a call is forced in the format's own syntax.
 * A template's format is found by rendering a call ({@link ChatTemplate.chatFormat}), never
 * from the model's name; `LLMModule` consults it through this interface alone.
 */
import type { ThoughtMarkers, ToolCallSyntax } from '../template';
import { GEMMA4_FORMAT } from './gemma4';

/** A thought channel's markers and the special tokens they are made of. */
export interface ThoughtChannel {
  readonly markers: ThoughtMarkers;
  /** The tokens the runner must keep in the streamed text for the thought splitter to see them. */
  readonly tokens: readonly string[];
}

/** How a format forces a call of one tool: the prompt opens the call, the model writes its arguments. */
export interface ForcedCallSyntax {
  /** The text the prompt ends with: the call's opening, as the template writes it. */
  opening(toolName: string): string;
  /** What closes the call after its arguments. */
  readonly closing: string;
  /** The arguments' syntax for the native grammar (`responseSyntax`). */
  readonly argumentSyntax: 'gemma4';
  /** Special tokens the arguments' text keeps (how the grammar quotes strings). */
  readonly keepSpecialTokens: readonly string[];
}

export interface ChatFormat {
  /** How the tool loop parses the model's calls. */
  readonly toolCallSyntax: ToolCallSyntax;
  /** Whether `rendered`, the template's rendering of a call of `toolName` with `{ n: 1 }`, is this format's. */
  writesCall(rendered: string, toolName: string): boolean;
  /** Special tokens the call parser reads: the runner keeps them in the text while tools are on. */
  readonly callTokens: readonly string[];
  /** Where the model's turn ends after its calls (the host writes what follows). */
  readonly callStops: readonly string[];
  /** A forced call in the format's own syntax, or null: forced as a JSON document instead. */
  readonly forcedCall: ForcedCallSyntax | null;
}

/** Every template without a syntax of its own: calls are JSON objects (in tags, or bare). */
export const JSON_FORMAT: ChatFormat = {
  toolCallSyntax: 'json',
  writesCall: () => true,
  callTokens: [],
  callStops: [],
  forcedCall: null,
};

/** The formats with a syntax of their own, tried in order before {@link JSON_FORMAT}. */
const NATIVE_FORMATS: readonly ChatFormat[] = [GEMMA4_FORMAT];

/** The format whose calls look like `rendered` (see {@link ChatFormat.writesCall}). */
export function formatWriting(rendered: string, toolName: string): ChatFormat {
  return NATIVE_FORMATS.find((format) => format.writesCall(rendered, toolName)) ?? JSON_FORMAT;
}

/** The thought channels templates may have, told apart by how an empty one ends a prompt. */
export const THOUGHT_CHANNELS: readonly ThoughtChannel[] = [GEMMA4_FORMAT.thought];
