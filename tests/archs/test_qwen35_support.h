// Helpers shared by the qwen35 architecture tests: loading a fixture model, running token
// sequences with a given split, greedy decoding and error statistics.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "archs/arch.h"
#include "base/thread_pool.h"
#include "formats/gguf.h"
#include "support/fixtures.h"
#include "support/json_fields.h"

namespace geist::qwen35_test {

using test::json_int_array;

// The backend the fixture model tests run on: GEIST_TEST_BACKEND=cpu (default), cuda or
// cpu-devlocal, so the same reference checks run on a device backend where one exists.
inline BackendKind test_backend_kind() {
  const char* b = std::getenv("GEIST_TEST_BACKEND");
  BackendKind k = BackendKind::CPU;
  if (b != nullptr && !backend_kind_from_name(b, &k)) {
    ADD_FAILURE() << "GEIST_TEST_BACKEND=" << b << " is not cpu, cuda or cpu-devlocal";
  }
  return k;
}

struct Loaded {
  std::unique_ptr<GgufFile> file;  // must outlive the model
  std::unique_ptr<ArchModel> model;
};

// Loads models/<name>; fails the test (and returns nulls) on error.
inline Loaded load_model(const std::string& name) {
  Loaded l;
  Status st = GgufFile::open(test::fixture_path("models/" + name), &l.file);
  EXPECT_TRUE(st.is_ok()) << st.message();
  if (!st) return l;
  st = load_arch_model(*l.file, test_backend_kind(), Logger{}, &l.model);
  EXPECT_TRUE(st.is_ok()) << name << ": " << st.message();
  if (!st) l.model.reset();
  return l;
}

// Logits of every row of `toks`, fed to `state` in pieces of the given sizes (cycled).
inline std::vector<float> run_rows(const ArchModel& m, ArchState& state,
                                   const std::vector<int32_t>& toks,
                                   const std::vector<int32_t>& pieces, ThreadPool& pool) {
  const int32_t nv = m.info().n_vocab;
  std::vector<float> out(toks.size() * static_cast<size_t>(nv));
  int32_t pos = 0;
  for (size_t p = 0; pos < static_cast<int32_t>(toks.size()); ++p) {
    const int32_t len =
        std::min(pieces[p % pieces.size()], static_cast<int32_t>(toks.size()) - pos);
    Status st = m.forward(state, toks.data() + pos, len, pos, true,
                          out.data() + static_cast<size_t>(pos) * nv, pool);
    EXPECT_TRUE(st.is_ok()) << st.message();
    if (!st) break;
    pos += len;
  }
  return out;
}

inline std::vector<float> run_rows_fresh(const ArchModel& m, const std::vector<int32_t>& toks,
                                         const std::vector<int32_t>& pieces, ThreadPool& pool) {
  std::unique_ptr<ArchState> state;
  Status st = m.create_state(static_cast<int32_t>(toks.size()) + 8, &state);
  EXPECT_TRUE(st.is_ok()) << st.message();
  if (!st) return {};
  return run_rows(m, *state, toks, pieces, pool);
}

inline int32_t argmax(const float* x, int32_t n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);
}

// Prefills `prompt` in one call, then decodes n_gen greedy tokens one at a time. step_logits
// receives the logits each token was chosen from ([n_gen][n_vocab]).
inline std::vector<int32_t> greedy(const ArchModel& m, const std::vector<int32_t>& prompt,
                                   int32_t n_gen, ThreadPool& pool,
                                   std::vector<float>* step_logits) {
  const int32_t nv = m.info().n_vocab;
  std::unique_ptr<ArchState> state;
  Status st = m.create_state(static_cast<int32_t>(prompt.size()) + n_gen + 1, &state);
  EXPECT_TRUE(st.is_ok()) << st.message();
  std::vector<int32_t> out;
  if (!st) return out;
  std::vector<float> logits(static_cast<size_t>(nv));
  step_logits->clear();
  st = m.forward(*state, prompt.data(), static_cast<int32_t>(prompt.size()), 0, false,
                 logits.data(), pool);
  EXPECT_TRUE(st.is_ok()) << st.message();
  int32_t pos = static_cast<int32_t>(prompt.size());
  for (int32_t i = 0; i < n_gen && st; ++i) {
    step_logits->insert(step_logits->end(), logits.begin(), logits.end());
    const int32_t tok = argmax(logits.data(), nv);
    out.push_back(tok);
    if (i + 1 == n_gen) break;
    st = m.forward(*state, &tok, 1, pos++, false, logits.data(), pool);
    EXPECT_TRUE(st.is_ok()) << st.message();
  }
  return out;
}

struct Diff {
  double max_abs = 0;
  double mean_abs = 0;
  int32_t argmax_equal = 0;  // rows whose argmax agrees
  int32_t rows = 0;
};

inline Diff compare(const std::vector<float>& a, const std::vector<float>& b, int32_t n_vocab) {
  Diff d;
  EXPECT_EQ(a.size(), b.size());
  if (a.size() != b.size() || a.empty()) return d;
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = std::fabs(double{a[i]} - double{b[i]});
    d.max_abs = std::max(d.max_abs, e);
    sum += e;
  }
  d.mean_abs = sum / static_cast<double>(a.size());
  d.rows = static_cast<int32_t>(a.size() / static_cast<size_t>(n_vocab));
  for (int32_t r = 0; r < d.rows; ++r) {
    const float* ra = a.data() + static_cast<size_t>(r) * n_vocab;
    const float* rb = b.data() + static_cast<size_t>(r) * n_vocab;
    d.argmax_equal += argmax(ra, n_vocab) == argmax(rb, n_vocab) ? 1 : 0;
  }
  return d;
}

}  // namespace geist::qwen35_test
