export { parseToolCalls, type ParsedAnswer } from './parse';
export { fallbackToolInstruction, ToolPrompt } from './prompt';
export { DEFAULT_MAX_TOOL_ROUNDS, runToolRounds, type ToolTurn } from './loop';
