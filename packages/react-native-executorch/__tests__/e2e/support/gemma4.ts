/**
 * The tiny random Gemma 4 of the e2e suites (Gemma 4's vocabulary size) with Gemma 4's real chat
 * template and the Gemma-4-shaped tokenizer, published on a 127.0.0.1 Hugging Face server.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { models, type LLMDescriptor } from '../../../src';
import { sha256, type HfServer } from '../../support/hfServer';

/** Gemma 4's chat template (llama.cpp's copy; provenance in fixtures/gemma4/provenance.json). */
export const GEMMA4_TEMPLATE = readFileSync(join(__dirname, '../../fixtures/gemma4/gemma4.jinja'), 'utf8');
/** Its tokenizer_config.json: the special tokens only (the template is the .jinja file). */
export const GEMMA4_TOKENIZER_CONFIG = readFileSync(join(__dirname, '../../fixtures/gemma4/tokenizer_config.json'), 'utf8');

/** The tiny multimodal Gemma 4's decoder and encoders, from globalSetup (gemma4_paths.py). */
export function gemma4MultimodalFiles(): { pte: string; vision: string; audio: string } {
  const pte = process.env.RNE_E2E_GEMMA4_MM_PTE ?? '';
  const vision = process.env.RNE_E2E_GEMMA4_VISION_PTE ?? '';
  const audio = process.env.RNE_E2E_GEMMA4_AUDIO_PTE ?? '';
  if (![pte, vision, audio].every((path) => existsSync(path))) {
    throw new Error('Run the e2e suites through jest.e2e.config.js: its globalSetup finds the tiny Gemma 4 files.');
  }
  return { pte, vision, audio };
}

/** The tiny Gemma 4's files, from globalSetup (gemma4_paths.py). */
export function gemma4Files(): { pte: string; tokenizer: string } {
  const pte = process.env.RNE_E2E_GEMMA4_PTE ?? '';
  const tokenizer = process.env.RNE_E2E_GEMMA4_TOKENIZER ?? '';
  if (!existsSync(pte) || !existsSync(tokenizer)) {
    throw new Error('Run the e2e suites through jest.e2e.config.js: its globalSetup finds the tiny Gemma 4 files.');
  }
  return { pte, tokenizer };
}

/**
 * Serves the tiny Gemma 4 on `server` as a published `gemma4_e2b` with its files' sha256; with
 * `multimodal`, the tiny multimodal one (same vocabulary) with its vision encoder published too.
 */
export function publishTinyGemma4(server: HfServer, { multimodal = false } = {}): LLMDescriptor<'xnnpack'> {
  const { tokenizer } = gemma4Files();
  const pte = multimodal ? gemma4MultimodalFiles().pte : gemma4Files().pte;
  const repo = multimodal ? 'e2e/gemma4-multimodal' : 'e2e/gemma4';
  const revision = 'tiny';
  const entries = [
    ['xnnpack/gemma4.pte', readFileSync(pte)],
    ['tokenizer.json', readFileSync(tokenizer)],
    ['tokenizer_config.json', Buffer.from(GEMMA4_TOKENIZER_CONFIG)],
    ['chat_template.jinja', Buffer.from(GEMMA4_TEMPLATE)],
  ] as const;
  for (const [path, body] of entries) server.add(repo, revision, path, { body });
  const [model, ...tokenizerFiles] = entries.map(([path, body]) => ({ path, sha256: sha256(body), size: body.length }));
  const gemma = models.llm.gemma4_e2b;
  const encoders: Record<string, { status: 'published'; path: string; sha256: string; size: number }> = {};
  if (multimodal) {
    const files = gemma4MultimodalFiles();
    for (const kind of ['vision', 'audio'] as const) {
      const body = readFileSync(files[kind]);
      const path = `xnnpack/gemma4_${kind}.pte`;
      server.add(repo, revision, path, { body });
      encoders[kind] = { status: 'published', path, sha256: sha256(body), size: body.length };
    }
  }
  return {
    ...gemma,
    hf: { repo, revision },
    tokenizer: { status: 'published', chatTemplate: 'chat_template.jinja', files: tokenizerFiles },
    platformDefaults: { ios: 'xnnpack', android: 'xnnpack' },
    variants: {
      xnnpack: {
        ...gemma.variants.xnnpack,
        quantization: 'fp32',
        maxContext: multimodal ? 512 : 2048,
        status: 'published',
        files: [model!],
        encoders: multimodal ? encoders : gemma.variants.xnnpack.encoders,
      },
    },
  };
}
