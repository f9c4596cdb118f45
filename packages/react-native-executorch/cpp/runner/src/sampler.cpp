#include "rne/runner/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "rne/runner/sampler_ranges.generated.h"

namespace rne::runner {

namespace {

// exp(x) for x <= 0 as an inlined polynomial with range reduction, instead of a libm call per
// vocabulary entry. Relative error ~2e-7, well below what sampling can notice. Branch-free so
// the compiler vectorises the loops that call it.
inline float exp_nonpositive(float x) {
  // Clamp at -87 (below it exp underflows a float) on the bit pattern: for x <= 0 (and -inf) a
  // larger pattern is a more negative number, and an unsigned min vectorises where a float
  // compare-and-select (which may trap on NaN) does not.
  uint32_t pattern;
  std::memcpy(&pattern, &x, sizeof(x));
  constexpr uint32_t kMinus87 = 0xC2AE0000u;
  pattern = pattern < kMinus87 ? pattern : kMinus87;
  std::memcpy(&x, &pattern, sizeof(x));
  const float y = x * 1.44269504088896341f;  // x / ln 2
  // round(y) for y <= 0 without a libm call: truncation of (y - 0.5).
  const int32_t n = static_cast<int32_t>(y - 0.5f);
  const float nf = static_cast<float>(n);
  const float r = (x - nf * 0.693145751953125f) - nf * 1.428606765330187e-06f;  // |r| <= ln2/2
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (n + 127) << 23;  // 2^n
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(value));
  return bits;
}

float float_of(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// weights[i] = exp((logits[i] - max) / temperature).
void fill_weights(const float* __restrict logits, float* __restrict weights, int64_t size,
                  float max, float inv_t) {
  for (int64_t i = 0; i < size; ++i) weights[i] = exp_nonpositive((logits[i] - max) * inv_t);
}

int64_t argmax(const float* logits, int64_t size) {
  int64_t best = 0;
  float best_value = logits[0];
  for (int64_t i = 1; i < size; ++i) {
    if (logits[i] > best_value) {
      best_value = logits[i];
      best = i;
    }
  }
  return best;
}

// Reductions with independent lanes: a single accumulator serialises on the add latency (and
// the compiler may not reorder float adds to vectorise it by itself).
constexpr int64_t kLanes = 8;

// Maps a float to an int32 with the same order (negative patterns flipped), so the max below
// is an integer max, which vectorises where a float compare-and-select does not.
inline int32_t ordered_key(float value) {
  int32_t bits;
  std::memcpy(&bits, &value, sizeof(value));
  return bits ^ ((bits >> 31) & 0x7FFFFFFF);
}

float max_value(const float* values, int64_t size) {
  int32_t lanes[kLanes];
  std::fill(lanes, lanes + kLanes, std::numeric_limits<int32_t>::min());
  int64_t i = 0;
  for (; i + kLanes <= size; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] = std::max(lanes[j], ordered_key(values[i + j]));
  }
  for (; i < size; ++i) lanes[0] = std::max(lanes[0], ordered_key(values[i]));
  const int32_t key = *std::max_element(lanes, lanes + kLanes);
  const int32_t bits = key ^ ((key >> 31) & 0x7FFFFFFF);  // the mapping is its own inverse
  float max;
  std::memcpy(&max, &bits, sizeof(max));
  return max;
}

float sum(const float* values, int64_t size) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= size; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] += values[i + j];
  }
  for (; i < size; ++i) lanes[0] += values[i];
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

// Mass of the values >= floor. Compares bit patterns (monotonic for non-negative floats) so
// the loop vectorises.
float mass_at_least(const float* values, int64_t size, float floor) {
  const uint32_t floor_bits = bits_of(floor);
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= size; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) {
      lanes[j] += bits_of(values[i + j]) >= floor_bits ? values[i + j] : 0.0f;
    }
  }
  for (; i < size; ++i) lanes[0] += values[i] >= floor ? values[i] : 0.0f;
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

// Weights are summed per block of this many ids: a draw walks the block sums, then one block.
constexpr int64_t kBlock = 256;

