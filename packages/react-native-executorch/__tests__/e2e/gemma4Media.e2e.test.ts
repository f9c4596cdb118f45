/**
 * Images and audio in a Gemma 4 conversation on the real runner: the tiny random multimodal
 * Gemma 4 (Gemma 4's vocabulary, through the Node-API addon) published over HTTP with its vision
 * and audio encoders,
 * Gemma 4's real chat template and the Gemma-4-shaped tokenizer. The TypeScript side renders the
 * template with the image part and hands the image to native code as a media part; the runner
 * decodes and encodes it, expands it to Gemma 4's image tokens and splices the rows into the
 * prefill; audio goes the same way as Float32Array samples. tests/runner/test_multimodal_decoder.py
 * checks the same model's logits against transformers; this suite checks the app path and the
 * KV cache: a picture or clip is reused only where it is the same one.
 * @jest-environment node
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { LLMModule, ResourceFetcher, isExecutorchError, type MessageInput } from '../../src';
import { HfServer } from '../support/hfServer';
import { nodeAdapters } from '../support/nodeAdapters';
import { publishTinyGemma4 } from './support/gemma4';
import { createRealNative } from './support/realNative';

const REPO_ROOT = resolve(__dirname, '../../../..');
const GREEDY = { temperature: 0, maxNewTokens: 8 };
const CHECKPOINT_MARGIN = 16;

let server: HfServer;
let docs: string;
let llm: LLMModule;
let pictures: { a: string; b: string };

/** Two different PNG photos-to-be, drawn by the repo's own probe pictures (Pillow). */
function drawPictures(dir: string): { a: string; b: string } {
  const a = join(dir, 'a.png');
  const b = join(dir, 'b.png');
  const script = [
    'import sys',
    'from PIL import Image',
    'from rne_tools.encoders.export import probe_picture',
    'Image.fromarray(probe_picture(300, 400, 1), "RGB").save(sys.argv[1])',
    'Image.fromarray(probe_picture(240, 240, 2), "RGB").save(sys.argv[2])',
  ].join('\n');
  execFileSync(join(REPO_ROOT, '.venv/bin/python'), ['-c', script, a, b], {
    cwd: REPO_ROOT,
    env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'tools') },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return { a, b };
}

function withImage(path: string, text: string): MessageInput[] {
  return [{ role: 'user', content: [{ type: 'image', path }, { type: 'text', text }] }];
}

beforeAll(async () => {
  server = new HfServer();
  await server.start();
  docs = mkdtempSync(join(tmpdir(), 'rne-e2e-gemma4-image-'));
  pictures = drawPictures(docs);
  const model = publishTinyGemma4(server, { multimodal: true });
  const resources = new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl });
  const localFiles = await resources.fetchModel(model, 'xnnpack');
  const native = createRealNative({ os: 'android', isSimulator: false, osVersion: '34' });
  llm = new LLMModule({ model, localFiles, resources, native });
  await llm.load();
  llm.configure({ generationConfig: GREEDY });
});

afterAll(async () => {
  llm?.release();
  await server?.stop();
  if (docs) rmSync(docs, { recursive: true, force: true });
});

