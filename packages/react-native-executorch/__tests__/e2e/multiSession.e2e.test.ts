/**
 * Several conversations over one loaded model end to end: LLMModule.createSession on the real
 * SmolLM2 through the Node-API addon, and the same flow on the fake native module. Each session
 * answers exactly as its conversation does alone, generations of different sessions run one at
 * a time in the order asked, and releasing one session leaves the others working.
 * @jest-environment node
 */
import { LLMModule, type GenerationStats } from '../../src';
import { codeOf } from '../support/errorCode';
import { freshModules, hostSmollm2, TARGETS, type SeamTarget } from './support/targets';

const GREEDY = { temperature: 0, maxNewTokens: 12 } as const;
const SCRIPTS = [
  ['Name one colour.', 'And one animal?'],
  ['What is 2 + 2?', 'And 3 + 3?'],
] as const;

const smol = hostSmollm2('rne-e2e-sessions-');

describe.each(TARGETS.map((t) => [t.name, t] as const))('Sessions of one model on %s', (_, target: SeamTarget) => {
  const { modules, fresh } = freshModules(smol, target, GREEDY);

  it('answers each conversation as it is answered alone, turns interleaved', async () => {
    const first = await fresh();
    const second = await first.createSession();
    modules.push(second);
    const sessions = [first, second];
    const answers: string[][] = [[], []];
    const stats: GenerationStats[][] = [[], []];
    // A1, B1, B2, A2: each session's cache must survive the other's turns.
    for (const [who, turn] of [[0, 0], [1, 0], [1, 1], [0, 1]] as const) {
      answers[who]!.push(await sessions[who]!.sendMessage(SCRIPTS[who]![turn]!));
      stats[who]!.push(sessions[who]!.stats as GenerationStats);
    }
    for (const who of [0, 1]) {
      const alone = await fresh();
      for (const [turn, message] of SCRIPTS[who]!.entries()) {
        const answer = await alone.sendMessage(message);
        if (!target.real) continue;
        expect(answers[who]![turn]).toBe(answer);
        // Only the new turn was prefilled: the session kept its own cache.
        expect(stats[who]![turn]!.reusedTokens).toBe((alone.stats as GenerationStats).reusedTokens);
      }
      expect(sessions[who]!.messageHistory).toEqual(alone.messageHistory);
    }
    if (target.real) expect(answers[0]![0]).not.toBe(answers[1]![0]);
  });

  it('runs the generations of two sessions one at a time, in the order asked', async () => {
    const first = await fresh();
    const second = await first.createSession();
    modules.push(second);
    const events: string[] = [];
    const a = first.sendMessage(SCRIPTS[0][0], { onToken: () => events.push('a') }).then(() => events.push('a done'));
    const b = second.sendMessage(SCRIPTS[1][0], { onToken: () => events.push('b') }).then(() => events.push('b done'));
    // The same session twice is busy; another session waits its turn.
    expect(await codeOf(first.sendMessage('again'))).toBe('busy');
    await Promise.all([a, b]);
    expect(events.filter((e) => e === 'a').length).toBeGreaterThan(0);
    expect(events.filter((e) => e === 'b').length).toBeGreaterThan(0);
    if (target.real) {
      // Never interleaved: every piece of the first generation before any of the second.
      expect(events.lastIndexOf('a')).toBeLessThan(events.indexOf('b'));
    }
  });

  it('keeps a session working when the module it came from is released', async () => {
    const first = await fresh();
    const second = await first.createSession();
    modules.push(second);
    const alone = await fresh();
    const expected = await alone.sendMessage(SCRIPTS[1][0]);
    first.release();
    expect(await codeOf(first.createSession())).toBe('released');
    const answer = await second.sendMessage(SCRIPTS[1][0]);
    if (target.real) expect(answer).toBe(expected);
    const third = await second.createSession(); // a session of a session: the same model
    modules.push(third);
    expect(third.messageHistory).toEqual([]);
    second.release();
    expect((await third.sendMessage(SCRIPTS[1][0])).length).toBeGreaterThan(0);
  });

  it('refuses a session before the model is loaded', async () => {
    const llm = new LLMModule({ model: smol.model, localFiles: smol.files, native: target.create(), resources: smol.fetcher() });
    modules.push(llm);
    expect(await codeOf(llm.createSession())).toBe('model_not_loaded');
  });
});
