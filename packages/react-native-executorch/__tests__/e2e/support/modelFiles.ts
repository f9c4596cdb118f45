/**
 * What LlmRunner::load refuses, checked the same way and with the same codes, for the fake
 * native module's loads (`checkLoad`): e2e suites then see the same load errors on both targets.
 */
import { existsSync, readFileSync } from 'node:fs';

import type { NativeLoadOptions } from '../../../src';
import { nativeError } from '../../../src/testing/fakeNative';

export function checkModelFiles({ modelPath, tokenizerPath }: NativeLoadOptions, modelVocabSize: number): void {
  for (const path of [modelPath, tokenizerPath]) {
    if (!existsSync(path)) throw nativeError('not_found', `${path}: no such file`);
  }
  // An ExecuTorch program is a flatbuffer with the file identifier "ET" + version at byte 4.
  if (readFileSync(modelPath).subarray(4, 6).toString('latin1') !== 'ET') {
    throw nativeError('invalid_model', `${modelPath} is not an ExecuTorch program`);
  }
  let tokenizer: { model?: { vocab?: object }; added_tokens?: { content: string }[] };
  try {
    tokenizer = JSON.parse(readFileSync(tokenizerPath, 'utf8'));
  } catch (error) {
    throw nativeError('tokenizer', `${tokenizerPath}: ${(error as Error).message}`);
  }
  const vocab = tokenizer.model?.vocab ?? {};
  const added = (tokenizer.added_tokens ?? []).filter((t) => !(t.content in vocab)).length;
  const size = Object.keys(vocab).length + added;
  if (size > modelVocabSize) {
    throw nativeError(
      'tokenizer',
      `${tokenizerPath} has ${size} tokens but ${modelPath} has a vocabulary of ${modelVocabSize}; ` +
        'they belong to different models',
    );
  }
}
