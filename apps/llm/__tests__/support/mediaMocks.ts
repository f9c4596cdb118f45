/**
 * Jest stand-ins for the app's two native media modules, installed for every test by setup.ts
 * and driven by the tests: `expo-image-picker` returns the file a test puts in
 * {@link picker}.next, and `react-native-audio-api`'s recorder delivers the Float32Array buffers
 * a test hands to {@link FakeRecorder.deliver}, as the native recorder's callback would.
 */
import { writeFileSync } from 'node:fs';
import { crc32, deflateSync } from 'node:zlib';

import type { ImagePickerAsset, ImagePickerOptions, ImagePickerResult } from 'expo-image-picker';
import type { AudioRecorder, AudioRecorderCallbackOptions, PermissionStatus } from 'react-native-audio-api';

/** The recorder's buffer callback (its event type is not exported). */
type AudioReadyCallback = Parameters<AudioRecorder['onAudioReady']>[1];
type AudioReadyEvent = Parameters<AudioReadyCallback>[0];

/** What the picker does, and what it was asked. */
export const picker = {
  cameraGranted: true,
  /** The asset the next launch returns; null: the user cancels. */
  next: null as ImagePickerAsset | null,
  launches: [] as { source: 'camera' | 'library'; options: ImagePickerOptions | undefined }[],
};

async function launch(source: 'camera' | 'library', options?: ImagePickerOptions): Promise<ImagePickerResult> {
  picker.launches.push({ source, options });
  const asset = picker.next;
  picker.next = null;
  return asset ? { canceled: false, assets: [asset] } : { canceled: true, assets: null };
}

export const imagePickerMock = {
  UIImagePickerPreferredAssetRepresentationMode: {
    Automatic: 'automatic',
    Compatible: 'compatible',
    Current: 'current',
  },
  requestCameraPermissionsAsync: async () => ({
    granted: picker.cameraGranted,
    status: picker.cameraGranted ? 'granted' : 'denied',
    canAskAgain: !picker.cameraGranted,
    expires: 'never',
  }),
  launchCameraAsync: (options?: ImagePickerOptions) => launch('camera', options),
  launchImageLibraryAsync: (options?: ImagePickerOptions) => launch('library', options),
};

/** The recorder side: the permission answer and every recorder the app created. */
export const microphone = {
  permission: 'Granted' as PermissionStatus,
  recorders: [] as FakeRecorder[],
  /** Whether the audio session is active (the app must give it back). */
  sessionActive: false,
};

/** `react-native-audio-api`'s AudioRecorder, delivering what the test gives it. */
export class FakeRecorder {
  options: AudioRecorderCallbackOptions | null = null;
  recording = false;
  stopped = false;
  private callback: AudioReadyCallback | null = null;
  private delivered = 0;

  constructor() {
    microphone.recorders.push(this);
  }

  onAudioReady(options: AudioRecorderCallbackOptions, callback: AudioReadyCallback) {
    this.options = options;
    this.callback = callback;
    return { status: 'success' as const };
  }

  clearOnAudioReady(): void {
    this.callback = null;
  }

  onError(): void {}
  clearOnError(): void {}

  async start() {
    this.recording = true;
    return { status: 'success' as const };
  }

  async stop() {
    this.recording = false;
    this.stopped = true;
    return { status: 'success' as const, path: '', size: 0, duration: 0 };
  }

  /**
   * One buffer of mono samples at the rate the app asked for (or `sampleRate`); false when the
   * recorder is stopped or has no callback (the buffer goes nowhere, as on a device).
   */
  deliver(samples: Float32Array, sampleRate = this.options?.sampleRate ?? 0): boolean {
    if (!this.callback || !this.recording) return false;
    const buffer = {
      sampleRate,
      length: samples.length,
      duration: samples.length / sampleRate,
      numberOfChannels: 1,
      getChannelData: (channel: number) => {
        if (channel !== 0) throw new Error(`no channel ${channel}`);
        return samples;
      },
    };
    const when = this.delivered / sampleRate;
    this.delivered += samples.length;
    this.callback({ buffer, numFrames: samples.length, when } as unknown as AudioReadyEvent);
    return true;
  }
}

export const audioApiMock = {
  AudioRecorder: FakeRecorder,
  AudioManager: {
    requestRecordingPermissions: async () => microphone.permission,
    setAudioSessionOptions: () => {},
    setAudioSessionActivity: async (active: boolean) => {
      microphone.sessionActive = active;
    },
  },
};

/** Back to a granting, empty state (each test starts from it). */
export function resetMediaMocks(): void {
  picker.cameraGranted = true;
  picker.next = null;
  picker.launches = [];
  microphone.permission = 'Granted';
  microphone.recorders = [];
  microphone.sessionActive = false;
}

/** The recorder the app started last. */
export function lastRecorder(): FakeRecorder {
  const recorder = microphone.recorders[microphone.recorders.length - 1];
  if (!recorder) throw new Error('the app created no AudioRecorder');
  return recorder;
}

/** Writes a real `width` x `height` RGB PNG (a gradient) to `path`. */
export function writePng(path: string, width = 8, height = 6): void {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc32(body), 8 + data.length);
    return out;
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8-bit RGB, no interlace
  // Each row: filter type 0, then RGB pixels.
  const rows = Buffer.alloc(height * (1 + width * 3));
  for (let y = 0; y < height; y += 1) {
    for (let x = 0; x < width; x += 1) {
      rows.set([Math.floor((x * 255) / width), Math.floor((y * 255) / height), 128], y * (1 + width * 3) + 1 + x * 3);
    }
  }
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  writeFileSync(
    path,
    Buffer.concat([signature, chunk('IHDR', header), chunk('IDAT', deflateSync(rows)), chunk('IEND', Buffer.alloc(0))]),
  );
}
