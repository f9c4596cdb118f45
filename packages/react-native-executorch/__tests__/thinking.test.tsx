/**
 * Thinking (`chatConfig.thinking`) on Gemma 4's real template: off by default, the thought
 * streamed apart from the answer, kept on the assistant message, dropped from later prompts by
 * the template, and a thought that never closes kept as a documented recovery. LLMModule and
 * useLLM on the fake native.
 */
import { act, renderHook, waitFor } from '@testing-library/react-native';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { LLMModule, models, useLLM, type ModelFiles } from '../src';
import { ThoughtSplitter } from '../src/chat/thought';
import { FakeNative } from '../src/testing/fakeNative';
import { nodeAdapters } from './support/nodeAdapters';

const GEMMA4 = join(__dirname, 'fixtures', 'gemma4');
const MARKERS = { open: '<|channel>thought\n', close: '<channel|>' };
const THINKING = ['<|chan', 'nel>thou', 'ght\nSky ', 'scatters', ' blue.<chan', 'nel|>', '\n', 'Rayleigh', ' scattering.'];

describe('ThoughtSplitter', () => {
  it('splits a streamed thought from the answer, markers cut across pieces included', () => {
    const splitter = new ThoughtSplitter(MARKERS);
    const pieces = THINKING.map((p) => splitter.push(p));
    expect(pieces.map((p) => p.thought).join('')).toBe('Sky scatters blue.');
    expect(pieces.map((p) => p.answer).join('')).toBe('Rayleigh scattering.');
    expect(splitter.finish()).toEqual({ answer: 'Rayleigh scattering.', thought: 'Sky scatters blue.', thoughtUnfinished: false });
  });

  it('passes an answer without a thought through (even one that starts like the marker)', () => {
    const splitter = new ThoughtSplitter(MARKERS);
    expect(['<|ch', 'at> hi'].map((p) => splitter.push(p).answer).join('')).toBe('<|chat> hi');
    expect(splitter.finish()).toEqual({ answer: '<|chat> hi', thought: '', thoughtUnfinished: false });
    const plain = new ThoughtSplitter(null);
    expect(plain.push('<|channel>thought\nx').answer).toBe('<|channel>thought\nx');
  });

  it('keeps a thought that never closes as the thought, with an empty answer', () => {
    const splitter = new ThoughtSplitter(MARKERS);
    splitter.push('<|channel>thought\nStill thinking <chan');
    expect(splitter.finish()).toEqual({ answer: '', thought: 'Still thinking <chan', thoughtUnfinished: true });
  });
});

describe('thinking through LLMModule and useLLM', () => {
  let dir: string;
  let files: ModelFiles;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rne-thinking-'));
    files = {
      modelPath: join(dir, 'model.pte'),
      tokenizerPath: join(dir, 'tokenizer.json'),
      chatTemplatePath: join(dir, 'chat_template.jinja'),
    };
    // The model names the .jinja file; its special tokens come from the config beside it.
    writeFileSync(files.chatTemplatePath, readFileSync(join(GEMMA4, 'gemma4.jinja')));
    writeFileSync(join(dir, 'tokenizer_config.json'), readFileSync(join(GEMMA4, 'tokenizer_config.json')));
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const thinker = (prompt: string) => (prompt.endsWith('<|turn>model\n') ? THINKING : ['Blue', '.']);

  async function loaded(answer: (prompt: string) => readonly string[] = thinker) {
    const native = new FakeNative({ answer, tokenIntervalMs: 1 });
    const llm = new LLMModule({ model: models.llm.smollm2_135m, localFiles: files, resources: nodeAdapters(dir), native });
    await llm.load();
    return { llm, native };
  }

  it('is off by default: the prompt ends with the empty thought channel, the answer streams as is', async () => {
    const { llm, native } = await loaded();
    const tokens: string[] = [];
    const thoughts: string[] = [];
    expect(await llm.sendMessage('Why is the sky blue?', { onToken: (t) => tokens.push(t), onThought: (t) => thoughts.push(t) })).toBe('Blue.');
    expect(native.prompts[0]).toBe('<bos><|turn>user\nWhy is the sky blue?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>');
    expect(tokens.join('')).toBe('Blue.');
    expect(thoughts).toEqual([]);
    expect(llm.messageHistory[1]).toEqual({ role: 'assistant', content: 'Blue.' });
  });

  it('on: <|think|> in the system turn, thought and answer streamed apart, history keeps both, next prompt drops the thought', async () => {
    const { llm, native } = await loaded();
    llm.configure({ chatConfig: { thinking: true, systemPrompt: 'Be brief.' } });
    const tokens: string[] = [];
    const thoughts: string[] = [];
    const answer = await llm.sendMessage('Why is the sky blue?', { onToken: (t) => tokens.push(t), onThought: (t) => thoughts.push(t) });
    expect(native.prompts[0]).toBe('<bos><|turn>system\n<|think|>Be brief.<turn|>\n<|turn>user\nWhy is the sky blue?<turn|>\n<|turn>model\n');
    expect(answer).toBe('Rayleigh scattering.');
    expect(tokens.join('')).toBe('Rayleigh scattering.');
    expect(thoughts.join('')).toBe('Sky scatters blue.');
    expect(llm.thought).toBe('Sky scatters blue.');
    expect(llm.thoughtUnfinished).toBe(false);
    expect(llm.messageHistory).toEqual([
      { role: 'user', content: 'Why is the sky blue?' },
      { role: 'assistant', content: 'Rayleigh scattering.', thought: 'Sky scatters blue.' },
    ]);
    await llm.sendMessage('Thanks');
    expect(native.prompts[1]).toContain('<|turn>model\nRayleigh scattering.<turn|>\n<|turn>user\nThanks<turn|>\n<|turn>model\n');
    expect(native.prompts[1]).not.toContain('Sky scatters');
  });

  it('a thought that never closes before the budget: empty answer, thought kept, thoughtUnfinished', async () => {
    const { llm } = await loaded(() => ['<|channel>thought\n', 'Hmm, ', 'let me see']);
    llm.configure({ chatConfig: { thinking: true } });
    expect(await llm.sendMessage('Hard question')).toBe('');
    expect(llm.thoughtUnfinished).toBe(true);
    expect(llm.messageHistory[1]).toEqual({ role: 'assistant', content: '', thought: 'Hmm, let me see' });
  });

  it('useLLM streams the thought into `thought` and the answer into `response`', async () => {
    const native = new FakeNative({ answer: thinker, tokenIntervalMs: 1 });
    const { result } = renderHook(() =>
      useLLM({ model: models.llm.smollm2_135m, localFiles: files, resources: nodeAdapters(dir), native, tokenBatchMs: 0 }),
    );
    await waitFor(() => expect(result.current.isReady).toBe(true));
    act(() => result.current.configure({ chatConfig: { thinking: true } }));
    let answer = '';
    await act(async () => {
      answer = await result.current.sendMessage('Why is the sky blue?');
    });
    expect(answer).toBe('Rayleigh scattering.');
    expect(result.current.response).toBe('Rayleigh scattering.');
    expect(result.current.thought).toBe('Sky scatters blue.');
    expect(result.current.messageHistory[1]).toEqual({ role: 'assistant', content: 'Rayleigh scattering.', thought: 'Sky scatters blue.' });
    // Thinking off again: the next answer has no thought.
    act(() => result.current.configure({ chatConfig: { thinking: false } }));
    await act(async () => {
      await result.current.sendMessage('Thanks');
    });
    expect(result.current.response).toBe('Blue.');
    expect(result.current.thought).toBe('');
  });
});
