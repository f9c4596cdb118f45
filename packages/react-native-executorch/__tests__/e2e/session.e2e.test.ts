/**
 * Saved sessions end to end: LLMModule.saveSession / loadSession on the real SmolLM2 through the
 * Node-API addon (a new seam object plays the new process after the app was killed), and the
 * same flow on the fake native module. The restored conversation answers exactly as the
 * uninterrupted one; bad files and a load during a generation are refused and change nothing.
 * @jest-environment node
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import type { GenerationStats } from '../../src';
import { codeOf } from '../support/errorCode';
import { freshModules, hostSmollm2, TARGETS, type SeamTarget } from './support/targets';

const GREEDY = { temperature: 0, maxNewTokens: 16 } as const;
const FIRST = 'Name one colour.';
const SECOND = 'And one animal?';

const smol = hostSmollm2('rne-e2e-session-');

it('the real seam refuses a session load or save while a generation runs, as busy', async () => {
  const native = TARGETS.find((t) => t.real)!.create();
  const handle = await native.loadLLM({ modelPath: smol.files.modelPath, tokenizerPath: smol.files.tokenizerPath, backend: 'xnnpack' });
  const path = join(smol.docs, 'busy.session');
  await native.saveSession(handle, path, false, '');
  const config = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1, seed: 1, maxNewTokens: 8, stopStrings: [] };
  const running = native.generate(handle, 'Hello', config, () => {});
  const refusal = (call: () => Promise<unknown>) => call().then(() => 'resolved', (e: { code?: string }) => e.code);
  expect(await refusal(() => native.loadSession(handle, path))).toBe('busy');
  expect(await refusal(() => native.saveSession(handle, path, false, ''))).toBe('busy');
  expect((await running).generatedTokens).toBe(8); // the generation went on untouched
  expect((await native.loadSession(handle, path)).tokens).toBe(0);
  native.release(handle);
});

describe.each(TARGETS.map((t) => [t.name, t] as const))('Saved sessions on %s', (_, target: SeamTarget) => {
  const { modules, fresh } = freshModules(smol, target, GREEDY);

  it('continues a saved conversation in a new process exactly as if it never stopped', async () => {
    const whole = await fresh();
    await whole.sendMessage(FIRST);
    const uninterrupted = await whole.sendMessage(SECOND);
    const uninterruptedStats = whole.stats as GenerationStats;

    const before = await fresh();
    await before.sendMessage(FIRST);
    const path = join(smol.docs, 'chat.session');
    const saved = await before.saveSession(path);
    expect(saved.restored).toBe('cache');
    expect(saved.tokens).toBeGreaterThan(10);

    const after = await fresh();
    const loaded = await after.loadSession(path);
    expect(loaded).toMatchObject({ restored: 'cache', tokens: saved.tokens, fileBytes: saved.fileBytes });
    expect(after.messageHistory).toEqual(before.messageHistory);
    const answer = await after.sendMessage(SECOND);
    expect(after.messageHistory).toEqual(whole.messageHistory);
    if (target.real) {
      expect(answer).toBe(uninterrupted);
      // Only the new turn was prefilled: the rest came back from the file.
      const stats = after.stats as GenerationStats;
      expect(stats.promptTokens).toBe(uninterruptedStats.promptTokens);
      expect(stats.reusedTokens).toBe(uninterruptedStats.reusedTokens);
    }
  });

  it('forks a conversation at a message without prefilling the shared part again', async () => {
    const reference = await fresh();
    await reference.sendMessage(FIRST);
    const branchAnswer = await reference.sendMessage('And one fruit?');
    const referenceStats = reference.stats as GenerationStats;

    const llm = await fresh();
    await llm.sendMessage(FIRST);
    await llm.sendMessage(SECOND);
    const history = llm.messageHistory;
    expect(await codeOf(llm.fork(4, join(smol.docs, 'nowhere.session')))).toBe('invalid_argument');
    const path = join(smol.docs, 'branch.session');
    await llm.fork(1, path); // after the first answer
    expect(llm.messageHistory).toEqual(history); // the current conversation goes on unchanged

    const branch = await fresh();
    await branch.loadSession(path);
    expect(branch.messageHistory).toEqual(history.slice(0, 2));
    const answer = await branch.sendMessage('And one fruit?');
    if (target.real) {
      expect(answer).toBe(branchAnswer);
      // The first turn came from the copied cache: the branch prefilled at most what the
      // reference's second turn did (less where the longer conversation shares more with it).
      const stats = branch.stats as GenerationStats;
      expect(stats.promptTokens).toBeLessThanOrEqual(referenceStats.promptTokens);
      expect(stats.promptTokens + stats.reusedTokens).toBe(referenceStats.promptTokens + referenceStats.reusedTokens);
    }
  });

  it('refuses bad session files and a load during a generation, changing nothing', async () => {
    const other = await fresh();
    await other.sendMessage(FIRST);
    const good = join(smol.docs, 'good.session');
    await other.saveSession(good);
    const expected = await other.sendMessage(SECOND);

    const llm = await fresh();
    await llm.sendMessage(FIRST);
    const history = llm.messageHistory;
    expect(await codeOf(llm.loadSession(join(smol.docs, 'absent.session')))).toBe('not_found');
    if (target.real) {
      const bytes = readFileSync(good);
      const truncated = join(smol.docs, 'truncated.session');
      writeFileSync(truncated, bytes.subarray(0, bytes.length >> 1));
      const altered = join(smol.docs, 'altered.session');
      const flipped = Buffer.from(bytes);
      const middle = flipped.length >> 1;
      flipped.writeUInt8(flipped.readUInt8(middle) ^ 1, middle);
      writeFileSync(altered, flipped);
      const newer = join(smol.docs, 'newer.session');
      const future = Buffer.from(bytes);
      future.writeUInt32LE(2, 8);
      writeFileSync(newer, future);
      const directory = join(smol.docs, 'directory.session');
      mkdirSync(directory, { recursive: true });
      for (const bad of [truncated, altered, newer]) {
        expect(await codeOf(llm.loadSession(bad))).toBe('invalid_argument');
      }
      expect(await codeOf(llm.loadSession(directory))).toBe('not_found');
    }
    // A load while a generation runs is refused; the generation goes on as if it were not asked.
    const running = llm.sendMessage(SECOND);
    expect(await codeOf(llm.loadSession(good))).toBe('busy');
    const answer = await running;
    expect(llm.messageHistory).toEqual([...history, { role: 'user', content: SECOND }, { role: 'assistant', content: answer }]);
    if (target.real) expect(answer).toBe(expected);
  });
});
