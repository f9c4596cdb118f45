import type { JsonSchema } from '../llm/LLMModule';
import type { ToolDefinition } from '../llm/types';

/**
 * The JSON Schema of a call of `tool`: `{"name": "<its name>", "arguments": <valid for its
 * parameters>}`. Given as the generation's `responseFormat`, the runner's grammar-constrained
 * sampler makes the answer exactly such a call (the parser reads it as a bare JSON call).
 */
export function toolCallSchema(tool: ToolDefinition): JsonSchema {
  return {
    type: 'object',
    properties: { name: { const: tool.name }, arguments: tool.parameters },
    required: ['name', 'arguments'],
  };
}
