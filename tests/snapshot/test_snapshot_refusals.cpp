// Restore refuses every malformed, foreign or mismatched image, names the failed check, and
// leaves the session bit-identical (its continuation equals the one without the failed calls).
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "snapshot/snapshot_util.h"

namespace geist::test {
namespace {

constexpr int kRefusalSteps = 64;

template <class T>
void poke(std::vector<uint8_t>* img, size_t off, T v) {
  std::memcpy(img->data() + off, &v, sizeof v);
}

class SnapshotRefusal : public ::testing::Test {
 protected:
  void SetUp() override {
    GEIST_REQUIRE_FIXTURES();
    model_ = load_model("models/stories260K.gguf");
    ASSERT_TRUE(model_);
    nv_ = model_.n_vocab();
    // The session under test has its own state; refusals must not touch it.
    victim_ = make_session(model_, 0, true);
    ASSERT_EQ(victim_.prefill({1, 400, 57, 90, 200}), GEIST_OK);
    SessionHandle ref = make_session(model_, 0, true);
    ASSERT_EQ(ref.prefill({1, 400, 57, 90, 200}), GEIST_OK);
    ref_ = run_steps(ref, nv_, kRefusalSteps);
    // A small image: two tokens.
    SessionHandle src = make_session(model_, 0, true);
    EXPECT_EQ(src.prefill({1, 300}), GEIST_OK);
    EXPECT_EQ(src.snapshot(&small_), GEIST_OK);
  }
  void TearDown() override {
    if (victim_) {
      EXPECT_TRUE(same_continuation(ref_, 0, run_steps(victim_, nv_, kRefusalSteps), nv_))
          << "a refused restore changed the session";
    }
  }
  // Restore must fail with `code` and a message containing `check`.
  void expect_refused(const std::vector<uint8_t>& img, geist_status code, const char* check) {
    EXPECT_EQ(victim_.restore(img.data(), img.size()), code);
    EXPECT_NE(std::string(victim_.last_error()).find(check), std::string::npos)
        << "message '" << victim_.last_error() << "' does not name '" << check << "'";
  }

