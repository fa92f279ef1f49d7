// KV cache modes on real models: agreement of every mode with the f32-KV run (top-1 and mean
// KL divergence of the next-token distributions over the 200-token references), prefill split
// and thread invariance and interleaved sessions, bit-exact within each mode.
//
// Floors (measured values in docs/BENCHMARKS.md, "KV cache modes"): top-1 a few rows under the
// measurement, KL ceilings about 3x the measured values, so that a broken encoding (which moves
// KL by orders of magnitude) fails while small arithmetic changes do not; where the issue sets
// a minimum above that (q8 >= 99 %, q4 >= 90 % on stories260K), the floor is the minimum. On
// stories260K the minimums hold for every mode. Its keys have one outlier channel per
// 8-wide head (rms ~20 against ~1.5), mostly a constant offset before RoPE: keys stored
// relative to position 0's key (K_REF) and q8 keys with an f16 min per block took q8 from 193
// to 200/200 (KL 9.2e-4 -> 2.8e-4) and q4 from 140 to 161/200. q4 keys relative to K_REF
// turned by RoPE to their position (the offset rotates with p) plus an f16 window of the
// newest 32-63 positions give 187/200 (KL 0.0090; the flips are near-ties, top-2 gaps
// 0.002-0.12); the window alone gave 176-178, the RoPE-aware reference alone 172.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "archs/arch.h"
#include "base/thread_pool.h"
#include "support/fixtures.h"
#include "test_qwen35_support.h"