// The nucleus histogram bins a weight (in (0, 1]) by its float exponent and top 3 mantissa
// bits: 8 bins per octave, so the bin holding the top-p cut is narrow.
constexpr int kBinShift = 20;
constexpr size_t kBins = (0x3F800000u >> kBinShift) + 1;  // bins up to the pattern of 1.0f
// Interleaved copies of the histogram: consecutive ids mostly land in the same bin, and one
// copy would serialise every add on the previous one.
constexpr size_t kCopies = 4;

}  // namespace

// The ranges are declared in sampler_options.yaml, which TypeScript's checks come from too.
Result<void> validate(const SamplerConfig& c) {
  const auto values = sampler_values(c);
  for (size_t i = 0; i < kSamplerRanges.size(); ++i) {
    const SamplerRange& range = kSamplerRanges[i];
    const double value = values[i];
    const bool inside = std::isfinite(value) &&
                        (range.low_inclusive ? value >= range.low : value > range.low) &&
                        (range.high_inclusive ? value <= range.high : value < range.high);
    if (!inside) {
      const std::string got = range.integer ? std::to_string(static_cast<int64_t>(value))
                                            : std::to_string(value);
      return Error{ErrorCode::kInvalidArgument, std::string(range.name) + " must be " +
                                                    range.range + " (" + range.off + "), got " +
                                                    got};
    }
  }
  return {};
}

Sampler::Sampler(const SamplerConfig& config, int64_t vocab_size)
    : config_(config), vocab_size_(vocab_size), rng_(config.seed) {}

void Sampler::apply_repetition_penalty(float* logits, const std::vector<int64_t>& context) {
  if (config_.repetition_penalty == 1.0f || context.empty()) return;
  if (penalized_at_.empty()) penalized_at_.assign(static_cast<size_t>(vocab_size_), 0);
  if (++call_ == 0) {  // stamp wrapped: clear so old stamps cannot collide
    std::fill(penalized_at_.begin(), penalized_at_.end(), 0);
    call_ = 1;
  }
  const float penalty = config_.repetition_penalty;
  for (int64_t id : context) {
    if (id < 0 || id >= vocab_size_ || penalized_at_[id] == call_) continue;
    penalized_at_[id] = call_;  // once per id, however often it occurs
    float& l = logits[id];
    l = l > 0.0f ? l / penalty : l * penalty;
  }
}

// Keeps the k largest logits in a min-heap: one pass, and after the heap fills most elements
// fail the single comparison with its minimum. Then turns them into weights (the top weighs 1).
float Sampler::weigh_top_k(const float* logits, float inv_t) {
  const auto k = static_cast<size_t>(config_.top_k);
  auto greater = [](const Candidate& a, const Candidate& b) { return a.value > b.value; };
  candidates_.clear();
  for (int32_t i = 0; i < static_cast<int32_t>(vocab_size_); ++i) {
    if (candidates_.size() < k) {
      candidates_.push_back({logits[i], i});
      std::push_heap(candidates_.begin(), candidates_.end(), greater);
    } else if (logits[i] > candidates_.front().value) {
      std::pop_heap(candidates_.begin(), candidates_.end(), greater);
      candidates_.back() = {logits[i], i};
      std::push_heap(candidates_.begin(), candidates_.end(), greater);
    }
  }
  std::sort_heap(candidates_.begin(), candidates_.end(), greater);  // descending
  const float m = candidates_.front().value;
  float total = 0.0f;
  for (auto& c : candidates_) {
    c.value = exp_nonpositive((c.value - m) * inv_t);
    total += c.value;
  }
  return total;
}

