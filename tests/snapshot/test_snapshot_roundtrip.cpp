// Restored sessions continue bit-identically: tokens and logits (memcmp) against the
// uninterrupted run, for every model fixture, KV mode and sampler (greedy, seeded sampling).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kv/kv_cache.h"
#include "snapshot/snapshot_util.h"
#include "support/sanitized.h"

namespace geist::test {
namespace {

constexpr int kRoundTripSteps = 64;

using Param = SnapshotParam;

class SnapshotRoundTrip : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    GEIST_REQUIRE_FIXTURES();
    // The sanitizer stage covers three representative KV layouts (plain rows, quantized rows,
    // KIVI groups + residual: kv_mode_in_run); the release stage runs the whole matrix.
    const int32_t m = std::get<1>(GetParam());
    if (!kv_mode_in_run(m)) {
      GTEST_SKIP() << "sanitizer stage: KV mode " << kv_mode_name(static_cast<KvMode>(m))
                   << " runs in the release stage only";
    }
    model_ = load_model(std::get<0>(GetParam()));
    ASSERT_TRUE(model_);
    nv_ = model_.n_vocab();
    mode_ = std::get<1>(GetParam());
    sampled_ = std::get<2>(GetParam());
    pa_ = prompt(11, 37);
    pb_ = prompt(12, 21);
    // Uninterrupted references.
    SessionHandle r = session();
    ASSERT_EQ(r.prefill(pa_), GEIST_OK) << r.last_error();
    ref_a_ = run_steps(r, nv_, kRoundTripSteps);
    SessionHandle rb = session();
    ASSERT_EQ(rb.prefill(pb_), GEIST_OK);
    ref_b_ = run_steps(rb, nv_, kRoundTripSteps);
  }
  SessionHandle session(int32_t max_seq_len = 256) {
    return make_session(model_, mode_, sampled_, max_seq_len);
  }
  std::vector<uint8_t> image_after_prefill(const std::vector<int32_t>& p) {
    SessionHandle s = session();
    EXPECT_EQ(s.prefill(p), GEIST_OK);
    std::vector<uint8_t> img;
    EXPECT_EQ(s.snapshot(&img), GEIST_OK) << s.last_error();
    return img;
  }

  ModelHandle model_;
  int32_t nv_ = 0;
  int32_t mode_ = 0;
  bool sampled_ = false;
  std::vector<int32_t> pa_, pb_;
  Trace ref_a_, ref_b_;
};

TEST_P(SnapshotRoundTrip, SameSessionOtherSessionAndTwice) {
  SessionHandle s = session();
  ASSERT_EQ(s.prefill(pa_), GEIST_OK);
  std::vector<uint8_t> img;
  ASSERT_EQ(s.snapshot(&img), GEIST_OK) << s.last_error();
  size_t size = 0;
  ASSERT_EQ(s.snapshot_size(&size), GEIST_OK);
  EXPECT_EQ(size, img.size());
  run_steps(s, nv_, 9);  // move away from the snapshot point
  ASSERT_EQ(s.restore(img), GEIST_OK) << s.last_error();
  EXPECT_TRUE(same_continuation(ref_a_, 0, run_steps(s, nv_, kRoundTripSteps), nv_))
      << "same session";

  SessionHandle other = session(400);  // a larger target capacity is fine
  ASSERT_EQ(other.restore(img), GEIST_OK) << other.last_error();
  ASSERT_EQ(other.restore(img), GEIST_OK) << "restoring the same image twice";
  EXPECT_TRUE(same_continuation(ref_a_, 0, run_steps(other, nv_, kRoundTripSteps), nv_)) << "other";
}

// The restore the server uses for images it verified already (no checksum pass): the same
// continuation as the uninterrupted run, bit for bit, into the same and another session.
TEST_P(SnapshotRoundTrip, TrustedRestoreContinuesTheSame) {
  const std::vector<uint8_t> img = image_after_prefill(pa_);
  SessionHandle s = session();
  ASSERT_EQ(s.prefill(pb_), GEIST_OK);  // some other state first
  ASSERT_EQ(s.restore_trusted(img.data(), img.size()), GEIST_OK) << s.last_error();
  EXPECT_TRUE(same_continuation(ref_a_, 0, run_steps(s, nv_, kRoundTripSteps), nv_));
  SessionHandle other = session(400);
  ASSERT_EQ(other.restore_trusted(img.data(), img.size()), GEIST_OK) << other.last_error();
  EXPECT_TRUE(same_continuation(ref_a_, 0, run_steps(other, nv_, kRoundTripSteps), nv_));
}

