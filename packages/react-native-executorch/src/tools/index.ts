export { parseToolCalls, type ParsedAnswer } from './parse';
export { fallbackToolInstruction, ToolPrompt } from './prompt';
export { DEFAULT_MAX_TOOL_ROUNDS, runToolRounds, type Generated, type GenerateRound, type ToolTurn } from './loop';
export { toolCallSchema } from './schema';
