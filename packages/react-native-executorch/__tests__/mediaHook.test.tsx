/**
 * useLLM with images and audio: the real hook over the fake native module (pending history with
 * the media, the prompt's media parts, typed errors in `error`), and the package's jest mock
 * (`react-native-executorch/jest`), whose scripted model takes the media its registry entry
 * declares and hands the reply function the messages with their parts.
 */
import { act, renderHook, waitFor } from '@testing-library/react-native';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { models, UnsupportedInputError, useLLM, type Message, type ModelFiles } from '../src';
import { FakeNative } from '../src/testing/fakeNative';
import { llmMock, useLLM as mockedUseLLM } from '../src/testing/jest';
import smolConfig from './fixtures/smollm2_tokenizer_config.json';
import { nodeAdapters } from './support/nodeAdapters';

const GEMMA4 = join(__dirname, 'fixtures', 'gemma4');
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'rne-media-hook-'));
  writeFileSync(join(dir, 'chat_template.jinja'), readFileSync(join(GEMMA4, 'gemma4.jinja')));
  writeFileSync(join(dir, 'tokenizer_config.json'), readFileSync(join(GEMMA4, 'tokenizer_config.json')));
  writeFileSync(join(dir, 'smol_config.json'), JSON.stringify(smolConfig));
});

afterEach(() => rmSync(dir, { recursive: true, force: true }));

function gemmaFiles(): ModelFiles {
  return {
    modelPath: join(dir, 'gemma.pte'),
    tokenizerPath: join(dir, 'tokenizer.json'),
    chatTemplatePath: join(dir, 'chat_template.jinja'),
    visionEncoderPath: join(dir, 'vision.pte'),
    audioEncoderPath: join(dir, 'audio.pte'),
  };
}

describe('useLLM with media (real hook, fake native)', () => {
  it('sends an image and audio; the prompt and the history carry them', async () => {
    const native = new FakeNative({ answer: () => ['A dog', ' barking.'] });
    const { result } = renderHook(() =>
      useLLM({
        model: models.llm.gemma4_e2b,
        backend: 'xnnpack',
        localFiles: gemmaFiles(),
        resources: nodeAdapters(dir),
        native,
        tokenBatchMs: 0,
      }),
    );
    await waitFor(() => expect(result.current.isReady).toBe(true));
    const samples = new Float32Array(8000).fill(0.5);
    let answer = '';
    await act(async () => {
      answer = await result.current.sendMessage('What is happening?', { image: '/dog.jpg', audio: samples });
    });
    expect(answer).toBe('A dog barking.');
    expect(native.promptParts[0]!.filter((p) => p.media)).toEqual([
      { media: 'image', path: '/dog.jpg' },
      { media: 'audio', samples },
    ]);
    expect(result.current.messageHistory[0]).toEqual({
      role: 'user',
      content: 'What is happening?',
      parts: [
        { type: 'image', path: '/dog.jpg' },
        { type: 'audio', samples },
        { type: 'text', text: 'What is happening?' },
      ],
    });
  });

  it('media for a text-only model: the call rejects with the typed error, history unchanged', async () => {
    const native = new FakeNative();
    const { result } = renderHook(() =>
      useLLM({
        model: models.llm.smollm2_135m,
        localFiles: {
          modelPath: join(dir, 'smol.pte'),
          tokenizerPath: join(dir, 'tokenizer.json'),
          chatTemplatePath: join(dir, 'smol_config.json'),
        },
        resources: nodeAdapters(dir),
        native,
      }),
    );
    await waitFor(() => expect(result.current.isReady).toBe(true));
    let error: unknown;
    await act(async () => {
      // A model typed as any model: the capability is checked when it is sent.
      const send = result.current.sendMessage as unknown as (text: string, media: { image: string }) => Promise<string>;
      error = await send('What is this?', { image: '/cat.jpg' }).catch((e: unknown) => e);
    });
    expect(error).toBeInstanceOf(UnsupportedInputError);
    expect(result.current.messageHistory).toEqual([]);
    expect(native.calls).not.toContain('generate');
  });
});

describe('the jest mock with media', () => {
  beforeEach(() => llmMock.reset());

  it("loads the model's encoders and gives the reply function the messages with their parts", async () => {
    const seen: Message[][] = [];
    llmMock.respondWith((messages) => {
      seen.push([...messages]);
      return messages[messages.length - 1]?.parts?.some((p) => p.type === 'image') ? 'A picture.' : 'Text.';
    });
    const { result } = renderHook(() => mockedUseLLM({ model: models.llm.gemma4_e2b }));
    await act(async () => llmMock.finishLoading());
    expect(result.current.isReady).toBe(true);
    expect(llmMock.nativeModule.loads[0]).toMatchObject({
      visionEncoderPath: expect.stringMatching(/vision_encoder\.pte$/) as string,
      audioEncoderPath: expect.stringMatching(/audio_encoder\.pte$/) as string,
    });

    let answer = '';
    await act(async () => {
      answer = await result.current.sendMessage('What is this?', { image: '/cat.jpg', audio: '/purr.wav' });
    });
    expect(answer).toBe('A picture.');
    expect(seen[0]).toEqual([
      {
        role: 'user',
        content: 'What is this?',
        parts: [
          { type: 'image', path: '/cat.jpg' },
          { type: 'audio', path: '/purr.wav' },
          { type: 'text', text: 'What is this?' },
        ],
      },
    ]);
    expect(llmMock.nativeModule.promptParts[0]!.filter((p) => p.media)).toEqual([
      { media: 'image', path: '/cat.jpg' },
      { media: 'audio', path: '/purr.wav' },
    ]);
    await act(async () => {
      answer = await result.current.sendMessage('Thanks');
    });
    expect(answer).toBe('Text.');
  });
});
