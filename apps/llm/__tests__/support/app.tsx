import { render, userEvent } from '@testing-library/react-native';
import ReactNativeBlobUtil from 'react-native-blob-util';
import { FakeNative, type FakeNativeOptions } from 'react-native-executorch/jest';

import App, { type AppProps } from '../../src/App';

/** The app's documents directory in this test (see setup.ts). */
export function documentDir(): string {
  return ReactNativeBlobUtil.fs.dirs.DocumentDir;
}

/**
 * Renders the app on a device simulated by the package's native test double (null: an app
 * built without the native module) and returns a user to drive it.
 */
export function renderApp(native: FakeNative | FakeNativeOptions | null, props: AppProps = {}) {
  const double = native === null ? null : native instanceof FakeNative ? native : new FakeNative(native);
  globalThis.__RNExecutorch = double ?? undefined;
  const user = userEvent.setup();
  const screen = render(<App {...props} />);
  return { user, screen, native: double };
}

/** `count` words, " w0 w1 …", as the pieces of a streamed answer. */
export function words(count: number): string[] {
  return Array.from({ length: count }, (_, i) => ` w${i}`);
}
