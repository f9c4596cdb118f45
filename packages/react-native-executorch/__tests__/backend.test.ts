import {
  BACKENDS,
  ExecutorchError,
  PLATFORM_PREFERENCE,
  candidateBackends,
  models,
  resolveBackend,
  type Backend,
  type DeviceCapabilities,
  type UseLLMOptions,
} from '../src';

const ALL: Backend[] = ['mlx', 'vulkan', 'xnnpack'];
const iosDevice: DeviceCapabilities = {
  os: 'ios',
  isSimulator: false,
  osVersion: '17.4',
  availableBackends: ['mlx', 'xnnpack'],
};
const iosSimulator: DeviceCapabilities = { ...iosDevice, isSimulator: true };
const android: DeviceCapabilities = {
  os: 'android',
  isSimulator: false,
  osVersion: '34',
  availableBackends: ['vulkan', 'xnnpack'],
};
const androidEmulator: DeviceCapabilities = { ...android, isSimulator: true };
const gemma = models.llm.gemma4_e2b;
const smol = models.llm.smollm2_135m;

function resolveError(fn: () => unknown): ExecutorchError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ExecutorchError);
    return error as ExecutorchError;
  }
  throw new Error('expected an ExecutorchError');
}

describe('backend resolution matrix', () => {
  it.each([
    ['iOS device', iosDevice, 'mlx', ['mlx', 'xnnpack']],
    ['iOS simulator', iosSimulator, 'xnnpack', ['xnnpack']],
    ['Android', android, 'vulkan', ['vulkan', 'xnnpack']],
    ['Android binary without Vulkan', { ...android, availableBackends: ['xnnpack'] }, 'xnnpack', ['xnnpack']],
    ['iOS binary without MLX', { ...iosDevice, availableBackends: ['xnnpack'] }, 'xnnpack', ['xnnpack']],
  ] as const)('defaults Gemma 4 E2B on %s', (_, device, expected, candidates) => {
    expect(resolveBackend(gemma, device)).toBe(expected);
    expect(candidateBackends(gemma, device)).toEqual(candidates);
  });

  it.each([
    ['iOS device', iosDevice],
    ['iOS simulator', iosSimulator],
    ['Android', android],
  ] as const)('runs SmolLM2 (xnnpack only) on %s', (_, device) => {
    expect(resolveBackend(smol, device)).toBe('xnnpack');
  });

  it('honours an explicit backend that can run', () => {
    expect(resolveBackend(gemma, iosDevice, 'xnnpack')).toBe('xnnpack');
    expect(resolveBackend(gemma, android, 'xnnpack')).toBe('xnnpack');
    expect(resolveBackend(gemma, { ...android, availableBackends: ALL }, 'vulkan')).toBe(
      'vulkan',
    );
  });

  it('refuses explicit MLX on the iOS simulator, naming the alternatives', () => {
    const error = resolveError(() => resolveBackend(gemma, iosSimulator, 'mlx'));
    expect(error.code).toBe('backend_unavailable');
    expect(error.details.alternatives).toEqual(['xnnpack']);
    expect(error.message).toContain('MLX does not run on the iOS simulator');
    expect(error.message).toContain('xnnpack');
  });

  it('refuses an explicit backend the binary lacks instead of falling back', () => {
    const error = resolveError(() => resolveBackend(gemma, iosDevice, 'vulkan'));
    expect(error.code).toBe('backend_unavailable');
    expect(error.details.alternatives).toEqual(['mlx', 'xnnpack']);
    expect(error.message).toContain('built without the vulkan backend');
  });

  it('refuses a backend the model does not ship (at runtime, for untyped callers)', () => {
    const error = resolveError(() => resolveBackend(smol, iosDevice, 'mlx' as 'xnnpack'));
    expect(error.message).toContain('ships no mlx variant');
    expect(error.details.alternatives).toEqual(['xnnpack']);
  });

  it('reports no_backend when nothing the model ships can run', () => {
    const error = resolveError(() =>
      resolveBackend(smol, { ...android, availableBackends: ['vulkan'] }),
    );
    expect(error.code).toBe('no_backend');
    expect(error.message).toContain('ships xnnpack');
  });

  it('makes a backend the model does not ship a compile-time error', () => {
    // @ts-expect-error SmolLM2 ships no MLX variant.
    const call = () => resolveBackend(smol, iosDevice, 'mlx');
    expect(call).toThrow(ExecutorchError);
    // @ts-expect-error The same for the hook's options.
    const options: UseLLMOptions<typeof smol> = { model: smol, backend: 'vulkan' };
    const gemmaOptions: UseLLMOptions<typeof gemma> = { model: gemma, backend: 'vulkan' };
    expect([options.backend, gemmaOptions.backend]).toEqual(['vulkan', 'vulkan']);
  });
});