// weights_[i] = exp((logits[i] - max) / T), so the top token weighs exactly 1. Block by block,
// so each block's sum is taken while it is still in L1.
float Sampler::weigh_vocabulary(const float* logits, float inv_t) {
  weights_.resize(static_cast<size_t>(vocab_size_));
  block_sums_.resize(static_cast<size_t>((vocab_size_ + kBlock - 1) / kBlock));
  const float m = max_value(logits, vocab_size_);
  float* w = weights_.data();
  for (size_t b = 0; b < block_sums_.size(); ++b) {
    const int64_t begin = static_cast<int64_t>(b) * kBlock;
    const int64_t size = std::min(kBlock, vocab_size_ - begin);
    fill_weights(logits + begin, w + begin, size, m, inv_t);
    block_sums_[b] = sum(w + begin, size);
  }
  return sum(block_sums_.data(), static_cast<int64_t>(block_sums_.size()));
}

// Draws an id with probability weights_[id] / total, walking ids in order.
int64_t Sampler::draw_from_vocabulary(float total) {
  float u = std::uniform_real_distribution<float>(0.0f, total)(rng_);
  for (size_t b = 0; b < block_sums_.size(); ++b) {
    const int64_t begin = static_cast<int64_t>(b) * kBlock;
    const int64_t end = std::min(begin + kBlock, vocab_size_);
    if (u >= block_sums_[b]) {
      u -= block_sums_[b];
      continue;
    }
    for (int64_t i = begin; i < end; ++i) {
      if (u < weights_[i]) return i;
      u -= weights_[i];
    }
    return end - 1;  // rounding left u just above the block's last weight
  }
  // Rounding left u >= the sum of all blocks: take the top token (the one weighing 1).
  return std::find(weights_.begin(), weights_.end(), 1.0f) - weights_.begin();
}

void Sampler::collect_at_least(float threshold) {
  candidates_.clear();
  for (int32_t i = 0; i < static_cast<int32_t>(vocab_size_); ++i) {
    if (weights_[i] >= threshold) candidates_.push_back({weights_[i], i});
  }
}

// The nucleus is the shortest prefix of the tokens sorted by weight whose mass reaches `need`
// (top_p * total). It lies inside any set {w >= floor} whose mass already reaches `need`, so
// only the tokens above such a floor become candidates: min_weight when set (then a short mass
// means the prefix is all of them), else the highest of a few floors that a vectorised mass pass
// accepts. A histogram of the candidates' mass per weight bin finds the bin where the prefix
// ends: the tokens of the bins above are all in it, in any order, and only the cut bin's tokens
// need sorting.
void Sampler::select_nucleus(float need, float min_weight) {
  float floor = min_weight;
  if (floor <= 0.0f) {
    for (float candidate_floor : {0x1p-10f, 0x1p-20f}) {
      if (mass_at_least(weights_.data(), vocab_size_, candidate_floor) >= need) {
        floor = candidate_floor;
        break;
      }
    }
  }
  collect_at_least(floor);

  mass_by_bin_.assign(kBins * kCopies, 0.0f);
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const float w = candidates_[i].value;
    mass_by_bin_[(bits_of(w) >> kBinShift) * kCopies + i % kCopies] += w;
  }
  size_t bin = kBins - 1;
  float cumulative = 0.0f;
  for (;; --bin) {
    for (size_t c = 0; c < kCopies; ++c) cumulative += mass_by_bin_[bin * kCopies + c];
    if (cumulative >= need || bin == 0) break;
  }
  const float lower = bin == 0 ? 0.0f : float_of(static_cast<uint32_t>(bin) << kBinShift);
  const float upper = float_of(static_cast<uint32_t>(bin + 1) << kBinShift);

  auto descending = [](const Candidate& a, const Candidate& b) { return a.value > b.value; };
  auto above = std::partition(candidates_.begin(), candidates_.end(),
                              [upper](const Candidate& c) { return c.value >= upper; });
  float mass = 0.0f;
  for (auto c = candidates_.begin(); c != above; ++c) mass += c->value;
  // Float rounding can move the cut out of the bin the histogram named: when the bins above
  // already reach the mass, order them too; when the cut bin falls short, order the rest.
  auto sorted_from = above;
  if (mass >= need) {
    sorted_from = candidates_.begin();
    mass = 0.0f;
  }
  auto in_bin = std::partition(above, candidates_.end(),
                               [lower](const Candidate& c) { return c.value >= lower; });
  std::sort(sorted_from, in_bin, descending);
  std::sort(in_bin, candidates_.end(), descending);
  for (auto c = sorted_from; c != candidates_.end(); ++c) {
    mass += c->value;
    if (mass >= need) {
      candidates_.erase(c + 1, candidates_.end());
      return;
    }
  }
}

