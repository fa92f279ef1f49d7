// Sampler tests on fixed logit vectors. Expected distributions are computed here from the
// definitions (softmax, top-k, nucleus, min-p, llama.cpp's penalty formula) in double
// precision; sample frequencies are compared with a chi-square test whose false-failure
// probability is ~1e-6 per test (the seeds are fixed, so a pass is reproducible).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "engine/rng.h"
#include "engine/sampler.h"

// Heap allocations made by this process so far (alloc_counter.cpp replaces operator new).
long geist_test_alloc_count();

namespace geist {
namespace {

constexpr int kSamples = 200000;

// Upper 1e-6 quantile of chi-square with df degrees of freedom (Wilson-Hilferty
// approximation; z = 4.753 is the standard normal's upper 1e-6 quantile).
double chi2_critical(int df) {
  const double k = df;
  const double a = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - a + 4.753 * std::sqrt(a), 3.0);
}

std::vector<double> softmax(const std::vector<double>& x) {
  const double m = *std::max_element(x.begin(), x.end());
  std::vector<double> p(x.size());
  double z = 0;
  for (size_t i = 0; i < x.size(); ++i) z += (p[i] = std::exp(x[i] - m));
  for (double& v : p) v /= z;
  return p;
}

// Draws kSamples tokens and returns their counts [n_vocab].
std::vector<long> draw(const std::vector<float>& logits, const std::vector<int32_t>& history,
                       const geist_sampler_params& p, uint64_t seed, size_t n_generated = 0) {
  Sampler s(static_cast<int32_t>(logits.size()));
  Rng rng;
  rng.seed(seed);
  std::vector<long> counts(logits.size(), 0);
  for (int i = 0; i < kSamples; ++i) {
    ++counts[static_cast<size_t>(
        s.sample(logits.data(), history.data(), history.size(), n_generated, p, rng))];
  }
  return counts;
}

// Pearson statistic of counts against `expected` probabilities. Tokens with expected
// probability 0 must never be drawn (checked by the caller); they contribute no cells.
double chi2_stat(const std::vector<long>& counts, const std::vector<double>& expected, int* df) {
  double stat = 0;
  int cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0) continue;
    const double e = expected[i] * kSamples;
    stat += (counts[i] - e) * (counts[i] - e) / e;
    ++cells;
  }
  *df = cells - 1;
  return stat;
}

void expect_matches(const std::vector<long>& counts, const std::vector<double>& expected) {
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " must be filtered out";
    }
  }
  int df = 0;
  const double stat = chi2_stat(counts, expected, &df);
  if (df == 0) return;  // a single possible token: the zero checks above say everything
  EXPECT_LT(stat, chi2_critical(df)) << "df " << df;
}

