/**
 * @jest-environment node
 *
 * Images and audio: the placeholder splice (spliceMedia), and LLMModule with media through the
 * fake native module, on Gemma 4's real chat template: encoders downloaded and verified with the
 * model and passed to the native load, media parts in the prompt where the template put their
 * placeholders, the KV cache reused across media turns, and the typed errors (the model has no
 * such capability, its encoder is not there, the audio is in a form the SDK does not read), each
 * leaving the conversation as it was.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  AUDIO_SAMPLE_RATE,
  ExecutorchError,
  LLMModule,
  models,
  ResourceFetcher,
  spliceMedia,
  UnsupportedInputError,
  type AnyLLMDescriptor,
  type LLMDescriptor,
  type MediaPromptPart,
  type PromptPart,
} from '../src';
import { FAKE_MEDIA_TOKENS, FakeNative, fakeMediaText } from '../src/testing/fakeNative';
import { codeOf } from './support/errorCode';
import { bytes, HfServer, sha256 } from './support/hfServer';
import { nodeAdapters } from './support/nodeAdapters';
import { publishOn } from './support/publishedModel';

const GEMMA4 = join(__dirname, 'fixtures', 'gemma4');
const TEMPLATE = readFileSync(join(GEMMA4, 'gemma4.jinja'));
const SPECIAL_TOKENS = readFileSync(join(GEMMA4, 'tokenizer_config.json'));

describe('spliceMedia', () => {
  const cat: MediaPromptPart = { media: 'image', path: '/cat.jpg' };
  const purr: MediaPromptPart = { media: 'audio', samples: new Float32Array([0.1, -0.1]) };

  it('replaces the k-th placeholder of template text with the k-th media part', () => {
    const parts: PromptPart[] = [
      { text: '<|turn>user\n\n\n<|image|>\n\n' },
      { text: 'What are these?', plain: true },
      { text: '<|audio|><turn|>' },
    ];
    expect(spliceMedia(parts, [cat, purr])).toEqual([
      { text: '<|turn>user\n\n\n' },
      cat,
      { text: '\n\n' },
      { text: 'What are these?', plain: true },
      purr,
      { text: '<turn|>' },
    ]);
  });

  it('leaves plain text alone: a placeholder typed by the user is text', () => {
    const parts: PromptPart[] = [{ text: 'x<|image|>y', plain: true }, { text: '<|image|>' }];
    expect(spliceMedia(parts, [cat])).toEqual([{ text: 'x<|image|>y', plain: true }, cat]);
  });

  it('changes nothing without media', () => {
    const parts: PromptPart[] = [{ text: '<|turn>user\n' }, { text: 'Hi', plain: true }];
    expect(spliceMedia(parts, [])).toEqual(parts);
  });

  it.each([
    ['more placeholders than media', [{ text: '<|image|><|image|>' }], [cat], /wrote 2 placeholders for 1 media/],
    ['fewer placeholders than media', [{ text: '<|image|>' }], [cat, cat], /wrote 1 placeholders for 2 media/],
    ['media but no placeholder', [{ text: 'Hi', plain: true }], [cat], /wrote 0 placeholders for 1 media/],
    ['a placeholder of another kind', [{ text: '<|audio|>' }], [cat], /placeholder 1 is <\|audio\|> \(audio\) but media part 1 is image/],
  ] as [string, PromptPart[], MediaPromptPart[], RegExp][])('%s is a chat_template error', (_, parts, media, message) => {
    const splice = () => spliceMedia(parts, media);
    expect(splice).toThrow(ExecutorchError);
    expect(splice).toThrow(expect.objectContaining({ code: 'chat_template' }));
    expect(splice).toThrow(message);
  });
});

let server: HfServer;
let docs: string;

beforeEach(async () => {
  server = new HfServer();
  await server.start();
  docs = await mkdtemp(join(tmpdir(), 'rne-media-'));
});

afterEach(async () => {
  await server.stop();
  // A load that failed on one file leaves its other downloads finishing into the cache (they
  // may serve another fetch); retry while their last writes land.
  await rm(docs, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
});

function fetcher() {
  return new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl });
}

type EncoderState = 'published' | 'unpublished' | 'corrupt';

/**
 * Gemma 4 E2B's registry entry, published on the test server with Gemma 4's real chat template
 * and small stand-in files, its encoders as `encoders` says (`corrupt`: published with a
 * checksum the served file does not have).
 */
