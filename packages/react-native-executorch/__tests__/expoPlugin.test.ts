/**
 * The Expo config plugin on config objects, and through Expo's own mod compiler on a project
 * folder (the files `expo prebuild` writes: android/gradle.properties, ios/Podfile.properties.json).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { ExpoConfig } from 'expo/config';
import { IOSConfig, compileModsAsync } from 'expo/config-plugins';

import withExecutorch, { applyGradleProperties, type GradleProperty } from '../plugin/src';

const ENTITLEMENT = 'com.apple.developer.kernel.increased-memory-limit';
const base = (): ExpoConfig => ({ name: 'app', slug: 'app' });

function gradle(lines: Record<string, string>): GradleProperty[] {
  return [
    { type: 'comment', value: 'Project-wide Gradle settings.' },
    ...Object.entries(lines).map(([key, value]) => ({ type: 'property' as const, key, value })),
  ];
}

function property(properties: GradleProperty[], key: string): string | undefined {
  const found = properties.find((p) => p.type === 'property' && p.key === key);
  return found?.type === 'property' ? found.value : undefined;
}

describe('the config object', () => {
  it('sets iOS 17.0 and the increased memory limit entitlement, keeping other fields', () => {
    const config = withExecutorch({
      ...base(),
      ios: { bundleIdentifier: 'com.example', entitlements: { 'aps-environment': 'development' } },
    });
    expect(config.ios).toEqual({
      bundleIdentifier: 'com.example',
      deploymentTarget: '17.0',
      entitlements: { 'aps-environment': 'development', [ENTITLEMENT]: true },
    });
  });

  it.each([
    ['15.1', '17.0'],
    ['17.0', '17.0'],
    ['17.4', '17.4'],
    ['18', '18'],
    ['9.9', '17.0'],
  ])('deployment target %s becomes %s (a higher one is kept)', (target, expected) => {
    expect(withExecutorch({ ...base(), ios: { deploymentTarget: target } }).ios?.deploymentTarget).toBe(expected);
  });

  it('leaves the entitlement out when asked', () => {
    expect(withExecutorch(base(), { increasedMemoryLimit: false }).ios?.entitlements).toBeUndefined();
  });

  it('refuses a deployment target that is not a version', () => {
    expect(() => withExecutorch({ ...base(), ios: { deploymentTarget: 'latest' } })).toThrow(
      'ios.deploymentTarget "latest" is not a version',
    );
  });
});

describe('gradle.properties', () => {
  it('raises minSdkVersion to 26 and limits the ABIs to those ExecuTorch ships', () => {
    const result = applyGradleProperties(
      gradle({ 'android.minSdkVersion': '24', reactNativeArchitectures: 'armeabi-v7a,arm64-v8a,x86,x86_64' }),
    );
    expect(property(result, 'android.minSdkVersion')).toBe('26');
    expect(property(result, 'reactNativeArchitectures')).toBe('arm64-v8a,x86_64');
    expect(result[0]).toEqual({ type: 'comment', value: 'Project-wide Gradle settings.' });
  });

  it('adds both when absent, keeps a higher minSdkVersion and a narrower ABI list', () => {
    const added = applyGradleProperties(gradle({}));
    expect(property(added, 'android.minSdkVersion')).toBe('26');
    expect(property(added, 'reactNativeArchitectures')).toBe('arm64-v8a,x86_64');
    const kept = applyGradleProperties(gradle({ 'android.minSdkVersion': '30', reactNativeArchitectures: 'arm64-v8a' }));
    expect(property(kept, 'android.minSdkVersion')).toBe('30');
    expect(property(kept, 'reactNativeArchitectures')).toBe('arm64-v8a');
  });

  it('is idempotent', () => {
    const once = applyGradleProperties(gradle({ 'android.minSdkVersion': '21', hermesEnabled: 'true' }));
    expect(applyGradleProperties(once)).toEqual(once);
    const config = withExecutorch({ ...base(), ios: { deploymentTarget: '16.0' } });
    expect(withExecutorch(structuredClone({ ...config, mods: null })).ios).toEqual(config.ios);
  });

  it('refuses an ABI list without a supported ABI, and a minSdkVersion that is not a number', () => {
    expect(() => applyGradleProperties(gradle({ reactNativeArchitectures: 'armeabi-v7a' }))).toThrow(
      'has none of the ABIs ExecuTorch is built for (arm64-v8a, x86_64)',
    );
    expect(() => applyGradleProperties(gradle({ 'android.minSdkVersion': 'Q' }))).toThrow('is not an API level');
  });
});

describe('through Expo\'s mod compiler, as `expo prebuild` runs it', () => {
  let project = '';

  beforeEach(() => {
    project = mkdtempSync(join(tmpdir(), 'rne-expo-'));
    mkdirSync(join(project, 'android'));
    mkdirSync(join(project, 'ios'));
    writeFileSync(
      join(project, 'android', 'gradle.properties'),
      '# Project-wide Gradle settings.\nandroid.minSdkVersion=24\nhermesEnabled=true\n',
    );
    writeFileSync(join(project, 'ios', 'Podfile.properties.json'), '{"ios.deploymentTarget":"15.1"}');
  });

  afterEach(() => rmSync(project, { recursive: true, force: true }));

  async function prebuild(config: ExpoConfig): Promise<{ gradle: string; podfile: unknown }> {
    // Prebuild's own plugin that writes ios.deploymentTarget to Podfile.properties.json.
    const withPodfileProps = IOSConfig.DeploymentTarget.withDeploymentTargetPodfileProps(config);
    await compileModsAsync(withPodfileProps, { projectRoot: project, platforms: ['android', 'ios'] });
    return {
      gradle: readFileSync(join(project, 'android', 'gradle.properties'), 'utf8'),
      podfile: JSON.parse(readFileSync(join(project, 'ios', 'Podfile.properties.json'), 'utf8')),
    };
  }

  it('writes the files prebuild generates, and a second run changes nothing', async () => {
    const first = await prebuild(withExecutorch({ ...base(), ios: { deploymentTarget: '15.1' } }));
    expect(first.gradle).toBe(
      // A missing property is appended after the last line, as Expo's own properties plugins do.
      '# Project-wide Gradle settings.\nandroid.minSdkVersion=26\nhermesEnabled=true\n\n' +
        'reactNativeArchitectures=arm64-v8a,x86_64',
    );
    expect(first.podfile).toEqual({ 'ios.deploymentTarget': '17.0' });
    const second = await prebuild(withExecutorch(withExecutorch({ ...base(), ios: { deploymentTarget: '15.1' } })));
    expect(second).toEqual(first);
  });

  it('records the backend set for both native builds, and refuses an unknown one', async () => {
    const result = await prebuild(withExecutorch(base(), { backends: 'cpu' }));
    expect(result.gradle).toContain('\nrneBinariesBackends=cpu');
    expect(result.podfile).toEqual({ 'ios.deploymentTarget': '17.0', rneBinariesBackends: 'cpu' });
    expect(() => withExecutorch(base(), { backends: 'gpu' as 'all' })).toThrow('backends "gpu" is not one of all, cpu');
  });
});