geist_sampler_params plain(float temperature) {
  geist_sampler_params p = default_sampler_params();
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

const std::vector<float> kLogits = {1.0f, 2.5f, -0.5f, 0.3f, 2.0f, -2.0f, 1.7f, 0.0f};

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<double> scaled(const std::vector<float>& l, double t) {
  std::vector<double> x = to_double(l);
  for (double& v : x) v /= t;
  return x;
}

// Keeps the entries of p at `keep` and renormalises; zero elsewhere.
std::vector<double> restrict_to(const std::vector<double>& p, const std::set<size_t>& keep) {
  std::vector<double> q(p.size(), 0.0);
  double z = 0;
  for (size_t i : keep) z += p[i];
  for (size_t i : keep) q[i] = p[i] / z;
  return q;
}

std::vector<size_t> order_desc(const std::vector<double>& p) {
  std::vector<size_t> idx(p.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  return idx;
}

TEST(Sampler, GreedyPicksArgmaxAndLowestIdOnTies) {
  Sampler s(6);
  Rng rng;
  rng.seed(1);
  const Rng before = rng;
  const std::vector<float> tie = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, 3.0f};
  EXPECT_EQ(s.sample(tie.data(), nullptr, 0, 0, plain(0.0f), rng), 1);
  EXPECT_EQ(s.sample(tie.data(), nullptr, 0, 0, plain(-1.0f), rng), 1);
  // Greedy consumes no randomness.
  EXPECT_EQ(0, std::memcmp(&before, &rng, sizeof rng));
}

// Greedy with no penalty takes a short path (kernels argmax_first, no copy): it must choose
// what the definition chooses, the lowest id of the largest logit with NaN read as -inf, on
// lengths around its 8-wide steps, ties, signed zeros, infinities, NaN, all-NaN and all -inf,
// and on a 128256-entry vocabulary; the same logits through the penalised path (a penalty
// that changes nothing: a history token that is not the winner) agree.
TEST(Sampler, GreedyWithoutPenaltiesEqualsTheDefinition) {
  const float nan = std::nanf(""), inf = INFINITY;
  const auto definition = [](const std::vector<float>& l) {
    int32_t best = 0;
    float bv = -INFINITY;
    for (size_t i = 0; i < l.size(); ++i) {
      const float v = std::isnan(l[i]) ? -INFINITY : l[i];
      if (v > bv) bv = v, best = static_cast<int32_t>(i);
    }
    return best;
  };
  std::vector<std::vector<float>> cases = {
      {nan},
      {-inf},
      {nan, -inf, nan},
      {-inf, nan, -inf, -inf},
      {-0.0f, 0.0f},
      {0.0f, -0.0f, -1.0f},
      {nan, 2.0f, nan, 2.0f},
      {1.0f, inf, inf, nan},
      {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -3.0f}};
  Rng gen;
  gen.seed(11);
  for (int len = 1; len <= 40; ++len) {
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<float> l(static_cast<size_t>(len));
      for (float& v : l) {
        const uint64_t r = gen.next_u64();
        // Few distinct values (ties), now and then a NaN, an infinity or a signed zero.
        switch (r % 16) {
          case 0:
            v = nan;
            break;
          case 1:
            v = -inf;
            break;
          case 2:
            v = -0.0f;
            break;
          default:
            v = static_cast<float>(static_cast<int>((r >> 8) % 7) - 3);
        }
      }
      cases.push_back(l);
    }
  }
  std::vector<float> big(128256);
  for (float& v : big)
    v = static_cast<float>(static_cast<int64_t>(gen.next_u64() % 200001) - 100000);
  cases.push_back(big);
  big[77777] = 1e6f;
  big[100000] = 1e6f;
  cases.push_back(big);
  for (const std::vector<float>& l : cases) {
    Sampler s(static_cast<int32_t>(l.size()));
    Rng rng;
    rng.seed(1);
    const int32_t want = definition(l);
    ASSERT_EQ(s.sample(l.data(), nullptr, 0, 0, plain(0.0f), rng), want) << "n " << l.size();
    // The general path: a repeat penalty on a token that cannot matter here.
    geist_sampler_params p = plain(0.0f);
    p.repeat_penalty = 1.5f;
    const int32_t other = want == 0 ? static_cast<int32_t>(l.size()) - 1 : 0;
    const bool harmless = other != want && (std::isnan(l[static_cast<size_t>(other)]) ||
                                            l[static_cast<size_t>(other)] == -inf);
    if (harmless) {
      EXPECT_EQ(s.sample(l.data(), &other, 1, 0, p, rng), want) << "n " << l.size();
    }
  }
}

TEST(Sampler, TemperatureMatchesSoftmaxOfScaledLogits) {
  for (double t : {0.5, 1.0, 1.7}) {
    const std::vector<long> counts = draw(kLogits, {}, plain(static_cast<float>(t)), 42);
    expect_matches(counts, softmax(scaled(kLogits, t)));
  }
}

TEST(Sampler, ChiSquareRejectsTheWrongTemperature) {
  // The test above has power: samples at T = 0.5 are far from softmax(logits / 1).
  const std::vector<long> counts = draw(kLogits, {}, plain(0.5f), 42);
  int df = 0;
  const double stat = chi2_stat(counts, softmax(scaled(kLogits, 1.0)), &df);
  EXPECT_GT(stat, 10 * chi2_critical(df));
}

TEST(Sampler, TopKKeepsTheKBestRenormalised) {
  for (int k : {1, 3, 5}) {
    geist_sampler_params p = plain(1.3f);
    p.top_k = k;
    const std::vector<double> full = softmax(scaled(kLogits, 1.3));
    const std::vector<size_t> order = order_desc(full);
    const std::set<size_t> best(order.begin(), order.begin() + k);
    expect_matches(draw(kLogits, {}, p, 7), restrict_to(full, best));
  }
}

