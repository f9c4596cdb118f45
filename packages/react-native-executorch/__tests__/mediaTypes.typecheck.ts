/**
 * Type-level test, checked by `npm run typecheck` and never run: `image` / `audio` options
 * type-check only for models whose registry capabilities include `vision` / `audio`. Each
 * `@ts-expect-error` line must be an error, or tsc reports the directive as unused.
 */
import type { LLMController, LLMModule, models } from '../src';

type Gemma = typeof models.llm.gemma4_e2b;
type Smol = typeof models.llm.smollm2_135m;
/** A model that takes images but not audio. */
type VisionOnly = Omit<Gemma, 'capabilities'> & { readonly capabilities: readonly ['chat', 'vision'] };

declare const gemma: LLMModule<Gemma>;
declare const smol: LLMModule<Smol>;
declare const visionOnly: LLMModule<VisionOnly>;
declare const anyModel: LLMModule;
declare const smolHook: LLMController<Smol>;
declare const gemmaHook: LLMController<Gemma>;

export async function typeChecks(): Promise<void> {
  await gemma.sendMessage('What is this?', { image: '/cat.jpg', audio: new Float32Array(16_000) });
  await gemma.sendMessage('And this?', { audio: '/purr.wav', onToken: () => {} });
  await gemmaHook.sendMessage('What is this?', { image: '/cat.jpg' });
  await smol.sendMessage('Hi', { onToken: () => {} });
  await visionOnly.sendMessage('What is this?', { image: '/cat.jpg' });
  // A model whose capabilities are not known statically is checked when it sends.
  await anyModel.sendMessage('What is this?', { image: '/cat.jpg', audio: '/purr.wav' });

  // @ts-expect-error SmolLM2 does not take images.
  await smol.sendMessage('What is this?', { image: '/cat.jpg' });
  // @ts-expect-error SmolLM2 does not take audio.
  await smol.sendMessage('What is this?', { audio: new Float32Array(1) });
  // @ts-expect-error nor through the hook.
  await smolHook.sendMessage('What is this?', { image: '/cat.jpg' });
  // @ts-expect-error this model takes images only.
  await visionOnly.sendMessage('What is this?', { audio: '/purr.wav' });
  // @ts-expect-error audio is a path or Float32Array samples, not Int16Array.
  await gemma.sendMessage('What is this?', { audio: new Int16Array(1) });
}
