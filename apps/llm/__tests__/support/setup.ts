/**
 * Runs before every test file: `react-native-blob-util` (a native module) becomes the package's
 * Node stand-in over a fresh temporary documents directory per test, `expo-image-picker` and
 * `react-native-audio-api` (native modules) become the stand-ins of mediaMocks.ts, reset per
 * test, and the native seam (`globalThis.__RNExecutorch`) is emptied so each test installs its
 * own double.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import ReactNativeBlobUtil from 'react-native-blob-util';

import { resetMediaMocks } from './mediaMocks';

jest.mock('react-native-blob-util', () => {
  const { fakeBlobUtil } = jest.requireActual<
    typeof import('react-native-executorch/__tests__/support/fakeBlobUtil')
  >('react-native-executorch/__tests__/support/fakeBlobUtil');
  // The directory is replaced in beforeEach; blob-util's `dirs` are read when the app mounts.
  return { __esModule: true, default: fakeBlobUtil('/nonexistent') };
});

jest.mock('expo-image-picker', () => require('./mediaMocks').imagePickerMock);
jest.mock('react-native-audio-api', () => require('./mediaMocks').audioApiMock);

let documentDir = '';

beforeEach(() => {
  resetMediaMocks();
  documentDir = mkdtempSync(join(tmpdir(), 'rne-app-'));
  (ReactNativeBlobUtil.fs.dirs as { DocumentDir: string }).DocumentDir = documentDir;
});

afterEach(() => {
  globalThis.__RNExecutorch = undefined;
  rmSync(documentDir, { recursive: true, force: true });
});