  ModelHandle model_;
  int32_t nv_ = 0;
  SessionHandle victim_;
  Trace ref_;
  std::vector<uint8_t> small_;
};

TEST_F(SnapshotRefusal, NullAndShortBuffers) {
  EXPECT_EQ(victim_.restore(nullptr, 100), GEIST_E_INVALID_ARG);
  EXPECT_EQ(victim_.restore(small_.data(), 95), GEIST_E_INVALID_ARG);
  EXPECT_EQ(victim_.restore(small_.data(), 0), GEIST_E_INVALID_ARG);
  size_t written = 0;
  std::vector<uint8_t> tiny(10);
  EXPECT_EQ(geist_session_snapshot(victim_.get(), tiny.data(), tiny.size(), &written),
            GEIST_E_INVALID_ARG);
}

TEST_F(SnapshotRefusal, TruncatedAndExtendedImages) {
  for (size_t n = 96; n < small_.size(); n += 7) {
    std::vector<uint8_t> t(small_.begin(), small_.begin() + static_cast<long>(n));
    EXPECT_EQ(victim_.restore(t), GEIST_E_FORMAT) << "truncated to " << n;
  }
  std::vector<uint8_t> longer = small_;
  longer.push_back(0);
  expect_refused(longer, GEIST_E_FORMAT, "size");
}

// Every single-byte corruption (all 255 other values of every byte) is refused.
TEST_F(SnapshotRefusal, EverySingleByteCorruption) {
  ASSERT_LT(small_.size(), 8192u);
  std::vector<uint8_t> img = small_;
  size_t accepted = 0;
  for (size_t i = 0; i < img.size(); ++i) {
    const uint8_t orig = img[i];
    for (int v = 0; v < 256; ++v) {
      if (v == orig) continue;
      img[i] = static_cast<uint8_t>(v);
      if (victim_.restore(img) == GEIST_OK) ++accepted;
    }
    img[i] = orig;
  }
  EXPECT_EQ(accepted, 0u);
}

TEST_F(SnapshotRefusal, RandomMultiByteCorruptions) {
  std::mt19937 g(99);
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> img = small_;
    const int n = 2 + static_cast<int>(g() % 15);
    for (int k = 0; k < n; ++k) img[g() % img.size()] ^= static_cast<uint8_t>(1 + g() % 255);
    if (img == small_) continue;
    ASSERT_EQ(victim_.restore(img), GEIST_E_FORMAT) << "trial " << trial;
  }
}

// Semantic checks behind the checksum: the image is re-sealed after each edit, so each check
// must catch it by itself.
TEST_F(SnapshotRefusal, EachCheckNamesItself) {
  auto edited = [&](auto edit) {
    std::vector<uint8_t> img = small_;
    edit(&img);
    reseal(&img);
    return img;
  };
  expect_refused(edited([](auto* i) { (*i)[0] = 'X'; }), GEIST_E_FORMAT, "magic");
  expect_refused(edited([](auto* i) { poke<uint32_t>(i, 8, 2); }), GEIST_E_FORMAT, "version");
  expect_refused(edited([](auto* i) { poke<uint32_t>(i, 12, 100); }), GEIST_E_FORMAT, "header");
  expect_refused(edited([](auto* i) { poke<uint64_t>(i, 32, 12345); }), GEIST_E_FORMAT, "model id");
  expect_refused(edited([](auto* i) { poke<uint32_t>(i, 56, 511); }), GEIST_E_FORMAT, "n_vocab");
  expect_refused(edited([](auto* i) { poke<uint32_t>(i, 40, 1); }), GEIST_E_FORMAT, "KV mode");
  expect_refused(edited([](auto* i) { poke<uint32_t>(i, 48, 100000); }), GEIST_E_FORMAT,
                 "capacity");
  expect_refused(edited([](auto* i) { poke<uint32_t>(i, 52, 1); }), GEIST_E_FORMAT, "kv_len");
  expect_refused(edited([](auto* i) { poke<uint32_t>(i, 64, 0x11); }), GEIST_E_FORMAT, "flags");
  expect_refused(edited([](auto* i) { poke<uint32_t>(i, 64, 3); }), GEIST_E_FORMAT, "flags");
  expect_refused(edited([](auto* i) { (*i)[80] = 1; }), GEIST_E_FORMAT, "reserved");
  expect_refused(edited([](auto* i) { poke<uint32_t>(i, 76, 3); }), GEIST_E_FORMAT, "n_generated");
  expect_refused(edited([](auto* i) { poke<uint32_t>(i, 68, 5); }), GEIST_E_FORMAT, "owed");
  expect_refused(edited([](auto* i) { poke<uint32_t>(i, 72, 1); }), GEIST_E_FORMAT, "pin");
  // Section table: entry 0 is SAMPLER, entry 1 TOKENS (2 tokens: 8 bytes).
  expect_refused(edited([](auto* i) { poke<uint32_t>(i, 96, 5); }), GEIST_E_FORMAT,
                 "section table");
  expect_refused(edited([](auto* i) { poke<uint64_t>(i, 96 + 24 + 8, 1); }), GEIST_E_FORMAT,
                 "contiguous");
  expect_refused(edited([](auto* i) { poke<uint64_t>(i, 96 + 24 + 16, 12); }), GEIST_E_FORMAT,
                 "section length");
  const size_t hdr = 96 + 24 * small_[60];
  expect_refused(edited([&](auto* i) { poke<int32_t>(i, hdr + 72 + 4, 512); }), GEIST_E_FORMAT,
                 "token ids");
  expect_refused(edited([&](auto* i) { poke<int32_t>(i, hdr + 72 + 4, -1); }), GEIST_E_FORMAT,
                 "token ids");
  expect_refused(edited([&](auto* i) { poke<float>(i, hdr + 16, -1.0f); }), GEIST_E_FORMAT,
                 "sampler");
  expect_refused(edited([&](auto* i) { poke<float>(i, hdr + 28, INFINITY); }), GEIST_E_FORMAT,
                 "frequency_penalty");
  expect_refused(edited([&](auto* i) { std::memset(i->data() + hdr + 40, 0, 32); }), GEIST_E_FORMAT,
                 "RNG");
}

// geist_session_restore_trusted skips the image checksum and nothing else: every structural
// refusal above still happens (the session untouched, checked in TearDown), truncated and
// extended images are refused, and only an image whose checksum field alone is wrong is taken.
TEST_F(SnapshotRefusal, TrustedRestoreSkipsOnlyTheChecksum) {
  auto refused_trusted = [&](std::vector<uint8_t> img, const char* check) {
    reseal(&img);
    EXPECT_EQ(victim_.restore_trusted(img.data(), img.size()), GEIST_E_FORMAT) << check;
    EXPECT_NE(std::string(victim_.last_error()).find(check), std::string::npos)
        << "message '" << victim_.last_error() << "' does not name '" << check << "'";
  };
  auto with = [&](auto edit) {
    std::vector<uint8_t> img = small_;
    edit(&img);
    return img;
  };
  refused_trusted(with([](auto* i) { (*i)[0] = 'X'; }), "magic");
  refused_trusted(with([](auto* i) { poke<uint64_t>(i, 32, 12345); }), "model id");
  refused_trusted(with([](auto* i) { poke<uint32_t>(i, 40, 1); }), "KV mode");
  refused_trusted(with([](auto* i) { poke<uint32_t>(i, 48, 100000); }), "capacity");
  refused_trusted(with([](auto* i) { poke<uint64_t>(i, 96 + 24 + 16, 12); }), "section length");
  const size_t hdr = 96 + 24 * small_[60];
  refused_trusted(with([&](auto* i) { poke<int32_t>(i, hdr + 72 + 4, 512); }), "token ids");
  refused_trusted(with([&](auto* i) { std::memset(i->data() + hdr + 40, 0, 32); }), "RNG");
  EXPECT_EQ(victim_.restore_trusted(nullptr, 100), GEIST_E_INVALID_ARG);
  for (size_t n = 96; n < small_.size(); n += 7) {
    EXPECT_EQ(victim_.restore_trusted(small_.data(), n), GEIST_E_FORMAT) << "truncated to " << n;
  }
  std::vector<uint8_t> longer = small_;
  longer.push_back(0);
  EXPECT_EQ(victim_.restore_trusted(longer.data(), longer.size()), GEIST_E_FORMAT);

  // The checksum field alone altered: restore refuses it, restore_trusted takes it, and the
  // session continues as one restored from the intact image.
  std::vector<uint8_t> bad_sum = small_;
  bad_sum[24] ^= 1;
  EXPECT_EQ(victim_.restore(bad_sum), GEIST_E_FORMAT);
  SessionHandle a = make_session(model_, 0, true), b = make_session(model_, 0, true);
  ASSERT_EQ(a.restore(small_), GEIST_OK);
  ASSERT_EQ(b.restore_trusted(bad_sum.data(), bad_sum.size()), GEIST_OK) << b.last_error();
  EXPECT_TRUE(same_continuation(run_steps(a, nv_, kRefusalSteps), 0,
                                run_steps(b, nv_, kRefusalSteps), nv_));
}

TEST_F(SnapshotRefusal, OtherModelOtherModeTooSmallTarget) {
  ModelHandle qwen = load_model("models/tiny-qwen35-f32.gguf");
  SessionHandle q = make_session(qwen, 0, true);
  ASSERT_EQ(q.prefill({1, 300}), GEIST_OK);
  std::vector<uint8_t> foreign;
  ASSERT_EQ(q.snapshot(&foreign), GEIST_OK);
  expect_refused(foreign, GEIST_E_FORMAT, "model id");
  // Same architecture and shapes, other tensor types: another model.
  ModelHandle q16 = load_model("models/tiny-qwen35-f16.gguf");
  SessionHandle q2 = make_session(q16, 0, true);
  EXPECT_EQ(q2.restore(foreign), GEIST_E_FORMAT);
  EXPECT_NE(std::string(q2.last_error()).find("model id"), std::string::npos);

  SessionHandle f16 = make_session(model_, 1, true);
  ASSERT_EQ(f16.prefill({1, 300}), GEIST_OK);
  std::vector<uint8_t> other_mode;
  ASSERT_EQ(f16.snapshot(&other_mode), GEIST_OK);
  expect_refused(other_mode, GEIST_E_FORMAT, "KV mode");

  SessionHandle big = make_session(model_, 0, true);
  ASSERT_EQ(big.prefill({1, 5, 6, 7, 8, 9, 10}), GEIST_OK);
  std::vector<uint8_t> seven;
  ASSERT_EQ(big.snapshot(&seven), GEIST_OK);
  SessionHandle small_target = make_session(model_, 0, true, 6);
  EXPECT_EQ(small_target.restore(seven), GEIST_E_FORMAT);
  EXPECT_NE(std::string(small_target.last_error()).find("capacity"), std::string::npos);
  SessionHandle exact_target = make_session(model_, 0, true, 7);
  EXPECT_EQ(exact_target.restore(seven), GEIST_OK) << exact_target.last_error();
}

// The same file copied elsewhere has the same snapshot_id.
TEST(SnapshotId, CopiedModelFileAcceptsTheImage) {
  GEIST_REQUIRE_FIXTURES();
  const std::string copy = test::temp_path("snapshot_copy_stories260K.gguf");
  {
    std::ifstream in(fixture_path("models/stories260K.gguf"), std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
  }
  ModelHandle a = load_model("models/stories260K.gguf");
  ModelHandle b;
  ASSERT_EQ(ModelHandle::load(copy, &b), GEIST_OK);
  SessionHandle sa = make_session(a, 0, false);
  ASSERT_EQ(sa.prefill({1, 300, 301}), GEIST_OK);
  std::vector<uint8_t> img;
  ASSERT_EQ(sa.snapshot(&img), GEIST_OK);
  SessionHandle sb = make_session(b, 0, false);
  EXPECT_EQ(sb.restore(img), GEIST_OK) << sb.last_error();
  const Trace ta = run_steps(sa, a.n_vocab(), 16);
  EXPECT_TRUE(same_continuation(ta, 0, run_steps(sb, b.n_vocab(), 16), a.n_vocab()));
  std::remove(copy.c_str());
}

// Image size = used state bytes + header and section table (< 4 KiB), from the shapes:
// stories260K has 5 layers with 4 KV heads of dim 8 (32 floats per K and per V row).
TEST(SnapshotSize, UsedBytesPlusSmallHeader) {
  GEIST_REQUIRE_FIXTURES();
  ModelHandle m = load_model("models/stories260K.gguf");
  SessionHandle s = make_session(m, 0, false);
  std::vector<int32_t> p(50, 7);
  p[0] = 1;
  ASSERT_EQ(s.prefill(p), GEIST_OK);
  size_t size = 0;
  ASSERT_EQ(s.snapshot_size(&size), GEIST_OK);
  const size_t used = 72 + 4 * 50 + 4 * 512 + 5 * 2 * 50 * 32 * 4;
  EXPECT_GT(size, used);
  EXPECT_LT(size - used, 4096u);
}

TEST(SnapshotFile, SaveReplacesAtomicallyAndLoads) {
  GEIST_REQUIRE_FIXTURES();
  ModelHandle m = load_model("models/stories260K.gguf");
  const std::string path = test::temp_path("snapshot_test.gsnap");
  SessionHandle s = make_session(m, 0, true);
  ASSERT_EQ(s.prefill({1, 300}), GEIST_OK);
  ASSERT_EQ(s.save_file(path), GEIST_OK) << s.last_error();
  ASSERT_EQ(s.prefill({301, 302}), GEIST_OK);
  ASSERT_EQ(s.save_file(path), GEIST_OK) << "replacing an existing file";
  const Trace ref = run_steps(s, m.n_vocab(), 16);
  SessionHandle t = make_session(m, 0, true);
  ASSERT_EQ(t.load_file(path), GEIST_OK) << t.last_error();
  EXPECT_EQ(t.position(), 4);
  EXPECT_TRUE(same_continuation(ref, 0, run_steps(t, m.n_vocab(), 16), m.n_vocab()));
  EXPECT_EQ(t.load_file(path + ".missing"), GEIST_E_FILE_NOT_FOUND);
  {
    std::ofstream bad(path, std::ios::binary | std::ios::trunc);
    bad << "not a snapshot at all, but long enough to pass the size check of ninety-six bytes"
           "............................";
  }
  EXPECT_EQ(t.load_file(path), GEIST_E_FORMAT);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace geist::test
