// Token sampler with the semantics geist.h documents for geist_sampler_params:
// repetition penalty, presence/frequency penalties -> top-k -> temperature -> top-p -> min-p ->
// draw.
// The result depends only on (logits, history, params, RNG state): ties are broken by the
// lowest token id and no step depends on thread count or memory addresses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/rng.h"
#include "geist/geist.h"

namespace geist {

// The defaults geist.h lists.
geist_sampler_params default_sampler_params();

// GEIST_E_INVALID_ARG naming the field for a wrong struct_size, a temperature that is negative,
// infinite or NaN, top_p or min_p outside [0, 1] (or NaN), repeat_penalty not finite and > 0,
// presence_penalty or frequency_penalty not finite, or penalty_last_n < -1. top_k takes any value
// (<= 0: off).
Status validate_sampler_params(const geist_sampler_params& p);

class Sampler {
 public:
  // Allocates all scratch once; sample() never allocates.
  explicit Sampler(int32_t n_vocab);

  int32_t n_vocab() const { return n_vocab_; }

  // Picks a token from logits[n_vocab]. `history` [n_history] is the token history: the
  // repetition penalty looks at its last penalty_last_n entries, the presence and frequency
  // penalties at its last n_generated entries (the tokens sampled since the last prompt
  // input; n_generated <= n_history); every id must be < n_vocab.
  // `p` must have passed validate_sampler_params. Consumes exactly one RNG draw unless the
  // choice is greedy (temperature <= 0), which draws nothing.
  int32_t sample(const float* logits, const int32_t* history, size_t n_history, size_t n_generated,
                 const geist_sampler_params& p, Rng& rng);
  // Whether sample() would be argmax_first(logits) (kernels/ops.h): greedy with no penalty
  // to apply. Such a choice needs only the argmax, which a device backend finds where the
  // logits are (LogitsOut::argmax).
  static bool is_argmax(const geist_sampler_params& p, size_t n_history, size_t n_generated);

 private:
  struct Candidate {
    int32_t id;
    float logit;  // penalised logit
    float p;      // unnormalised probability exp((logit - max) / T)
  };

  void apply_penalties(const int32_t* history, size_t n_history, size_t n_generated,
                       const geist_sampler_params& p);
  // a before b in the candidates' order: higher logit, then lower id (a strict total order).
  struct Better {
    bool operator()(const Candidate& a, const Candidate& b) const;
  };
  // cand_[0, k) = the k best of work_ (higher logit, then lower id), best first.
  void select_top_k(size_t k);

  int32_t n_vocab_;
  std::vector<float> work_;      // [n_vocab] logits after penalties, NaN replaced by -inf
  std::vector<uint8_t> seen_;    // [n_vocab] 1 while a token is in the penalty window
  std::vector<int32_t> count_;   // [n_vocab] occurrences among the generated tokens (0 between
                                 // calls)
  std::vector<Candidate> cand_;  // [n_vocab] surviving candidates, best first once sorted
};

}  // namespace geist
