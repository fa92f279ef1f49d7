// Snapshots of deep models: more sections than the original 4 KiB section table held (166).
// A synthetic Llama as deep as Llama-3.1-405B (126 layers) but a few thousand parameters wide
// round-trips bit-identically in a plain and the KIVI KV modes; the section count is read from
// the image and checked against the count the spec implies, and the reader's bound on
// n_sections sits exactly at the documented cap.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/mkmodel.h"
#include "snapshot/snapshot_util.h"

namespace geist::test {
namespace {

constexpr int32_t kDeepLayers = 126;  // Llama-3.1-405B's depth
constexpr int kPrompt = 70;           // 2 full KIVI groups of 32 + a 6-position residual
constexpr int kDeepSteps = 40;        // crosses the next group boundary (position 96)
constexpr int kCut = 20;
// SNAPSHOT_FORMAT.md §1: header_size = 96 + 24 n_sections <= 65536; the old cap was 4096.
constexpr uint32_t kMaxSections = 2726;
constexpr uint32_t kOldMaxSections = 166;

// BOS then pseudo-random ids below the deep model's 512-token vocabulary.
std::vector<int32_t> deep_prompt(uint32_t seed, int n) {
  std::mt19937 g(seed);
  std::vector<int32_t> t{1};
  for (int i = 1; i < n; ++i) t.push_back(static_cast<int32_t>(3 + g() % 490));
  return t;
}

uint32_t u32_at(const std::vector<uint8_t>& img, size_t off) {
  uint32_t v = 0;
  std::memcpy(&v, img.data() + off, 4);
  return v;
}

// KV sections per attention layer (SNAPSHOT_FORMAT.md §3.2) with kv_len past one full KIVI
// group and not on a group boundary, so that no part is empty.
uint32_t parts_per_layer(int32_t mode) {
  switch (static_cast<KvMode>(mode)) {
    case KvMode::F32:
    case KvMode::F16:
      return 2;
    case KvMode::Q8:
      return 3;
    case KvMode::Q4:
      return 5;
    default:
      return 4;  // KIVI: quantized K, quantized V, residual K, residual V
  }
}

class SnapshotDeep : public ::testing::TestWithParam<int32_t> {
 protected:
  static void SetUpTestSuite() {
    const MkModelPreset* tiny = find_mkmodel_preset("tiny-llama");
    ASSERT_NE(tiny, nullptr);
    // tiny-llama's layout with its width cut to the minimum the format allows (q8_0 rows of
    // 32, the vocabulary builder's 320 regular tokens) and its depth raised: the per-layer
    // cost is what the section count scales with, so it is kept tiny.
    MkModelPreset p = *tiny;
    p.name = "deep-llama-test";
    p.model_name = "deep-llama-test (geist snapshot test, random weights)";
    p.n_vocab = 512;
    p.n_special = 16;
    p.n_embd = 64;
    p.n_ff = 128;
    p.n_layer = kDeepLayers;
    p.n_head = 2;
    p.n_head_kv = 1;
    p.head_dim = 32;
    path_ = new std::string(test::temp_path("snapshot_deep.gguf"));
    const Status st = mkmodel_write(p, "q8_0", *path_, 42, {});
    ASSERT_TRUE(st.is_ok()) << st.message();
  }
  static void TearDownTestSuite() {
    if (path_ != nullptr) std::remove(path_->c_str());
    delete path_;
    path_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(path_, nullptr);
    mode_ = GetParam();
    geist_model_params mp;
    geist_model_params_default(&mp);
    mp.backend = test_backend();
    std::string err;
    ASSERT_EQ(ModelHandle::load(*path_, &model_, &mp, &err), GEIST_OK) << err;
    nv_ = model_.n_vocab();
    ASSERT_EQ(nv_, 512);
    prompt_ = deep_prompt(5, kPrompt);
    SessionHandle r = session();
    ASSERT_EQ(r.prefill(prompt_), GEIST_OK) << r.last_error();
    ref_ = run_steps(r, nv_, kDeepSteps);
    ASSERT_EQ(ref_.tokens.size(), static_cast<size_t>(kDeepSteps));
  }

  SessionHandle session() { return make_session(model_, mode_, false, 128); }

  // Section count implied by the spec: SAMPLER, TOKENS, LOGITS (pending) and the KV parts.
  uint32_t expected_sections() const { return 3 + parts_per_layer(mode_) * kDeepLayers; }