// Draws one of candidates_[0, count) with probability proportional to its weight.
int64_t Sampler::draw_from_candidates(size_t count) {
  float mass = 0.0f;
  for (size_t i = 0; i < count; ++i) mass += candidates_[i].value;
  float u = std::uniform_real_distribution<float>(0.0f, mass)(rng_);
  for (size_t i = 0; i < count; ++i) {
    if (u < candidates_[i].value) return candidates_[i].id;
    u -= candidates_[i].value;
  }
  // Rounding left u >= the mass: take the heaviest candidate.
  return std::max_element(candidates_.begin(), candidates_.begin() + count,
                          [](const Candidate& a, const Candidate& b) { return a.value < b.value; })
      ->id;
}

// Disallowed logits become -inf. Per 64-id word: masks are mostly all-allowed (inside a string)
// or all-disallowed (between values), and both are a skip or a fill.
static void mask_logits(float* logits, const TokenMask& allowed, int64_t size) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  for (int64_t begin = 0; begin < size; begin += 64) {
    const uint64_t word = allowed.words[static_cast<size_t>(begin >> 6)];
    const int64_t count = std::min<int64_t>(64, size - begin);
    float* block = logits + begin;
    if (word == ~uint64_t{0}) continue;
    if (word == 0) {
      std::fill(block, block + count, kMinusInf);
      continue;
    }
    for (int64_t j = 0; j < count; ++j) {
      if (!((word >> j) & 1)) block[j] = kMinusInf;
    }
  }
}

int64_t Sampler::sample(float* logits, const std::vector<int64_t>& context,
                        const TokenMask* allowed) {
  if (allowed != nullptr) mask_logits(logits, *allowed, vocab_size_);
  apply_repetition_penalty(logits, context);
  const int64_t id = sample_unmasked(logits);
  // A masked token weighs exp(-87) at most (the fast exp clamps there), so a draw cannot
  // realistically pick one; if rounding ever did, the most likely allowed token is taken.
  if (allowed != nullptr && !allowed->allows(id)) return argmax(logits, vocab_size_);
  return id;
}

int64_t Sampler::sample_unmasked(float* logits) {
  if (config_.temperature <= 0.0f) return argmax(logits, vocab_size_);

  const float inv_t = 1.0f / config_.temperature;
  const float top_p = config_.top_p;
  const float min_p = config_.min_p;

  if (config_.top_k > 0 && config_.top_k < vocab_size_) {
    // candidates_: the top-k weights, descending. top-p is measured against their total (the
    // distribution after top-k); min-p against the top token, which weighs 1.
    const float total = weigh_top_k(logits, inv_t);
    size_t keep = candidates_.size();
    if (top_p < 1.0f) {
      float cumulative = 0.0f;
      for (size_t i = 0; i < candidates_.size(); ++i) {
        cumulative += candidates_[i].value;
        if (cumulative >= top_p * total) {
          keep = i + 1;
          break;
        }
      }
    }
    size_t above_min_p = 1;  // the top token always stays
    while (above_min_p < keep && candidates_[above_min_p].value >= min_p) ++above_min_p;
    return draw_from_candidates(above_min_p);
  }

  const float total = weigh_vocabulary(logits, inv_t);
  if (top_p >= 1.0f && min_p <= 0.0f) return draw_from_vocabulary(total);
  // Top-p and min-p both keep a prefix of the tokens sorted by weight; the shorter one wins.
  // The nucleus search over the candidates {w >= min_p} finds exactly that: the nucleus when it
  // lies inside them, all of them when their mass falls short of top_p.
  if (top_p < 1.0f) {
    select_nucleus(top_p * total, min_p);
  } else {
    collect_at_least(min_p);
  }
  return draw_from_candidates(candidates_.size());
}

}  // namespace rne::runner
