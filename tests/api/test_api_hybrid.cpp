// C API sessions on the trained Qwen3.5 hybrid (recurrent DeltaNet layers), where the owed
// forward and session isolation matter most: recurrent state cannot be recomputed cheaply.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "api/api_util.h"
#include "geist/geist.h"

namespace geist::test {
namespace {

class ApiHybrid : public testing::Test {
 protected:
  void SetUp() override {
    GEIST_REQUIRE_FIXTURES();
    char err[512] = "";
    const std::string path = fixture_path("models/stories-qwen35-f32.gguf");
    ASSERT_EQ(geist_model_load(path.c_str(), nullptr, &model_.m, err, sizeof err), GEIST_OK) << err;
    const std::string json =
        read_text_file(fixture_path("reference/stories-qwen35/hf_reference.json"));
    prompt_ = json_int_array(json, "greedy_prompt");
    greedy_ = json_int_array(json, "greedy_tokens");
    ASSERT_EQ(prompt_.size(), 16u);
    ASSERT_EQ(greedy_.size(), 64u);
  }

  void create(SessionHandle* s, float temperature, uint64_t seed) {
    geist_session_params p;
    geist_session_params_default(&p);
    p.kv_mode = GEIST_KV_F32;  // as the transformers reference
    p.max_seq_len = 128;
    p.n_threads = 2;
    p.sampler.temperature = temperature;
    p.sampler.seed = seed;
    ASSERT_EQ(geist_session_create(model_.m, &p, &s->s), GEIST_OK)
        << geist_model_last_error(model_.m);
  }

  ModelHandle model_;
  std::vector<int32_t> prompt_;  // HF's greedy_prompt (BOS first)
  std::vector<int32_t> greedy_;  // HF transformers' 64 greedy tokens after it
};

TEST_F(ApiHybrid, GreedyContinuationMatchesTransformers) {
  SessionHandle s;
  create(&s, 0.0f, 0);
  ASSERT_EQ(geist_session_prefill(s.s, prompt_.data(), prompt_.size()), GEIST_OK);
  std::vector<int32_t> got;
  for (size_t i = 0; i < greedy_.size(); ++i) {
    geist_token t = -1;
    ASSERT_EQ(geist_session_decode(s.s, &t), GEIST_OK) << geist_session_last_error(s.s);
    got.push_back(t);
  }
  EXPECT_EQ(got, greedy_);
}

TEST_F(ApiHybrid, InterleavedSampledSessionsEqualSoloRuns) {
  const int kSteps = 32;
  auto run_solo = [&](uint64_t seed, size_t prompt_len) {
    SessionHandle s;
    create(&s, 0.8f, seed);
    std::vector<int32_t> toks;
    std::vector<float> logits;
    EXPECT_EQ(geist_session_prefill(s.s, prompt_.data(), prompt_len), GEIST_OK);
    for (int i = 0; i < kSteps; ++i) {
      const float* l = nullptr;
      int32_t nv = 0;
      EXPECT_EQ(geist_session_logits(s.s, &l, &nv), GEIST_OK);
      logits.insert(logits.end(), l, l + nv);
      geist_token t = -1;
      EXPECT_EQ(geist_session_decode(s.s, &t), GEIST_OK);
      toks.push_back(t);
    }
    return std::make_pair(toks, logits);
  };
  const auto solo_a = run_solo(3, 16);
  const auto solo_b = run_solo(4, 5);

  SessionHandle a, b;
  create(&a, 0.8f, 3);
  create(&b, 0.8f, 4);
  ASSERT_EQ(geist_session_prefill(a.s, prompt_.data(), 16), GEIST_OK);
  ASSERT_EQ(geist_session_prefill(b.s, prompt_.data(), 5), GEIST_OK);
  std::vector<int32_t> ta, tb;
  std::vector<float> la, lb;
  for (int i = 0; i < kSteps; ++i) {
    for (auto [s, toks, logits] : {std::tuple{a.s, &ta, &la}, std::tuple{b.s, &tb, &lb}}) {
      const float* l = nullptr;
      int32_t nv = 0;
      ASSERT_EQ(geist_session_logits(s, &l, &nv), GEIST_OK);
      logits->insert(logits->end(), l, l + nv);
      geist_token t = -1;
      ASSERT_EQ(geist_session_decode(s, &t), GEIST_OK);
      toks->push_back(t);
    }
  }
  EXPECT_EQ(ta, solo_a.first);
  EXPECT_EQ(tb, solo_b.first);
  ASSERT_EQ(la.size(), solo_a.second.size());
  ASSERT_EQ(lb.size(), solo_b.second.size());
  EXPECT_EQ(0, std::memcmp(la.data(), solo_a.second.data(), la.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(lb.data(), solo_b.second.data(), lb.size() * sizeof(float)));
}

TEST_F(ApiHybrid, RefusedPrefillKeepsRecurrentStateIntact) {
  SessionHandle s, control;
  create(&s, 0.0f, 0);
  create(&control, 0.0f, 0);
  ASSERT_EQ(geist_session_prefill(s.s, prompt_.data(), prompt_.size()), GEIST_OK);
  ASSERT_EQ(geist_session_prefill(control.s, prompt_.data(), prompt_.size()), GEIST_OK);
  std::vector<int32_t> too_many(200, 5);
  EXPECT_EQ(geist_session_prefill(s.s, too_many.data(), too_many.size()), GEIST_E_TOO_MANY_TOKENS);
  const geist_token bad[] = {1, 2, -3};
  EXPECT_EQ(geist_session_prefill(s.s, bad, 3), GEIST_E_INVALID_ARG);
  for (int i = 0; i < 20; ++i) {
    geist_token x = -1, y = -2;
    ASSERT_EQ(geist_session_decode(s.s, &x), GEIST_OK);
    ASSERT_EQ(geist_session_decode(control.s, &y), GEIST_OK);
    EXPECT_EQ(x, y);
    EXPECT_EQ(x, greedy_[static_cast<size_t>(i)]);
  }
}

}  // namespace
}  // namespace geist::test
