// Bounds at the C ABI: sampler settings out of range and thread counts beyond the cap are
// refused with GEIST_E_INVALID_ARG naming the field; sessions share their model's thread pool
// (two sessions driven from two threads at once give the bits each gives alone); a prefill
// cancelled between micro-batches stops at a grid point, valid and continuable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/api_util.h"
#include "geist/geist.h"
#include "geist/geist_backend.h"
#include "geist/geist_util.h"

namespace geist::test {
namespace {

class ApiBounds : public testing::Test {
 protected:
  void SetUp() override {
    GEIST_REQUIRE_FIXTURES();
    // The CPU backend: the cancellation test counts its micro-batch (on CUDA a prompt of 400
    // rows is one micro-batch, with no point to stop at).
    geist_model_params mp;
    geist_model_params_default(&mp);
    mp.backend = GEIST_BACKEND_CPU;
    char err[512] = "";
    ASSERT_EQ(geist_model_load(stories260k_path().c_str(), &mp, &model_.m, err, sizeof err),
              GEIST_OK)
        << err;
  }
  geist_session_params params() const {
    geist_session_params p;
    geist_session_params_default(&p);
    p.n_threads = 2;
    p.max_seq_len = 512;
    p.kv_mode = GEIST_KV_F32;
    return p;
  }
  // Tokens that are all in the vocabulary, deterministic.
  std::vector<int32_t> tokens(size_t n) const {
    std::vector<int32_t> t(n);
    for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>(1 + (i * 37) % 500);
    return t;
  }
  ModelHandle model_;
};

struct BadField {
  const char* field;
  void (*set)(geist_sampler_params*);
};

const BadField kBad[] = {
    {"temperature", [](geist_sampler_params* p) { p->temperature = -1.0f; }},
    {"temperature", [](geist_sampler_params* p) { p->temperature = std::nanf(""); }},
    {"temperature", [](geist_sampler_params* p) { p->temperature = INFINITY; }},
    {"top_p", [](geist_sampler_params* p) { p->top_p = 7.0f; }},
    {"top_p", [](geist_sampler_params* p) { p->top_p = -0.5f; }},
    {"top_p", [](geist_sampler_params* p) { p->top_p = std::nanf(""); }},
    {"min_p", [](geist_sampler_params* p) { p->min_p = -0.1f; }},
    {"min_p", [](geist_sampler_params* p) { p->min_p = 1.5f; }},
    {"repeat_penalty", [](geist_sampler_params* p) { p->repeat_penalty = 0.0f; }},
    {"repeat_penalty", [](geist_sampler_params* p) { p->repeat_penalty = -2.0f; }},
    {"presence_penalty", [](geist_sampler_params* p) { p->presence_penalty = INFINITY; }},
    {"frequency_penalty", [](geist_sampler_params* p) { p->frequency_penalty = INFINITY; }},
    {"frequency_penalty", [](geist_sampler_params* p) { p->frequency_penalty = std::nanf(""); }},
    {"penalty_last_n", [](geist_sampler_params* p) { p->penalty_last_n = -2; }},
    {"struct_size", [](geist_sampler_params* p) { p->struct_size = 3; }},
};

TEST_F(ApiBounds, SamplerOutOfRangeIsRefusedNamingTheField) {
  SessionHandle s;
  geist_session_params ok = params();
  ASSERT_EQ(geist_session_create(model_.m, &ok, &s.s), GEIST_OK);
  for (const BadField& b : kBad) {
    geist_session_params p = params();
    b.set(&p.sampler);
    geist_session* bad = reinterpret_cast<geist_session*>(1);
    EXPECT_EQ(geist_session_create(model_.m, &p, &bad), GEIST_E_INVALID_ARG) << b.field;
    EXPECT_EQ(bad, nullptr);
    EXPECT_NE(std::string(geist_model_last_error(model_.m)).find(b.field), std::string::npos)
        << geist_model_last_error(model_.m);
    EXPECT_EQ(geist_session_set_sampler(s.s, &p.sampler), GEIST_E_INVALID_ARG) << b.field;
    EXPECT_NE(std::string(geist_session_last_error(s.s)).find(b.field), std::string::npos)
        << geist_session_last_error(s.s);
  }
  // The edges of each range are accepted.
  geist_sampler_params edge;
  geist_sampler_params_default(&edge);
  edge.temperature = 0.0f;
  edge.top_p = 1.0f;
  edge.min_p = 0.0f;
  edge.top_k = -1;
  edge.penalty_last_n = -1;
  EXPECT_EQ(geist_session_set_sampler(s.s, &edge), GEIST_OK) << geist_session_last_error(s.s);
  edge.top_p = 0.0f;
  edge.min_p = 1.0f;
  EXPECT_EQ(geist_session_set_sampler(s.s, &edge), GEIST_OK) << geist_session_last_error(s.s);
}

TEST_F(ApiBounds, ThreadCountBeyondTheCapIsRefusedBeforeAnyThreadStarts) {
  // The check comes before the pool is looked up or created, so these cannot start threads.
  for (int32_t n : {257, 100000, 1 << 30, -1}) {
    geist_session_params p = params();
    p.n_threads = n;
    geist_session* s = nullptr;
    EXPECT_EQ(geist_session_create(model_.m, &p, &s), GEIST_E_INVALID_ARG) << n;
    EXPECT_EQ(s, nullptr);
    EXPECT_NE(std::string(geist_model_last_error(model_.m)).find("n_threads"), std::string::npos);
  }
}

// Two sessions of one model with the same thread count share one pool; run from two threads at
// once they take turns on it and each gives the bits it gives alone.
TEST_F(ApiBounds, SessionsSharingThePoolFromTwoThreadsEqualLoneRuns) {
  const std::vector<int32_t> prompt = tokens(300);
  auto run = [&](geist_session* s, uint64_t seed, size_t len, std::vector<int32_t>* toks,
                 std::vector<float>* last) {
    geist_sampler_params sp;
    geist_sampler_params_default(&sp);
    sp.seed = seed;
    ASSERT_EQ(geist_session_set_sampler(s, &sp), GEIST_OK);
    ASSERT_EQ(geist_session_prefill(s, prompt.data(), len), GEIST_OK);
    for (int i = 0; i < 48; ++i) {
      geist_token t = 0;
      ASSERT_EQ(geist_session_decode(s, &t), GEIST_OK) << geist_session_last_error(s);
      toks->push_back(t);
    }
    const float* l = nullptr;
    int32_t nv = 0;
    ASSERT_EQ(geist_session_logits(s, &l, &nv), GEIST_OK);
    last->assign(l, l + nv);
  };
  std::vector<int32_t> ta, tb, ua, ub;
  std::vector<float> la, lb, ma, mb;
  {
    SessionHandle a, b;
    geist_session_params p = params();
    ASSERT_EQ(geist_session_create(model_.m, &p, &a.s), GEIST_OK);
    ASSERT_EQ(geist_session_create(model_.m, &p, &b.s), GEIST_OK);
    run(a.s, 1, 300, &ta, &la);
    run(b.s, 2, 77, &tb, &lb);
  }
  SessionHandle a, b;
  geist_session_params p = params();
  ASSERT_EQ(geist_session_create(model_.m, &p, &a.s), GEIST_OK);
  ASSERT_EQ(geist_session_create(model_.m, &p, &b.s), GEIST_OK);
  std::thread other([&] { run(b.s, 2, 77, &ub, &mb); });
  run(a.s, 1, 300, &ua, &ma);
  other.join();
  EXPECT_EQ(ua, ta);
  EXPECT_EQ(ub, tb);
  ASSERT_EQ(ma.size(), la.size());
  ASSERT_EQ(mb.size(), lb.size());
  EXPECT_EQ(std::memcmp(ma.data(), la.data(), la.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(mb.data(), lb.data(), lb.size() * sizeof(float)), 0);
}

// A cancel asked before the prefill stops it after its first micro-batch (256 rows for llama
// on the CPU, a grid point): the session then equals one prefilled with those rows alone, and
// continuing gives the bits of the uncancelled prefill.
TEST_F(ApiBounds, CancelledPrefillStopsAtAGridPointAndContinues) {
  const std::vector<int32_t> prompt = tokens(400);
  SessionHandle whole, cut, part;
  geist_session_params p = params();
  ASSERT_EQ(geist_session_create(model_.m, &p, &whole.s), GEIST_OK);
  ASSERT_EQ(geist_session_create(model_.m, &p, &cut.s), GEIST_OK);
  ASSERT_EQ(geist_session_create(model_.m, &p, &part.s), GEIST_OK);
  ASSERT_EQ(geist_session_prefill(whole.s, prompt.data(), prompt.size()), GEIST_OK);

  geist_session_cancel(cut.s);
  ASSERT_EQ(geist_session_prefill(cut.s, prompt.data(), prompt.size()), GEIST_E_CANCELLED);
  const int32_t at = geist_session_position(cut.s);
  EXPECT_EQ(at, 256);
  EXPECT_NE(std::string(geist_session_last_error(cut.s)).find("256"), std::string::npos);
  ASSERT_EQ(geist_session_prefill(part.s, prompt.data(), static_cast<size_t>(at)), GEIST_OK);
  const float* lc = nullptr;
  const float* lp = nullptr;
  int32_t nv = 0;
  ASSERT_EQ(geist_session_logits(cut.s, &lc, &nv), GEIST_OK);
  ASSERT_EQ(geist_session_logits(part.s, &lp, &nv), GEIST_OK);
  EXPECT_EQ(std::memcmp(lc, lp, static_cast<size_t>(nv) * sizeof(float)), 0);

  // The request was consumed: the rest runs to the end, equal to the whole prefill.
  ASSERT_EQ(
      geist_session_prefill(cut.s, prompt.data() + at, prompt.size() - static_cast<size_t>(at)),
      GEIST_OK);
  const float* lw = nullptr;
  ASSERT_EQ(geist_session_logits(cut.s, &lc, &nv), GEIST_OK);
  ASSERT_EQ(geist_session_logits(whole.s, &lw, &nv), GEIST_OK);
  EXPECT_EQ(std::memcmp(lc, lw, static_cast<size_t>(nv) * sizeof(float)), 0);
  geist_session_cancel(nullptr);  // a no-op
}

// Cancelled from another thread while it runs: it either finished or stopped at a
// micro-batch boundary, and the session is usable either way.
TEST_F(ApiBounds, CancelFromAnotherThread) {
  const std::vector<int32_t> prompt = tokens(500);
  SessionHandle s;
  geist_session_params p = params();
  p.n_threads = 1;
  ASSERT_EQ(geist_session_create(model_.m, &p, &s.s), GEIST_OK);
  std::thread canceller([&] { geist_session_cancel(s.s); });
  const geist_status st = geist_session_prefill(s.s, prompt.data(), prompt.size());
  canceller.join();
  const int32_t at = geist_session_position(s.s);
  if (st == GEIST_E_CANCELLED) {
    EXPECT_TRUE(at == 256) << at;
  } else {
    EXPECT_EQ(st, GEIST_OK);
    EXPECT_EQ(at, 500);
  }
  geist_token t = 0;
  EXPECT_EQ(geist_session_decode(s.s, &t), GEIST_OK) << geist_session_last_error(s.s);
}

}  // namespace
}  // namespace geist::test
