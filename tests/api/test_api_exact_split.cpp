// The prefill grid of attention-only models (docs/ARCHITECTURE.md "Determinism",
// geist_session_prefill_grid): 1 in every KV mode. For split points k on and off every block
// and group size (1, 2, 3, 17, 31, 32, 33, 63, 64, 65, 100, ..., and seeded random ones),
// prefill(0:k) (one call, or random pieces) + snapshot + restore (into another session, or the
// same one) + prefill(k:N) gives memcmp-equal logits rows and a memcmp-equal snapshot image
// (the whole state) to prefill(0:N) in one call; the prefix's own pending logits equal row
// k - 1 of the one-call run. N crosses the CPU's 256-row Llama micro-batch, so a cut moves
// every later micro-batch boundary. Models: stories260K (f32 weights, head width 8, so the
// quantized KV modes run on blocks of 8) and a tiny-llama of q8_0 weights (the llama-1b
// benchmark's weight type, head width 32). The one-call run on stories260K is anchored to
// llama.cpp's logits (the fixture's random200). The Qwen3.5 side (grid 64) is
// tests/api/test_api_grid.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api/api_util.h"
#include "geist/geist.h"
#include "geist/geist_snapshot.h"
#include "geist/geist_util.h"
#include "support/sanitized.h"

