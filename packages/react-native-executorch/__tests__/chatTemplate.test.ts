import { ChatTemplate, ExecutorchError, type Message } from '../src';
import expected from './fixtures/smollm2_chat_expected.json';
import smolConfig from './fixtures/smollm2_tokenizer_config.json';

describe('ChatTemplate', () => {
  it.each(expected.cases.map((c, i) => [i, c] as const))(
    "renders SmolLM2's template exactly like transformers (case %i)",
    (_, { messages, prompt }) => {
      const template = ChatTemplate.fromTokenizerConfig(JSON.stringify(smolConfig));
      expect(template.render(messages as Message[])).toBe(prompt);
    },
  );

  it('omits the assistant header without addGenerationPrompt', () => {
    const template = ChatTemplate.fromTokenizerConfig(smolConfig);
    const text = template.render([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: false });
    expect(text.endsWith('Hi<|im_end|>\n')).toBe(true);
  });

  it('picks the default of several named templates and resolves AddedToken special tokens', () => {
    const template = ChatTemplate.fromTokenizerConfig({
      bos_token: { content: '<bos>', lstrip: false },
      chat_template: [
        { name: 'tool_use', template: 'TOOLS' },
        {
          name: 'default',
          template:
            "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n{% endfor %}" +
            '{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}',
        },
      ],
    });
    expect(template.render([{ role: 'user', content: 'Hi' }])).toBe(
      '<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n',
    );
  });

  it('reports a template that raises as a chat_template error', () => {
    const template = ChatTemplate.fromString(
      "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}",
    );
    expect(() => template.render([{ role: 'system', content: 'x' }])).toThrow(
      expect.objectContaining({ code: 'chat_template', message: expect.stringContaining('System role not supported') }),
    );
  });

  it('explains a config without a chat template and a malformed one', () => {
    expect(() => ChatTemplate.fromTokenizerConfig({ bos_token: '<s>' })).toThrow(
      expect.objectContaining({ code: 'chat_template', message: expect.stringContaining('no `chat_template`') }),
    );
    expect(() => ChatTemplate.fromTokenizerConfig('{not json')).toThrow(ExecutorchError);
    expect(() => ChatTemplate.fromString('{% for %}')).toThrow(
      expect.objectContaining({ code: 'chat_template' }),
    );
  });
});
