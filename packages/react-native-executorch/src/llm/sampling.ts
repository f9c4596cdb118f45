/**
 * The sampler's ranges, checked before the native call so a bad value is refused where the app
 * set it. The ranges come from `cpp/runner/sampler_options.yaml`, as the native check's do.
 */
import { SAMPLING_RANGES, type RangedSamplingOption, type SamplingRange } from './sampling.generated';
import type { GenerationConfig } from './types';

export { SAMPLING_OFF } from './sampling.generated';

function admits(range: SamplingRange, value: unknown): boolean {
  if (typeof value !== 'number' || !Number.isFinite(value)) return false;
  if (range.integer && !Number.isInteger(value)) return false;
  const above = range.lowInclusive ? value >= range.low : value > range.low;
  const below = range.highInclusive ? value <= range.high : value < range.high;
  return above && below;
}

/**
 * What is wrong with the first sampling option of `config` outside its range, or null. An
 * option set to null is unset, as when the config is sent (the model's default applies).
 */
export function samplingProblem(config: GenerationConfig): string | null {
  for (const [name, range] of Object.entries(SAMPLING_RANGES) as [RangedSamplingOption, SamplingRange][]) {
    const value: unknown = config[name];
    if (value != null && !admits(range, value)) {
      const shown = typeof value === 'number' ? String(value) : JSON.stringify(value);
      return `${name} ${shown} is not ${range.integer ? 'an integer ' : ''}${range.range}`;
    }
  }
  return null;
}
