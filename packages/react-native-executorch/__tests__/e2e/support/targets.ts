/**
 * The two implementations of the native seam every e2e suite runs against: the real runner
 * (through the Node-API addon) and the fake native module the unit tests use. A test that
 * passes on both shows the fake behaves like the binding for what that test checks.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { models, type LLMDescriptor, type NativeExecutorch, type NativePlatformInfo } from '../../../src';
import { FakeNative } from '../../../src/testing/fakeNative';
import { sha256, type HfServer } from '../../support/hfServer';
import { checkModelFiles } from './modelFiles';
import { createRealNative, smollm2Files, type Smollm2Files } from './realNative';

const PLATFORM: NativePlatformInfo = { os: 'android', isSimulator: false, osVersion: '34' };
/** SmolLM2's vocabulary and the KV capacity of the fp32 export (the registry's maxContext). */
const SMOLLM2_VOCAB = 49152;
export const SMOLLM2_MAX_CONTEXT = models.llm.smollm2_135m.variants.xnnpack.maxContext;

/** A fake answer long enough to interrupt: words spread over many pieces. */
function fakeAnswer(): string[] {
  const words = 'The capital of France is Paris, a city on the Seine known for its museums and cafes.';
  return Array.from({ length: 6 }, () => words.split(/(?= )/)).flat();
}

export interface SeamTarget {
  readonly name: string;
  /** True for the C++ runner: model-quality checks (the Paris answer) apply only there. */
  readonly real: boolean;
  create(): NativeExecutorch;
}

export const TARGETS: readonly SeamTarget[] = [
  { name: 'the real runner (Node-API addon)', real: true, create: () => createRealNative(PLATFORM) },
  {
    name: 'the fake native module',
    real: false,
    create: () =>
      new FakeNative({
        os: PLATFORM.os,
        answer: fakeAnswer,
        tokenIntervalMs: 3,
        checkLoad: (load) => checkModelFiles(load, SMOLLM2_VOCAB),
        maxContext: SMOLLM2_MAX_CONTEXT,
      }),
  },
];

export { smollm2Files, type Smollm2Files };

/** Serves the real SmolLM2 files on `server` and returns a registry entry with their sha256. */
export function publishSmollm2(
  server: HfServer,
  files: Smollm2Files,
  repo = 'e2e/smollm2',
  revision = 'fp32',
): LLMDescriptor<'xnnpack'> {
  const entries = [
    ['xnnpack/smollm2.pte', readFileSync(files.pte)],
    ['tokenizer.json', readFileSync(join(files.tokenizerDir, 'tokenizer.json'))],
    ['tokenizer_config.json', readFileSync(join(files.tokenizerDir, 'tokenizer_config.json'))],
  ] as const;
  for (const [path, body] of entries) server.add(repo, revision, path, { body });
  const [pte, tokenizer, config] = entries.map(([path, body]) => ({
    path,
    sha256: sha256(body),
    size: body.length,
  }));
  const smol = models.llm.smollm2_135m;
  return {
    ...smol,
    hf: { repo, revision },
    tokenizer: { status: 'published', chatTemplate: 'tokenizer_config.json', files: [tokenizer!, config!] },
    variants: {
      xnnpack: { ...smol.variants.xnnpack, quantization: 'fp32', status: 'published', files: [pte!] },
    },
  };
}
