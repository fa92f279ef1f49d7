// A restore copies the image into the state on the session's threads (base/parallel_copy.h).
// Images large enough that every thread takes a range: restored through the parallel copy,
// the state is the source's byte for byte (its snapshot is memcmp-equal to the image) and the
// continuation is the uninterrupted run's, the same as through a one-thread session's serial
// copy; for plain rows (f32) and for Q4, whose window rows are copied apart from the batch.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/parallel_copy.h"
#include "kv/kv_cache.h"
#include "snapshot/snapshot_util.h"

namespace geist::test {
namespace {

constexpr int kParallelSteps = 16;
constexpr int kThreads = 2;    // the machine CI runs on has two cores
constexpr int kPrefix = 2100;  // f32 KV: over 2 MiB of state on both fixtures
constexpr int kMaxSeq = 2200;

std::vector<int32_t> long_prompt(int n) {
  std::mt19937 g(5);
  std::vector<int32_t> t{1};
  for (int i = 1; i < n; ++i) t.push_back(static_cast<int32_t>(3 + g() % 500));
  return t;
}

SessionHandle make(const ModelHandle& m, int32_t kv_mode, int n_threads) {
  geist_session_params sp;
  geist_session_params_default(&sp);
  sp.max_seq_len = kMaxSeq;
  sp.n_threads = n_threads;
  sp.kv_mode = kv_mode;
  sp.sampler = sampler_for(false);
  SessionHandle s;
  EXPECT_EQ(SessionHandle::create(m, &s, &sp), GEIST_OK);
  return s;
}

using ParallelParam = std::tuple<const char*, int32_t>;

class ParallelRestore : public ::testing::TestWithParam<ParallelParam> {};

TEST_P(ParallelRestore, SameBytesAndContinuationAsTheSerialCopy) {
  GEIST_REQUIRE_FIXTURES();
  ModelHandle m = load_model(std::get<0>(GetParam()));
  ASSERT_TRUE(m);
  const int32_t mode = std::get<1>(GetParam());
  const int32_t nv = m.n_vocab();
  const std::vector<int32_t> p = long_prompt(kPrefix);

  // The source and its uninterrupted continuation (on as many threads as the restored one).
  SessionHandle src = make(m, mode, kThreads);
  ASSERT_EQ(src.prefill(p), GEIST_OK) << src.last_error();
  std::vector<uint8_t> img;
  ASSERT_EQ(src.snapshot(&img), GEIST_OK) << src.last_error();
  const Trace ref = run_steps(src, nv, kParallelSteps);
  if (mode == static_cast<int32_t>(KvMode::F32)) {
    // Large enough that the pool's every thread copies a range (else this tests nothing new):
    // the state sections alone, without the tokens, the logits and the header.
    const size_t state = img.size() - 4 * p.size() - 4 * static_cast<size_t>(nv) - 65536;
    ASSERT_EQ(parallel_copy_threads(state, kThreads), kThreads) << img.size() << " bytes";
  }

  for (bool trusted : {false, true}) {
    SCOPED_TRACE(trusted ? "restore_trusted" : "restore");
    SessionHandle par = make(m, mode, kThreads), ser = make(m, mode, 1);
    // Some other state first, so that a byte the copy misses would show.
    const std::vector<int32_t> other = long_prompt(300);
    ASSERT_EQ(par.prefill(other), GEIST_OK);
    ASSERT_EQ(ser.prefill(other), GEIST_OK);
    for (SessionHandle* s : {&par, &ser}) {
      const geist_status st =
          trusted ? s->restore_trusted(img.data(), img.size()) : s->restore(img.data(), img.size());
      ASSERT_EQ(st, GEIST_OK) << s->last_error();
    }
    std::vector<uint8_t> again_par, again_ser;
    ASSERT_EQ(par.snapshot(&again_par), GEIST_OK);
    ASSERT_EQ(ser.snapshot(&again_ser), GEIST_OK);
    ASSERT_EQ(again_par.size(), img.size());
    EXPECT_EQ(std::memcmp(again_par.data(), img.data(), img.size()), 0);
    ASSERT_EQ(again_ser.size(), img.size());
    EXPECT_EQ(std::memcmp(again_ser.data(), img.data(), img.size()), 0);
    EXPECT_TRUE(same_continuation(ref, 0, run_steps(par, nv, kParallelSteps), nv));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, ParallelRestore,
    ::testing::Values(ParallelParam{"models/stories260K.gguf", static_cast<int32_t>(KvMode::F32)},
                      ParallelParam{"models/stories260K.gguf", static_cast<int32_t>(KvMode::Q4)},
                      ParallelParam{"models/stories-qwen35-f32.gguf",
                                    static_cast<int32_t>(KvMode::F32)}),
    [](const ::testing::TestParamInfo<ParallelParam>& info) {
      std::string m = std::get<0>(info.param);
      m = m.substr(m.find('/') + 1);
      m = m.substr(0, m.find('.'));
      std::string out;
      for (char c : m) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return out + "_" + kv_mode_name(static_cast<KvMode>(std::get<1>(info.param)));
    });

}  // namespace
}  // namespace geist::test
