import {
  ExecutorchError,
  candidateBackends,
  models,
  resolveBackend,
  type Backend,
  type DeviceCapabilities,
  type UseLLMOptions,
} from '../src';

const ALL: Backend[] = ['mlx', 'vulkan', 'xnnpack'];
const iosDevice: DeviceCapabilities = { os: 'ios', isSimulator: false, availableBackends: ['mlx', 'xnnpack'] };
const iosSimulator: DeviceCapabilities = { os: 'ios', isSimulator: true, availableBackends: ['mlx', 'xnnpack'] };
const android: DeviceCapabilities = { os: 'android', isSimulator: false, availableBackends: ['vulkan', 'xnnpack'] };
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
    expect(resolveBackend(gemma, { os: 'android', isSimulator: false, availableBackends: ALL }, 'vulkan')).toBe(
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
      resolveBackend(smol, { os: 'android', isSimulator: false, availableBackends: ['vulkan'] }),
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