function publishGemma(encoders: { vision?: EncoderState; audio?: EncoderState } = {}) {
  const { vision = 'published', audio = 'published' } = encoders;
  const repo = 'acme/gemma-mm';
  const revision = 'r1';
  const gemma = models.llm.gemma4_e2b;
  const files = {
    'xnnpack/gemma.pte': bytes(4000, 1),
    'xnnpack/vision.pte': bytes(3000, 2),
    'xnnpack/audio.pte': bytes(2000, 3),
    'tokenizer.json': Buffer.from('{}'),
    'tokenizer_config.json': SPECIAL_TOKENS,
    'chat_template.jinja': TEMPLATE,
  };
  for (const [path, body] of Object.entries(files)) server.add(repo, revision, path, { body });
  const pub = (path: keyof typeof files) => ({ path, sha256: sha256(files[path]), size: files[path].length });
  const encoder = (state: EncoderState, path: 'xnnpack/vision.pte' | 'xnnpack/audio.pte') =>
    state === 'unpublished'
      ? ({ status: 'unpublished', path } as const)
      : ({ status: 'published', ...pub(path), ...(state === 'corrupt' ? { sha256: '0'.repeat(64) } : {}) } as const);
  return {
    ...gemma,
    hf: { repo, revision },
    tokenizer: {
      status: 'published',
      chatTemplate: 'chat_template.jinja',
      files: [pub('tokenizer.json'), pub('tokenizer_config.json'), pub('chat_template.jinja')],
    },
    platformDefaults: { ios: 'xnnpack', android: 'xnnpack' },
    variants: {
      xnnpack: {
        ...gemma.variants.xnnpack,
        status: 'published',
        files: [pub('xnnpack/gemma.pte')],
        encoders: { vision: encoder(vision, 'xnnpack/vision.pte'), audio: encoder(audio, 'xnnpack/audio.pte') },
      },
    },
  } as const satisfies LLMDescriptor<'xnnpack'>;
}

async function loaded(model: ReturnType<typeof publishGemma>, native = new FakeNative({ answer: () => ['A cat', '.'] })) {
  const llm = new LLMModule({ model, resources: fetcher(), native });
  await llm.load();
  return { llm, native };
}

const root = () => join(docs, 'react-native-executorch/models/acme/gemma-mm/r1');

