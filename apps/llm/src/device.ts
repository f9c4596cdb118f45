import { TurboModuleRegistry, type TurboModule } from 'react-native';
import type { DeviceCapabilities, NativeExecutorch } from 'react-native-executorch';

interface Installer extends TurboModule {
  install(): boolean;
}

/**
 * The native module, installed if needed, or null when the app was built without it.
 *
 * The package resolves the backend only inside `load()`; the picker must show it before
 * loading, and the package does not export its own `getNativeExecutorch()`. So this repeats its
 * two steps: the JSI object at `globalThis.__RNExecutorch` (the documented seam, where tests put
 * their double), else the `RNExecutorch` TurboModule's `install()`.
 */
function nativeModule(): NativeExecutorch | null {
  if (globalThis.__RNExecutorch) return globalThis.__RNExecutorch;
  TurboModuleRegistry.get<Installer>('RNExecutorch')?.install();
  return globalThis.__RNExecutorch ?? null;
}

/** What the native binary can run on this device, or null when it is not linked. */
export function deviceCapabilities(): DeviceCapabilities | null {
  const native = nativeModule();
  if (!native) return null;
  return { ...native.platformInfo(), availableBackends: native.availableBackends() };
}