// The top-k selection (one pass over the vocabulary with a heap) against its definition, a
// partial sort of the whole vocabulary by (logit desc, id asc): the same draws, token for
// token, from the same random stream, over vocabularies full of ties and NaN, k from 1 to
// nearly the whole vocabulary. The draw below is the sampler's (top-p and min-p off).
TEST(Sampler, TopKDrawsEqualAPartialSortOfTheVocabulary) {
  struct Cand {
    int32_t id;
    float logit;
  };
  Rng gen;
  gen.seed(5);
  for (const int32_t n : {9, 1000, 128256}) {
    std::vector<float> l(static_cast<size_t>(n));
    for (float& v : l) {
      const uint64_t r = gen.next_u64();
      v = r % 97 == 0 ? std::nanf("") : static_cast<float>(static_cast<int>((r >> 8) % 41)) * 0.25f;
    }
    for (const int32_t k : {1, 2, 7, 40, n - 1}) {
      if (k <= 0 || k >= n) continue;
      SCOPED_TRACE(::testing::Message() << "n " << n << " k " << k);
      std::vector<Cand> all(static_cast<size_t>(n));
      for (int32_t i = 0; i < n; ++i) {
        const float v = l[static_cast<size_t>(i)];
        all[static_cast<size_t>(i)] = {i, std::isnan(v) ? -INFINITY : v};
      }
      std::partial_sort(all.begin(), all.begin() + k, all.end(), [](const Cand& a, const Cand& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
      });
      geist_sampler_params p = plain(0.9f);
      p.top_k = k;
      const float inv_t = 1.0f / p.temperature;
      Sampler s(n);
      Rng r1, r2;
      r1.seed(17);
      r2.seed(17);
      for (int draw = 0; draw < 50; ++draw) {
        const float max_logit = all[0].logit;
        std::vector<float> pk(static_cast<size_t>(k));
        double mass = 0.0;
        for (int32_t i = 0; i < k; ++i) {
          const float li = all[static_cast<size_t>(i)].logit;
          pk[static_cast<size_t>(i)] = li == max_logit ? 1.0f : std::exp((li - max_logit) * inv_t);
          mass += pk[static_cast<size_t>(i)];
        }
        const double u = r2.next_double() * mass;
        double cum = 0.0;
        int32_t want = all[static_cast<size_t>(k - 1)].id;
        for (int32_t i = 0; i < k; ++i) {
          cum += pk[static_cast<size_t>(i)];
          if (u < cum) {
            want = all[static_cast<size_t>(i)].id;
            break;
          }
        }
        ASSERT_EQ(s.sample(l.data(), nullptr, 0, 0, p, r1), want) << "draw " << draw;
      }
    }
  }
}

TEST(Sampler, TopKTiesKeepLowestIds) {
  // Four tokens tie for the best logit; top-2 must keep ids 1 and 3, never 4 or 6.
  const std::vector<float> l = {0.0f, 5.0f, 1.0f, 5.0f, 5.0f, 2.0f, 5.0f};
  geist_sampler_params p = plain(1.0f);
  p.top_k = 2;
  expect_matches(draw(l, {}, p, 3), {0, 0.5, 0, 0.5, 0, 0, 0});
}

TEST(Sampler, TopPKeepsTheMinimalNucleus) {
  const double t = 0.9;
  const std::vector<double> full = softmax(scaled(kLogits, t));
  const std::vector<size_t> order = order_desc(full);
  for (double top_p : {0.3, 0.6, 0.85, 0.97}) {
    std::set<size_t> nucleus;
    double cum = 0;
    for (size_t i : order) {
      nucleus.insert(i);
      cum += full[i];
      if (cum >= top_p) break;
    }
    geist_sampler_params p = plain(static_cast<float>(t));
    p.top_p = static_cast<float>(top_p);
    SCOPED_TRACE(top_p);
    expect_matches(draw(kLogits, {}, p, 11), restrict_to(full, nucleus));
  }
}

TEST(Sampler, TopPAppliesAfterTopK) {
  // top_p's mass is measured on the distribution renormalised over the top-k survivors.
  const double t = 1.0;
  geist_sampler_params p = plain(static_cast<float>(t));
  p.top_k = 3;
  p.top_p = 0.8f;
  const std::vector<double> full = softmax(scaled(kLogits, t));
  const std::vector<size_t> order = order_desc(full);
  const std::vector<double> k3 = restrict_to(full, {order[0], order[1], order[2]});
  std::set<size_t> nucleus;
  double cum = 0;
  for (size_t i : order) {
    nucleus.insert(i);
    cum += k3[i];
    if (cum >= 0.8) break;
  }
  expect_matches(draw(kLogits, {}, p, 5), restrict_to(full, nucleus));
}