TEST_P(SnapshotRoundTrip, MidDecodeWithForwardOwed) {
  SessionHandle s = session();
  ASSERT_EQ(s.prefill(pa_), GEIST_OK);
  const int k = 5;
  for (int i = 0; i < k; ++i) {  // decode only: the last step's forward stays owed
    int32_t tok = -1;
    ASSERT_EQ(s.decode(&tok), GEIST_OK);
    ASSERT_EQ(tok, ref_a_.tokens[static_cast<size_t>(i)]);
  }
  std::vector<uint8_t> img;
  ASSERT_EQ(s.snapshot(&img), GEIST_OK);
  SessionHandle t = session();
  ASSERT_EQ(t.restore(img), GEIST_OK) << t.last_error();
  const float* lg = nullptr;
  int32_t nv = 0;
  ASSERT_EQ(t.logits(&lg, &nv), GEIST_OK);
  Trace got;
  got.tokens.push_back(ref_a_.tokens[k - 1]);
  got.logits.assign(lg, lg + nv);
  Trace rest = run_steps(t, nv_, kRoundTripSteps - k);
  got.tokens.insert(got.tokens.end(), rest.tokens.begin(), rest.tokens.end());
  got.logits.insert(got.logits.end(), rest.logits.begin(), rest.logits.end());
  EXPECT_TRUE(same_continuation(ref_a_, k - 1, got, nv_));
}

TEST_P(SnapshotRoundTrip, SecondTurnAfterRestore) {
  const std::vector<int32_t> turn2 = prompt(13, 9);
  SessionHandle r = session();
  ASSERT_EQ(r.prefill(pa_), GEIST_OK);
  run_steps(r, nv_, 20);
  ASSERT_EQ(r.prefill(turn2), GEIST_OK);
  const Trace ref = run_steps(r, nv_, kRoundTripSteps);

  SessionHandle s = session();
  ASSERT_EQ(s.restore(image_after_prefill(pa_)), GEIST_OK) << s.last_error();
  EXPECT_TRUE(same_continuation(ref_a_, 0, run_steps(s, nv_, 20), nv_));
  ASSERT_EQ(s.prefill(turn2), GEIST_OK) << s.last_error();
  EXPECT_TRUE(same_continuation(ref, 0, run_steps(s, nv_, kRoundTripSteps), nv_));
}

TEST_P(SnapshotRoundTrip, InterleavedPrefixesABA) {
  const std::vector<uint8_t> a = image_after_prefill(pa_);
  const std::vector<uint8_t> b = image_after_prefill(pb_);
  SessionHandle s = session();
  ASSERT_EQ(s.restore(a), GEIST_OK);
  EXPECT_TRUE(same_continuation(ref_a_, 0, run_steps(s, nv_, kRoundTripSteps), nv_)) << "A";
  ASSERT_EQ(s.restore(b), GEIST_OK);
  EXPECT_TRUE(same_continuation(ref_b_, 0, run_steps(s, nv_, kRoundTripSteps), nv_)) << "B";
  ASSERT_EQ(s.restore(a), GEIST_OK);
  EXPECT_TRUE(same_continuation(ref_a_, 0, run_steps(s, nv_, kRoundTripSteps), nv_)) << "A again";
}

TEST_P(SnapshotRoundTrip, EmptyImageIsAFreshSession) {
  SessionHandle fresh = session();
  std::vector<uint8_t> empty;
  ASSERT_EQ(fresh.snapshot(&empty), GEIST_OK);
  SessionHandle s = session();
  ASSERT_EQ(s.prefill(pb_), GEIST_OK);
  run_steps(s, nv_, 3);
  ASSERT_EQ(s.restore(empty), GEIST_OK) << s.last_error();
  EXPECT_EQ(s.position(), 0);
  ASSERT_EQ(s.prefill(pa_), GEIST_OK);
  EXPECT_TRUE(same_continuation(ref_a_, 0, run_steps(s, nv_, kRoundTripSteps), nv_));
}

