/**
 * Tool prompts rendered by ChatTemplate (TypeScript, @huggingface/jinja) equal transformers'
 * apply_chat_template(messages, tools=..., add_generation_prompt=True, tokenize=False) byte for
 * byte, on real templates (fixtures written by tests/chat/test_tool_templates.py, which also checks
 * they are what transformers renders today).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { ChatTemplate, type Message, type ToolDefinition } from '../src';
import expected from './fixtures/tool_templates/tool_chat_expected.json';

interface OpenAiTool {
  readonly function: ToolDefinition;
}
interface OpenAiMessage {
  readonly role: Message['role'];
  readonly content: string;
  readonly tool_calls?: readonly { function: { name: string; arguments: Record<string, unknown> } }[];
}

function template(file: string): ChatTemplate {
  return ChatTemplate.fromTokenizerConfig(readFileSync(join(__dirname, 'fixtures', file), 'utf8'));
}

/** The fixture's OpenAI-style messages as the SDK's messages. */
function toMessage({ role, content, tool_calls }: OpenAiMessage): Message {
  const toolCalls = tool_calls?.map((c) => ({ toolName: c.function.name, arguments: c.function.arguments }));
  return toolCalls ? { role, content, toolCalls } : { role, content };
}

const templates = Object.entries(expected.templates);
const cases = templates.flatMap(([name, t]) => t.cases.map((c, i) => [name, i, t.file, c] as const));

describe('tool prompts of real chat templates', () => {
  it.each(templates.map(([name, t]) => [name, t.supports_tools, t.file] as const))(
    '%s: supportsTools is %s, as transformers renders it',
    (_, supports, file) => {
      expect(template(file).supportsTools).toBe(supports);
    },
  );

  it.each(cases)('%s case %i renders exactly like transformers', (_, __, file, c) => {
    const tools = (c.tools as unknown as OpenAiTool[]).map((t) => t.function);
    const messages = (c.messages as unknown as OpenAiMessage[]).map(toMessage);
    expect(template(file).render(messages, { tools, extra: expected.extra })).toBe(c.prompt);
  });

  it("prints today's date in Llama 3.x prompts, as transformers' strftime_now does", () => {
    const llama = template(expected.templates.llama3_2.file);
    const today = new Date();
    const month = today.toLocaleString('en-US', { month: 'short' });
    const date = `${String(today.getDate()).padStart(2, '0')} ${month} ${today.getFullYear()}`;
    expect(llama.render([{ role: 'user', content: 'Hi' }])).toContain(`Today Date: ${date}\n`);
  });
});
