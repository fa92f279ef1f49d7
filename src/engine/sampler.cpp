#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ops.h"

namespace geist {
namespace {

// Total order: higher logit first, then lower id. Logits are never NaN here.
bool better(float la, int32_t ia, float lb, int32_t ib) { return la > lb || (la == lb && ia < ib); }

}  // namespace

geist_sampler_params default_sampler_params() {
  geist_sampler_params p{};
  p.struct_size = sizeof(geist_sampler_params);
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.repeat_penalty = 1.0f;
  p.presence_penalty = 0.0f;
  p.penalty_last_n = 64;
  p.seed = 0;
  p.frequency_penalty = 0.0f;
  return p;
}

Status validate_sampler_params(const geist_sampler_params& p) {
  if (p.struct_size != sizeof(geist_sampler_params)) {
    return Status::error(GEIST_E_INVALID_ARG,
                         "geist_sampler_params.struct_size is %u, expected %zu (initialise "
                         "with geist_sampler_params_default)",
                         p.struct_size, sizeof(geist_sampler_params));
  }
  // Every field is checked against the range geist.h documents; the message names the field.
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature)) {
    return Status::error(GEIST_E_INVALID_ARG,
                         "sampler temperature %g must be finite and >= 0 (0: greedy)",
                         static_cast<double>(p.temperature));
  }
  if (!(p.top_p >= 0.0f && p.top_p <= 1.0f)) {
    return Status::error(GEIST_E_INVALID_ARG, "sampler top_p %g is not in [0, 1] (1: off)",
                         static_cast<double>(p.top_p));
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return Status::error(GEIST_E_INVALID_ARG, "sampler min_p %g is not in [0, 1] (0: off)",
                         static_cast<double>(p.min_p));
  }
  if (!(p.repeat_penalty > 0.0f) || std::isinf(p.repeat_penalty)) {
    return Status::error(GEIST_E_INVALID_ARG, "sampler repeat_penalty %g must be finite and > 0",
                         static_cast<double>(p.repeat_penalty));
  }
  if (!std::isfinite(p.presence_penalty)) {
    return Status::error(GEIST_E_INVALID_ARG, "sampler presence_penalty is not finite");
  }
  if (!std::isfinite(p.frequency_penalty)) {
    return Status::error(GEIST_E_INVALID_ARG, "sampler frequency_penalty is not finite");
  }
  if (p.penalty_last_n < -1) {
    return Status::error(GEIST_E_INVALID_ARG, "sampler penalty_last_n %d must be >= -1",
                         p.penalty_last_n);
  }
  return Status::ok();
}

Sampler::Sampler(int32_t n_vocab)
    : n_vocab_(n_vocab),
      work_(static_cast<size_t>(n_vocab)),
      seen_(static_cast<size_t>(n_vocab), 0),
      count_(static_cast<size_t>(n_vocab), 0),
      cand_(static_cast<size_t>(n_vocab)) {
  GEIST_CHECK(n_vocab > 0, "sampler needs a non-empty vocabulary");
}

void Sampler::apply_penalties(const int32_t* history, size_t n_history, size_t n_generated,
                              const geist_sampler_params& p) {
  GEIST_CHECK(n_generated <= n_history, "more generated tokens than history");
  const bool repeat = p.repeat_penalty != 1.0f && p.penalty_last_n != 0;
  if (repeat && n_history > 0) {
    const size_t window = p.penalty_last_n < 0
                              ? n_history
                              : std::min(n_history, static_cast<size_t>(p.penalty_last_n));
    const int32_t* begin = history + (n_history - window);
    // Each distinct token is penalised once, however often it occurs (llama.cpp semantics).
    for (size_t i = 0; i < window; ++i) {
      const int32_t t = begin[i];
      GEIST_CHECK(t >= 0 && t < n_vocab_, "history token outside the vocabulary");
      if (seen_[static_cast<size_t>(t)]) continue;
      seen_[static_cast<size_t>(t)] = 1;
      float& l = work_[static_cast<size_t>(t)];
      l = l > 0.0f ? l / p.repeat_penalty : l * p.repeat_penalty;
    }
    for (size_t i = 0; i < window; ++i) seen_[static_cast<size_t>(begin[i])] = 0;
  }
  // OpenAI's presence and frequency penalties, over the tokens of this completion:
  // logit -= frequency * count + presence * (count > 0).
  if ((p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) || n_generated == 0) return;
  const int32_t* gen = history + (n_history - n_generated);
  for (size_t i = 0; i < n_generated; ++i) {
    GEIST_CHECK(gen[i] >= 0 && gen[i] < n_vocab_, "history token outside the vocabulary");
    ++count_[static_cast<size_t>(gen[i])];
  }
  for (size_t i = 0; i < n_generated; ++i) {
    int32_t& c = count_[static_cast<size_t>(gen[i])];
    if (c == 0) continue;  // a repeat already handled
    work_[static_cast<size_t>(gen[i])] -=
        p.frequency_penalty * static_cast<float>(c) + p.presence_penalty;
    c = 0;
  }
}

// The k best by `better` (a strict total order: ids are distinct), so the same set and order as
// a partial sort of the whole vocabulary, from one pass that keeps them in a heap whose front
// is the worst kept: a later id enters only with a logit strictly above the front's (an equal
// logit has the higher id), and 8 values at a time are skipped when none is above it, which
// is nearly all of them once the heap holds good candidates (128k logits, top-k 40: the
// whole default sampling step 194 -> ~60 us on the 2-core machine).
inline bool Sampler::Better::operator()(const Candidate& a, const Candidate& b) const {
  return better(a.logit, a.id, b.logit, b.id);
}