TEST_P(SnapshotRoundTrip, PinnedPrefixCarriedByImage) {
  SessionHandle s = session();
  EXPECT_EQ(s.pin_len(), -1);
  EXPECT_EQ(s.reset_to_prefix(), GEIST_E_INVALID_STATE);
  ASSERT_EQ(s.prefill(pa_), GEIST_OK);
  ASSERT_EQ(s.pin_prefix(), GEIST_OK) << s.last_error();
  EXPECT_EQ(s.pin_len(), static_cast<int32_t>(pa_.size()));
  EXPECT_TRUE(same_continuation(ref_a_, 0, run_steps(s, nv_, 40), nv_));
  std::vector<uint8_t> img;
  ASSERT_EQ(s.snapshot(&img), GEIST_OK);
  ASSERT_EQ(s.reset_to_prefix(), GEIST_OK) << s.last_error();
  EXPECT_TRUE(same_continuation(ref_a_, 0, run_steps(s, nv_, kRoundTripSteps), nv_)) << "reset";
  ASSERT_EQ(s.reset_to_prefix(), GEIST_OK);
  EXPECT_TRUE(same_continuation(ref_a_, 0, run_steps(s, nv_, kRoundTripSteps), nv_))
      << "reset twice";

  SessionHandle t = session();
  ASSERT_EQ(t.restore(img), GEIST_OK) << t.last_error();
  EXPECT_EQ(t.pin_len(), static_cast<int32_t>(pa_.size()));
  EXPECT_TRUE(same_continuation(ref_a_, 40, run_steps(t, nv_, kRoundTripSteps - 40), nv_))
      << "restored";
  ASSERT_EQ(t.reset_to_prefix(), GEIST_OK) << t.last_error();
  EXPECT_TRUE(same_continuation(ref_a_, 0, run_steps(t, nv_, kRoundTripSteps), nv_))
      << "restored pin";
}

// Property: a snapshot at a random step (forward owed or paid) restores into a fresh session
// that continues exactly as the uninterrupted run.
TEST_P(SnapshotRoundTrip, RandomCutPoints) {
  std::mt19937 g(1234u + static_cast<uint32_t>(mode_));
  for (int trial = 0; trial < 4; ++trial) {
    const int cut = static_cast<int>(g() % kRoundTripSteps);
    const bool owed = cut > 0 && (g() & 1) != 0;
    SessionHandle s = session();
    ASSERT_EQ(s.prefill(pa_), GEIST_OK);
    run_steps(s, nv_, owed ? cut - 1 : cut);
    if (owed) {
      int32_t tok = -1;
      ASSERT_EQ(s.decode(&tok), GEIST_OK);
    }
    std::vector<uint8_t> img;
    ASSERT_EQ(s.snapshot(&img), GEIST_OK);
    SessionHandle t = session();
    ASSERT_EQ(t.restore(img), GEIST_OK) << t.last_error();
    Trace got;
    if (owed) {
      const float* lg = nullptr;
      int32_t nv = 0;
      ASSERT_EQ(t.logits(&lg, &nv), GEIST_OK);
      got.tokens.push_back(ref_a_.tokens[static_cast<size_t>(cut - 1)]);
      got.logits.assign(lg, lg + nv);
    }
    const Trace rest = run_steps(t, nv_, kRoundTripSteps - cut);
    got.tokens.insert(got.tokens.end(), rest.tokens.begin(), rest.tokens.end());
    got.logits.insert(got.logits.end(), rest.logits.begin(), rest.logits.end());
    EXPECT_TRUE(same_continuation(ref_a_, static_cast<size_t>(owed ? cut - 1 : cut), got, nv_))
        << "cut " << cut << (owed ? " (owed)" : "");
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SnapshotRoundTrip,
                         ::testing::Combine(::testing::Values("models/stories260K.gguf",
                                                              "models/tiny-qwen35-f32.gguf",
                                                              "models/stories-qwen35-f32.gguf"),
                                            ::testing::Range(0, kKvModeCount), ::testing::Bool()),
                         snapshot_param_name);

}  // namespace
}  // namespace geist::test
