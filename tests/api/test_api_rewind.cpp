// geist_session_rewind: a session that prefilled a prompt (and decoded past it) is rewound to
// k and prefills another prompt that shares the first k tokens; its logits rows and snapshot
// image must be memcmp-equal to a fresh session that prefilled the other prompt in one call
// (itself anchored to llama.cpp: tests/api/test_api_exact_split.cpp), in every KV mode where
// the rewind is accepted. F32, F16 and Q8 accept every k; Q4 and KIVI refuse where later
// positions overwrote the window or residual rows k needs, and a refusal leaves the session
// unchanged (its image memcmp-equal). A hybrid (Qwen3.5) refuses every k inside its history
// but 0. After a rewind, decode, logits and snapshots refuse until a prefill.
#include <gtest/gtest.h>

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

geist_session* new_session(geist_model* m, int32_t kv_mode, int32_t max_seq_len) {
  geist_session_params p;
  geist_session_params_default(&p);
  p.kv_mode = kv_mode;
  p.max_seq_len = max_seq_len;
  p.n_threads = 2;
  geist_session* s = nullptr;
  EXPECT_EQ(geist_session_create(m, &p, &s), GEIST_OK) << geist_model_last_error(m);
  return s;
}

TEST(ApiRewind, RewoundPrefixEqualsTheWholePrefillInEveryKvMode) {
  GEIST_REQUIRE_FIXTURES();
  ModelHandle model;
  ASSERT_NO_FATAL_FAILURE(load_model(stories260k_path(), &model));
  const int32_t nv = geist_model_n_vocab(model.m);
  const std::string dir = fixture_path("reference/stories260K/");
  std::vector<int32_t> a = json_int_array(read_text_file(dir + "random200.json"), "prompt_tokens");
  ASSERT_EQ(a.size(), 200u);
  std::mt19937 g(3);
  while (a.size() < 300) a.push_back(3 + static_cast<int32_t>(g() % 509));
  const int32_t n = 300, cap = 320;
  const std::vector<int32_t> ks = {1,   2,   31,  32,  33,  64,  100, 128,
                                   200, 255, 256, 257, 270, 290, 299};
  int accepted = 0, refused = 0;
  for (const int32_t kv : kv_modes_for_run("ApiRewind")) {
    const bool always = kv == GEIST_KV_F32 || kv == GEIST_KV_F16 || kv == GEIST_KV_Q8;
    for (const int32_t k : ks) {
      // b: a's first k tokens, then others.
      std::vector<int32_t> b(a.begin(), a.begin() + k);
      while (static_cast<int32_t>(b.size()) < n) b.push_back(3 + static_cast<int32_t>(g() % 509));
      SessionHandle whole, s;
      whole.s = new_session(model.m, kv, cap);
      s.s = new_session(model.m, kv, cap);
      ASSERT_TRUE(whole.s && s.s);
      std::vector<float> want(static_cast<size_t>(n) * nv);
      ASSERT_EQ(
          geist_session_prefill_all_logits(whole.s, b.data(), b.size(), want.data(), want.size()),
          GEIST_OK);
      ASSERT_NO_FATAL_FAILURE(prefill_pieces(s.s, a, 0, n, &g));
      for (int i = 0; i < 5; ++i) {  // decoded rows past the prompt: the rewind drops them
        geist_token t = 0;
        ASSERT_EQ(geist_session_decode(s.s, &t), GEIST_OK);
      }
      const std::vector<uint8_t> before = snapshot_of(s.s);
      const geist_status st = geist_session_rewind(s.s, k);
      if (st != GEIST_OK) {
        EXPECT_FALSE(always) << "kv " << kv << " k " << k << ": " << geist_session_last_error(s.s);
        EXPECT_EQ(st, GEIST_E_INVALID_STATE);
        EXPECT_EQ(snapshot_of(s.s), before)
            << "kv " << kv << " k " << k << ": a refusal changed it";
        ++refused;
        continue;
      }
      ++accepted;
      EXPECT_EQ(geist_session_position(s.s), k);
      geist_token t = 0;
      const float* lg = nullptr;
      size_t size = 0;
      EXPECT_EQ(geist_session_decode(s.s, &t), GEIST_E_INVALID_STATE);
      EXPECT_EQ(geist_session_logits(s.s, &lg, nullptr), GEIST_E_INVALID_STATE);
      EXPECT_EQ(geist_session_snapshot_size(s.s, &size), GEIST_E_INVALID_STATE);
      EXPECT_NE(std::string(geist_session_last_error(s.s)).find("rewound"), std::string::npos);
      // The RNG drew for the decoded tokens and a rewind keeps it: re-seeded as a server does
      // for its next request (whole never drew).
      geist_sampler_params sp;
      geist_sampler_params_default(&sp);
      ASSERT_EQ(geist_session_set_sampler(s.s, &sp), GEIST_OK);
      std::vector<float> got(static_cast<size_t>(n - k) * nv);
      ASSERT_EQ(geist_session_prefill_all_logits(s.s, b.data() + k, static_cast<size_t>(n - k),
                                                 got.data(), got.size()),
                GEIST_OK)
          << geist_session_last_error(s.s);
      EXPECT_EQ(std::memcmp(got.data(), want.data() + static_cast<size_t>(k) * nv,
                            got.size() * sizeof(float)),
                0)
          << "kv " << kv << " k " << k << ": logits differ";
      EXPECT_TRUE(snapshot_of(s.s) == snapshot_of(whole.s))
          << "kv " << kv << " k " << k << ": state differs";
    }
  }
  std::printf("[ stories260K ] rewinds: %d accepted and memcmp-equal, %d refused (Q4 / KIVI)\n",
              accepted, refused);
  EXPECT_GT(accepted, 0);
}

