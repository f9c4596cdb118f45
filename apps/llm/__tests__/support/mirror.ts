/**
 * A published model served by the package's Hugging Face style HTTP server on 127.0.0.1: the
 * registry entries are all unpublished today, so download tests need one with checksums.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import {
  models,
  type Backend,
  type LLMDescriptor,
  type MediaCapability,
  type PublishedFile,
} from 'react-native-executorch';
import smolConfig from 'react-native-executorch/__tests__/fixtures/smollm2_tokenizer_config.json';
import { bytes, HfServer, sha256, type ServedFile } from 'react-native-executorch/__tests__/support/hfServer';

export const MODEL_BYTES = bytes(200_000, 7);
/** The encoders a `media` mirror publishes beside each `.pte` (random bytes, as the `.pte`). */
export const ENCODER_BYTES = { vision: bytes(30_000, 11), audio: bytes(20_000, 13) } as const;
/** The program with the assistant drafter an `assistant` mirror publishes: larger, as a real one is. */
export const ASSISTANT_BYTES = bytes(260_000, 17);

export interface Mirror {
  readonly server: HfServer;
  readonly model: LLMDescriptor<Backend>;
  /** Serves the `.pte` of `backend` (again), e.g. after a test started without it. */
  serveModel(backend?: Backend, file?: Partial<ServedFile>): void;
  stop(): Promise<void>;
}

const MEDIA: readonly MediaCapability[] = ['vision', 'audio'];

let repos = 0;

/** Gemma 4's real template files, from the package's fixtures. */
function gemma4TemplateFiles(): { jinja: Buffer; config: Buffer } {
  const dir = join(dirname(require.resolve('react-native-executorch/package.json')), '__tests__', 'fixtures', 'gemma4');
  return { jinja: readFileSync(join(dir, 'gemma4.jinja')), config: readFileSync(join(dir, 'tokenizer_config.json')) };
}

/**
 * Starts a server publishing a chat template (SmolLM2's, or Gemma 4's with `template: 'gemma4'`),
 * a tokenizer and a random `.pte` per backend at `<backend>/mirror.pte` (`serveModelFiles:
 * false` leaves them out: 404s). `chunkDelayMs` slows the `.pte` down so that progress is visible.
 * `media: true` makes it a multimodal model: capabilities `vision` and `audio`, and each variant
 * publishes its vision and audio encoders (`<backend>/vision_encoder.pte`, `audio_encoder.pte`).
 * `assistant: true`: each variant publishes its program with an assistant drafter
 * (`<backend>/mirror_assistant.pte`), as Gemma 4's XNNPACK variant declares one.
 */
export async function startMirror({
  backends = ['xnnpack'],
  chunkDelayMs = 0,
  serveModelFiles = true,
  template = 'smollm2',
  media = false,
  assistant = false,
}: {
  backends?: Backend[];
  chunkDelayMs?: number;
  serveModelFiles?: boolean;
  template?: 'smollm2' | 'gemma4';
  media?: boolean;
  assistant?: boolean;
} = {}): Promise<Mirror> {
  const server = new HfServer();
  await server.start();
  // A new repo per mirror, so that no test finds another one's files in the cache.
  const repo = `acme/mirror-${++repos}`;
  const revision = 'r1';
  const tokenizer = Buffer.from('{"model": {"type": "BPE", "vocab": {}, "merges": []}}');
  const gemma4 = template === 'gemma4' ? gemma4TemplateFiles() : null;
  const config = gemma4 ? gemma4.config : Buffer.from(JSON.stringify(smolConfig));
  server.add(repo, revision, 'tokenizer.json', { body: tokenizer });
  server.add(repo, revision, 'tokenizer_config.json', { body: config });
  if (gemma4) server.add(repo, revision, 'chat_template.jinja', { body: gemma4.jinja });
  const modelPath = (backend: Backend) => `${backend}/mirror.pte`;
  const serveModel = (backend: Backend = backends[0]!, file: Partial<ServedFile> = {}) =>
    server.add(repo, revision, modelPath(backend), { body: MODEL_BYTES, chunkSize: 8192, chunkDelayMs, ...file });
  if (serveModelFiles) backends.forEach((b) => serveModel(b));
  const encoderPath = (backend: Backend, kind: MediaCapability) => `${backend}/${kind}_encoder.pte`;
  if (media) {
    for (const b of backends) {
      for (const kind of MEDIA) server.add(repo, revision, encoderPath(b, kind), { body: ENCODER_BYTES[kind] });
    }
  }

  const assistantPath = (backend: Backend) => `${backend}/mirror_assistant.pte`;
  if (assistant) backends.forEach((b) => server.add(repo, revision, assistantPath(b), { body: ASSISTANT_BYTES }));

  const pub = (path: string, body: Buffer): PublishedFile => ({ path, sha256: sha256(body), size: body.length });
  const encoders = (b: Backend) =>
    Object.fromEntries(
      MEDIA.map((kind) => [kind, { status: 'published', ...pub(encoderPath(b, kind), ENCODER_BYTES[kind]) }]),
    );
  const smol = models.llm.smollm2_135m;
  const variants = Object.fromEntries(
    backends.map((b) => [
      b,
      {
        ...smol.variants.xnnpack,
        backend: b,
        status: 'published',
        files: [pub(modelPath(b), MODEL_BYTES)],
        ...(media ? { encoders: encoders(b) } : {}),
        ...(assistant
          ? {
              assistant: {
                status: 'published',
                ...pub(assistantPath(b), ASSISTANT_BYTES),
                sourceRepo: 'acme/assistant',
                verifyTokens: 5,
              },
            }
          : {}),
      },
    ]),
  ) as unknown as LLMDescriptor<Backend>['variants'];
  const model: LLMDescriptor<Backend> = {
    ...smol,
    id: media ? 'mirror_media' : 'mirror_smol',
    name: media ? 'Mirror Media' : 'Mirror Smol',
    capabilities: media ? [...smol.capabilities, 'vision', 'audio'] : smol.capabilities,
    hf: { repo, revision },
    tokenizer: {
      status: 'published',
      chatTemplate: gemma4 ? 'chat_template.jinja' : 'tokenizer_config.json',
      files: [
        pub('tokenizer.json', tokenizer),
        pub('tokenizer_config.json', config),
        ...(gemma4 ? [pub('chat_template.jinja', gemma4.jinja)] : []),
      ],
    },
    // Android: its first backend; iOS: XNNPACK (what a CPU-only model defaults to).
    platformDefaults: { android: backends[0]!, ios: backends.includes('mlx') ? 'mlx' : 'xnnpack' },
    variants,
  };
  return { server, model, serveModel, stop: () => server.stop() };
}
