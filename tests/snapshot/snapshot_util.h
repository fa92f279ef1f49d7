// Helpers for the snapshot tests: models, sessions and recorded continuations.
#pragma once

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "geist/geist.hpp"
#include "geist/geist_backend.h"
#include "kv/kv_cache.h"
#include "support/fixtures.h"

namespace geist::test {

// A continuation: per step the sampled token and the logits its forward produced.
struct Trace {
  std::vector<int32_t> tokens;  // [n_steps]
  std::vector<float> logits;    // [n_steps][n_vocab], row i = logits after tokens[i]'s forward
};

inline geist_sampler_params sampler_for(bool sampled) {
  geist_sampler_params p;
  geist_sampler_params_default(&p);
  if (sampled) {
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.seed = 7;
    // OpenAI-style penalties count the tokens generated since the last prefill, which the
    // image must carry (header n_generated) for a restored session to continue identically.
    p.presence_penalty = 0.3f;
    p.frequency_penalty = 0.2f;
  } else {
    p.temperature = 0.0f;
  }
  return p;
}

inline ::geist::SessionHandle make_session(const ::geist::ModelHandle& m, int32_t kv_mode,
                                           bool sampled, int32_t max_seq_len = 256) {
  geist_session_params sp;
  geist_session_params_default(&sp);
  sp.max_seq_len = max_seq_len;
  sp.n_threads = 1;
  sp.kv_mode = kv_mode;
  sp.sampler = sampler_for(sampled);
  ::geist::SessionHandle s;
  EXPECT_EQ(::geist::SessionHandle::create(m, &s, &sp), GEIST_OK);
  return s;
}

// Runs n decode steps, reading the logits after each (which pays the owed forward).
inline Trace run_steps(::geist::SessionHandle& s, int32_t n_vocab, int n) {
  Trace t;
  for (int i = 0; i < n; ++i) {
    int32_t tok = -1;
    EXPECT_EQ(s.decode(&tok), GEIST_OK) << s.last_error();
    const float* lg = nullptr;
    int32_t nv = 0;
    EXPECT_EQ(s.logits(&lg, &nv), GEIST_OK) << s.last_error();
    if (lg == nullptr || nv != n_vocab) return t;
    t.tokens.push_back(tok);
    t.logits.insert(t.logits.end(), lg, lg + nv);
  }
  return t;
}

// Tokens equal and logits bitwise equal (memcmp) for steps [from, from + n) of `ref` against
// all of `got`.
inline ::testing::AssertionResult same_continuation(const Trace& ref, size_t from, const Trace& got,
                                                    int32_t n_vocab) {
  const size_t n = got.tokens.size();
  if (from + n > ref.tokens.size()) return ::testing::AssertionFailure() << "trace too long";
  for (size_t i = 0; i < n; ++i) {
    if (ref.tokens[from + i] != got.tokens[i]) {
      return ::testing::AssertionFailure() << "token differs at step " << from + i << ": "
                                           << got.tokens[i] << " vs " << ref.tokens[from + i];
    }
    const size_t row = static_cast<size_t>(n_vocab);
    if (std::memcmp(&ref.logits[(from + i) * row], &got.logits[i * row], row * 4) != 0) {
      return ::testing::AssertionFailure() << "logits differ at step " << from + i;
    }
  }
  return ::testing::AssertionSuccess();
}

// The backend the public-API tests run on: GEIST_TEST_BACKEND=cpu (default), cuda or
// cpu-devlocal, so the same suite checks a device backend on a machine that has one.
inline int32_t test_backend() {
  const char* b = std::getenv("GEIST_TEST_BACKEND");
  const std::string name = b ? b : "cpu";
  if (name == "cuda") return GEIST_BACKEND_CUDA;
  if (name == "cpu-devlocal") return GEIST_BACKEND_CPU_DEVICE_LOCAL;
  EXPECT_TRUE(name == "cpu") << "GEIST_TEST_BACKEND=" << name
                             << " is not cpu, cuda or cpu-devlocal";
  return GEIST_BACKEND_CPU;
}

inline ::geist::ModelHandle load_model(const std::string& rel, int32_t backend = test_backend()) {
  geist_model_params p;
  geist_model_params_default(&p);
  p.backend = backend;
  ::geist::ModelHandle m;
  std::string err;
  EXPECT_EQ(::geist::ModelHandle::load(fixture_path(rel), &m, &p, &err), GEIST_OK) << err;
  return m;
}

// Parameters of the snapshot round-trip suites: model path, KV mode, sampled (else greedy).
using SnapshotParam = std::tuple<const char*, int32_t, bool>;

// Test-name suffix of a SnapshotParam, e.g. "stories260K_q4_sampled".
inline std::string snapshot_param_name(const ::testing::TestParamInfo<SnapshotParam>& info) {
  std::string m = std::get<0>(info.param);
  m = m.substr(m.find('/') + 1);
  m = m.substr(0, m.find('.'));
  std::string out;
  for (char c : m) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out + "_" + kv_mode_name(static_cast<KvMode>(std::get<1>(info.param))) +
         (std::get<2>(info.param) ? "_sampled" : "_greedy");
}

// BOS then pseudo-random ids below 503 (fixed seed): not aligned to KIVI's 32-position groups.
inline std::vector<int32_t> prompt(uint32_t seed, int n) {
  std::mt19937 g(seed);
  std::vector<int32_t> t{1};
  for (int i = 1; i < n; ++i) t.push_back(static_cast<int32_t>(3 + g() % 500));
  return t;
}

// The format's checksum, from its definition (SNAPSHOT_FORMAT.md §2): XXH3-64 of the image with
// bytes [24, 32) taken as zero.
inline void reseal(std::vector<uint8_t>* img) {
  std::memset(img->data() + 24, 0, 8);
  const uint64_t h = XXH3_64bits(img->data(), img->size());
  std::memcpy(img->data() + 24, &h, 8);
}

}  // namespace geist::test
