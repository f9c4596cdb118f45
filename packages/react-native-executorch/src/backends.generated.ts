// GENERATED FILE: do not edit. Source: model-registry/backends.yaml.
// Regenerate with: .venv/bin/python tools/gen_registry.py
/* eslint-disable */

/** A platform the SDK runs on. */
export type Platform = 'ios' | 'android';

/** A compute backend a model variant is exported for. */
export type Backend = 'mlx' | 'vulkan' | 'xnnpack';

/**
 * How a backend may run on a platform's simulator or emulator: `never` (not even when asked
 * for), `explicit_only` (when asked for by name, never chosen automatically) or `allowed`.
 */
export type SimulatorRule = 'allowed' | 'never' | 'explicit_only';

/** What the SDK knows of a backend. */
export interface BackendInfo {
  readonly name: Backend;
  /** Its name in messages: "MLX". */
  readonly title: string;
  /** Its name in UIs: "MLX (GPU)". */
  readonly label: string;
  readonly processor: 'CPU' | 'GPU';
  /** The rule on each platform's simulator or emulator. */
  readonly simulator: { readonly [P in Platform]: SimulatorRule };
}

/** Every backend, by name. */
export const BACKENDS: { readonly [B in Backend]: BackendInfo } = {
  mlx: {
    name: 'mlx',
    title: 'MLX',
    label: 'MLX (GPU)',
    processor: 'GPU',
    simulator: {
      ios: 'never',
      android: 'allowed',
    },
  },
  vulkan: {
    name: 'vulkan',
    title: 'Vulkan',
    label: 'Vulkan (GPU)',
    processor: 'GPU',
    simulator: {
      ios: 'allowed',
      android: 'explicit_only',
    },
  },
  xnnpack: {
    name: 'xnnpack',
    title: 'XNNPACK',
    label: 'XNNPACK (CPU)',
    processor: 'CPU',
    simulator: {
      ios: 'allowed',
      android: 'allowed',
    },
  },
};

/** Backends each platform prefers, best first (after the model's own default). */
export const PLATFORM_PREFERENCE: { readonly [P in Platform]: readonly Backend[] } = {
  ios: [
    'mlx',
    'xnnpack',
  ],
  android: [
    'vulkan',
    'xnnpack',
  ],
};
