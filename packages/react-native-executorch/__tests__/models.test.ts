import { models, type Backend, type LLMDescriptor } from '../src';

describe('generated model registry', () => {
  it('exposes gemma4_e2b with its three backends and platform defaults', () => {
    const gemma = models.llm.gemma4_e2b;
    expect(gemma.id).toBe('gemma4_e2b');
    expect(Object.keys(gemma.variants).sort()).toEqual(['mlx', 'vulkan', 'xnnpack']);
    expect(gemma.variants.mlx.quantization).toBe('int4');
    expect(gemma.variants.xnnpack.quantization).toBe('8da4w');
    expect(gemma.platformDefaults).toEqual({ ios: 'mlx', android: 'vulkan' });
  });

  it('keeps every platform default among the shipped variants', () => {
    for (const model of Object.values(models.llm) as LLMDescriptor[]) {
      for (const backend of Object.values(model.platformDefaults)) {
        expect(Object.keys(model.variants)).toContain(backend);
      }
    }
  });

  it('gives published files a checksum and size, and unpublished files none', () => {
    for (const model of Object.values(models.llm) as LLMDescriptor[]) {
      for (const variant of Object.values(model.variants)) {
        for (const file of variant.files) {
          if (variant.status === 'published') {
            expect(file).toEqual(
              expect.objectContaining({ sha256: expect.stringMatching(/^[0-9a-f]{64}$/) }),
            );
          } else {
            expect(Object.keys(file)).toEqual(['path']);
          }
        }
      }
    }
  });

  it('types a backend the model does not ship as a compile-time error', () => {
    const smol = models.llm.smollm2_135m;
    type SmolBackend = keyof typeof smol.variants;
    const shipped: SmolBackend = 'xnnpack';
    // @ts-expect-error SmolLM2 ships no MLX variant.
    const notShipped: SmolBackend = 'mlx';
    const all: Backend[] = ['mlx', 'vulkan', 'xnnpack'];
    expect(all).toContain(shipped);
    expect(notShipped).toBe('mlx');
  });
});