namespace geist {
namespace {

using qwen35_test::argmax;
using qwen35_test::json_int_array;
using qwen35_test::load_model;
using qwen35_test::Loaded;

constexpr KvMode kModes[] = {KvMode::F32, KvMode::F16,   KvMode::Q8,
                             KvMode::Q4,  KvMode::KIVI4, KvMode::KIVI2};

struct Floor {
  double top1;    // minimum fraction of rows whose argmax equals the f32-KV run's
  double max_kl;  // maximum mean KL(f32 || mode) in nats
};

struct ModelCase {
  const char* model;
  const char* ref_json;
  const char* key;
  Floor floors[6];  // per mode, in kModes order
};

const ModelCase kModels[] = {
    {"stories260K.gguf",
     "reference/stories260K/random200.json",
     "prompt_tokens",
     {{1.0, 1e-12}, {1.0, 1e-5}, {0.99, 1e-3}, {0.90, 0.03}, {0.90, 0.02}, {0.72, 0.35}}},
    {"tiny-qwen35-f32.gguf",
     "reference/tiny-qwen35/hf_reference.json",
     "tokens",
     {{1.0, 1e-12}, {1.0, 1e-6}, {0.99, 1e-4}, {0.95, 1.2e-3}, {0.95, 1e-3}, {0.85, 0.02}}},
    {"stories-qwen35-f32.gguf",
     "reference/stories-qwen35/hf_reference.json",
     "tokens",
     {{1.0, 1e-12}, {1.0, 1e-6}, {0.99, 1e-4}, {0.97, 6e-4}, {0.97, 2e-3}, {0.92, 0.04}}},
};

std::vector<int32_t> ref_tokens(const ModelCase& mc) {
  return json_int_array(test::read_text_file(test::fixture_path(mc.ref_json)), mc.key);
}

std::vector<float> run_mode(const ArchModel& m, KvMode mode, const std::vector<int32_t>& toks,
                            const std::vector<int32_t>& pieces, int n_threads) {
  ThreadPool pool(n_threads);
  std::unique_ptr<ArchState> state;
  Status st = m.create_state(static_cast<int32_t>(toks.size()) + 8, mode, &state);
  EXPECT_TRUE(st) << st.message();
  if (!st) return {};
  return qwen35_test::run_rows(m, *state, toks, pieces, pool);
}

// Mean over rows of KL(p || q) with p, q the softmax of the rows, in double.
double mean_kl(const std::vector<float>& p_logits, const std::vector<float>& q_logits, int32_t nv) {
  const size_t rows = p_logits.size() / static_cast<size_t>(nv);
  double total = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* a = p_logits.data() + r * nv;
    const float* b = q_logits.data() + r * nv;
    double ma = -INFINITY, mb = -INFINITY, sa = 0, sb = 0;
    for (int32_t j = 0; j < nv; ++j)
      ma = std::max(ma, double{a[j]}), mb = std::max(mb, double{b[j]});
    for (int32_t j = 0; j < nv; ++j) sa += std::exp(a[j] - ma), sb += std::exp(b[j] - mb);
    double kl = 0;
    for (int32_t j = 0; j < nv; ++j) {
      const double lp = a[j] - ma - std::log(sa);
      const double lq = b[j] - mb - std::log(sb);
      kl += std::exp(lp) * (lp - lq);
    }
    total += kl;
  }
  return total / static_cast<double>(rows);
}

TEST(KvModes, AgreementWithF32Kv) {
  GEIST_REQUIRE_FIXTURES();
  std::printf("    | model | mode | top-1 vs f32 KV | mean KL (nats) | KV bytes/token |\n");
  for (const ModelCase& mc : kModels) {
    Loaded l = load_model(mc.model);
    ASSERT_TRUE(l.model) << mc.model;
    const std::vector<int32_t> toks = ref_tokens(mc);
    ASSERT_EQ(toks.size(), 200u) << mc.ref_json;
    const int32_t nv = l.model->info().n_vocab;
    const std::vector<float> base = run_mode(*l.model, KvMode::F32, toks, {200}, 2);
    for (size_t mi = 0; mi < 6; ++mi) {
      const KvMode mode = kModes[mi];
      const std::vector<float> got = run_mode(*l.model, mode, toks, {200}, 2);
      ASSERT_EQ(got.size(), base.size());
      int32_t same = 0;
      for (size_t r = 0; r < toks.size(); ++r) {
        same += argmax(base.data() + r * nv, nv) == argmax(got.data() + r * nv, nv) ? 1 : 0;
      }
      const double top1 = same / 200.0;
      const double kl = mean_kl(base, got, nv);
      // Bytes per token of one attention layer of this model (K and V of n_head_kv heads).
      const ModelInfo& info = l.model->info();
      const int32_t width = info.n_head_kv * info.head_dim;
      std::unique_ptr<KvCache> one_layer;
      ASSERT_TRUE(
          KvCache::create(mode, {{width, width, info.head_dim, info.head_dim}}, 64, &one_layer));
      std::printf("    | %s | %s | %d/200 | %.3g | %lld per attention layer |\n", mc.model,
                  kv_mode_name(mode), same, kl,
                  static_cast<long long>(one_layer->bytes_per_token()));
      EXPECT_GE(top1, mc.floors[mi].top1) << mc.model << " " << kv_mode_name(mode);
      EXPECT_LE(kl, mc.floors[mi].max_kl) << mc.model << " " << kv_mode_name(mode);
    }
  }
}

// Llama only: qwen35's chunked and recurrent delta rule differ in the last bits (its own split
// test bounds that by 1e-4), which no KV mode can make bitwise. The KV cache's own bytes and
// attention rows are split-invariant in every mode (tests/kv).
TEST(KvModes, SplitAndThreadInvariantInEveryMode) {
  GEIST_REQUIRE_FIXTURES();
  for (const ModelCase& mc : {kModels[0]}) {
    Loaded l = load_model(mc.model);
    ASSERT_TRUE(l.model);
    std::vector<int32_t> toks = ref_tokens(mc);
    toks.resize(100);  // crosses three KIVI group boundaries
    for (KvMode mode : kModes) {
      const std::vector<float> one = run_mode(*l.model, mode, toks, {100}, 2);
      const std::vector<float> split = run_mode(*l.model, mode, toks, {1, 7, 33, 5, 31}, 1);
      ASSERT_EQ(one.size(), split.size());
      EXPECT_EQ(std::memcmp(one.data(), split.data(), one.size() * 4), 0)
          << mc.model << " " << kv_mode_name(mode);
    }
  }
}

TEST(KvModes, InterleavedSessionsInEveryMode) {
  GEIST_REQUIRE_FIXTURES();
  for (const ModelCase& mc : {kModels[0], kModels[1]}) {
    Loaded l = load_model(mc.model);
    ASSERT_TRUE(l.model);
    std::vector<int32_t> a = ref_tokens(mc);
    a.resize(80);
    std::vector<int32_t> b(a.rbegin(), a.rend());
    const int32_t nv = l.model->info().n_vocab;
    for (KvMode mode : kModes) {
      // The same pieces alone: qwen35's delta rule is only split-invariant within 1e-4.
      const std::vector<float> ra = run_mode(*l.model, mode, a, {9}, 2);
      const std::vector<float> rb = run_mode(*l.model, mode, b, {9}, 1);
      ThreadPool pool(2);
      std::unique_ptr<ArchState> sa, sb;
      ASSERT_TRUE(l.model->create_state(88, mode, &sa));
      ASSERT_TRUE(l.model->create_state(88, mode, &sb));
      std::vector<float> ia(ra.size()), ib(rb.size());
      for (int32_t pos = 0; pos < 80; pos += 9) {  // alternate the two sessions every 9 tokens
        const int32_t n = std::min(9, 80 - pos);
        ASSERT_TRUE(l.model->forward(*sa, a.data() + pos, n, pos, true,
                                     ia.data() + static_cast<size_t>(pos) * nv, pool));
        ASSERT_TRUE(l.model->forward(*sb, b.data() + pos, n, pos, true,
                                     ib.data() + static_cast<size_t>(pos) * nv, pool));
      }
      EXPECT_EQ(std::memcmp(ia.data(), ra.data(), ra.size() * 4), 0) << kv_mode_name(mode);
      EXPECT_EQ(std::memcmp(ib.data(), rb.data(), rb.size() * 4), 0) << kv_mode_name(mode);
    }
  }
}

// A KIVI cache keeps f16 rows only for the group being filled. Continuing inside an earlier
// group (what a caller would do after a call that failed partway) must be an error, not a read
// of another position's rows; a group boundary or the current group is fine.
TEST(KvModes, KiviRefusesToContinueInsideAnOverwrittenGroup) {
  GEIST_REQUIRE_FIXTURES();
  Loaded l = load_model("stories260K.gguf");
  ASSERT_TRUE(l.model);
  const std::vector<int32_t> toks = ref_tokens(kModels[0]);
  const int32_t nv = l.model->info().n_vocab;
  ThreadPool pool(1);
  std::vector<float> logits(static_cast<size_t>(nv) * 40);
  for (KvMode mode : kModes) {
    std::unique_ptr<ArchState> st;
    ASSERT_TRUE(l.model->create_state(64, mode, &st));
    ASSERT_TRUE(l.model->forward(*st, toks.data(), 40, 0, false, logits.data(), pool));
    const bool kivi = mode == KvMode::KIVI4 || mode == KvMode::KIVI2;
    // Position 5 lies in group 0, whose residual rows positions 32..39 replaced.
    const Status back = l.model->forward(*st, toks.data() + 5, 1, 5, false, logits.data(), pool);
    EXPECT_EQ(back.code(), kivi ? GEIST_E_INVALID_STATE : GEIST_OK) << kv_mode_name(mode);
    if (kivi) {
      EXPECT_NE(back.message().find("position 5"), std::string::npos) << back.message();
    }
    EXPECT_TRUE(l.model->forward(*st, toks.data(), 1, 0, false, logits.data(), pool));
  }
  // q4 keeps f16 rows for its newest 64 positions: after 100, position 5's window rows [0, 5)
  // are gone, position 90's [32, 90) too (36..99 remain), position 99's [64, 99) are there.
  std::unique_ptr<ArchState> st;
  ASSERT_TRUE(l.model->create_state(128, KvMode::Q4, &st));
  std::vector<float> many(static_cast<size_t>(nv) * 100);
  ASSERT_TRUE(l.model->forward(*st, toks.data(), 100, 0, false, many.data(), pool));
  EXPECT_EQ(l.model->forward(*st, toks.data() + 5, 1, 5, false, logits.data(), pool).code(),
            GEIST_E_INVALID_STATE);
  EXPECT_EQ(l.model->forward(*st, toks.data() + 90, 1, 90, false, logits.data(), pool).code(),
            GEIST_E_INVALID_STATE);
  EXPECT_TRUE(l.model->forward(*st, toks.data() + 99, 1, 99, false, logits.data(), pool));
}

}  // namespace
}  // namespace geist
