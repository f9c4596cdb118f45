/**
 * Codegen spec of the tiny TurboModule whose only job is to install the JSI binding
 * (`globalThis.__RNExecutorch`) on the JS runtime. Everything else goes through JSI.
 */
import type { TurboModule } from 'react-native';
import { TurboModuleRegistry } from 'react-native';

export interface Spec extends TurboModule {
  /** Installs `globalThis.__RNExecutorch`; returns true when it is installed. */
  install(): boolean;
}

export default TurboModuleRegistry.get<Spec>('RNExecutorch');