  static std::string* path_;  // the deep model, written once per suite
  ModelHandle model_;
  int32_t mode_ = 0;
  int32_t nv_ = 0;
  std::vector<int32_t> prompt_;
  Trace ref_;  // uninterrupted greedy run after the prompt
};

std::string* SnapshotDeep::path_ = nullptr;

TEST_P(SnapshotDeep, RoundTripsPastTheOldSectionTable) {
  SessionHandle s = session();
  ASSERT_EQ(s.prefill(prompt_), GEIST_OK);
  std::vector<uint8_t> a;
  ASSERT_EQ(s.snapshot(&a), GEIST_OK) << s.last_error();
  ASSERT_GE(a.size(), 96u);
  const uint32_t n_sections = u32_at(a, 60);
  EXPECT_GT(n_sections, kOldMaxSections) << "the image must need the widened table";
  EXPECT_EQ(n_sections, expected_sections());
  EXPECT_EQ(u32_at(a, 12), 96u + 24u * n_sections) << "header_size";
  EXPECT_EQ(u32_at(a, 8), 1u) << "format version stays 1";

  EXPECT_TRUE(same_continuation(ref_, 0, run_steps(s, nv_, kCut), nv_)) << "source";
  std::vector<uint8_t> b;
  ASSERT_EQ(s.snapshot(&b), GEIST_OK) << s.last_error();
  EXPECT_EQ(u32_at(b, 60), expected_sections());

  SessionHandle t = session();
  ASSERT_EQ(t.restore(a), GEIST_OK) << t.last_error();
  EXPECT_TRUE(same_continuation(ref_, 0, run_steps(t, nv_, kDeepSteps), nv_)) << "after prefill";
  SessionHandle u = session();
  ASSERT_EQ(u.restore(b), GEIST_OK) << u.last_error();
  EXPECT_TRUE(same_continuation(ref_, kCut, run_steps(u, nv_, kDeepSteps - kCut), nv_))
      << "after " << kCut << " steps";
}

// A pinned prefix nests a second image of the deep state (KV parts 0 and 1 omitted) inside
// the outer one; both tables are walked on restore.
TEST_P(SnapshotDeep, PinnedPrefixRoundTrips) {
  SessionHandle s = session();
  ASSERT_EQ(s.prefill(prompt_), GEIST_OK);
  ASSERT_EQ(s.pin_prefix(), GEIST_OK) << s.last_error();
  EXPECT_TRUE(same_continuation(ref_, 0, run_steps(s, nv_, kCut), nv_));
  std::vector<uint8_t> img;
  ASSERT_EQ(s.snapshot(&img), GEIST_OK) << s.last_error();
  // SAMPLER, TOKENS, LOGITS, the KV parts, PIN.
  EXPECT_EQ(u32_at(img, 60), expected_sections() + 1);
  SessionHandle t = session();
  ASSERT_EQ(t.restore(img), GEIST_OK) << t.last_error();
  EXPECT_TRUE(same_continuation(ref_, kCut, run_steps(t, nv_, kDeepSteps - kCut), nv_))
      << "restored";
  ASSERT_EQ(t.reset_to_prefix(), GEIST_OK) << t.last_error();
  EXPECT_TRUE(same_continuation(ref_, 0, run_steps(t, nv_, kDeepSteps), nv_)) << "restored pin";
}

// The reader bounds n_sections at the documented cap before reading the table: one past it is
// a header-size refusal, the cap itself passes that check and fails later, on the table's
// content (this image has fewer sections). A refused restore leaves the session as it was.
TEST_P(SnapshotDeep, ReaderBoundIsTheDocumentedCap) {
  SessionHandle s = session();
  ASSERT_EQ(s.prefill(prompt_), GEIST_OK);
  std::vector<uint8_t> img;
  ASSERT_EQ(s.snapshot(&img), GEIST_OK);
  ASSERT_GT(img.size(), 96u + 24u * (kMaxSections + 1)) << "the buffer must not be the limit";
  auto with_sections = [&](uint32_t n) {
    std::vector<uint8_t> e = img;
    const uint32_t header = 96u + 24u * n;
    std::memcpy(e.data() + 60, &n, 4);
    std::memcpy(e.data() + 12, &header, 4);
    reseal(&e);
    return e;
  };
  SessionHandle t = session();
  ASSERT_EQ(t.prefill(prompt_), GEIST_OK);
  EXPECT_EQ(t.restore(with_sections(kMaxSections + 1)), GEIST_E_FORMAT);
  EXPECT_NE(std::strstr(t.last_error(), "header size"), nullptr) << t.last_error();
  EXPECT_EQ(t.restore(with_sections(kMaxSections)), GEIST_E_FORMAT);
  EXPECT_EQ(std::strstr(t.last_error(), "header size"), nullptr) << t.last_error();
  EXPECT_NE(std::strstr(t.last_error(), "section table"), nullptr) << t.last_error();
  EXPECT_EQ(t.restore(with_sections(0xFFFFFFFFu)), GEIST_E_FORMAT);
  EXPECT_NE(std::strstr(t.last_error(), "header size"), nullptr) << t.last_error();
  EXPECT_TRUE(same_continuation(ref_, 0, run_steps(t, nv_, kCut), nv_)) << "after refusals";
}

// f16: the plain layout (2 sections per layer, 255 in all); kivi4 / kivi2: 4 per layer (507),
// the mode that hit the old cap first.
INSTANTIATE_TEST_SUITE_P(Modes, SnapshotDeep,
                         ::testing::Values(static_cast<int32_t>(KvMode::F16),
                                           static_cast<int32_t>(KvMode::KIVI4),
                                           static_cast<int32_t>(KvMode::KIVI2)),
                         [](const ::testing::TestParamInfo<int32_t>& info) {
                           return std::string(kv_mode_name(static_cast<KvMode>(info.param)));
                         });

}  // namespace
}  // namespace geist::test