TEST(ApiRewind, ArgumentsAndTheHybridsRecurrentState) {
  GEIST_REQUIRE_FIXTURES();
  ModelHandle llama, hybrid;
  ASSERT_NO_FATAL_FAILURE(load_model(stories260k_path(), &llama));
  ASSERT_NO_FATAL_FAILURE(load_model(fixture_path("models/tiny-qwen35-q8_0.gguf"), &hybrid));
  std::vector<int32_t> toks;
  for (int i = 0; i < 100; ++i) toks.push_back(3 + (i * 37) % 200);

  SessionHandle s;
  s.s = new_session(llama.m, GEIST_KV_F16, 128);
  ASSERT_EQ(geist_session_prefill(s.s, toks.data(), 40), GEIST_OK);
  EXPECT_EQ(geist_session_rewind(s.s, -1), GEIST_E_INVALID_ARG);
  EXPECT_EQ(geist_session_rewind(s.s, 41), GEIST_E_INVALID_ARG);
  const std::vector<uint8_t> at40 = snapshot_of(s.s);
  EXPECT_EQ(geist_session_rewind(s.s, 40), GEIST_OK);  // the whole history: nothing forgotten
  EXPECT_EQ(snapshot_of(s.s), at40);
  EXPECT_EQ(geist_session_rewind(s.s, 0), GEIST_OK);
  EXPECT_EQ(geist_session_position(s.s), 0);
  size_t size = 0;  // rewound to nothing: an empty session, which snapshots
  EXPECT_EQ(geist_session_snapshot_size(s.s, &size), GEIST_OK) << geist_session_last_error(s.s);

  SessionHandle q;
  q.s = new_session(hybrid.m, GEIST_KV_F16, 128);
  ASSERT_EQ(geist_session_prefill_grid(q.s), 64);
  ASSERT_EQ(geist_session_prefill(q.s, toks.data(), toks.size()), GEIST_OK);
  const std::vector<uint8_t> before = snapshot_of(q.s);
  for (const int32_t k : {1, 50, 64, 99}) {
    EXPECT_EQ(geist_session_rewind(q.s, k), GEIST_E_INVALID_STATE) << k;
    EXPECT_NE(std::string(geist_session_last_error(q.s)).find("recurrent"), std::string::npos);
    EXPECT_EQ(snapshot_of(q.s), before) << k;
  }
  EXPECT_EQ(geist_session_rewind(q.s, 0), GEIST_OK);
  EXPECT_EQ(geist_session_position(q.s), 0);
}

}  // namespace
}  // namespace geist::test
