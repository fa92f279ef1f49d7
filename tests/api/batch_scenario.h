// The batch invariance scenario of geist_batch.h, shared by the CPU suite (test_api_batch.cpp)
// and the CUDA one (tests/cuda/test_cuda_batch.cpp): for random mixes of 1-16 sessions with
// different prompt lengths, join steps, sampler settings and leave steps, every session's
// tokens and logits are memcmp-equal, step by step, to a twin session of the same settings run
// alone (in lockstep, on another thread count); a session snapshotted mid-batch and restored
// into a lone session continues bit-identically. Every KV mode; greedy and sampled sessions in
// every mix. At random steps a session samples inside the batched call (geist_batch_item.decode)
// instead of through geist_session_decode afterwards: its token must be the twin's, and its
// logits are compared at its next step that samples the other way.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "api/api_util.h"
#include "geist/geist.h"
#include "geist/geist_backend.h"
#include "geist/geist_batch.h"
#include "geist/geist_snapshot.h"
#include "geist/geist_util.h"
#include "support/sanitized.h"

namespace geist::test::batch {

constexpr int kSteps = 64;  // decode steps every session runs unless it leaves early

struct Sess {
  SessionHandle batched;   // runs in the batch
  SessionHandle alone;     // its twin, run alone
  SessionHandle restored;  // after a mid-batch snapshot: continues alone, compared to the twin
  std::vector<int32_t> prompt;
  int join = 0;   // global step at which its prompt joins the batch
  int leave = 0;  // decode steps it runs
  int snap = -1;  // step after which it is snapshotted (-1: never)
  int steps = 0;  // decode steps done
};

// Pending logits of a and b are memcmp-equal (paying b's owed forward alone; a's was paid by
// the batch, so its call runs no forward).
inline void expect_same_logits(geist_session* a, geist_session* b, const std::string& what) {
  const float* la = nullptr;
  const float* lb = nullptr;
  int32_t na = 0, nb = 0;
  ASSERT_EQ(geist_session_logits(a, &la, &na), GEIST_OK) << what << geist_session_last_error(a);
  ASSERT_EQ(geist_session_logits(b, &lb, &nb), GEIST_OK) << what << geist_session_last_error(b);
  ASSERT_EQ(na, nb);
  ASSERT_EQ(std::memcmp(la, lb, static_cast<size_t>(na) * sizeof(float)), 0) << what;
}

// One random scenario; returns the number of (session, step) pairs compared.
inline int run_scenario(geist_model* model, int32_t kv_mode, uint32_t seed, int n_sessions) {
  std::mt19937 rng(seed);
  std::mt19937 decode_rng(seed ^ 0x5eedu);  // which items sample inside the call
  const int32_t nv = geist_model_n_vocab(model);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::unique_ptr<Sess>> ss;
  for (int i = 0; i < n_sessions; ++i) {
    auto s = std::make_unique<Sess>();
    geist_session_params p;
    geist_session_params_default(&p);
    p.kv_mode = kv_mode;
    p.max_seq_len = 384;
    p.sampler.seed = static_cast<uint64_t>(uni(0, 1 << 20));
    p.sampler.temperature = uni(0, 1) ? 0.0f : 0.9f;
    p.sampler.top_k = uni(0, 1) ? 40 : 0;
    p.sampler.top_p = uni(0, 1) ? 0.9f : 1.0f;
    p.sampler.repeat_penalty = uni(0, 3) == 0 ? 1.1f : 1.0f;
    p.n_threads = 2;
    EXPECT_EQ(geist_session_create(model, &p, &s->batched.s), GEIST_OK);
    p.n_threads = 1;  // the twin also runs on another thread count
    EXPECT_EQ(geist_session_create(model, &p, &s->alone.s), GEIST_OK);
    // Short prompts, ones across grid points, and ones longer than a micro-batch.
    const int len = uni(0, 3) == 0 ? uni(129, 300) : uni(1, 100);
    for (int t = 0; t < len; ++t) s->prompt.push_back(uni(1, nv - 1));
    s->join = uni(0, 12);
    s->leave = uni(0, 4) == 0 ? uni(8, kSteps) : kSteps;
    s->snap = uni(0, 3) == 0 ? uni(1, s->leave - 1) : -1;
    ss.push_back(std::move(s));
  }
  int compared = 0;
  std::vector<geist_batch_item> items;
  std::vector<Sess*> in_batch;
  for (int step = 0;; ++step) {
    items.clear();
    in_batch.clear();
    for (auto& s : ss) {
      if (step < s->join || s->steps >= s->leave) continue;
      geist_batch_item it;
      geist_batch_item_init(&it, s->batched.s, nullptr, 0);
      it.decode = static_cast<int32_t>(decode_rng() & 1u);
      if (step == s->join) {  // joins with its prompt, next to the others' decode steps
        it.tokens = s->prompt.data();
        it.n_tokens = s->prompt.size();
      }
      items.push_back(it);
      in_batch.push_back(s.get());
    }
    bool pending = false;
    for (auto& s : ss) pending |= s->steps < s->leave;
    if (!pending) break;
    if (items.empty()) continue;
    EXPECT_EQ(geist_batch_forward(model, items.data(), items.size()), GEIST_OK)
        << geist_model_last_error(model);
    for (size_t i = 0; i < items.size(); ++i) {
      Sess& s = *in_batch[i];
      EXPECT_EQ(items[i].status, GEIST_OK) << geist_session_last_error(s.batched.s);
      if (step == s.join) {
        EXPECT_EQ(geist_session_prefill(s.alone.s, s.prompt.data(), s.prompt.size()), GEIST_OK);
      }
      const std::string what = "seed " + std::to_string(seed) + " kv " + std::to_string(kv_mode) +
                               " session " + std::to_string(i) + " step " +
                               std::to_string(s.steps) + ": ";
      geist_token a = items[i].token, b = -2;
      if (items[i].decode == 0) {
        expect_same_logits(s.batched.s, s.alone.s, what);
        a = -1;
        EXPECT_EQ(geist_session_decode(s.batched.s, &a), GEIST_OK);
      }
      EXPECT_EQ(geist_session_decode(s.alone.s, &b), GEIST_OK);
      EXPECT_EQ(a, b) << what;
      ++s.steps;
      ++compared;
      if (s.steps == s.snap) {  // mid-batch: the restored copy goes on alone
        const std::vector<uint8_t> img = snapshot_of(s.batched.s);
        geist_session_params p;
        geist_session_params_default(&p);
        p.kv_mode = kv_mode;
        p.max_seq_len = 384;
        p.n_threads = 1;
        EXPECT_EQ(geist_session_create(model, &p, &s.restored.s), GEIST_OK);
        EXPECT_EQ(geist_session_restore(s.restored.s, img.data(), img.size()), GEIST_OK);
      }
    }
  }
  // Each restored copy continues alone for the steps its source ran after the snapshot, and
  // then one more: it must have followed the twin exactly (compare final logits + history).
  for (auto& s : ss) {
    if (!s->restored.s) continue;
    for (int t = s->snap; t < s->leave; ++t) {
      geist_token a = -1;
      EXPECT_EQ(geist_session_decode(s->restored.s, &a), GEIST_OK);
    }
    expect_same_logits(s->restored.s, s->alone.s, "restored seed " + std::to_string(seed));
    const geist_token* ta = nullptr;
    const geist_token* tb = nullptr;
    size_t na = 0, nb = 0;
    EXPECT_EQ(geist_session_tokens(s->restored.s, &ta, &na), GEIST_OK);
    EXPECT_EQ(geist_session_tokens(s->alone.s, &tb, &nb), GEIST_OK);
    EXPECT_EQ(std::vector<geist_token>(ta, ta + na), std::vector<geist_token>(tb, tb + nb));
  }
  return compared;
}

// Every KV mode's scenario on the model in `file`, loaded on `backend` (geist_backend).
inline void check_model(const char* file, uint32_t seed0, int32_t backend) {
  ModelHandle model;
  char err[512] = "";
  const std::string path = fixture_path(std::string("models/") + file);
  geist_model_params mp;
  geist_model_params_default(&mp);
  mp.backend = backend;
  ASSERT_EQ(geist_model_load(path.c_str(), &mp, &model.m, err, sizeof err), GEIST_OK) << err;
  int compared = 0;
  // Every KV mode (three in the sanitizer stage: kv_modes_for_run); the session counts cover 1
  // and 16 and values between (16, 2 and 6 in the sanitizer stage).
  const int counts[6] = {16, 1, 4, 2, 3, 6};
  const std::vector<int32_t> modes = kv_modes_for_run(std::string("batch scenario ") + file +
                                                      ", backend " + std::to_string(backend));
  for (const int32_t kv : modes) {
    compared += run_scenario(model.m, kv, seed0 + static_cast<uint32_t>(kv), counts[kv]);
  }
  std::printf("[ %s, backend %d ] %d session-steps memcmp-equal to lone runs (%zu KV modes)\n",
              file, backend, compared, modes.size());
}

}  // namespace geist::test::batch
