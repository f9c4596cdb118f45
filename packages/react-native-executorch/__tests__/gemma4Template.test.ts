/**
 * Gemma 4's real chat templates (fixtures/gemma4/, with their provenance) rendered by
 * ChatTemplate (TypeScript, @huggingface/jinja with our Python-Jinja layer) equal transformers'
 * apply_chat_template byte for byte: system prompts, several turns, tools with nested / enum /
 * array parameters, tool calls and responses, thinking on and off, earlier thoughts, image /
 * audio / video parts, unicode, and the template's own errors. Fixtures written by
 * fixtures/make_gemma4_fixtures.py (which also records the token ids; the e2e suite compares
 * those with the runner's tokenizer).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import {
  ChatTemplate,
  ExecutorchError,
  MEDIA_PLACEHOLDERS,
  normalizeMessage,
  type Message,
  type MessageInput,
  type ToolDefinition,
} from '../src';
import expected from './fixtures/gemma4_chat_expected.json';

const GEMMA4 = join(__dirname, 'fixtures', 'gemma4');
const read = (name: string) => readFileSync(join(GEMMA4, name), 'utf8');

function template(name: string): ChatTemplate {
  return ChatTemplate.fromFiles({ chatTemplateJinja: read(name), tokenizerConfig: read('tokenizer_config.json') });
}

interface FixtureCase {
  readonly name: string;
  readonly messages: Record<string, unknown>[];
  readonly tools?: { function: ToolDefinition }[];
  readonly add_generation_prompt: boolean;
  readonly enable_thinking?: boolean;
  readonly prompt?: string;
  readonly error?: string;
}

const TEMPLATES = Object.keys(expected.templates);
const cases = Object.entries(expected.templates).flatMap(([file, list]) =>
  (list as unknown as FixtureCase[]).map((c) => [file, c.name, c] as const),
);

describe("Gemma 4's chat templates", () => {
  it('has the fixture set the issue asks for, on both templates', () => {
    expect(cases.length).toBe(38);
    expect(cases.filter(([, , c]) => c.error).length).toBe(4);
  });

  it.each(cases)('%s: %s renders exactly like transformers', (file, _, c) => {
    const render = () =>
      template(file).renderTemplateMessages(c.messages, {
        tools: c.tools?.map((t) => t.function),
        addGenerationPrompt: c.add_generation_prompt,
        thinking: c.enable_thinking,
      });
    if (c.error !== undefined) {
      expect(render).toThrow(ExecutorchError);
      expect(render).toThrow(expect.objectContaining({ code: 'chat_template' }));
    } else {
      expect(render()).toBe(c.prompt);
    }
  });

  it("renders the SDK's messages (parts, calls, thoughts) as the fixtures' template messages", () => {
    const byName = (file: string, name: string) => cases.find(([f, n]) => f === file && n === name)![2];
    const media = byName('gemma4.jinja', 'image, audio and video parts');
    const messages: Message[] = [
      {
        role: 'user',
        content: 'What is in this picture and this clip?',
        parts: [
          { type: 'image', path: '/photos/cat.jpg' },
          { type: 'text', text: '  What is in this picture and this clip?  ' },
          { type: 'audio', samples: new Float32Array(16_000) },
        ],
      },
      { role: 'assistant', content: 'A cat and a purr.', thought: 'look' },
      {
        role: 'user',
        content: 'And this?',
        parts: [{ type: 'text', text: 'And this?' }, { type: 'image', path: '/photos/dog.png' }],
      },
    ];
    // The fixture's first message also has a video part, which the SDK does not send.
    // (the template writes `\n\n<|video|>\n\n` for it).
    expect(template('gemma4.jinja').render(messages)).toBe(media.prompt!.replace('\n\n<|video|>\n\n', ''));
  });

  describe.each(TEMPLATES)('%s: media parts', (file) => {
    const fixture = cases.find(([f, n]) => f === file && n === 'image and audio parts with their files')![2];
    const samples = new Float32Array([0.25, -0.5, 0]);
    // The fixture's messages (transformers' form), in the SDK's: array content, one clip as samples.
    const messages: MessageInput[] = [
      { role: 'system', content: 'Describe what you are shown.' },
      { role: 'user', content: [{ type: 'image', path: '/photos/cat.jpg' }, { type: 'text', text: 'What is this?' }] },
      { role: 'assistant', content: 'A cat.' },
      {
        role: 'user',
        content: [
          { type: 'audio', path: '/clips/purr.wav' },
          { type: 'text', text: 'And this sound, with this one?' },
          { type: 'image', path: '/photos/dog.png' },
          { type: 'audio', samples },
        ],
      },
    ];

    it('renders like transformers', () => {
      expect(template(file).render(messages.map(normalizeMessage))).toBe(fixture.prompt);
    });

    it('puts each media part where its placeholder was, in order; the text around stays', () => {
      const parts = template(file).renderParts(messages.map(normalizeMessage));
      expect(parts.filter((p) => p.media)).toEqual([
        { media: 'image', path: '/photos/cat.jpg' },
        { media: 'audio', path: '/clips/purr.wav' },
        { media: 'image', path: '/photos/dog.png' },
        { media: 'audio', samples },
      ]);
      // Each media part back as its placeholder gives transformers' prompt byte for byte.
      const text = parts.map((p) => (p.media === undefined ? p.text : MEDIA_PLACEHOLDERS[p.media])).join('');
      expect(text).toBe(fixture.prompt);
      expect(parts.some((p) => p.text?.includes('<|image|>') || p.text?.includes('<|audio|>'))).toBe(false);
      // The template's `\n\n` around an image stay template text next to it.
      const first = parts.findIndex((p) => p.media === 'image');
      expect(parts[first - 1]).toEqual({ text: expect.stringMatching(/user\n\n\n$/) as string });
      expect(parts[first + 1]).toEqual({ text: '\n\n' });
      expect(parts.filter((p) => p.plain).map((p) => p.text)).toEqual([
        'Describe what you are shown.',
        'What is this?',
        'And this sound, with this one?',
      ]);
    });
  });

  it('finds the tool-call syntax and the thought channel by rendering, not by name', () => {
    const gemma4 = template('gemma4.jinja');
    expect(gemma4.supportsTools).toBe(true);
    expect(gemma4.toolCallSyntax).toBe('gemma4');
    expect(gemma4.thoughtChannel).toEqual({ open: '<|channel>thought\n', close: '<channel|>' });
    expect(template('google-gemma-4-31B-it-interleaved.jinja').toolCallSyntax).toBe('gemma4');
    const gemma3 = ChatTemplate.fromTokenizerConfig(readFileSync(join(__dirname, 'fixtures', 'gemma3_tokenizer_config.json'), 'utf8'));
    expect(gemma3.toolCallSyntax).toBe('json');
    expect(gemma3.thoughtChannel).toBeNull();
    const qwen = ChatTemplate.fromTokenizerConfig(
      readFileSync(join(__dirname, 'fixtures', 'tool_templates', 'qwen2_5_tokenizer_config.json'), 'utf8'),
    );
    expect(qwen.toolCallSyntax).toBe('json');
  });
});

describe('ChatTemplate.fromFiles (the way transformers finds a template)', () => {
  const withTemplate = JSON.stringify({ bos_token: '<s>', chat_template: 'CONFIG {{ bos_token }}' });

  it('prefers chat_template.jinja over tokenizer_config.json, whose special tokens it uses', () => {
    const t = ChatTemplate.fromFiles({ chatTemplateJinja: 'JINJA {{ bos_token }}', tokenizerConfig: withTemplate });
    expect(t.render([{ role: 'user', content: 'x' }])).toBe('JINJA <s>');
  });

  it("falls back to tokenizer_config.json's chat_template", () => {
    expect(ChatTemplate.fromFiles({ tokenizerConfig: withTemplate }).render([])).toBe('CONFIG <s>');
    expect(ChatTemplate.fromFiles({ chatTemplateJinja: null, tokenizerConfig: withTemplate }).render([])).toBe('CONFIG <s>');
  });

  it('refuses to guess without either file', () => {
    expect(() => ChatTemplate.fromFiles({})).toThrow(expect.objectContaining({ code: 'chat_template' }));
  });
});

describe('the Python-Jinja layer', () => {
  const render = (source: string, variables: Record<string, unknown> = {}) =>
    ChatTemplate.fromString(source).renderTemplateMessages([], { extra: variables, addGenerationPrompt: false });

  it('prints none and booleans as Python does', () => {
    expect(render('{{ none }}|{{ x }}|{{ true }}|{{ y }}|{{ z }}', { x: null, y: false })).toBe('None|None|True|False|');
  });

  it('select / reject with and without tests, map with a filter name, upper of a list and a dict', () => {
    expect(render("{{ ['a', 'null', 'b'] | reject('equalto', 'null') | list | join(',') }}")).toBe('a,b');
    expect(render("{{ [0, 1, '', 'x'] | select | list | length }}")).toBe('2');
    expect(render("{{ [1, 2, 3] | select('odd') | list | length }}")).toBe('2');
    expect(render("{{ ['a', 'b'] | map('upper') | list | join('-') }}")).toBe('A-B');
    expect(render("{{ ['string', 'null'] | upper }}")).toBe("['STRING', 'NULL']");
    expect(render("{{ {'k': [1, none, true, \"it's\"]} | upper }}")).toBe(`{'K': [1, NONE, TRUE, "IT'S"]}`);
  });

  it('raises on an attribute of an undefined value, as Python does, but not on an undefined one', () => {
    expect(render("{{ x['a'] is defined }}", { x: {} })).toBe('False');
    expect(() => render("{{ x['a']['b'] }}", { x: {} })).toThrow(expect.objectContaining({ code: 'chat_template' }));
  });

  it('gives raise_exception, range and strftime_now', () => {
    expect(() => render("{{ raise_exception('nope') }}")).toThrow(/nope/);
    expect(render('{% for i in range(3) %}{{ i }}{% endfor %}')).toBe('012');
    expect(render("{{ strftime_now('%Y') }}")).toBe(String(new Date().getFullYear()));
  });
});
