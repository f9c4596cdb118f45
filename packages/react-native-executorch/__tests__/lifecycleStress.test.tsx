/**
 * The UI half of the lifecycle stress (the native half: e2e/lifecycle.stress.e2e.test.ts): a
 * seeded random sequence of mount, send, interrupt, unmount (often mid-generation) and remount
 * of a useLLM component, beside an LLMModule of the same fake native module whose sessions
 * (createSession) send, interrupt and are released. Every call settles with a value or an error
 * its contract allows, nothing is left unhandled, and at the end every native handle is
 * released. Prints the counts.
 */
import { act, renderHook, waitFor } from '@testing-library/react-native';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { ExecutorchError, LLMModule, models, useLLM, type ModelFiles } from '../src';
import { FakeNative } from '../src/testing/fakeNative';
import smolConfig from './fixtures/smollm2_tokenizer_config.json';
import { nodeAdapters } from './support/nodeAdapters';

const SEED = 60;
const STEPS = 300;

/** mulberry32: a small seeded generator, so a failure replays exactly. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

it('survives a seeded random UI lifecycle beside several sessions of one model', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rne-ui-stress-'));
  const files: ModelFiles = {
    modelPath: join(dir, 'model.pte'),
    tokenizerPath: join(dir, 'tokenizer.json'),
    chatTemplatePath: join(dir, 'tokenizer_config.json'),
  };
  writeFileSync(files.chatTemplatePath, JSON.stringify(smolConfig));
  const native = new FakeNative({ answer: () => Array.from({ length: 40 }, (_, i) => ` w${i}`), tokenIntervalMs: 1 });
  const smol = models.llm.smollm2_135m;
  const options = { model: smol, localFiles: files, resources: nodeAdapters(dir), native };
  const next = random(SEED);
  const counts = new Map<string, number>();
  const count = (what: string) => counts.set(what, (counts.get(what) ?? 0) + 1);
  const pending = new Set<Promise<void>>();
  /** Tracks `promise`: it must resolve, or reject with an ExecutorchError of `allowed`. */
  const settle = (op: string, promise: Promise<unknown>, allowed: readonly string[]) => {
    const tracked = promise.then(
      () => {
        count(`${op} ok`);
      },
      (error: unknown) => {
        if (!(error instanceof ExecutorchError) || !allowed.includes(error.code)) throw error;
        count(`${op} ${error.code}`);
      },
    );
    const entry = tracked.finally(() => pending.delete(entry));
    pending.add(entry);
  };

  const owner = new LLMModule(options);
  await owner.load();
  const sessions: LLMModule<typeof smol>[] = [];
  const mount = () => renderHook(() => useLLM(options));
  let hook: ReturnType<typeof mount> | null = null;

  for (let step = 0; step < STEPS; ++step) {
    const roll = next();
    if (roll < 0.45) {
      if (hook === null) {
        count('mount');
        hook = mount();
        continue;
      }
      const current = hook.result.current;
      if (roll < 0.25) {
        // Before the load finished, sendMessage is refused; while one runs, busy.
        act(() => settle('ui send', current.sendMessage('Go'), ['busy', 'model_not_loaded', 'released']));
      } else if (roll < 0.33) {
        count('ui interrupt');
        act(() => current.interrupt());
      } else {
        count('unmount');
        hook.unmount(); // often mid-generation or mid-load
        hook = null;
      }
    } else if (roll < 0.55) {
      if (sessions.length >= 3) continue;
      settle('createSession', owner.createSession().then((s) => void sessions.push(s)), []);
    } else if (roll < 0.8 && sessions.length > 0) {
      const session = sessions[Math.floor(next() * sessions.length)]!;
      settle('session send', session.sendMessage('Hello'), ['busy', 'released']);
    } else if (roll < 0.87 && sessions.length > 0) {
      count('session interrupt');
      sessions[Math.floor(next() * sessions.length)]!.interrupt();
    } else if (roll < 0.93 && sessions.length > 0) {
      count('session release');
      sessions.splice(Math.floor(next() * sessions.length), 1)[0]!.release();
    } else {
      count('await');
      await act(async () => {
        await Promise.all(pending);
      });
    }
  }
  hook?.unmount();
  sessions.forEach((s) => s.release());
  owner.release();
  await act(async () => {
    await Promise.all(pending);
  });
  // useLLM releases a model whose load was still in flight at unmount once the load finishes.
  await waitFor(() => expect(native.liveHandles()).toBe(0));
  rmSync(dir, { recursive: true, force: true });

  const summary = [...counts.entries()].sort(([a], [b]) => a.localeCompare(b));
  console.log(`UI stress (seed ${SEED}, ${STEPS} steps): ${summary.map(([k, v]) => `${k} ${v}`).join(', ')}`);
  expect(counts.get('ui send ok') ?? 0).toBeGreaterThan(3);
  expect(counts.get('session send ok') ?? 0).toBeGreaterThan(10);
  expect(counts.get('unmount') ?? 0).toBeGreaterThan(5);
}, 60000);
