/** A registry-shaped model whose files are published on a test {@link HfServer}. */
import { models, type LLMDescriptor } from '../../src';
import { bytes, sha256, type HfServer, type ServedFile } from './hfServer';
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

/** The assistant drafter's program that {@link publishWithAssistant} publishes. */
export const ASSISTANT_PTE = 'xnnpack/smol_assistant.pte';

/**
 * {@link publishOn}'s model whose xnnpack variant also has a published assistant drafter
 * program (`served` overrides how the server sends it, e.g. faults).
 */
export function publishWithAssistant(
  server: HfServer,
  served: Partial<ServedFile> = {},
  repo = 'acme/smol-published',
  revision = 'r1',
): LLMDescriptor<'xnnpack'> {
  const model = publishOn(server, repo, revision);
  const body = bytes(130_000, 22);
  server.add(repo, revision, ASSISTANT_PTE, { body, chunkSize: 8192, chunkDelayMs: 2, ...served });
  const assistant = {
    status: 'published' as const,
    path: ASSISTANT_PTE,
    sha256: sha256(body),
    size: body.length,
    sourceRepo: 'acme/smol-assistant',
    verifyTokens: 5,
  };
  return { ...model, variants: { xnnpack: { ...model.variants.xnnpack, assistant } } };
}
