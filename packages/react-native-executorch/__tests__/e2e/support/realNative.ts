/**
 * The real native seam on Node: the Node-API addon (cpp/node/) over the C++ runner, built by the
 * host CMake build. Missing addon or model files are errors that say how to get them: the
 * end-to-end suites must never pass without the real runner.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

import type { NativeExecutorch, NativePlatformInfo, NativePrompt } from '../../../src';

const REPO_ROOT = resolve(__dirname, '../../../../..');

interface Addon {
  create(platform: NativePlatformInfo): NativeExecutorch;
  tokenize(tokenizerPath: string, prompt: NativePrompt): number[];
}

/** Where the addon is: $RNE_NODE_ADDON, else the host build's output. */
export function addonPath(): string {
  return process.env.RNE_NODE_ADDON ?? join(REPO_ROOT, 'build/host/node/rne_node.node');
}

function addon(): Addon {
  const path = addonPath();
  if (!existsSync(path)) {
    throw new Error(
      `The Node-API addon ${path} is missing. Build it with ` +
        '`.venv/bin/python tools/build_binaries.py --platform host` or set RNE_NODE_ADDON.',
    );
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(path) as Addon;
}

/** A fresh seam object (its own model table and worker thread) reporting `platform`. */
export function createRealNative(platform: NativePlatformInfo): NativeExecutorch {
  return addon().create(platform);
}

/** The token ids the runner feeds the model for `prompt` (its tokenizer, no special tokens added). */
export function runnerTokenize(tokenizerPath: string, prompt: NativePrompt): number[] {
  return addon().tokenize(tokenizerPath, prompt);
}

/** The SmolLM2-135M-Instruct files the suites run: the cached fp32 export (the exact reference). */
export interface Smollm2Files {
  readonly pte: string;
  /** The checkpoint directory: tokenizer.json and tokenizer_config.json (chat template). */
  readonly tokenizerDir: string;
}

/** From $RNE_E2E_PTE and $RNE_E2E_TOKENIZER_DIR (scripts/test.sh sets them). */
export function smollm2Files(): Smollm2Files {
  const pte = process.env.RNE_E2E_PTE ?? '';
  const tokenizerDir = process.env.RNE_E2E_TOKENIZER_DIR ?? '';
  if (!existsSync(pte) || !existsSync(join(tokenizerDir, 'tokenizer.json'))) {
    throw new Error(
      'Set RNE_E2E_PTE to the cached SmolLM2 fp32 export (`.venv/bin/python tools/export_model.py ' +
        '--model smollm2_135m --backend xnnpack --quantization fp32 --cached --quiet | tail -n1`) and ' +
        'RNE_E2E_TOKENIZER_DIR to its checkpoint (rne_tools.gguf_import.default_checkpoint("smollm2_135m")); ' +
        'jest.e2e.config.js finds both (__tests__/e2e/globalSetup.js). ' +
        `Got RNE_E2E_PTE=${JSON.stringify(pte)}, RNE_E2E_TOKENIZER_DIR=${JSON.stringify(tokenizerDir)}.`,
    );
  }
  return { pte, tokenizerDir };
}