void Sampler::select_top_k(size_t k) {
  const Better cmp;
  const size_t n = static_cast<size_t>(n_vocab_);
  const auto heap_end = cand_.begin() + static_cast<ptrdiff_t>(k);
  for (size_t i = 0; i < k; ++i) cand_[i] = {static_cast<int32_t>(i), work_[i], 0.0f};
  std::make_heap(cand_.begin(), heap_end, cmp);  // front: the worst of them
  float floor = cand_[0].logit;
  for (size_t i = k; i < n;) {
    if (i + 8 <= n) {
      bool any = false;
      for (size_t j = 0; j < 8; ++j) any |= work_[i + j] > floor;
      if (!any) {
        i += 8;
        continue;
      }
    }
    if (work_[i] > floor) {
      std::pop_heap(cand_.begin(), heap_end, cmp);
      cand_[k - 1] = {static_cast<int32_t>(i), work_[i], 0.0f};
      std::push_heap(cand_.begin(), heap_end, cmp);
      floor = cand_[0].logit;
    }
    ++i;
  }
  std::sort_heap(cand_.begin(), heap_end, cmp);  // best first
}

bool Sampler::is_argmax(const geist_sampler_params& p, size_t n_history, size_t n_generated) {
  const bool repeat = p.repeat_penalty != 1.0f && p.penalty_last_n != 0 && n_history != 0;
  const bool openai = (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) && n_generated;
  return !(p.temperature > 0.0f) && !repeat && !openai;
}

int32_t Sampler::sample(const float* logits, const int32_t* history, size_t n_history,
                        size_t n_generated, const geist_sampler_params& p, Rng& rng) {
  const size_t n = static_cast<size_t>(n_vocab_);
  // What the path below finds through work_, without the copy.
  if (is_argmax(p, n_history, n_generated)) {
    return static_cast<int32_t>(argmax_first(logits, static_cast<int64_t>(n)));
  }
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) work_[i] = std::isnan(logits[i]) ? kNegInf : logits[i];
  apply_penalties(history, n_history, n_generated, p);

  if (!(p.temperature > 0.0f)) {  // penalised greedy: the same choice over work_
    return static_cast<int32_t>(argmax_first(work_.data(), static_cast<int64_t>(n)));
  }

  const Better cmp;
  size_t n_cand = n;
  bool sorted = false;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    n_cand = static_cast<size_t>(p.top_k);
    select_top_k(n_cand);
    sorted = true;
  } else {
    for (size_t i = 0; i < n; ++i) cand_[i] = {static_cast<int32_t>(i), work_[i], 0.0f};
  }

  float max_logit = kNegInf;
  for (size_t i = 0; i < n_cand; ++i) max_logit = std::max(max_logit, cand_[i].logit);
  if (max_logit == kNegInf) {
    // Every candidate is impossible: fall back to the lowest id among them, deterministically.
    int32_t best = cand_[0].id;
    for (size_t i = 1; i < n_cand; ++i) best = std::min(best, cand_[i].id);
    return best;
  }
  const float inv_t = 1.0f / p.temperature;
  double z = 0.0;  // softmax normaliser over the top-k survivors
  for (size_t i = 0; i < n_cand; ++i) {
    // The maximum gets exactly 1 even when the difference is NaN (+inf logits from a restored
    // image, or a temperature so small that 1/T is inf), so min-p always keeps a candidate.
    cand_[i].p =
        cand_[i].logit == max_logit ? 1.0f : std::exp((cand_[i].logit - max_logit) * inv_t);
    z += cand_[i].p;
  }

  // min-p keeps p_i >= min_p * p_max; top-p and min-p both keep a prefix of the sorted order
  // and neither changes the other's ratios, so filtering min-p first (before sorting) gives
  // the same set as the documented order and spares sorting the whole vocabulary.
  if (p.min_p > 0.0f) {
    auto end = std::partition(cand_.begin(), cand_.begin() + static_cast<ptrdiff_t>(n_cand),
                              [&](const Candidate& c) { return c.p >= p.min_p; });
    n_cand = static_cast<size_t>(end - cand_.begin());  // p_max == 1 survives: n_cand >= 1
    sorted = false;
  }
  if (p.top_p < 1.0f) {
    if (!sorted) {
      std::sort(cand_.begin(), cand_.begin() + static_cast<ptrdiff_t>(n_cand), cmp);
    }
    // The minimal prefix whose probability mass (normalised over the top-k survivors)
    // reaches top_p; at least one token.
    double cum = 0.0;
    size_t keep = n_cand;
    for (size_t i = 0; i < n_cand; ++i) {
      cum += cand_[i].p / z;
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
    n_cand = keep;
  }

  // The draw walks the candidates in their current order, which is a deterministic function
  // of the inputs (id order, or the sorted order), so no extra sort is needed.
  double mass = 0.0;
  for (size_t i = 0; i < n_cand; ++i) mass += cand_[i].p;
  const double u = rng.next_double() * mass;
  double cum = 0.0;
  for (size_t i = 0; i < n_cand; ++i) {
    cum += cand_[i].p;
    if (u < cum) return cand_[i].id;
  }
  return cand_[n_cand - 1].id;  // u landed on the rounding slack at the very end
}

}  // namespace geist
