// Many sessions, one forward (geist_batch.h) on the CPU backend: the invariance scenario of
// batch_scenario.h on stories260K, tiny-qwen35 and stories-qwen35, every KV mode (the CUDA
// backend's run of it is tests/cuda/test_cuda_batch.cpp); errors per session.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "api/api_util.h"
#include "api/batch_scenario.h"
#include "geist/geist.h"
#include "geist/geist_batch.h"
#include "geist/geist_snapshot.h"
#include "geist/geist_util.h"

namespace geist::test {
namespace {

using batch::check_model;
using batch::expect_same_logits;

TEST(ApiBatch, Stories260KSessionsEqualLoneRuns) {
  GEIST_REQUIRE_FIXTURES();
  check_model("stories260K.gguf", 100, GEIST_BACKEND_CPU);
}

TEST(ApiBatch, TinyQwen35SessionsEqualLoneRuns) {
  GEIST_REQUIRE_FIXTURES();
  check_model("tiny-qwen35-q8_0.gguf", 200, GEIST_BACKEND_CPU);
}

TEST(ApiBatch, StoriesQwen35SessionsEqualLoneRuns) {
  GEIST_REQUIRE_FIXTURES();
  check_model("stories-qwen35-f32.gguf", 300, GEIST_BACKEND_CPU);
}

// stories260K, and sessions of 64 positions on 2 threads (the per-session error tests).
void batch_small_setup(ModelHandle* model, geist_session_params* p) {
  char err[512] = "";
  ASSERT_EQ(geist_model_load(stories260k_path().c_str(), nullptr, &model->m, err, sizeof err),
            GEIST_OK)
      << err;
  geist_session_params_default(p);
  p->max_seq_len = 64;
  p->n_threads = 2;
}

// Errors are per session: an id outside the vocabulary or a chunk that does not fit fails
// that item and leaves its session bit-identical; the others advance.
TEST(ApiBatch, ErrorsArePerSession) {
  GEIST_REQUIRE_FIXTURES();
  ModelHandle model;
  geist_session_params p;
  ASSERT_NO_FATAL_FAILURE(batch_small_setup(&model, &p));
  SessionHandle ok, bad_id, full, lone;
  ASSERT_EQ(geist_session_create(model.m, &p, &ok.s), GEIST_OK);
  ASSERT_EQ(geist_session_create(model.m, &p, &bad_id.s), GEIST_OK);
  ASSERT_EQ(geist_session_create(model.m, &p, &full.s), GEIST_OK);
  ASSERT_EQ(geist_session_create(model.m, &p, &lone.s), GEIST_OK);
  const std::vector<geist_token> prompt = {1, 20, 30, 40};
  ASSERT_EQ(geist_session_prefill(bad_id.s, prompt.data(), prompt.size()), GEIST_OK);
  const std::vector<uint8_t> before = snapshot_of(bad_id.s);
  const std::vector<geist_token> ids = {5, 99999};
  const std::vector<geist_token> big(70, 7);
  std::vector<geist_batch_item> items(3);
  geist_batch_item_init(&items[0], ok.s, prompt.data(), prompt.size());
  geist_batch_item_init(&items[1], bad_id.s, ids.data(), ids.size());
  geist_batch_item_init(&items[2], full.s, big.data(), big.size());
  ASSERT_EQ(geist_batch_forward(model.m, items.data(), items.size()), GEIST_OK);
  EXPECT_EQ(items[0].status, GEIST_OK);
  EXPECT_EQ(items[1].status, GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(geist_session_last_error(bad_id.s)).find("99999"), std::string::npos);
  EXPECT_EQ(items[2].status, GEIST_E_TOO_MANY_TOKENS);
  EXPECT_EQ(geist_session_position(full.s), 0);
  EXPECT_TRUE(snapshot_of(bad_id.s) == before);
  ASSERT_EQ(geist_session_prefill(lone.s, prompt.data(), prompt.size()), GEIST_OK);
  expect_same_logits(ok.s, lone.s, "ok session");
  // Malformed calls run nothing.
  std::vector<geist_batch_item> twice(2);
  geist_batch_item_init(&twice[0], ok.s, nullptr, 0);
  geist_batch_item_init(&twice[1], ok.s, nullptr, 0);
  EXPECT_EQ(geist_batch_forward(model.m, twice.data(), twice.size()), GEIST_E_INVALID_ARG);
  std::vector<geist_batch_item> none(1);
  geist_batch_item_init(&none[0], nullptr, nullptr, 0);
  EXPECT_EQ(geist_batch_forward(model.m, none.data(), none.size()), GEIST_E_INVALID_ARG);
  // An item whose struct_size is not the library's (a drifted mirror, an uninitialised item)
  // is refused by name before any session runs: `ok` keeps its position.
  const int32_t ok_pos = geist_session_position(ok.s);
  std::vector<geist_batch_item> drifted(2);
  geist_batch_item_init(&drifted[0], ok.s, prompt.data(), prompt.size());
  geist_batch_item_init(&drifted[1], lone.s, nullptr, 0);
  drifted[1].struct_size = sizeof(geist_batch_item) - 8;
  EXPECT_EQ(geist_batch_forward(model.m, drifted.data(), drifted.size()), GEIST_E_INVALID_ARG);
  const std::string why = geist_model_last_error(model.m);
  EXPECT_NE(why.find("item 1 has struct_size"), std::string::npos) << why;
  EXPECT_NE(why.find("geist_batch_item_init"), std::string::npos) << why;
  EXPECT_EQ(geist_session_position(ok.s), ok_pos);
  geist_batch_item zeroed{};
  zeroed.session = ok.s;
  EXPECT_EQ(geist_batch_forward(model.m, &zeroed, 1), GEIST_E_INVALID_ARG);
  EXPECT_EQ(geist_session_position(ok.s), ok_pos);
  EXPECT_EQ(geist_batch_forward(nullptr, nullptr, 0), GEIST_E_INVALID_ARG);
  EXPECT_EQ(geist_batch_forward(model.m, nullptr, 0), GEIST_OK);
}

// An item that samples inside the call (decode) but could not afterwards fails with
// geist_session_decode's status and nothing run; the others sample the lone sessions' tokens:
// one after its prompt, one from logits already pending (nothing to forward), one after its
// owed forward.
TEST(ApiBatch, DecodeInsideTheCallIsDecodesStatusAndToken) {
  GEIST_REQUIRE_FIXTURES();
  ModelHandle model;
  geist_session_params p;
  ASSERT_NO_FATAL_FAILURE(batch_small_setup(&model, &p));
  p.sampler.temperature = 0.8f;  // one sampled session next to greedy ones
  p.sampler.seed = 9;
  SessionHandle fresh, nearly_full, sampled, pending, owed, lone;
  for (SessionHandle* h : {&fresh, &nearly_full, &sampled, &pending, &owed, &lone}) {
    ASSERT_EQ(geist_session_create(model.m, &p, &h->s), GEIST_OK);
    p.sampler.temperature = 0.0f;
  }
  const std::vector<geist_token> prompt = {1, 20, 30, 40};
  const std::vector<geist_token> long_prompt(64, 7);  // fits, but leaves no room
  ASSERT_EQ(geist_session_prefill(pending.s, prompt.data(), prompt.size()), GEIST_OK);
  ASSERT_EQ(geist_session_prefill(owed.s, prompt.data(), prompt.size()), GEIST_OK);
  geist_token owed_first = -1;
  ASSERT_EQ(geist_session_decode(owed.s, &owed_first), GEIST_OK);
  const std::vector<uint8_t> owed_before = snapshot_of(owed.s);
  std::vector<geist_batch_item> items(5);
  geist_batch_item_init(&items[0], fresh.s, nullptr, 0);
  geist_batch_item_init(&items[1], nearly_full.s, long_prompt.data(), long_prompt.size());
  geist_batch_item_init(&items[2], sampled.s, prompt.data(), prompt.size());
  geist_batch_item_init(&items[3], pending.s, nullptr, 0);
  geist_batch_item_init(&items[4], owed.s, nullptr, 0);
  for (geist_batch_item& it : items) it.decode = 1;
  ASSERT_EQ(geist_batch_forward(model.m, items.data(), items.size()), GEIST_OK);
  EXPECT_EQ(items[0].status, GEIST_E_INVALID_STATE);
  EXPECT_EQ(geist_session_position(fresh.s), 0);
  EXPECT_EQ(items[1].status, GEIST_E_TOO_MANY_TOKENS);  // 64 + the token > 64 positions
  EXPECT_NE(std::string(geist_session_last_error(nearly_full.s)).find("full"), std::string::npos);
  EXPECT_EQ(geist_session_position(nearly_full.s), 0);
  for (int i = 2; i < 5; ++i) EXPECT_EQ(items[static_cast<size_t>(i)].status, GEIST_OK) << i;

  // The same tokens through the lone path, each on a session in the same state as before.
  SessionHandle lone_sampled;
  geist_session_params ps = p;
  ps.sampler.temperature = 0.8f;
  ps.sampler.seed = 9;
  ASSERT_EQ(geist_session_create(model.m, &ps, &lone_sampled.s), GEIST_OK);
  ASSERT_EQ(geist_session_prefill(lone_sampled.s, prompt.data(), prompt.size()), GEIST_OK);
  geist_token want = -1;
  ASSERT_EQ(geist_session_decode(lone_sampled.s, &want), GEIST_OK);
  EXPECT_EQ(items[2].token, want);
  ASSERT_EQ(geist_session_prefill(lone.s, prompt.data(), prompt.size()), GEIST_OK);
  ASSERT_EQ(geist_session_decode(lone.s, &want), GEIST_OK);
  EXPECT_EQ(items[3].token, want);
  EXPECT_EQ(owed_first, want);
  ASSERT_EQ(geist_session_decode(lone.s, &want), GEIST_OK);
  EXPECT_EQ(items[4].token, want);
  // Afterwards each session owes its token's forward, as after geist_session_decode: its
  // logits (one forward) and its history are the lone session's.
  expect_same_logits(owed.s, lone.s, "owed session");
  EXPECT_TRUE(snapshot_of(owed.s) == snapshot_of(lone.s));
  EXPECT_FALSE(snapshot_of(owed.s) == owed_before);
}

}  // namespace
}  // namespace geist::test
