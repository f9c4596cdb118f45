import { ExecutorchError } from './errors';
import type { AnyLLMDescriptor, Backend, Platform } from './models';

/** Backends each platform prefers, best first (after the model's own default). */
export const PLATFORM_PREFERENCE: { readonly [P in Platform]: readonly Backend[] } = {
  ios: ['mlx', 'xnnpack'],
  android: ['vulkan', 'xnnpack'],
};

/** What the device can run, as the native module reports it. */
export interface DeviceCapabilities {
  readonly os: Platform;
  readonly isSimulator: boolean;
  /** Backends linked into the native binary. */
  readonly availableBackends: readonly Backend[];
}

/** The backends a model ships, as a union type (a backend it does not ship does not typecheck). */
export type BackendOf<M extends AnyLLMDescriptor> = keyof M['variants'] & Backend;

/** Whether `backend` can run on `device` at all, regardless of the model. */
function runsOn(backend: Backend, device: DeviceCapabilities): boolean {
  if (!device.availableBackends.includes(backend)) return false;
  // MLX needs a real Apple GPU; the simulator's Metal cannot run it.
  if (backend === 'mlx' && device.os === 'ios' && device.isSimulator) return false;
  return true;
}

/**
 * The backends of `model` that can run on `device`, in the order they would be chosen:
 * the model's platform default, then the platform's preference order, then anything else the
 * model ships.
 */
export function candidateBackends<M extends AnyLLMDescriptor>(
  model: M,
  device: DeviceCapabilities,
): BackendOf<M>[] {
  const shipped = Object.keys(model.variants) as BackendOf<M>[];
  const order: Backend[] = [
    model.platformDefaults[device.os],
    ...PLATFORM_PREFERENCE[device.os],
    ...shipped,
  ];
  const result: BackendOf<M>[] = [];
  for (const backend of order) {
    const b = backend as BackendOf<M>;
    if (shipped.includes(b) && !result.includes(b) && runsOn(b, device)) result.push(b);
  }
  return result;
}

/**
 * Chooses the backend to run `model` on: the explicit one if given (an error naming the
 * alternatives if it cannot run here, never a silent fallback), else the first of
 * {@link candidateBackends}.
 */
export function resolveBackend<M extends AnyLLMDescriptor>(
  model: M,
  device: DeviceCapabilities,
  explicit?: BackendOf<M>,
): BackendOf<M> {
  const candidates = candidateBackends(model, device);
  if (explicit !== undefined) {
    if (candidates.includes(explicit)) return explicit;
    const why = !(explicit in model.variants)
      ? `${model.name} ships no ${explicit} variant`
      : explicit === 'mlx' && device.os === 'ios' && device.isSimulator
        ? 'MLX does not run on the iOS simulator'
        : `the native binary was built without the ${explicit} backend`;
    const options = candidates.length ? candidates.join(', ') : 'none';
    throw new ExecutorchError(
      'backend_unavailable',
      `Backend "${explicit}" is unavailable: ${why}. Backends that work for ${model.name} on ` +
        `this device: ${options}. Pass one of them, or omit \`backend\` to choose automatically.`,
      { alternatives: candidates },
    );
  }
  const chosen = candidates[0];
  if (chosen === undefined) {
    throw new ExecutorchError(
      'no_backend',
      `${model.name} ships ${Object.keys(model.variants).join(', ')} but this ` +
        `${device.os}${device.isSimulator ? ' simulator' : ''} can run only ` +
        `${device.availableBackends.join(', ') || 'none'}. Use another model or a native build ` +
        'that links one of its backends.',
      { alternatives: [] },
    );
  }
  return chosen;
}
