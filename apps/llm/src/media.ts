/**
 * Photos and voice recordings for the chat: what `sendMessage(text, { image, audio })` takes, an
 * image file's plain absolute path and 16 kHz mono float PCM, from expo-image-picker and
 * react-native-audio-api. Permission denials and failures come back as messages for the user,
 * never as exceptions.
 */
import * as ImagePicker from 'expo-image-picker';
import { AudioManager, AudioRecorder, type AudioBuffer } from 'react-native-audio-api';
import { AUDIO_SAMPLE_RATE } from 'react-native-executorch';

/** The sample rate the SDK takes audio at (Gemma 4's audio encoder's). */
export const SAMPLE_RATE = AUDIO_SAMPLE_RATE;
/** The longest clip Gemma 4 takes; recording stops there. */
export const MAX_AUDIO_SECONDS = 30;
const MAX_SAMPLES = SAMPLE_RATE * MAX_AUDIO_SECONDS;
/** Samples per recorder callback: 0.1 s, so the recording's timer moves smoothly. */
const BUFFER_LENGTH = SAMPLE_RATE / 10;

/** A picture ready to send: `path` for the SDK, `uri` for an <Image>. */
export interface PickedImage {
  readonly path: string;
  readonly uri: string;
}

export type PickResult =
  | { readonly status: 'picked'; readonly image: PickedImage }
  | { readonly status: 'cancelled' }
  | { readonly status: 'failed'; readonly message: string };

export const CAMERA_DENIED =
  'The app may not use the camera. Allow it in Settings (ExecuTorch LLM → Camera), or pick a photo from the library.';
export const MICROPHONE_DENIED =
  'The app may not use the microphone. Allow it in Settings (ExecuTorch LLM → Microphone) to record a question.';

/**
 * The plain absolute path of a `file://` URI, as the SDK takes local files. Other schemes
 * (`content://`, `ph://`) are not files the runner can open: null.
 */
export function filePath(uri: string): string | null {
  if (!uri.startsWith('file://')) return uri.startsWith('/') ? uri : null;
  try {
    return decodeURI(uri.slice('file://'.length));
  } catch {
    return null;
  }
}

/** The runner decodes JPEG and PNG only. */
function isJpegOrPng(asset: ImagePicker.ImagePickerAsset): boolean {
  if (asset.mimeType) return asset.mimeType === 'image/jpeg' || asset.mimeType === 'image/png';
  return /\.(jpe?g|png)$/i.test(asset.uri);
}

const PICK_OPTIONS: ImagePicker.ImagePickerOptions = {
  mediaTypes: 'images',
  // iOS: hand over HEIC photos as JPEG (the runner decodes JPEG and PNG).
  preferredAssetRepresentationMode: ImagePicker.UIImagePickerPreferredAssetRepresentationMode.Compatible,
  quality: 0.9,
};

/**
 * Lets the user pick a photo from the library or take one with the camera. Only the camera asks
 * for a permission: the system photo pickers (iOS 14+, Android 13+) need none.
 */
export async function pickImage(source: 'library' | 'camera'): Promise<PickResult> {
  try {
    if (source === 'camera' && !(await ImagePicker.requestCameraPermissionsAsync()).granted) {
      return { status: 'failed', message: CAMERA_DENIED };
    }
    const result =
      source === 'camera'
        ? await ImagePicker.launchCameraAsync(PICK_OPTIONS)
        : await ImagePicker.launchImageLibraryAsync(PICK_OPTIONS);
    const asset = result.canceled ? undefined : result.assets[0];
    if (!asset) return { status: 'cancelled' };
    const path = filePath(asset.uri);
    if (path === null) {
      return { status: 'failed', message: `The picker gave no file for that photo (${asset.uri}); pick it again.` };
    }
    if (!isJpegOrPng(asset)) {
      const kind = asset.mimeType ?? asset.uri.slice(asset.uri.lastIndexOf('.') + 1);
      return {
        status: 'failed',
        message: `The model reads JPEG and PNG pictures; this one is ${kind}. Pick another photo.`,
      };
    }
    return { status: 'picked', image: { path, uri: asset.uri } };
  } catch (error) {
    return { status: 'failed', message: `The photo could not be opened: ${describe(error)}` };
  }
}

