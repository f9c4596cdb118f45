/**
 * Runs before every test file: `react-native-blob-util` (a native module) becomes the package's
 * Node stand-in over a fresh temporary documents directory per test, and the native seam
 * (`globalThis.__RNExecutorch`) is emptied so each test installs its own double.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import ReactNativeBlobUtil from 'react-native-blob-util';

jest.mock('react-native-blob-util', () => {
  const { fakeBlobUtil } = jest.requireActual<
    typeof import('react-native-executorch/__tests__/support/fakeBlobUtil')
  >('react-native-executorch/__tests__/support/fakeBlobUtil');
  // The directory is replaced in beforeEach; blob-util's `dirs` are read when the app mounts.
  return { __esModule: true, default: fakeBlobUtil('/nonexistent') };
});

let documentDir = '';

beforeEach(() => {
  documentDir = mkdtempSync(join(tmpdir(), 'rne-app-'));
  (ReactNativeBlobUtil.fs.dirs as { DocumentDir: string }).DocumentDir = documentDir;
});

afterEach(() => {
  globalThis.__RNExecutorch = undefined;
  rmSync(documentDir, { recursive: true, force: true });
});
