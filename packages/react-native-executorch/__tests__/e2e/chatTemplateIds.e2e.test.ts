/**
 * The chat template rendered in TypeScript (@huggingface/jinja) gives the runner exactly the
 * token ids transformers' apply_chat_template(tokenize=True) gives, for SmolLM2's template as it
 * ships in the model's tokenizer_config.json. Reference ids: fixtures/make_chat_fixtures.py.
 * @jest-environment node
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { ChatTemplate, type Message } from '../../src';
import expected from '../fixtures/smollm2_chat_expected.json';
import { createRealNative, runnerTokenize, smollm2Files } from './support/realNative';

const REPO_ROOT = resolve(__dirname, '../../../..');
const files = smollm2Files();
const tokenizerPath = join(files.tokenizerDir, 'tokenizer.json');
const template = ChatTemplate.fromTokenizerConfig(readFileSync(join(files.tokenizerDir, 'tokenizer_config.json'), 'utf8'));

describe('SmolLM2 chat template: TypeScript rendering -> runner token ids', () => {
  it('the fixtures are what transformers produces today', () => {
    const script = join(__dirname, '../fixtures/make_chat_fixtures.py');
    // Throws (with the script's explanation on stderr) when they are stale.
    execFileSync(join(REPO_ROOT, '.venv/bin/python'), [script, '--check'], {
      cwd: REPO_ROOT,
      env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'tools') },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
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
