/**
 * Memory-aware loading through the real Node-API addon: the registry's measured peak of the
 * variant, passed by LLMModule, against the available memory the native side reads (here a fake
 * figure, the seam's availableMemoryBytes option), refused before anything is loaded.
 * @jest-environment node
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { ExecutorchError, LLMModule, type NativeExecutorch } from '../../src';
import { createRealNative } from './support/realNative';
import { hostSmollm2 } from './support/targets';

const PLATFORM = { os: 'android', isSimulator: false, osVersion: '34' } as const;

const smol = hostSmollm2('rne-e2e-memory-');

/**
 * A module on the real seam, whose memory checks and loads see `available` bytes of free
 * memory; with `download`, its files come from the server into `cacheDir` instead of `files`.
 */
function module(available: number, download?: { cacheDir: string }): LLMModule {
  const real = createRealNative(PLATFORM);
  const native: NativeExecutorch = Object.assign(Object.create(real) as NativeExecutorch, {
    checkMemory: (need: Parameters<NativeExecutorch['checkMemory']>[0]) =>
      real.checkMemory({ ...need, availableMemoryBytes: available }),
    loadLLM: (options: Parameters<NativeExecutorch['loadLLM']>[0]) =>
      real.loadLLM({ ...options, availableMemoryBytes: available }),
  });
  return new LLMModule({
    model: smol.model,
    ...(download ? {} : { localFiles: smol.files }),
    native,
    resources: smol.fetcher(download?.cacheDir),
  });
}

it('refuses a load the available memory cannot hold, naming both numbers', async () => {
  const peak = smol.model.variants.xnnpack.peakMemoryBytes;
  expect(peak).toBeGreaterThan(100 * 2 ** 20); // the registry carries the measured figure
  const refused = module(100 * 2 ** 20);
  const error = await refused.load().then(
    () => null,
    (e: unknown) => e,
  );
  refused.release();
  expect(error).toBeInstanceOf(ExecutorchError);
  expect((error as ExecutorchError).code).toBe('insufficient_memory');
  expect((error as ExecutorchError).message).toContain(`about ${Math.round(peak! / 2 ** 20)} MiB`);
  expect((error as ExecutorchError).message).toContain('only 100 MiB are available');

  const fits = module(peak!);
  await fits.load();
  expect(fits.isReady).toBe(true);
  fits.release();
});

it('refuses before downloading: a phone that cannot hold the model fetches nothing', async () => {
  const cacheDir = mkdtempSync(join(tmpdir(), 'rne-e2e-memory-fresh-'));
  try {
    const before = smol.server.requests.length;
    const refused = module(100 * 2 ** 20, { cacheDir });
    const error = await refused.load().then(
      () => null,
      (e: unknown) => e,
    );
    refused.release();
    expect((error as ExecutorchError).code).toBe('insufficient_memory');
    expect((error as ExecutorchError).message).toContain('only 100 MiB are available');
    expect(smol.server.requests.length).toBe(before);
  } finally {
    rmSync(cacheDir, { recursive: true, force: true });
  }
});