describe('LLMModule with images and audio', () => {
  it('downloads and verifies the published encoders with the model and loads them', async () => {
    const { native } = await loaded(publishGemma());
    expect(native.loads).toEqual([
      {
        modelPath: join(root(), 'xnnpack/gemma.pte'),
        tokenizerPath: join(root(), 'tokenizer.json'),
        backend: 'xnnpack',
        visionEncoderPath: join(root(), 'xnnpack/vision.pte'),
        audioEncoderPath: join(root(), 'xnnpack/audio.pte'),
        peakMemoryBytes: 1477443584, // the registry's measured E2B peak
      },
    ]);
    expect(server.requests.map((r) => r.path).filter((p) => p.endsWith('vision.pte'))).toHaveLength(1);
  });

  it('a corrupt encoder fails the load with checksum_mismatch', async () => {
    const llm = new LLMModule({ model: publishGemma({ audio: 'corrupt' }), resources: fetcher(), native: new FakeNative() });
    expect(await codeOf(llm.load())).toBe('checksum_mismatch');
  });

  it('sendMessage puts the image where the template wrote its placeholder and keeps it in the history', async () => {
    const { llm, native } = await loaded(publishGemma());
    expect(await llm.sendMessage('What is this?', { image: '/photos/cat.jpg' })).toBe('A cat.');
    const image = { media: 'image', path: '/photos/cat.jpg' } as const;
    expect(native.promptParts[0]).toEqual([
      { text: '<bos><|turn>user\n\n\n' },
      image,
      { text: '\n\n' },
      { text: 'What is this?', plain: true },
      { text: '<turn|>\n<|turn>model\n<|channel>thought\n<channel|>' },
    ]);
    expect(llm.messageHistory[0]).toEqual({
      role: 'user',
      content: 'What is this?',
      parts: [{ type: 'image', path: '/photos/cat.jpg' }, { type: 'text', text: 'What is this?' }],
    });
    // The fake counts a media part as FAKE_MEDIA_TOKENS tokens; the module's count is the native one.
    const prompt = native.promptParts[0]!;
    const text = prompt.map((p) => (p.media ? fakeMediaText(p) : p.text)).join('');
    expect(llm.getPromptTokenCount()).toBe(Math.ceil(text.length / 4));
    expect(fakeMediaText(image)).toHaveLength(FAKE_MEDIA_TOKENS * 4);

    // The next turn re-renders the image at the same place: the first turn is reused up to the
    // model's header (Gemma 4 drops the empty thought channel from the history).
    // The encoder's time is in the stats; the fake "encodes" for 5 ms per new media item.
    expect(llm.stats!.mediaEncodeMs).toBe(5);
    expect(llm.stats!.timeToFirstTokenMs).toBeGreaterThanOrEqual(5);

    await llm.sendMessage('And its colour?');
    const stats = llm.stats!;
    // The picture was encoded lately: its rows are the native side's cached ones.
    expect(stats.mediaEncodeMs).toBe(0);
    expect(stats.reusedTokens).toBeGreaterThanOrEqual(Math.floor(text.indexOf('<turn|>\n<|turn>model') / 4));
    expect(text.indexOf('<turn|>\n<|turn>model')).toBeGreaterThan(text.indexOf('[image:'));
    expect(native.promptParts[1]!.filter((p) => p.media)).toEqual([image]);
  });

  it('takes audio as samples or a file, and media in generate() as content parts', async () => {
    const { llm, native } = await loaded(publishGemma());
    const samples = new Float32Array(16_000).fill(0.25);
    await llm.sendMessage('What is this sound?', { audio: samples });
    expect(native.promptParts[0]!.filter((p) => p.media)).toEqual([{ media: 'audio', samples }]);
    expect(llm.messageHistory[0]!.parts).toEqual([
      { type: 'audio', samples },
      { type: 'text', text: 'What is this sound?' },
    ]);

    await llm.generate([
      {
        role: 'user',
        content: [
          { type: 'image', path: '/a.png' },
          { type: 'text', text: 'Compare.' },
          { type: 'audio', path: '/b.wav' },
        ],
      },
    ]);
    expect(native.promptParts[1]!.filter((p) => p.media)).toEqual([
      { media: 'image', path: '/a.png' },
      { media: 'audio', path: '/b.wav' },
    ]);
    expect(llm.messageHistory).toHaveLength(2);
  });

  it('the sliding window drops old media turns by their native token count', async () => {
    // 96 fake tokens of context, 16 kept for the answer: about two image turns (~29 each) fit.
    const native = new FakeNative({ answer: () => ['Ok.'], maxContext: 96 });
    const { llm } = await loaded(publishGemma(), native);
    llm.configure({ generationConfig: { maxNewTokens: 16 } });
    for (const path of ['/1.jpg', '/2.jpg', '/3.jpg', '/4.jpg']) await llm.sendMessage('Next.', { image: path });
    const sent = native.promptParts[3]!.flatMap((p) => (p.media ? [p.path] : []));
    expect(sent[sent.length - 1]).toBe('/4.jpg');
    expect(sent.length).toBeLessThan(4);
    expect(llm.getPromptTokenCount()).toBeLessThanOrEqual(96 - 16);
    expect(llm.countTokens(llm.messageHistory.slice(-4))).toBeLessThanOrEqual(96 - 16);
    expect(llm.messageHistory).toHaveLength(8);
  });
});

