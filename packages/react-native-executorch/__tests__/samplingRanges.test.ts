/**
 * @jest-environment node
 */
// LLMModule refuses the sampling values the native sampler refuses: both check the ranges
// generated from cpp/runner/sampler_options.yaml (tests/registry/test_sampler_options.py checks the C++
// side's rows and this file's come from the same declaration).
import { LLMModule, models } from '../src';
import { SAMPLING_OFF, SAMPLING_RANGES, type RangedSamplingOption } from '../src/llm/sampling.generated';

function configured(name: RangedSamplingOption, value: number): string | null {
  const llm = new LLMModule({ model: models.llm.smollm2_135m });
  try {
    llm.configure({ generationConfig: { [name]: value } });
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

describe.each(Object.entries(SAMPLING_RANGES) as [RangedSamplingOption, (typeof SAMPLING_RANGES)[RangedSamplingOption]][])(
  '%s',
  (name, range) => {
    it('takes its off value and null (unset), and refuses what is not a finite number', () => {
      expect(configured(name, SAMPLING_OFF[name])).toBeNull();
      expect(configured(name, null as never)).toBeNull();
      expect(configured(name, '0.5' as never)).toBe(
        `Invalid generation config: ${name} "0.5" is not ${range.integer ? 'an integer ' : ''}${range.range}.`,
      );
      for (const bad of [NaN, Infinity, -Infinity]) {
        expect(configured(name, bad)).toBe(
          `Invalid generation config: ${name} ${bad} is not ${range.integer ? 'an integer ' : ''}${range.range}.`,
        );
      }
    });

    it('refuses exactly the values outside its range', () => {
      const step = range.integer ? 1 : 1e-6;
      const cases: [number, boolean][] = [
        [range.low, range.lowInclusive],
        [range.low - step, false],
        [range.low + step, true],
      ];
      if (Number.isFinite(range.high)) cases.push([range.high, range.highInclusive], [range.high + step, false]);
      if (range.integer) cases.push([range.low + 0.5, false]);
      for (const [value, taken] of cases) {
        expect([value, configured(name, value) === null]).toEqual([value, taken]);
      }
    });
  },
);
