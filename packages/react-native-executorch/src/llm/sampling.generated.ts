// GENERATED FILE: do not edit. Source: packages/react-native-executorch/cpp/runner/sampler_options.yaml.
// Regenerate with: .venv/bin/python tools/gen_registry.py
/* eslint-disable */

/** The sampler's options that have a range. */
export type RangedSamplingOption = 'temperature' | 'topK' | 'topP' | 'minP' | 'repetitionPenalty';

/** A finite value with `low` <(=) value <(=) `high`, an integer where `integer`. */
export interface SamplingRange {
  readonly integer: boolean;
  readonly low: number;
  readonly lowInclusive: boolean;
  /** +infinity: no upper bound */
  readonly high: number;
  readonly highInclusive: boolean;
  /** the range as errors say it ("in (0, 1]") */
  readonly range: string;
}

/** Each option's range: the native sampler refuses the same values (runner::validate). */
export const SAMPLING_RANGES: { readonly [O in RangedSamplingOption]: SamplingRange } = {
  temperature: { integer: false, low: 0, lowInclusive: true, high: Infinity, highInclusive: true, range: '>= 0' },
  topK: { integer: true, low: 0, lowInclusive: true, high: Infinity, highInclusive: true, range: '>= 0' },
  topP: { integer: false, low: 0, lowInclusive: false, high: 1, highInclusive: true, range: 'in (0, 1]' },
  minP: { integer: false, low: 0, lowInclusive: true, high: 1, highInclusive: false, range: 'in [0, 1)' },
  repetitionPenalty: { integer: false, low: 0, lowInclusive: false, high: Infinity, highInclusive: true, range: '> 0' },
};

/** The value that turns each option off (the native defaults). */
export const SAMPLING_OFF = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 } as const;