describe('media the model cannot take: typed errors, conversation unchanged', () => {
  async function expectRefused<M extends AnyLLMDescriptor>(
    send: () => Promise<unknown>,
    llm: LLMModule<M>,
    native: FakeNative,
  ) {
    const history = llm.messageHistory;
    const calls = native.calls.length;
    let error: unknown;
    try {
      await send();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(UnsupportedInputError);
    expect(error).toBeInstanceOf(ExecutorchError);
    expect((error as ExecutorchError).code).toBe('unsupported_input');
    expect(llm.messageHistory).toBe(history);
    expect(native.calls.length).toBe(calls); // nothing reached the model
    return error as UnsupportedInputError;
  }

  it('a text-only model: says it takes no images and which models do', async () => {
    const native = new FakeNative();
    const llm: LLMModule = new LLMModule({ model: publishOn(server), resources: fetcher(), native });
    await llm.load();
    await llm.sendMessage('Hi');
    const error = await expectRefused(() => llm.sendMessage('What is this?', { image: '/cat.jpg' }), llm, native);
    expect(error.input).toBe('image');
    expect(error.supportedModels).toEqual(['gemma4_e2b']);
    expect(error.message).toMatch(/SmolLM2 135M Instruct does not take images .*Models that do: gemma4_e2b/);
    const audio = await expectRefused(
      () => llm.generate([{ role: 'user', content: [{ type: 'audio', path: '/a.wav' }] }]),
      llm,
      native,
    );
    expect(audio.message).toMatch(/does not take audio/);
    expect(() => llm.countTokens([{ role: 'user', content: [{ type: 'image', path: '/a.png' }] }])).toThrow(
      UnsupportedInputError,
    );
  });

  it.each([
    ['an Int16Array', new Int16Array(100), /Int16Array.*divide by 32768/],
    ['an empty Float32Array', new Float32Array(0), /Float32Array of 0 samples/],
    ['a plain array', [0.1, 0.2], /got an array/],
    ['an empty path', '', /got an empty string/],
    ['44.1 kHz samples', { samples: new Float32Array(441), sampleRate: 44_100 }, /44100 Hz.*resample the clip to 16000 Hz/],
  ])('audio as %s', async (_, audio, message) => {
    const { llm, native } = await loaded(publishGemma());
    const error = await expectRefused(
      () => llm.sendMessage('Hm?', { audio: audio as unknown as Float32Array }),
      llm,
      native,
    );
    expect(error.input).toBe('audio');
    expect(error.message).toMatch(message);
  });

  it('audio with its rate: 16 kHz goes to the model as samples; another rate in a message is refused', async () => {
    const { llm, native } = await loaded(publishGemma());
    const samples = new Float32Array(1600).fill(0.1);
    await llm.sendMessage('Hear this.', { audio: { samples, sampleRate: AUDIO_SAMPLE_RATE } });
    expect(native.promptParts[0]!.filter((p) => p.media)).toEqual([{ media: 'audio', samples }]);
    const error = await expectRefused(
      () => llm.generate([{ role: 'user', content: [{ type: 'audio', samples, sampleRate: 8000 }] }]),
      llm,
      native,
    );
    expect(error.message).toMatch(/8000 Hz/);
  });

  it('an encoder the registry has not published: the model loads without it and says so', async () => {
    const { llm, native } = await loaded(publishGemma({ vision: 'unpublished' }));
    expect(native.loads[0]!.visionEncoderPath).toBeUndefined();
    expect(native.loads[0]!.audioEncoderPath).toBe(join(root(), 'xnnpack/audio.pte'));
    const error = await expectRefused(() => llm.sendMessage('?', { image: '/cat.jpg' }), llm, native);
    expect(error.message).toMatch(/loaded without its vision encoder.*not published the encoder for the xnnpack variant/);
    await llm.sendMessage('Listen.', { audio: '/a.wav' }); // audio still works
  });

  it('localFiles without an encoder path: says which field to pass', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rne-media-local-'));
    try {
      await writeFile(join(dir, 'chat_template.jinja'), TEMPLATE);
      await writeFile(join(dir, 'tokenizer_config.json'), SPECIAL_TOKENS);
      const native = new FakeNative();
      const llm = new LLMModule({
        model: models.llm.gemma4_e2b,
        backend: 'xnnpack',
        localFiles: {
          modelPath: join(dir, 'gemma.pte'),
          tokenizerPath: join(dir, 'tokenizer.json'),
          chatTemplatePath: join(dir, 'chat_template.jinja'),
          audioEncoderPath: join(dir, 'audio.pte'),
        },
        resources: nodeAdapters(dir),
        native,
      });
      await llm.load();
      expect(native.loads[0]).toMatchObject({ audioEncoderPath: join(dir, 'audio.pte') });
      const error = await expectRefused(() => llm.sendMessage('?', { image: '/cat.jpg' }), llm, native);
      expect(error.message).toMatch(/pass localFiles\.visionEncoderPath/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('the native side refuses media for a model loaded without the encoder (the fake as the runner)', async () => {
    const native = new FakeNative();
    const handle = await native.loadLLM({ modelPath: '/m.pte', tokenizerPath: '/t.json', backend: 'xnnpack' });
    const prompt: PromptPart[] = [{ text: 'x' }, { media: 'image', path: '/cat.jpg' }];
    expect(() => native.countTokens(handle, prompt)).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    await expect(native.generate(handle, prompt, {} as never, () => {})).rejects.toMatchObject({
      code: 'invalid_argument',
    });
  });
});