TEST(Sampler, MinPThresholdIsRelativeToTheBest) {
  const double t = 1.2;
  const std::vector<double> full = softmax(scaled(kLogits, t));
  const double pmax = *std::max_element(full.begin(), full.end());
  for (double min_p : {0.05, 0.3, 0.7}) {
    std::set<size_t> keep;
    for (size_t i = 0; i < full.size(); ++i) {
      if (full[i] >= min_p * pmax) keep.insert(i);
    }
    geist_sampler_params p = plain(static_cast<float>(t));
    p.min_p = static_cast<float>(min_p);
    SCOPED_TRACE(min_p);
    expect_matches(draw(kLogits, {}, p, 13), restrict_to(full, keep));
  }
}

TEST(Sampler, AllFiltersTogether) {
  // Defaults-like chain on a wider vector: top-k 40 -> T -> top-p 0.9 -> min-p 0.05.
  std::vector<float> l(64);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(std::sin(i * 1.7) * 3.0);
  geist_sampler_params p = plain(0.8f);
  p.top_k = 40;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  const std::vector<double> full = softmax(scaled(l, 0.8));
  const std::vector<size_t> order = order_desc(full);
  const std::vector<double> k40 = restrict_to(full, {order.begin(), order.begin() + 40});
  std::set<size_t> keep;
  double cum = 0;
  for (size_t i : order) {
    keep.insert(i);
    cum += k40[i];
    if (cum >= 0.9) break;
  }
  const double pmax = full[order[0]];
  for (auto it = keep.begin(); it != keep.end();) {
    it = full[*it] < 0.05 * pmax ? keep.erase(it) : std::next(it);
  }
  expect_matches(draw(l, {}, p, 17), restrict_to(full, keep));
}

// llama.cpp's repetition penalty: a positive logit is divided by the penalty, a negative one
// multiplied, once per distinct token in the window.
std::vector<double> penalised(const std::vector<float>& l, const std::vector<int32_t>& window,
                              double repeat) {
  std::vector<double> x = to_double(l);
  std::set<int32_t> seen(window.begin(), window.end());
  for (int32_t t : seen) {
    double& v = x[static_cast<size_t>(t)];
    v = v > 0 ? v / repeat : v * repeat;
  }
  return x;
}

// OpenAI's definition (API reference, "Parameter details"): mu[j] -= c[j] * frequency +
// (c[j] > 0) * presence, c[j] the times token j was sampled so far in this completion.
std::vector<double> openai_penalised(std::vector<double> x, const std::vector<int32_t>& generated,
                                     double presence, double frequency) {
  std::map<int32_t, int> c;
  for (int32_t t : generated) ++c[t];
  for (const auto& [t, n] : c) x[static_cast<size_t>(t)] -= n * frequency + presence;
  return x;
}

TEST(Sampler, RepetitionPenaltyFollowsTheFormula) {
  // History holds tokens 1 (positive logit, twice), 2 (negative), 5 (negative), 3; with a
  // window of 4 the oldest entry (token 3) is outside and must not be penalised.
  const std::vector<int32_t> history = {3, 1, 2, 1, 5};
  geist_sampler_params p = plain(1.0f);
  p.repeat_penalty = 1.8f;
  p.penalty_last_n = 4;
  const std::vector<double> expected =
      softmax(penalised(kLogits, {1, 2, 1, 5}, static_cast<double>(p.repeat_penalty)));
  expect_matches(draw(kLogits, history, p, 19), expected);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesFollowOpenAI) {
  // Prompt {4, 4, 0}, then the completion so far {7, 7, 7, 2, 4}: 7 counts 3, 2 and 4 once;
  // token 0 and the prompt's two 4s are not counted.
  const std::vector<int32_t> history = {4, 4, 0, 7, 7, 7, 2, 4};
  const std::vector<int32_t> generated = {7, 7, 7, 2, 4};
  geist_sampler_params p = plain(1.0f);
  p.presence_penalty = 0.4f;
  p.frequency_penalty = 0.3f;
  const std::vector<double> expected = softmax(
      openai_penalised(to_double(kLogits), generated, static_cast<double>(p.presence_penalty),
                       static_cast<double>(p.frequency_penalty)));
  expect_matches(draw(kLogits, history, p, 23, generated.size()), expected);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesIgnoreThePrompt) {
  const std::vector<int32_t> history = {1, 1, 1, 4, 4};  // all prompt: nothing generated yet
  geist_sampler_params p = plain(1.0f);
  p.presence_penalty = 1.5f;
  p.frequency_penalty = 1.5f;
  expect_matches(draw(kLogits, history, p, 29, 0), softmax(to_double(kLogits)));
  // With a repetition penalty as well, only that one looks at the prompt.
  p.repeat_penalty = 1.8f;
  p.penalty_last_n = -1;
  const std::vector<int32_t> gen = {4};
  const std::vector<int32_t> history2 = {1, 1, 1, 4};
  expect_matches(draw(kLogits, history2, p, 31, 1),
                 softmax(openai_penalised(penalised(kLogits, history2, 1.8), gen, 1.5, 1.5)));
}

