import { ExecutorchError } from '../errors';
import type { NativeExecutorch } from './seam';

/**
 * Returns the installed native module, installing the JSI binding on first use.
 * Throws `native_module_missing` when the native part of the package is not linked.
 */
export function getNativeExecutorch(): NativeExecutorch {
  if (globalThis.__RNExecutorch) return globalThis.__RNExecutorch;
  // Required lazily so that code paths that never touch native code (downloads, templates)
  // do not need the TurboModule registry.
  const installer = (require('./NativeRNExecutorch') as typeof import('./NativeRNExecutorch'))
    .default;
  if (installer?.install() && globalThis.__RNExecutorch) return globalThis.__RNExecutorch;
  throw new ExecutorchError(
    'native_module_missing',
    'The react-native-executorch native module is not linked. Rebuild the app after installing ' +
      'the package (`npx pod-install` on iOS, a Gradle sync on Android); Expo Go cannot load it, ' +
      'use a development build.',
  );
}

