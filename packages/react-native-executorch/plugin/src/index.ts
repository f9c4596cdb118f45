/**
 * Expo config plugin of react-native-executorch (`"plugins": ["react-native-executorch"]`):
 * applies what the native side needs at `expo prebuild`.
 *
 * - iOS deployment target 17.0 (the podspec's platform: MLX needs iOS 17), via the built-in
 *   `ios.deploymentTarget` that prebuild writes to the Xcode project and `Podfile.properties.json`;
 * - the `com.apple.developer.kernel.increased-memory-limit` entitlement (a multi-GB model needs
 *   more than an iOS app's default memory limit; option `increasedMemoryLimit: false` drops it);
 * - Android `minSdkVersion` 26 in `gradle.properties` (`android.minSdkVersion`, which Expo's
 *   template reads), API 28 being needed only by Vulkan variants, which resolution checks at run time;
 * - Android ABIs (`reactNativeArchitectures`) limited to those `libexecutorch.so` is built for,
 *   so that no APK installs on a device it cannot run on;
 * - with option `backends` ("all" or "cpu"), the set of ExecuTorch backends whose native binaries
 *   the build fetches (scripts/fetch-binaries.js): `rneBinariesBackends` in `gradle.properties` and
 *   in `Podfile.properties.json`, which android/build.gradle and the podspec read. "cpu" (XNNPACK
 *   only) is the smaller download and app, for an app that runs no Vulkan or MLX model.
 *
 * Higher versions and narrower ABI lists the app sets are kept; applying it twice changes nothing.
 */
import { withGradleProperties, withPodfileProperties, type ConfigPlugin } from 'expo/config-plugins';

/** The minimum iOS version: the podspec's platform (MLX needs iOS 17). */
export const IOS_DEPLOYMENT_TARGET = '17.0';
/** The minimum Android API level: the library's minSdkVersion (XNNPACK runs from 26). */
export const ANDROID_MIN_SDK = 26;
/** The ABIs of `third-party/android/<abi>/libexecutorch.so`. */
export const ANDROID_ABIS = ['arm64-v8a', 'x86_64'] as const;
/** Entitlement that lets an iOS app use more memory than the default limit. */
export const INCREASED_MEMORY_ENTITLEMENT = 'com.apple.developer.kernel.increased-memory-limit';

/** The backend sets native binaries are published for: every delegate, or XNNPACK alone. */
export const BACKEND_SETS = ['all', 'cpu'] as const;
export type BackendSet = (typeof BACKEND_SETS)[number];
/** The Gradle property and Podfile.properties.json key the native builds read the set from. */
export const BACKENDS_PROPERTY = 'rneBinariesBackends';

/** Options of the plugin (`["react-native-executorch", { ... }]`). */
export interface ExecutorchPluginOptions {
  /** Add the increased-memory-limit entitlement on iOS. Default true. */
  readonly increasedMemoryLimit?: boolean;
  /** The native binaries to fetch: "all" (GPU delegate and XNNPACK, the default) or "cpu". */
  readonly backends?: BackendSet;
}

/** One line of `gradle.properties`, as Expo's `withGradleProperties` hands them over. */
export type GradleProperty =
  | { type: 'property'; key: string; value: string }
  | { type: 'comment'; value: string }
  | { type: 'empty' };

/** Numeric segments of "17.0"; throws a clear error for anything that is not a version. */
function parseVersion(version: string, what: string): number[] {
  if (!/^\d+(\.\d+)*$/.test(version)) {
    throw new Error(`react-native-executorch: ${what} "${version}" is not a version like "17.0".`);
  }
  return version.split('.').map(Number);
}

/** The higher of two "major.minor" versions, `current` when they are equal. */
export function maxVersion(current: string | undefined, minimum: string): string {
  if (current === undefined) return minimum;
  const a = parseVersion(current, 'ios.deploymentTarget');
  const b = parseVersion(minimum, 'minimum');
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d > 0 ? current : minimum;
  }
  return current;
}

/** Sets `key` to `value` in `properties` (in place of an existing line, else appended). */
function setProperty(properties: GradleProperty[], key: string, value: string): GradleProperty[] {
  const line: GradleProperty = { type: 'property', key, value };
  const index = properties.findIndex((p) => p.type === 'property' && p.key === key);
  return index === -1 ? [...properties, line] : properties.map((p, i) => (i === index ? line : p));
}

function getProperty(properties: readonly GradleProperty[], key: string): string | undefined {
  const found = properties.find((p) => p.type === 'property' && p.key === key);
  return found?.type === 'property' ? found.value.trim() : undefined;
}

/**
 * `gradle.properties` with `android.minSdkVersion` at least {@link ANDROID_MIN_SDK} and
 * `reactNativeArchitectures` limited to {@link ANDROID_ABIS} (an app's narrower list is kept).
 */
export function applyGradleProperties(properties: GradleProperty[], backends?: BackendSet): GradleProperty[] {
  const minSdk = getProperty(properties, 'android.minSdkVersion');
  if (minSdk !== undefined && !/^\d+$/.test(minSdk)) {
    throw new Error(`react-native-executorch: android.minSdkVersion "${minSdk}" is not an API level.`);
  }
  let result = setProperty(
    properties,
    'android.minSdkVersion',
    String(Math.max(minSdk === undefined ? 0 : Number(minSdk), ANDROID_MIN_SDK)),
  );
  const abis = getProperty(properties, 'reactNativeArchitectures');
  const requested = abis === undefined ? [...ANDROID_ABIS] : abis.split(',').map((a) => a.trim());
  const kept = requested.filter((abi) => (ANDROID_ABIS as readonly string[]).includes(abi));
  if (kept.length === 0) {
    throw new Error(
      `react-native-executorch: reactNativeArchitectures "${abis}" has none of the ABIs ExecuTorch ` +
        `is built for (${ANDROID_ABIS.join(', ')}). Add one of them.`,
    );
  }
  result = setProperty(result, 'reactNativeArchitectures', kept.join(','));
  return backends === undefined ? result : setProperty(result, BACKENDS_PROPERTY, backends);
}

/** The plugin. */
const withExecutorch: ConfigPlugin<ExecutorchPluginOptions | void> = (config, options) => {
  const increasedMemoryLimit = (options && options.increasedMemoryLimit) ?? true;
  const backends = options ? options.backends : undefined;
  if (backends !== undefined && !(BACKEND_SETS as readonly string[]).includes(backends)) {
    throw new Error(
      `react-native-executorch: backends "${String(backends)}" is not one of ${BACKEND_SETS.join(', ')} ` +
        '("all": the GPU delegate and XNNPACK; "cpu": XNNPACK only).',
    );
  }
  const ios = config.ios ?? {};
  config.ios = {
    ...ios,
    deploymentTarget: maxVersion(ios.deploymentTarget, IOS_DEPLOYMENT_TARGET),
    ...(increasedMemoryLimit ? { entitlements: { ...ios.entitlements, [INCREASED_MEMORY_ENTITLEMENT]: true } } : {}),
  };
  const withGradle = withGradleProperties(config, (c) => {
    c.modResults = applyGradleProperties(c.modResults as GradleProperty[], backends);
    return c;
  });
  if (backends === undefined) return withGradle;
  return withPodfileProperties(withGradle, (c) => {
    c.modResults = { ...c.modResults, [BACKENDS_PROPERTY]: backends };
    return c;
  });
};

export default withExecutorch;