namespace geist::test {
namespace {

void create_split_session(geist_model* m, int32_t kv_mode, int32_t max_seq_len,
                          geist_session** out) {
  geist_session_params p;
  geist_session_params_default(&p);
  p.kv_mode = kv_mode;
  p.max_seq_len = max_seq_len;
  p.n_threads = 2;
  ASSERT_EQ(geist_session_create(m, &p, out), GEIST_OK) << geist_model_last_error(m);
}

// Split points of [1, n): every block / group / window edge of the KV codecs and the
// micro-batch, neighbours included, then `n_random` seeded ones.
std::vector<int32_t> split_points(int32_t n, int n_random, uint32_t seed) {
  std::vector<int32_t> ks = {1,   2,   3,   7,   8,   9,   17,  31,    32,   33,
                             63,  64,  65,  95,  96,  97,  100, 127,   128,  129,
                             191, 192, 200, 255, 256, 257, 263, n - 2, n - 1};
  std::mt19937 g(seed);
  for (int i = 0; i < n_random; ++i) ks.push_back(1 + static_cast<int32_t>(g() % (n - 1)));
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  ks.erase(std::remove_if(ks.begin(), ks.end(), [&](int32_t k) { return k < 1 || k >= n; }),
           ks.end());
  return ks;
}

struct SplitStats {
  int checked = 0;
};

// Every KV mode: the grid the API reports is 1, and every split point of `ks` holds.
// ref: llama.cpp's logits of the first ref_rows rows (f32 KV), or null.
void check_exact_splits(const char* label, geist_model* model, const std::vector<int32_t>& toks,
                        const std::vector<int32_t>& ks, const float* ref, int32_t ref_rows,
                        SplitStats* stats) {
  const int32_t n = static_cast<int32_t>(toks.size());
  const size_t nv = static_cast<size_t>(geist_model_n_vocab(model));
  const int32_t cap = n + 8;
  for (const int32_t kv : kv_modes_for_run(std::string("ApiExactSplit ") + label)) {
    SessionHandle whole;
    ASSERT_NO_FATAL_FAILURE(create_split_session(model, kv, cap, &whole.s));
    ASSERT_EQ(geist_session_prefill_grid(whole.s), 1) << label << " kv " << kv;
    std::vector<float> want(static_cast<size_t>(n) * nv);
    ASSERT_EQ(geist_session_prefill_all_logits(whole.s, toks.data(), toks.size(), want.data(),
                                               want.size()),
              GEIST_OK)
        << geist_session_last_error(whole.s);
    if (ref != nullptr && kv == GEIST_KV_F32) {  // the run everything is compared to is right
      double worst = 0;
      for (size_t i = 0; i < static_cast<size_t>(ref_rows) * nv; ++i) {
        worst = std::max(worst, std::fabs(static_cast<double>(want[i]) - ref[i]));
      }
      EXPECT_LE(worst, 1e-3) << label << ": the one-call run against llama.cpp";
    }
    const std::vector<uint8_t> want_img = snapshot_of(whole.s);
    std::mt19937 g(1234u + static_cast<uint32_t>(kv));
    for (size_t i = 0; i < ks.size(); ++i) {
      const int32_t k = ks[i];
      const bool pieces = i % 2 == 1;        // the prefix in random pieces, or one call
      const bool same_session = i % 3 == 2;  // restore into the session that took it
      SessionHandle a, b;
      ASSERT_NO_FATAL_FAILURE(create_split_session(model, kv, cap, &a.s));
      if (pieces) {
        ASSERT_NO_FATAL_FAILURE(prefill_pieces(a.s, toks, 0, k, &g));
      } else {
        ASSERT_EQ(geist_session_prefill(a.s, toks.data(), static_cast<size_t>(k)), GEIST_OK);
      }
      const float* pending = nullptr;
      int32_t pn = 0;
      ASSERT_EQ(geist_session_logits(a.s, &pending, &pn), GEIST_OK);
      ASSERT_EQ(static_cast<size_t>(pn), nv);
      EXPECT_EQ(
          std::memcmp(pending, want.data() + static_cast<size_t>(k - 1) * nv, nv * sizeof(float)),
          0)
          << label << " kv " << kv << " k " << k << ": the prefix's logits differ";
      const std::vector<uint8_t> img = snapshot_of(a.s);
      geist_session* into = a.s;
      if (!same_session) {
        ASSERT_NO_FATAL_FAILURE(create_split_session(model, kv, cap, &b.s));
        into = b.s;
      } else {  // moved on past k first: the restore replaces all of it
        const int32_t other[5] = {toks[1], toks[1], toks[2], toks[3], toks[1]};
        ASSERT_EQ(geist_session_prefill(a.s, other, 5), GEIST_OK);
      }
      ASSERT_EQ(geist_session_restore(into, img.data(), img.size()), GEIST_OK)
          << geist_session_last_error(into);
      std::vector<float> got(static_cast<size_t>(n - k) * nv);
      ASSERT_EQ(geist_session_prefill_all_logits(into, toks.data() + k, static_cast<size_t>(n - k),
                                                 got.data(), got.size()),
                GEIST_OK)
          << geist_session_last_error(into);
      EXPECT_EQ(std::memcmp(got.data(), want.data() + static_cast<size_t>(k) * nv,
                            got.size() * sizeof(float)),
                0)
          << label << " kv " << kv << " k " << k << (pieces ? " (pieces)" : "")
          << ": logits differ";
      EXPECT_TRUE(snapshot_of(into) == want_img)
          << label << " kv " << kv << " k " << k << (pieces ? " (pieces)" : "")
          << ": state differs";
      ++stats->checked;
    }
  }
}

TEST(ApiExactSplit, Stories260KEverySplitIsBitExact) {
  GEIST_REQUIRE_FIXTURES();
  ModelHandle model;
  char err[512] = "";
  ASSERT_EQ(geist_model_load(stories260k_path().c_str(), nullptr, &model.m, err, sizeof err),
            GEIST_OK)
      << err;
  const std::string dir = fixture_path("reference/stories260K/");
  std::vector<int32_t> toks =
      json_int_array(read_text_file(dir + "random200.json"), "prompt_tokens");
  const std::vector<float> ref = read_f32_file(dir + "random200.f32");
  ASSERT_EQ(toks.size(), 200u);
  ASSERT_EQ(ref.size(), 200u * 512u);
  std::mt19937 g(7);
  while (toks.size() < 300) toks.push_back(3 + static_cast<int32_t>(g() % 509));
  SplitStats st;
  check_exact_splits("stories260K", model.m, toks, split_points(300, 12, 11), ref.data(), 200, &st);
  std::printf("[ stories260K ] %d splits memcmp-equal to the one-call prefill (each KV mode run)\n",
              st.checked);
}

TEST(ApiExactSplit, TinyLlamaQ8EverySplitIsBitExact) {
  const std::string path = temp_path("exact_split_tiny_llama_q8_0.gguf");
  char err[512] = "";
  ASSERT_EQ(
      geist_mkmodel("tiny-llama", "q8_0", path.c_str(), 42, nullptr, nullptr, err, sizeof err),
      GEIST_OK)
      << err;
  ModelHandle model;
  ASSERT_EQ(geist_model_load(path.c_str(), nullptr, &model.m, err, sizeof err), GEIST_OK) << err;
  const int32_t nv = geist_model_n_vocab(model.m);
  std::mt19937 g(5);
  std::vector<int32_t> toks = {geist_model_token_bos(model.m)};
  while (toks.size() < 280) toks.push_back(static_cast<int32_t>(g() % static_cast<uint32_t>(nv)));
  // Fewer points than stories260K (a forward costs ~50 times more): the edges that matter for
  // the codecs and the micro-batch, and a few random ones.
  const std::vector<int32_t> ks = {1, 17, 31, 33, 63, 65, 100, 129, 255, 257, 279};
  SplitStats st;
  std::vector<int32_t> with_random = ks;
  for (int i = 0; i < 3; ++i) with_random.push_back(2 + static_cast<int32_t>(g() % 276));
  std::sort(with_random.begin(), with_random.end());
  with_random.erase(std::unique(with_random.begin(), with_random.end()), with_random.end());
  check_exact_splits("tiny-llama q8_0", model.m, toks, with_random, nullptr, 0, &st);
  std::printf(
      "[ tiny-llama q8_0 ] %d splits memcmp-equal to the one-call prefill (each KV mode run)\n",
      st.checked);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace geist::test