/** What a {@link VoiceRecorder} reports while it records. */
export interface RecorderEvents {
  /** Seconds recorded so far. */
  onProgress(seconds: number): void;
  /** Recording stopped by itself at {@link MAX_AUDIO_SECONDS}, with the clip. */
  onLimit(clip: Float32Array): void;
  /** Recording failed and stopped. */
  onError(message: string): void;
}

/**
 * Records from the microphone as 16 kHz mono float PCM (react-native-audio-api resamples to
 * the rate asked for) and stops at {@link MAX_AUDIO_SECONDS}.
 */
export class VoiceRecorder {
  private recorder: AudioRecorder | null = null;
  private chunks: Float32Array[] = [];
  private samples = 0;
  /** Set by stop(): a start still waiting (for the permission dialog) must not record. */
  private stopped = false;

  constructor(private readonly events: RecorderEvents) {}

  /**
   * Starts recording (once per recorder); resolves with a message for the user when it cannot.
   * A stop() while it waits for the permission wins: nothing is recorded.
   */
  async start(): Promise<string | null> {
    try {
      const permission = await AudioManager.requestRecordingPermissions();
      if (this.stopped) return null;
      if (permission !== 'Granted') return MICROPHONE_DENIED;
      AudioManager.setAudioSessionOptions({ iosCategory: 'record', iosMode: 'default' });
      await AudioManager.setAudioSessionActivity(true);
      const recorder = new AudioRecorder();
      this.recorder = recorder;
      const ready = recorder.onAudioReady(
        { sampleRate: SAMPLE_RATE, bufferLength: BUFFER_LENGTH, channelCount: 1 },
        ({ buffer, numFrames }) => this.take(buffer, numFrames),
      );
      if (ready.status === 'error') throw new Error(ready.message);
      recorder.onError(({ message }) => this.fail(message));
      const started = await recorder.start();
      if (started.status === 'error') throw new Error(started.message);
      if (this.stopped) await this.release();
      return null;
    } catch (error) {
      await this.release();
      return `The microphone could not start: ${describe(error)}.`;
    }
  }

  /** Stops recording; resolves with the clip, or null when nothing was recorded. */
  async stop(): Promise<Float32Array | null> {
    this.stopped = true;
    await this.release();
    return this.clip();
  }

  private take(buffer: AudioBuffer, numFrames: number): void {
    if (!this.recorder) return; // a buffer that arrives after stop
    if (buffer.sampleRate !== SAMPLE_RATE) {
      this.fail(`the microphone delivered ${buffer.sampleRate} Hz audio instead of ${SAMPLE_RATE} Hz`);
      return;
    }
    // Copied: the recorder owns the buffer's memory.
    const data = buffer.getChannelData(0).slice(0, Math.min(numFrames, MAX_SAMPLES - this.samples));
    this.chunks.push(data);
    this.samples += data.length;
    this.events.onProgress(this.samples / SAMPLE_RATE);
    if (this.samples >= MAX_SAMPLES) {
      void this.release().then(() => {
        const clip = this.clip();
        if (clip) this.events.onLimit(clip);
      });
    }
  }

  private fail(message: string): void {
    void this.release().then(() => this.events.onError(`Recording failed: ${message}.`));
  }

  /** The recorded samples as one array (null when there are none). */
  private clip(): Float32Array | null {
    if (this.samples === 0) return null;
    const clip = new Float32Array(this.samples);
    let at = 0;
    for (const chunk of this.chunks) {
      clip.set(chunk, at);
      at += chunk.length;
    }
    this.chunks = [];
    this.samples = 0;
    return clip;
  }

  /**
   * Stops the recorder and gives the audio session back; safe to call twice, never rejects (a
   * recorder that fails to stop has nothing more to give).
   */
  private async release(): Promise<void> {
    const recorder = this.recorder;
    if (!recorder) return;
    this.recorder = null;
    try {
      recorder.clearOnAudioReady();
      recorder.clearOnError();
      await recorder.stop();
    } catch {
      // Stopping failed: the recording is over either way.
    }
    await AudioManager.setAudioSessionActivity(false).catch(() => undefined);
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