describe('images in a Gemma 4 conversation on the real runner (tiny random multimodal Gemma 4)', () => {
  it('sendMessage with an image: prefilled as counted, then reused by the next turn', async () => {
    llm.clearHistory();
    const question = 'What is in this picture?';
    const counted = llm.countTokens(withImage(pictures.a, question));
    await llm.sendMessage(question, { image: pictures.a });
    const first = llm.stats!;
    // The prompt the runner prefilled is the one countTokens measured: the image's soft tokens
    // (about 70 at this encoder's budget) are counted before anything runs.
    expect(first.reusedTokens + first.promptTokens).toBe(counted);
    expect(counted).toBeGreaterThan(60);
    expect(llm.messageHistory[0]?.parts?.some((p) => p.type === 'image')).toBe(true);
    // The encoder ran for this picture, before the first token.
    expect(first.mediaEncodeMs).toBeGreaterThan(0);
    expect(first.timeToFirstTokenMs).toBeGreaterThanOrEqual(first.mediaEncodeMs);

    await llm.sendMessage('Describe it in one word.');
    const second = llm.stats!;
    // The same picture in the history: its rows come from the native side's cache.
    expect(second.mediaEncodeMs).toBe(0);
    // The first turn, image included, stays in the cache. The template drops the empty thought
    // channel of the generation prompt before the answer, where the sliding layers' rings have
    // long wrapped (window 6), so the runner goes back to its ring checkpoint 16 tokens before
    // the end of the first prompt (TextGenerator::kCheckpointMargin).
    expect(second.reusedTokens).toBe(counted - CHECKPOINT_MARGIN);
  });

  it('another image at the same place is not taken for the cached one', async () => {
    llm.clearHistory();
    const question = 'What is in this picture?';
    const answerA = await llm.generate(withImage(pictures.a, question));
    // Same text, other picture: the soft tokens have the same ids, but not the same rows.
    const answerB = await llm.generate(withImage(pictures.b, question));
    // Reused at most up to the image's begin marker (here nothing: no ring checkpoint lies
    // that early, so the cache starts over).
    expect(llm.stats!.reusedTokens).toBeLessThan(10);
    llm.clearHistory();
    const freshB = await llm.generate(withImage(pictures.b, question));
    expect(llm.stats!.reusedTokens).toBe(0);
    // The answer after the swap is the fresh one, and the pictures do change the answer (so a
    // stale image would have been seen).
    expect(answerB).toBe(freshB);
    expect(answerA).not.toBe(answerB);
    // The same picture again is reused up to the ring checkpoint, which lies inside or just after
    // the image: a span reused in part is fed from its first uncached row, and the answer is
    // the fresh one.
    expect(await llm.generate(withImage(pictures.b, question))).toBe(freshB);
    expect(llm.stats!.reusedTokens).toBe(llm.countTokens(withImage(pictures.b, question)) - CHECKPOINT_MARGIN);
  });

  it('audio as samples: counted, spliced, reused only while the same clip', async () => {
    llm.clearHistory();
    const clip = (seed: number, seconds: number): Float32Array =>
      Float32Array.from({ length: Math.round(16000 * seconds) }, (_, i) => 0.3 * Math.sin((i * (seed + 1) * 2 * Math.PI * 220) / 16000));
    const question = 'What did you hear?';
    const message = (samples: Float32Array): MessageInput[] => [
      { role: 'user', content: [{ type: 'audio', samples }, { type: 'text', text: question }] },
    ];
    const first = clip(0, 1.2);
    const counted = llm.countTokens(message(first));
    const answer = await llm.generate(message(first));
    expect(llm.stats!.reusedTokens + llm.stats!.promptTokens).toBe(counted);
    // 1.2 s is 30 audio tokens (40 ms each) between the markers.
    expect(counted - llm.countTokens([{ role: 'user', content: question }])).toBeGreaterThanOrEqual(30);
    // The same samples again: reused up to the ring checkpoint, and the same answer.
    expect(await llm.generate(message(Float32Array.from(first)))).toBe(answer);
    expect(llm.stats!.reusedTokens).toBe(counted - CHECKPOINT_MARGIN);
    // Another clip of the same length: same token ids, other rows; not reused, other answer.
    const other = await llm.generate(message(clip(1, 1.2)));
    expect(llm.stats!.reusedTokens).toBeLessThan(10);
    expect(other).not.toBe(answer);
    // Longer than the encoder's program takes (4 s here): a typed error saying to split it.
    const error = await llm.generate(message(clip(0, 5))).catch((e: unknown) => e);
    expect(isExecutorchError(error, 'invalid_argument')).toBe(true);
    expect((error as Error).message).toMatch(/split it/);
  });

  it('a picture that cannot be read is a typed error and the history is unchanged', async () => {
    llm.clearHistory();
    const broken = join(docs, 'broken.png');
    writeFileSync(broken, 'not a picture');
    const before = llm.messageHistory.length;
    const error = await llm.sendMessage('And this one?', { image: broken }).catch((e: unknown) => e);
    expect(isExecutorchError(error)).toBe(true);
    expect((error as Error).message).toMatch(/not a JPEG or PNG/);
    expect(llm.messageHistory.length).toBe(before);
  });
});
