/** A registry-shaped model whose files are published on a test {@link HfServer}. */
import { models, type LLMDescriptor } from '../../src';
import { bytes, sha256, type HfServer } from './hfServer';
import smolConfig from '../fixtures/smollm2_tokenizer_config.json';

/** `tokenizerConfig`: the published tokenizer_config.json (chat template), SmolLM2's by default. */
export function publishOn(
  server: HfServer,
  repo = 'acme/smol-published',
  revision = 'r1',
  tokenizerConfig: object = smolConfig,
): LLMDescriptor<'xnnpack'> {
  const pte = bytes(120_000, 21);
  const tokenizer = Buffer.from('{"model": {"type": "BPE", "vocab": {}, "merges": []}}');
  const config = Buffer.from(JSON.stringify(tokenizerConfig));
  const entries = [
    ['xnnpack/smol.pte', pte],
    ['tokenizer.json', tokenizer],
    ['tokenizer_config.json', config],
  ] as const;
  // Paced, so that progress is observable between the first and the last byte.
  for (const [path, body] of entries) {
    server.add(repo, revision, path, { body, chunkSize: 8192, chunkDelayMs: 8 });
  }
  const pub = (path: string, body: Buffer) => ({ path, sha256: sha256(body), size: body.length });
  return {
    ...models.llm.smollm2_135m,
    hf: { repo, revision },
    tokenizer: {
      status: 'published',
      chatTemplate: 'tokenizer_config.json',
      files: [pub('tokenizer.json', tokenizer), pub('tokenizer_config.json', config)],
    },
    variants: {
      xnnpack: {
        ...models.llm.smollm2_135m.variants.xnnpack,
        status: 'published',
        files: [pub('xnnpack/smol.pte', pte)],
      },
    },
  };
}
