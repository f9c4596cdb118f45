#include "rne/runner/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace rne::runner {

namespace {

// exp(x) for x <= 0 as an inlined polynomial with range reduction, instead of a libm call per
// vocabulary entry. Relative error ~2e-7, well below what sampling can notice.
inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;  // below this exp underflows a float
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

float max_value(const float* values, int64_t size) {
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= size; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] = lanes[j] > values[i + j] ? lanes[j] : values[i + j];
  }
  for (; i < size; ++i) lanes[0] = std::max(lanes[0], values[i]);
  return *std::max_element(lanes, lanes + kLanes);
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

}  // namespace

Result<void> validate(const SamplerConfig& c) {
  auto bad = [](const std::string& what) { return Error{ErrorCode::kInvalidArgument, what}; };
  if (!(c.temperature >= 0.0f) || !std::isfinite(c.temperature)) {
    return bad("temperature must be >= 0 (0 = greedy), got " + std::to_string(c.temperature));
  }
  if (c.top_k < 0) return bad("top_k must be >= 0 (0 = off), got " + std::to_string(c.top_k));
  if (!(c.top_p > 0.0f && c.top_p <= 1.0f)) {
    return bad("top_p must be in (0, 1] (1 = off), got " + std::to_string(c.top_p));
  }
  if (!(c.min_p >= 0.0f && c.min_p < 1.0f)) {
    return bad("min_p must be in [0, 1) (0 = off), got " + std::to_string(c.min_p));
  }
  if (!(c.repetition_penalty > 0.0f) || !std::isfinite(c.repetition_penalty)) {
    return bad("repetition_penalty must be > 0 (1 = off), got " +
               std::to_string(c.repetition_penalty));
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
// fail the single comparison with its minimum.
void Sampler::select_top_k(const float* logits) {
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
}

// Collects the tokens whose weight (already in weights_) is >= threshold, largest first.
void Sampler::select_above(float threshold) {
  candidates_.clear();
  for (int32_t i = 0; i < static_cast<int32_t>(vocab_size_); ++i) {
    if (weights_[i] >= threshold) candidates_.push_back({weights_[i], i});
  }
  std::sort(candidates_.begin(), candidates_.end(),
            [](const Candidate& a, const Candidate& b) { return a.value > b.value; });
}

int64_t Sampler::sample(float* logits, const std::vector<int64_t>& context) {
  apply_repetition_penalty(logits, context);
  if (config_.temperature <= 0.0f) return argmax(logits, vocab_size_);

  const float inv_t = 1.0f / config_.temperature;
  const float top_p = config_.top_p;
  const float min_p = config_.min_p;
  float total = 0.0f;  // normaliser of the distribution top-p is measured against

  if (config_.top_k > 0 && config_.top_k < vocab_size_) {
    select_top_k(logits);
    const float m = candidates_.front().value;
    for (auto& c : candidates_) {
      c.value = exp_nonpositive((c.value - m) * inv_t);  // now a weight, max 1
      total += c.value;
    }
  } else {
    // Weights relative to the maximum (so the top token weighs 1) for the whole vocabulary.
    weights_.resize(static_cast<size_t>(vocab_size_));
    const float m = max_value(logits, vocab_size_);
    float* w = weights_.data();
    fill_weights(logits, w, vocab_size_, m, inv_t);
    total = sum(w, vocab_size_);
    if (top_p >= 1.0f && min_p <= 0.0f) {
      // Plain temperature sampling: draw by scanning in id order, no ordering needed.
      float u = std::uniform_real_distribution<float>(0.0f, total)(rng_);
      for (int64_t i = 0; i < vocab_size_; ++i) {
        u -= weights_[i];
        if (u <= 0.0f) return i;
      }
      return argmax(logits, vocab_size_);  // rounding left u > 0: take the mode
    }
    // The nucleus is a prefix of the tokens sorted by weight, so it lies inside any set
    // {w >= t} whose mass already reaches top_p: try a high t first (few candidates to sort)
    // and lower it only when that set is too light. min-p cuts at w >= min_p exactly.
    float threshold = min_p > 0.0f ? min_p : 1e-3f;
    for (;;) {
      select_above(threshold);
      float mass = 0.0f;
      for (const auto& c : candidates_) mass += c.value;
      if (min_p > 0.0f || mass >= top_p * total || threshold == 0.0f) break;
      threshold = threshold > 1e-30f ? threshold * 1e-4f : 0.0f;
    }
  }

  // candidates_ holds weights in descending order. Cut by top-p (mass over `total`, the
  // distribution after top-k) and min-p (weight relative to the top token, which weighs 1).
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
  if (min_p > 0.0f) {
    size_t above = 0;
    while (above < keep && candidates_[above].value >= min_p) ++above;
    keep = std::max<size_t>(above, 1);
  }
  float kept_mass = 0.0f;
  for (size_t i = 0; i < keep; ++i) kept_mass += candidates_[i].value;
  float u = std::uniform_real_distribution<float>(0.0f, kept_mass)(rng_);
  for (size_t i = 0; i < keep; ++i) {
    u -= candidates_[i].value;
    if (u <= 0.0f) return candidates_[i].id;
  }
  return candidates_[0].id;
}

}  // namespace rne::runner
