/**
 * Lifecycle under stress, on the real runner through the Node-API addon: a seeded random
 * sequence of generate, interrupt, reset, countTokens, session save/load (good, missing and
 * another model's files), release and reload, over two models at once (the tiny Gemma 4 twice
 * and SmolLM2), and further sessions of a loaded model (createSession) used and released like
 * the models. Every call must settle with a value or one of the errors its contract allows; the
 * run must end (no hang), and after every model is released the process's resident memory must
 * be back near where it was after the first load and release. Prints the counts.
 * @jest-environment node
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { NativeExecutorch, NativeGenerationConfig, NativeModelHandle } from '../../src';
import { createRealNative, smollm2Files } from './support/realNative';
import { gemma4Files } from './support/gemma4';

const SEED = 60;
const STEPS = 2000;
const PLATFORM = { os: 'android', isSimulator: false, osVersion: '34' } as const;
const MiB = 2 ** 20;

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

function residentBytes(): number {
  const status = readFileSync('/proc/self/status', 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

interface Slot {
  readonly options: { modelPath: string; tokenizerPath: string; backend: 'xnnpack' };
  readonly model: string;
  handle: NativeModelHandle | null;
  /** A session of another slot's model (createSession): released for good, never reloaded. */
  readonly session?: boolean;
}

/** Sessions alive at once at most: each holds its own KV cache (SmolLM2's: about 90 MiB). */
const MAX_SESSIONS = 3;

it('survives a seeded random lifecycle of two models, sessions included', async () => {
  const docs = mkdtempSync(join(tmpdir(), 'rne-stress-'));
  const native: NativeExecutorch = createRealNative(PLATFORM);
  const gemma = gemma4Files();
  const smol = smollm2Files();
  const tiny = { modelPath: gemma.pte, tokenizerPath: gemma.tokenizer, backend: 'xnnpack' as const };
  const slots: Slot[] = [
    { options: tiny, model: 'gemma', handle: null },
    { options: tiny, model: 'gemma', handle: null },
    {
      options: { modelPath: smol.pte, tokenizerPath: join(smol.tokenizerDir, 'tokenizer.json'), backend: 'xnnpack' },
      model: 'smollm2',
      handle: null,
    },
  ];
  // The baseline: one load and release of each model, so the allocator and the runtime's
  // one-time state are warm.
  for (const slot of slots.slice(1)) native.release(await native.loadLLM(slot.options));
  const baseline = residentBytes();

  const next = random(SEED);
  const pick = <T,>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const counts = new Map<string, number>();
  const count = (what: string): void => {
    counts.set(what, (counts.get(what) ?? 0) + 1);
  };
  const pending = new Set<Promise<void>>();
  /** Tracks `promise`: it must resolve, or reject with one of `allowed`. */
  const settle = (op: string, promise: Promise<unknown>, allowed: readonly string[]) => {
    const tracked = promise.then(
      () => count(`${op} ok`),
      (error: { code?: string; message?: string }) => {
        if (!allowed.includes(error.code ?? '')) {
          throw new Error(`${op} rejected with ${error.code}: ${error.message}`);
        }
        count(`${op} ${error.code}`);
      },
    );
    const entry = tracked.finally(() => pending.delete(entry));
    pending.add(entry);
    return entry;
  };
  /** A synchronous call that may throw one of `allowed`. */
  const call = (op: string, body: () => unknown, allowed: readonly string[]) => {
    try {
      body();
      count(`${op} ok`);
    } catch (error) {
      const code = (error as { code?: string }).code ?? '';
      if (!allowed.includes(code)) throw error;
      count(`${op} ${code}`);
    }
  };
  const config = (): NativeGenerationConfig => ({
    temperature: next() < 0.5 ? 0 : 0.8,
    topK: 0,
    topP: 1,
    minP: 0,
    repetitionPenalty: 1,
    seed: Math.floor(next() * 1000),
    maxNewTokens: 1 + Math.floor(next() * 6),
    stopStrings: [],
  });
  const words = ['hello', 'the', 'session', 'cache', 'fork', 'stress', 'model', 'again'];
  const prompt = () => Array.from({ length: 1 + Math.floor(next() * 12) }, () => pick(words)).join(' ');
  const files = [0, 1, 2].map((i) => join(docs, `s${i}.session`));

  for (let step = 0; step < STEPS; ++step) {
    const slot = pick(slots);
    if (slot.handle === null) {
      // Not loaded (or released): load it, waiting for it as an app's await would.
      count('loadLLM');
      slot.handle = await native.loadLLM(slot.options);
      continue;
    }
    const handle = slot.handle;
    const roll = next();
    if (roll < 0.3) {
      settle('generate', native.generate(handle, prompt(), config(), () => {}), ['busy', 'context_full']);
    } else if (roll < 0.4) {
      call('interrupt', () => native.interrupt(handle), []);
    } else if (roll < 0.5) {
      call('reset', () => native.reset(handle), ['busy']);
    } else if (roll < 0.58) {
      call('countTokens', () => native.countTokens(handle, prompt()), []);
    } else if (roll < 0.7) {
      settle('saveSession', native.saveSession(handle, pick(files), next() < 0.3, 'stress'), ['busy']);
    } else if (roll < 0.82) {
      // A file may be missing, another model's, or being replaced by a save right now (the
      // rename is atomic: the old file or the new one, never half).
      settle('loadSession', native.loadSession(handle, pick(files)), ['busy', 'not_found', 'invalid_argument']);
    } else if (roll < 0.85) {
      call('release', () => native.release(handle), []);
      slot.handle = null;
      if (slot.session) slots.splice(slots.indexOf(slot), 1);
      // A released handle is refused, however soon it is used again.
      settle('generate released', native.generate(handle, 'hi', config(), () => {}), ['invalid_argument']);
    } else if (roll < 0.9) {
      if (slots.filter((s) => s.session).length >= MAX_SESSIONS) continue;
      // Resolves once the worker reaches it: the model may have been released by then.
      const created = native.createSession(handle).then((session) => {
        slots.push({ options: slot.options, model: slot.model, handle: session, session: true });
      });
      settle('createSession', created, ['invalid_argument']);
    } else {
      // Let the queued work drain now and then, as an app awaiting its calls does.
      count('await');
      await Promise.all(pending);
    }
  }
  await Promise.all(pending);
  for (const slot of slots) if (slot.handle !== null) native.release(slot.handle);
  // The worker frees a released model once its queued work has run: a round trip through a
  // fresh load and release waits for that.
  native.release(await native.loadLLM(slots[0]!.options));
  global.gc?.();
  const after = residentBytes();
  rmSync(docs, { recursive: true, force: true });

  const summary = [...counts.entries()].sort(([a], [b]) => a.localeCompare(b));
  console.log(
    `stress (seed ${SEED}, ${STEPS} steps): ${summary.map(([k, v]) => `${k} ${v}`).join(', ')}; ` +
      `resident ${(baseline / MiB).toFixed(0)} MiB before, ${(after / MiB).toFixed(0)} MiB after`,
  );
  expect(counts.get('generate ok')).toBeGreaterThan(50);
  expect(counts.get('loadSession ok')).toBeGreaterThan(5);
  expect(counts.get('createSession ok')).toBeGreaterThan(5);
  // A model left loaded would show: SmolLM2 holds about 600 MiB, the tiny Gemma 4 about 200.
  expect(after - baseline).toBeLessThan(128 * MiB);
}, 300000);
