import { BACKENDS, PLATFORM_PREFERENCE, type SimulatorRule } from './backends.generated';
import { ExecutorchError } from './errors';
import type { AnyLLMDescriptor, Backend, MinPlatform, Platform } from './models';

export { PLATFORM_PREFERENCE };

/** What each platform's simulator or emulator is called in messages. */
const SIMULATOR_NAMES: { readonly [P in Platform]: string } = {
  ios: 'iOS simulator',
  android: 'Android emulator',
};

/** What the device can run, as the native module reports it. */
export interface DeviceCapabilities {
  readonly os: Platform;
  /** iOS simulator or Android emulator. */
  readonly isSimulator: boolean;
  /** OS version as `platformInfo().osVersion` reports it: "17.4" on iOS, the API level ("34") on Android. */
  readonly osVersion: string;
  /** Backends linked into the native binary. */
  readonly availableBackends: readonly Backend[];
}

/** The backends a model ships, as a union type (a backend it does not ship does not typecheck). */
export type BackendOf<M extends AnyLLMDescriptor> = keyof M['variants'] & Backend;

/** Numeric segments of "17.4.1" or "34"; throws on anything else (the native side always reports one). */
function parseVersion(version: string, what: string): number[] {
  if (!/^\d+(\.\d+)*$/.test(version)) {
    throw new ExecutorchError(
      'invalid_argument',
      `${what} "${version}" is not a version like "17.4" (iOS) or "34" (Android API level).`,
    );
  }
  return version.split('.').map(Number);
}

/** Whether version `a` is below version `b`, segment by segment ("17" equals "17.0"). */
function isBelow(a: readonly number[], b: readonly number[]): boolean {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d < 0;
  }
  return false;
}

/** The variant's minimum OS version on `device.os` when the device is below it, else null. */
function unmetMinimum(minPlatform: MinPlatform, device: DeviceCapabilities): string | null {
  const required = minPlatform[device.os];
  if (required === undefined) return null;
  const actual = parseVersion(device.osVersion, 'The device OS version');
  return isBelow(actual, parseVersion(String(required), 'The registry minimum OS version'))
    ? String(required)
    : null;
}

/** Human name of an OS version: "iOS 17.0", "Android API 28". */
function osName(os: Platform, version: string): string {
  return os === 'ios' ? `iOS ${version}` : `Android API ${version}`;
}

/** The catalog's rule for `backend` on `device` (`allowed` on a real device). */
function simulatorRule(backend: Backend, device: DeviceCapabilities): SimulatorRule {
  return device.isSimulator ? BACKENDS[backend].simulator[device.os] : 'allowed';
}

/** Why a backend cannot run; `requiredOsVersion` when the device's OS is too old for its variant. */
interface Unrunnable {
  readonly reason: string;
  readonly requiredOsVersion?: string;
}

/**
 * Why `backend` of `model` cannot run on `device` at all, or null when it can. Checked in this
 * order: shipped by the model, linked into the binary, allowed on this simulator, OS version.
 */
function whyNotRunnable(model: AnyLLMDescriptor, backend: Backend, device: DeviceCapabilities): Unrunnable | null {
  const variants = model.variants as Partial<Record<Backend, { readonly minPlatform: MinPlatform }>>;
  const variant = variants[backend];
  if (variant === undefined) return { reason: `${model.name} ships no ${backend} variant` };
  if (!device.availableBackends.includes(backend)) {
    return { reason: `the native binary was built without the ${backend} backend` };
  }
  if (simulatorRule(backend, device) === 'never') {
    return { reason: `${BACKENDS[backend].title} does not run on the ${SIMULATOR_NAMES[device.os]}` };
  }
  const required = unmetMinimum(variant.minPlatform, device);
  if (required !== null) {
    return {
      reason:
        `the ${backend} variant of ${model.name} needs ${osName(device.os, required)} or newer ` +
        `and this device runs ${osName(device.os, device.osVersion)}`,
      requiredOsVersion: required,
    };
  }
  return null;
}

/**
 * Whether automatic resolution skips `backend` on `device` although it could be requested
 * (Vulkan on an Android emulator, whose drivers are unreliable for ExecuTorch's shaders).
 */
function skippedAutomatically(backend: Backend, device: DeviceCapabilities): boolean {
  return simulatorRule(backend, device) === 'explicit_only';
}

/** Every backend `model` ships that can run on `device`, in the order of preference. */
function runnableBackends<M extends AnyLLMDescriptor>(model: M, device: DeviceCapabilities): BackendOf<M>[] {
  const shipped = Object.keys(model.variants) as BackendOf<M>[];
  const order: Backend[] = [model.platformDefaults[device.os], ...PLATFORM_PREFERENCE[device.os], ...shipped];
  const result: BackendOf<M>[] = [];
  for (const backend of order) {
    const b = backend as BackendOf<M>;
    if (shipped.includes(b) && !result.includes(b) && whyNotRunnable(model, b, device) === null) result.push(b);
  }
  return result;
}

/**
 * The backends of `model` that automatic resolution would choose from on `device`, in order:
 * the model's platform default, then the platform's preference order, then anything else the
 * model ships. Excludes what cannot run here (not linked, a backend whose simulator rule is
 * `never` on this simulator such as MLX on the iOS simulator, a variant whose registry
 * `minPlatform` is above the device's OS version) and one whose rule is `explicit_only` (Vulkan
 * on an Android emulator, which an explicit `backend: 'vulkan'` still gets).
 */
export function candidateBackends<M extends AnyLLMDescriptor>(model: M, device: DeviceCapabilities): BackendOf<M>[] {
  return runnableBackends(model, device).filter((b) => !skippedAutomatically(b, device));
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
  if (explicit !== undefined) return checkExplicit(model, device, explicit);
  const chosen = candidateBackends(model, device)[0];
  if (chosen === undefined) {
    const reasons = (Object.keys(model.variants) as Backend[]).map((b) => whyNotChosen(model, b, device));
    throw new ExecutorchError(
      'no_backend',
      `${model.name} ships ${Object.keys(model.variants).join(', ')} but none is chosen on this ` +
        `${device.os}${device.isSimulator ? ' simulator' : ''}: ${reasons.join('; ')}. ` +
        'Use another model, a newer OS, or a native build that links one of its backends.',
      { alternatives: runnableBackends(model, device) },
    );
  }
  return chosen;
}

/** Why automatic resolution does not choose `backend` (one of the model's) on `device`. */
function whyNotChosen(model: AnyLLMDescriptor, backend: Backend, device: DeviceCapabilities): string {
  const why = whyNotRunnable(model, backend, device);
  if (why !== null) return why.reason;
  return (
    `${backend} is not chosen automatically on an ${SIMULATOR_NAMES[device.os]} ` +
    `(pass \`backend: '${backend}'\` to force it)`
  );
}

function checkExplicit<M extends AnyLLMDescriptor>(
  model: M,
  device: DeviceCapabilities,
  explicit: BackendOf<M>,
): BackendOf<M> {
  const why = whyNotRunnable(model, explicit, device);
  if (why === null) return explicit;
  const alternatives = runnableBackends(model, device);
  throw new ExecutorchError(
    'backend_unavailable',
    `Backend "${explicit}" is unavailable: ${why.reason}. Backends that work for ${model.name} on ` +
      `this device: ${alternatives.length ? alternatives.join(', ') : 'none'}. Pass one of them, ` +
      'or omit `backend` to choose automatically.',
    {
      alternatives,
      ...(why.requiredOsVersion === undefined
        ? {}
        : { requiredOsVersion: why.requiredOsVersion, osVersion: device.osVersion }),
    },
  );
}
