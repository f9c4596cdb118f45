/**
 * Photos and recordings in the chat: the app on the package's FakeNative, downloading a
 * multimodal model (with its published vision and audio encoders) from the local mirror, with
 * expo-image-picker and react-native-audio-api replaced by the stand-ins of support/mediaMocks.ts.
 */
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { act, screen, waitFor, within } from '@testing-library/react-native';
import { models } from 'react-native-executorch';
import { FakeNative, type FakeNativeOptions } from 'react-native-executorch/jest';

import { formatBytes } from '../src/format';
import { documentDir, renderApp } from './support/app';
import { lastRecorder, microphone, picker, writePng } from './support/mediaMocks';
import { ENCODER_BYTES, MODEL_BYTES, startMirror, type Mirror } from './support/mirror';

let mirror: Mirror | null = null;

afterEach(async () => {
  await mirror?.stop();
  mirror = null;
});

/** Opens the mirror's model (multimodal with `media`) and waits until the chat is ready. */
async function openChat({ media = true, ...options }: FakeNativeOptions & { media?: boolean } = {}) {
  mirror = await startMirror(media ? { template: 'gemma4', media: true } : {});
  const native = new FakeNative({ os: 'android', answer: () => ['A', ' cat', '.'], ...options });
  const app = renderApp(native, { catalog: [mirror.model], baseUrl: mirror.server.baseUrl });
  await app.user.press(screen.getByRole('button', { name: `Open ${mirror.model.name}` }));
  await screen.findByText(`Ask ${mirror.model.name} something.`, {}, { timeout: 5000 });
  return { user: app.user, native, model: mirror.model };
}

type User = Awaited<ReturnType<typeof openChat>>['user'];

const gemma = models.llm.gemma4_e2b;

/**
 * Sideloads Gemma 4's files for Vulkan (placeholder bytes: the fake runner reads none; its real
 * chat template) plus `encoders`, opens it on an Android phone and waits until it is ready.
 */
async function openSideloadedGemma(encoders: readonly string[]) {
  const dir = join(documentDir(), 'sideload', gemma.id);
  mkdirSync(dir, { recursive: true });
  for (const file of ['vulkan.pte', 'tokenizer.json', ...encoders]) writeFileSync(join(dir, file), 'bytes');
  const fixtures = join(dirname(require.resolve('react-native-executorch/package.json')), '__tests__', 'fixtures', 'gemma4');
  copyFileSync(join(fixtures, 'gemma4.jinja'), join(dir, 'chat_template.jinja'));
  const { user, native } = renderApp({ os: 'android' });
  await waitFor(() =>
    expect(within(screen.getByLabelText(gemma.name)).getByText('Files: sideloaded on this device')).toBeOnTheScreen(),
  );
  await user.press(screen.getByRole('button', { name: `Open ${gemma.name}` }));
  await screen.findByText(`Ask ${gemma.name} something.`);
  return { user, native, dir };
}

/** A real PNG in a temporary folder, as the picker hands it over. */
function photo(name = 'cat photo.png') {
  const path = join(documentDir(), name);
  writePng(path);
  return { uri: `file://${encodeURI(path)}`, path };
}

async function attachPhoto(user: User, uri: string) {
  picker.next = { uri, width: 8, height: 6, mimeType: 'image/png' };
  await user.press(screen.getByRole('button', { name: 'Attach a photo' }));
  await screen.findByLabelText('Photo to send');
}

/** `seconds` of a 440 Hz tone at 16 kHz, in 0.5 s buffers. */
function tone(seconds: number): Float32Array[] {
  const buffers: Float32Array[] = [];
  for (let start = 0; start < seconds * 16000; start += 8000) {
    buffers.push(Float32Array.from({ length: 8000 }, (_, i) => 0.5 * Math.sin((2 * Math.PI * 440 * (start + i)) / 16000)));
  }
  return buffers;
}