TEST(Sampler, FrequencyPenaltyGreedyChoiceFlipsWhereTheFormulaSays) {
  // Token 0 sampled 3 times: its logit 2.0 becomes 2.0 - 3 * 0.25 - 0.1 = 1.15 by hand. The
  // greedy choice against a rival just above or below 1.15 pins the adjustment to 1e-3.
  Sampler s(3);
  Rng rng;
  rng.seed(0);
  geist_sampler_params p = plain(0.0f);
  p.frequency_penalty = 0.25f;
  p.presence_penalty = 0.1f;
  const int32_t hist[] = {2, 0, 0, 0};  // token 2 is the prompt
  for (const auto& [rival, want] :
       std::vector<std::pair<float, int32_t>>{{1.149f, 0}, {1.151f, 1}, {1.0f, 0}, {1.3f, 1}}) {
    const std::vector<float> l = {2.0f, rival, -5.0f};
    EXPECT_EQ(s.sample(l.data(), hist, 4, 3, p, rng), want) << "rival " << rival;
  }
  // Frequency alone: 2.0 - 3 * 0.25 = 1.25.
  p.presence_penalty = 0.0f;
  for (const auto& [rival, want] :
       std::vector<std::pair<float, int32_t>>{{1.249f, 0}, {1.251f, 1}}) {
    const std::vector<float> l = {2.0f, rival, -5.0f};
    EXPECT_EQ(s.sample(l.data(), hist, 4, 3, p, rng), want) << "rival " << rival;
  }
  // Only the tokens of this completion count: with two of the three 0s in the prompt,
  // 2.0 - 0.25 = 1.75 beats 1.5.
  const std::vector<float> l = {2.0f, 1.5f, -5.0f};
  EXPECT_EQ(s.sample(l.data(), hist, 4, 1, p, rng), 0);
  EXPECT_EQ(s.sample(l.data(), hist, 4, 3, p, rng), 1);
}

TEST(Sampler, ZeroFrequencyPenaltyChangesNoBit) {
  // frequency_penalty = 0 (the default) with a history and generated tokens: the same draws,
  // bit for bit, as no penalties at all, and greedy stays on the argmax-only path.
  geist_sampler_params p = plain(0.9f);
  ASSERT_EQ(p.frequency_penalty, 0.0f);
  const int32_t hist[] = {1, 4, 4, 1, 7};
  Sampler a(8), b(8);
  Rng ra, rb;
  ra.seed(77);
  rb.seed(77);
  for (int i = 0; i < 500; ++i) {
    ASSERT_EQ(a.sample(kLogits.data(), hist, 5, 3, p, ra),
              b.sample(kLogits.data(), nullptr, 0, 0, p, rb));
  }
  EXPECT_TRUE(Sampler::is_argmax(plain(0.0f), 5, 3));
  geist_sampler_params f = plain(0.0f);
  f.frequency_penalty = 0.5f;
  EXPECT_FALSE(Sampler::is_argmax(f, 5, 3));
  EXPECT_TRUE(Sampler::is_argmax(f, 5, 0));  // nothing generated yet: nothing to penalise
}