describe('minimum OS versions (the registry\'s minPlatform)', () => {
  it('skips a variant the OS is too old for: Gemma on Android API 27 gets xnnpack (Vulkan needs 28)', () => {
    const api27 = { ...android, osVersion: '27' };
    expect(candidateBackends(gemma, api27)).toEqual(['xnnpack']);
    expect(resolveBackend(gemma, api27)).toBe('xnnpack');
    expect(resolveBackend(gemma, { ...android, osVersion: '28' })).toBe('vulkan');
  });

  it('refuses an explicit backend the OS is too old for, with both versions and the alternatives', () => {
    const error = resolveError(() => resolveBackend(gemma, { ...android, osVersion: '27' }, 'vulkan'));
    expect(error.code).toBe('backend_unavailable');
    expect(error.details).toMatchObject({ alternatives: ['xnnpack'], requiredOsVersion: '28', osVersion: '27' });
    expect(error.message).toContain('needs Android API 28 or newer and this device runs Android API 27');
  });

  it('reports no_backend with the reason when every variant needs a newer OS', () => {
    const ios16 = { ...iosDevice, osVersion: '16.4' };
    const error = resolveError(() => resolveBackend(gemma, ios16));
    expect(error.code).toBe('no_backend');
    expect(error.message).toContain('the mlx variant of Gemma 4 E2B needs iOS 17.0 or newer and this device runs iOS 16.4');
    expect(error.message).toContain('the xnnpack variant of Gemma 4 E2B needs iOS 17.0');
    const explicit = resolveError(() => resolveBackend(gemma, ios16, 'mlx'));
    expect(explicit.details).toEqual({ alternatives: [], requiredOsVersion: '17.0', osVersion: '16.4' });
    // SmolLM2's XNNPACK variant needs only iOS 15.1.
    expect(resolveBackend(smol, ios16)).toBe('xnnpack');
  });

  it.each([
    ['17', true],
    ['17.0.1', true],
    ['16.7.10', false],
  ] as const)('compares versions numerically: iOS %s meets 17.0 = %s', (osVersion, meets) => {
    expect(candidateBackends(gemma, { ...iosDevice, osVersion }).includes('mlx')).toBe(meets);
  });

  it('compares segments as numbers, not text ("9.3" is below "15.1")', () => {
    expect(() => resolveBackend(smol, { ...iosDevice, osVersion: '9.3' })).toThrow(/needs iOS 15\.1 or newer/);
    expect(resolveBackend(smol, { ...iosDevice, osVersion: '15.10' })).toBe('xnnpack');
  });

  it('rejects an OS version that is not one', () => {
    const error = resolveError(() => resolveBackend(gemma, { ...android, osVersion: 'Tiramisu' }));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toContain('"Tiramisu" is not a version');
  });
});

describe('simulators and emulators', () => {
  it('resolves Gemma on an Android emulator to xnnpack: Vulkan only when asked for', () => {
    expect(candidateBackends(gemma, androidEmulator)).toEqual(['xnnpack']);
    expect(resolveBackend(gemma, androidEmulator)).toBe('xnnpack');
    expect(resolveBackend(gemma, androidEmulator, 'vulkan')).toBe('vulkan');
  });

  it('tells how to force Vulkan when a model ships nothing else', () => {
    const vulkanOnly = {
      ...gemma,
      platformDefaults: { ios: 'vulkan', android: 'vulkan' },
      variants: { vulkan: gemma.variants.vulkan },
    } as const;
    const error = resolveError(() => resolveBackend(vulkanOnly, androidEmulator));
    expect(error.code).toBe('no_backend');
    expect(error.details.alternatives).toEqual(['vulkan']);
    expect(error.message).toContain("not chosen automatically on an Android emulator (pass `backend: 'vulkan'`");
  });

  it('never runs MLX on the iOS simulator, even when asked', () => {
    expect(resolveBackend(gemma, iosSimulator)).toBe('xnnpack');
    expect(resolveError(() => resolveBackend(gemma, iosSimulator, 'mlx')).details.alternatives).toEqual(['xnnpack']);
  });
});

describe('the backend catalog (model-registry/backends.yaml, generated)', () => {
  it('declares every backend once, with its label, preference and simulator rules', () => {
    expect(Object.keys(BACKENDS).sort()).toEqual(ALL);
    for (const [name, info] of Object.entries(BACKENDS)) {
      expect(info.name).toBe(name);
      expect(info.label).toBe(`${info.title} (${info.processor})`);
    }
    expect(PLATFORM_PREFERENCE).toEqual({ ios: ['mlx', 'xnnpack'], android: ['vulkan', 'xnnpack'] });
    expect(BACKENDS.mlx.simulator).toEqual({ ios: 'never', android: 'allowed' });
    expect(BACKENDS.vulkan.simulator).toEqual({ ios: 'allowed', android: 'explicit_only' });
    expect(BACKENDS.xnnpack.simulator).toEqual({ ios: 'allowed', android: 'allowed' });
  });

  it.each(ALL)('applies the catalog\'s simulator rules to %s', (backend) => {
    for (const os of ['ios', 'android'] as const) {
      const device: DeviceCapabilities = { os, isSimulator: true, osVersion: '34', availableBackends: ALL };
      const model = {
        ...gemma,
        platformDefaults: { ios: backend, android: backend },
        variants: { [backend]: { ...gemma.variants.xnnpack, backend, minPlatform: {} } },
      } as unknown as typeof gemma;
      const rule = BACKENDS[backend].simulator[os];
      expect(candidateBackends(model, device)).toEqual(rule === 'allowed' ? [backend] : []);
      if (rule === 'never') {
        expect(() => resolveBackend(model, device, backend)).toThrow(`${BACKENDS[backend].title} does not run on the`);
      } else {
        expect(resolveBackend(model, device, backend)).toBe(backend);
      }
    }
  });
});