/** Records `buffers` through the app's Record and Stop buttons. */
async function record(user: User, buffers: readonly Float32Array[]) {
  await user.press(screen.getByRole('button', { name: 'Record audio' }));
  await screen.findByRole('button', { name: 'Stop recording' });
  const recorder = lastRecorder();
  expect(recorder.options).toEqual({ sampleRate: 16000, bufferLength: 1600, channelCount: 1 });
  act(() => buffers.forEach((b) => expect(recorder.deliver(b)).toBe(true)));
  await user.press(screen.getByRole('button', { name: 'Stop recording' }));
  return recorder;
}

async function type(user: User, text: string) {
  await user.type(screen.getByLabelText('Message'), text);
}

function concat(buffers: readonly Float32Array[]): Float32Array {
  const out = new Float32Array(buffers.reduce((n, b) => n + b.length, 0));
  let at = 0;
  for (const b of buffers) {
    out.set(b, at);
    at += b.length;
  }
  return out;
}

describe('attachments', () => {
  test('a photo and a recording reach the model with the text; the chat shows them and the encoder time', async () => {
    const { user, native } = await openChat({ mediaEncodeMs: 12 });
    // The published encoders were downloaded and loaded with the model.
    expect(native.loads[0]?.visionEncoderPath).toMatch(/xnnpack\/vision_encoder\.pte$/);
    expect(native.loads[0]?.audioEncoderPath).toMatch(/xnnpack\/audio_encoder\.pte$/);

    const { uri, path } = photo();
    await attachPhoto(user, uri);
    expect(picker.launches).toEqual([{ source: 'library', options: expect.objectContaining({ mediaTypes: 'images' }) }]);
    expect(screen.getByLabelText('Photo to send').props.source).toEqual({ uri });

    const buffers = tone(1.5);
    const recorder = await record(user, buffers);
    expect(recorder.stopped).toBe(true);
    expect(microphone.sessionActive).toBe(false);
    expect(screen.getByLabelText('Recording, 1.5 s')).toHaveTextContent('Audio 1.5 s');

    await type(user, 'What is in the picture, and what do you hear?');
    await user.press(screen.getByRole('button', { name: 'Send' }));
    await screen.findByText('A cat.', {}, { timeout: 3000 });
    await screen.findByRole('button', { name: 'Send' });

    // What the native side received: the image (the picked file's plain path), then the audio
    // (the recorded samples), then the text, as Gemma 4's template renders a user turn.
    const parts = native.promptParts[0] ?? [];
    const media = parts.filter((p) => p.media !== undefined);
    expect(media.map((p) => p.media)).toEqual(['image', 'audio']);
    expect(media[0]).toEqual({ media: 'image', path });
    expect(Array.from(media[1]?.samples ?? [])).toEqual(Array.from(concat(buffers)));
    const textAfter = (i: number) => parts.slice(parts.indexOf(media[i]!) + 1).map((p) => p.text ?? '').join('');
    expect(textAfter(1)).toMatch(/^What is in the picture, and what do you hear\?<turn\|>/);
    expect(parts.slice(0, parts.indexOf(media[0]!)).map((p) => p.text).join('')).toMatch(/<\|turn>user\n\n\n$/);

    // The user's bubble shows the thumbnail and the audio chip; nothing is pending any more.
    const bubble = screen.getByLabelText('Your message');
    expect(within(bubble).getByLabelText('Attached photo').props.source).toEqual({ uri });
    expect(within(bubble).getByLabelText('Recording, 1.5 s')).toBeOnTheScreen();
    expect(within(bubble).getByText('What is in the picture, and what do you hear?')).toBeOnTheScreen();
    expect(screen.queryByLabelText('Photo to send')).not.toBeOnTheScreen();
    expect(screen.queryByLabelText('Attachments to send')).not.toBeOnTheScreen();
    // Two media items at 12 ms each in the fake's encoders.
    expect(screen.getByLabelText('Stats')).toHaveTextContent(/^first token \d+ ms · encode 24 ms · prefill /);
  });

  test('a text-only model offers no attachments', async () => {
    const { user } = await openChat({ media: false });
    expect(screen.queryByRole('button', { name: 'Attach a photo' })).not.toBeOnTheScreen();
    expect(screen.queryByRole('button', { name: 'Take a photo' })).not.toBeOnTheScreen();
    expect(screen.queryByRole('button', { name: 'Record audio' })).not.toBeOnTheScreen();
    await type(user, 'Hi');
    await user.press(screen.getByRole('button', { name: 'Send' }));
    await screen.findByText('A cat.');
    // No media, no encoder time.
    expect(screen.getByLabelText('Stats')).toHaveTextContent(/^first token \d+ ms · prefill /);
  });

  test('a denied camera or microphone says what to do, and attaches nothing', async () => {
    const { user, native } = await openChat();
    picker.cameraGranted = false;
    await user.press(screen.getByRole('button', { name: 'Take a photo' }));
    expect(await screen.findByLabelText('Attachment notice')).toHaveTextContent(/may not use the camera.*Settings/);
    expect(picker.launches).toEqual([]);

    microphone.permission = 'Denied';
    await user.press(screen.getByRole('button', { name: 'Record audio' }));
    await waitFor(() => expect(screen.getByLabelText('Attachment notice')).toHaveTextContent(/may not use the microphone/));
    expect(microphone.recorders).toEqual([]);
    // Still usable: the Record button is back and nothing is pending.
    expect(screen.getByRole('button', { name: 'Record audio' })).toBeOnTheScreen();
    expect(screen.queryByLabelText('Attachments to send')).not.toBeOnTheScreen();

    // Granted once more, the camera works.
    picker.cameraGranted = true;
    const { uri } = photo('camera.png');
    picker.next = { uri, width: 8, height: 6, mimeType: 'image/png' };
    await user.press(screen.getByRole('button', { name: 'Take a photo' }));
    expect((await screen.findByLabelText('Photo to send')).props.source).toEqual({ uri });
    expect(picker.launches.map((l) => l.source)).toEqual(['camera']);
    expect(screen.queryByLabelText('Attachment notice')).not.toBeOnTheScreen();
    expect(native.prompts).toEqual([]);
  });

  test('removed attachments are not sent', async () => {
    const { user, native } = await openChat();
    await attachPhoto(user, photo().uri);
    await record(user, tone(1));
    await user.press(screen.getByRole('button', { name: 'Remove the photo' }));
    await user.press(screen.getByRole('button', { name: 'Remove the recording' }));
    expect(screen.queryByLabelText('Attachments to send')).not.toBeOnTheScreen();

    await type(user, 'Just text');
    await user.press(screen.getByRole('button', { name: 'Send' }));
    await screen.findByText('A cat.');
    await screen.findByRole('button', { name: 'Send' });
    expect(native.promptParts[0]?.some((p) => p.media !== undefined)).toBe(false);
    expect(native.prompts[0]).toContain('<|turn>user\nJust text<turn|>');
    expect(within(screen.getByLabelText('Your message')).queryByLabelText('Attached photo')).not.toBeOnTheScreen();
    expect(screen.getByLabelText('Stats')).not.toHaveTextContent(/encode/);
  });

  test('a cancelled pick attaches nothing; a HEIC picture is refused in words', async () => {
    const { user } = await openChat();
    await user.press(screen.getByRole('button', { name: 'Attach a photo' }));
    await waitFor(() => expect(picker.launches).toHaveLength(1));
    expect(screen.queryByLabelText('Photo to send')).not.toBeOnTheScreen();

    picker.next = { uri: 'file:///photos/IMG_1.heic', width: 8, height: 6, mimeType: 'image/heic' };
    await user.press(screen.getByRole('button', { name: 'Attach a photo' }));
    expect(await screen.findByLabelText('Attachment notice')).toHaveTextContent(
      'The model reads JPEG and PNG pictures; this one is image/heic. Pick another photo.',
    );
    expect(screen.queryByLabelText('Photo to send')).not.toBeOnTheScreen();
  });

  test('recording stops by itself at 30 s and says so', async () => {
    const { user, native } = await openChat();
    await user.press(screen.getByRole('button', { name: 'Record audio' }));
    await screen.findByRole('button', { name: 'Stop recording' });
    const recorder = lastRecorder();
    const buffers = tone(31);
    act(() => buffers.slice(0, 20).forEach((b) => recorder.deliver(b)));
    expect(screen.getByRole('button', { name: 'Stop recording' })).toHaveTextContent('Stop 10.0 s / 30 s');
    // The 60th half-second buffer reaches 30 s; the recorder stops before the 61st and 62nd.
    const delivered: boolean[] = [];
    act(() => buffers.slice(20).forEach((b) => delivered.push(recorder.deliver(b))));

    expect(await screen.findByLabelText('Attachment notice')).toHaveTextContent(/^Recording stopped at 30 s, the longest clip the model takes\.$/);
    expect(recorder.stopped).toBe(true);
    expect(delivered.filter(Boolean)).toHaveLength(40);
    expect(screen.getByRole('button', { name: 'Record audio' })).toBeOnTheScreen();
    expect(screen.getByLabelText('Recording, 30.0 s')).toBeOnTheScreen();

    await user.press(screen.getByRole('button', { name: 'Send' }));
    await screen.findByText('A cat.');
    const audio = native.promptParts[0]?.find((p) => p.media === 'audio');
    expect(audio?.samples?.length).toBe(30 * 16000);
    expect(Array.from(audio?.samples?.subarray(0, 8000) ?? [])).toEqual(Array.from(buffers[0]!));
  });

  test('a recorder that delivers another sample rate stops with a message, and nothing is attached', async () => {
    const { user } = await openChat();
    await user.press(screen.getByRole('button', { name: 'Record audio' }));
    await screen.findByRole('button', { name: 'Stop recording' });
    const recorder = lastRecorder();
    act(() => {
      recorder.deliver(new Float32Array(4800).fill(0.1), 48000);
    });
    expect(await screen.findByLabelText('Attachment notice')).toHaveTextContent(
      'Recording failed: the microphone delivered 48000 Hz audio instead of 16000 Hz.',
    );
    expect(recorder.stopped).toBe(true);
    expect(microphone.sessionActive).toBe(false);
    expect(screen.getByRole('button', { name: 'Record audio' })).toBeOnTheScreen();
    expect(screen.queryByLabelText('Attachments to send')).not.toBeOnTheScreen();
  });

  test('the picker counts the encoders in the download size', async () => {
    mirror = await startMirror({ template: 'gemma4', media: true });
    renderApp({ os: 'android' }, { catalog: [mirror.model], baseUrl: mirror.server.baseUrl });
    const tokenizer = mirror.model.tokenizer.files.reduce((n, f) => n + ('size' in f ? f.size : 0), 0);
    const total = MODEL_BYTES.length + tokenizer + ENCODER_BYTES.vision.length + ENCODER_BYTES.audio.length;
    expect(within(screen.getByLabelText(mirror.model.name)).getByText(`Download: ${formatBytes(total)}`)).toBeOnTheScreen();
  });

  test('sideloaded encoders are loaded with a sideloaded Gemma 4, which then offers attachments', async () => {
    const { user, native, dir } = await openSideloadedGemma(['vision_encoder.pte', 'audio_encoder.pte']);
    expect(native?.loads).toEqual([
      {
        modelPath: join(dir, 'vulkan.pte'),
        tokenizerPath: join(dir, 'tokenizer.json'),
        visionEncoderPath: join(dir, 'vision_encoder.pte'),
        audioEncoderPath: join(dir, 'audio_encoder.pte'),
        backend: 'vulkan',
      },
    ]);
    expect(screen.getByRole('button', { name: 'Attach a photo' })).toBeOnTheScreen();
    expect(screen.getByRole('button', { name: 'Record audio' })).toBeOnTheScreen();
  });

  test('a photo for a model loaded without its vision encoder is refused in words; the chat is unchanged', async () => {
    const { user, native } = await openSideloadedGemma([]);
    await attachPhoto(user, photo().uri);
    await type(user, 'What is this?');
    await user.press(screen.getByRole('button', { name: 'Send' }));

    expect(await screen.findByRole('alert')).toHaveTextContent('The model cannot take this attachment');
    expect(screen.getByText(/loaded without its vision encoder.*localFiles\.visionEncoderPath/)).toBeOnTheScreen();
    expect(screen.queryByLabelText('Your message')).not.toBeOnTheScreen();
    expect(native?.prompts).toEqual([]);
    expect(screen.getByRole('button', { name: 'Send again' })).toBeOnTheScreen();
  });
});