TEST(Sampler, PenaltiesApplyBeforeGreedy) {
  // Token 1 (2.5) / 1.5 = 1.67 falls below token 4 (2.0).
  Sampler s(8);
  Rng rng;
  rng.seed(0);
  geist_sampler_params p = plain(0.0f);
  const int32_t hist[] = {1};
  EXPECT_EQ(s.sample(kLogits.data(), hist, 1, 0, p, rng), 1);
  p.repeat_penalty = 1.5f;
  EXPECT_EQ(s.sample(kLogits.data(), hist, 1, 0, p, rng), 4);
  p.penalty_last_n = 0;  // window 0 disables penalties
  EXPECT_EQ(s.sample(kLogits.data(), hist, 1, 0, p, rng), 1);
  // A negative logit gets more negative: token 3 (-0.6) beats token 2 (-0.5) once 2 is
  // penalised.
  const std::vector<float> neg = {-3.0f, -3.0f, -0.5f, -0.6f};
  Sampler s4(4);
  geist_sampler_params q = plain(0.0f);
  q.repeat_penalty = 1.5f;
  const int32_t h2[] = {2};
  EXPECT_EQ(s4.sample(neg.data(), h2, 1, 0, q, rng), 3);  // -0.75 < -0.6
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedsDiffer) {
  const geist_sampler_params p = plain(1.0f);
  auto run = [&](uint64_t seed) {
    Sampler s(8);
    Rng rng;
    rng.seed(seed);
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) out.push_back(s.sample(kLogits.data(), nullptr, 0, 0, p, rng));
    return out;
  };
  EXPECT_EQ(run(123), run(123));
  EXPECT_NE(run(123), run(124));
  EXPECT_NE(run(0), run(1));
}

TEST(Sampler, CopiedRngContinuesIdentically) {
  const geist_sampler_params p = plain(0.9f);
  Sampler s(8);
  Rng a;
  a.seed(99);
  for (int i = 0; i < 37; ++i) (void)s.sample(kLogits.data(), nullptr, 0, 0, p, a);
  Rng b;
  std::memcpy(&b, &a, sizeof a);  // what a snapshot does
  Sampler other(8);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(s.sample(kLogits.data(), nullptr, 0, 0, p, a),
              other.sample(kLogits.data(), nullptr, 0, 0, p, b));
  }
}

TEST(Sampler, SampleDoesNotAllocate) {
  std::vector<float> l(5000);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(std::cos(i * 0.37) * 4.0);
  std::vector<int32_t> hist = {1, 2, 3, 4000, 2};
  geist_sampler_params p = default_sampler_params();
  p.repeat_penalty = 1.1f;
  p.presence_penalty = 0.2f;
  Sampler s(5000);
  Rng rng;
  rng.seed(5);
  const long before = geist_test_alloc_count();
  for (int i = 0; i < 50; ++i) (void)s.sample(l.data(), hist.data(), hist.size(), 2, p, rng);
  p.top_k = 0;
  p.min_p = 0;
  for (int i = 0; i < 50; ++i) (void)s.sample(l.data(), hist.data(), hist.size(), 2, p, rng);
  EXPECT_EQ(geist_test_alloc_count(), before);
}

TEST(Sampler, NaNLogitsAreNeverChosen) {
  const std::vector<float> l = {std::nanf(""), 1.0f, std::nanf(""), 0.5f};
  Sampler s(4);
  Rng rng;
  rng.seed(3);
  for (int i = 0; i < 1000; ++i) {
    const int32_t t = s.sample(l.data(), nullptr, 0, 0, plain(1.0f), rng);
    EXPECT_TRUE(t == 1 || t == 3);
  }
}

TEST(Sampler, ValidationNamesTheField) {
  geist_sampler_params p = default_sampler_params();
  EXPECT_TRUE(validate_sampler_params(p).is_ok());
  p.struct_size = 4;
  Status s = validate_sampler_params(p);
  EXPECT_EQ(s.code(), GEIST_E_INVALID_ARG);
  EXPECT_NE(s.message().find("struct_size"), std::string::npos);
  p = default_sampler_params();
  p.repeat_penalty = 0.0f;
  s = validate_sampler_params(p);
  EXPECT_EQ(s.code(), GEIST_E_INVALID_ARG);
  EXPECT_NE(s.message().find("repeat_penalty"), std::string::npos);
  p = default_sampler_params();
  p.temperature = std::nanf("");
  EXPECT_EQ(validate_sampler_params(p).code(), GEIST_E_INVALID_ARG);
  p = default_sampler_params();
  p.penalty_last_n = -2;
  EXPECT_EQ(validate_sampler_params(p).code(), GEIST_E_INVALID_ARG);
  p = default_sampler_params();
  p.frequency_penalty = std::numeric_limits<float>::infinity();
  s = validate_sampler_params(p);
  EXPECT_EQ(s.code(), GEIST_E_INVALID_ARG);
  EXPECT_NE(s.message().find("frequency_penalty"), std::string::npos);
}

}  // namespace
}  // namespace geist
