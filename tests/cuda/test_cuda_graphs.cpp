// Decode steps as CUDA graphs (cuda_stream_graph.cpp): a session whose one-token steps run as
// graphs, with residual adds fused into the next rms_norm, must produce bitwise the logits
// of a session launching every op plainly (GEIST_CUDA_GRAPHS=0, GEIST_CUDA_FUSE=0), which
// the other CUDA tests hold against the CPU oracle and the external references. The
// schedule crosses the cases that change what a step captures: a long prefill between
// decode steps (scratch regrows), a restart at position 0 (Qwen3.5 resets its state). Graphs
// are captured once and replayed at later positions where the KV layout allows (row modes:
// positions read on the device), and captured at every step where it does not (KIVI, q4):
// both are held to plain launches in several KV modes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "archs/qwen35.h"
#include "archs/test_qwen35_support.h"
#include "backends/cuda/cuda_stream.h"
#include "cuda/cuda_test_util.h"
#include "engine/quantize.h"
#include "kernels/ops.h"

namespace geist::test {
namespace {

constexpr int32_t kLongPrefill = 300;  // > the archs' 256-token micro-batch

// Sets or clears the two switches for the streams created while it lives.
class PlainLaunches {
 public:
  explicit PlainLaunches(bool plain) {
    if (plain) {
      setenv("GEIST_CUDA_GRAPHS", "0", 1);
      setenv("GEIST_CUDA_FUSE", "0", 1);
    } else {
      unsetenv("GEIST_CUDA_GRAPHS");
      unsetenv("GEIST_CUDA_FUSE");
    }
  }
  ~PlainLaunches() {
    unsetenv("GEIST_CUDA_GRAPHS");
    unsetenv("GEIST_CUDA_FUSE");
  }
};

struct ScheduleResult {
  std::vector<float> logits;  // [steps][n_vocab], every forward's logits in order
  std::vector<int32_t> tokens;
  cuda::CudaStepStats stats;  // qwen35 only (its state exposes the stream)
};

// prompt, 20 greedy steps, a long prefill of fixed pseudo-random ids, 12 greedy steps, then
// one token at position 0 and 8 greedy steps.
ScheduleResult run_schedule(const ArchModel& m, bool plain, const std::vector<int32_t>& prompt,
                            KvMode kv_mode) {
  ScheduleResult r;
  const int32_t nv = m.info().n_vocab;
  std::unique_ptr<ArchState> state;
  {
    PlainLaunches env(plain);
    const Status st = m.create_state(512, kv_mode, &state);
    EXPECT_TRUE(st.is_ok()) << st.message();
    if (!st) return r;
  }
  ThreadPool pool(1);
  std::vector<float> logits(static_cast<size_t>(nv));
  int32_t pos = 0;
  bool good = true;
  auto forward = [&](const std::vector<int32_t>& toks) {
    if (!good) return;
    const Status st = m.forward(*state, toks.data(), static_cast<int32_t>(toks.size()), pos, false,
                                logits.data(), pool);
    EXPECT_TRUE(st.is_ok()) << st.message();
    good = st.is_ok();
    pos += static_cast<int32_t>(toks.size());
    r.logits.insert(r.logits.end(), logits.begin(), logits.end());
  };
  auto decode = [&](int n) {
    for (int i = 0; i < n; ++i) {
      const int32_t tok = qwen35_test::argmax(logits.data(), nv);
      r.tokens.push_back(tok);
      forward({tok});
    }
  };
  forward(prompt);
  decode(20);
  std::vector<int32_t> lng(static_cast<size_t>(kLongPrefill));
  uint32_t x = 12345;
  for (int32_t& t : lng) {
    x = x * 1664525u + 1013904223u;
    t = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(nv));
  }
  forward(lng);
  decode(12);
  pos = 0;
  forward({prompt[0]});
  decode(8);
  if (auto* q = dynamic_cast<Qwen35State*>(state.get())) {
    EXPECT_TRUE(cuda::cuda_stream_stats(*q->stream, &r.stats).is_ok());
  }
  return r;
}

// How many one-token steps must replay a graph without capturing it (stats of qwen35 only).
enum class Replays { UNCHECKED, MOST, NONE };

// name: a model of the fixtures (models/), or a path when it starts with '/'.
void expect_bitwise(const std::string& name, KvMode kv_mode, Replays replays) {
  SCOPED_TRACE(name + " kv " + kv_mode_name(kv_mode));
  qwen35_test::Loaded l;
  {
    Status st =
        GgufFile::open(name.rfind('/', 0) == 0 ? name : fixture_path("models/" + name), &l.file);
    ASSERT_TRUE(st.is_ok()) << st.message();
    st = load_arch_model(*l.file, BackendKind::CUDA, Logger{}, &l.model);
    ASSERT_TRUE(st.is_ok()) << name << ": " << st.message();
  }
  const std::vector<int32_t> prompt = qwen35_test::json_int_array(
      read_text_file(fixture_path("reference/stories260K/prompt1.json")), "prompt_tokens");
  ASSERT_GE(prompt.size(), 2u);
  const ScheduleResult plain = run_schedule(*l.model, true, prompt, kv_mode);
  const ScheduleResult graph = run_schedule(*l.model, false, prompt, kv_mode);
  ASSERT_EQ(plain.logits.size(), graph.logits.size());
  const size_t nv = static_cast<size_t>(l.model->info().n_vocab);
  int first_diff = -1;
  for (size_t s = 0; s * nv < plain.logits.size(); ++s) {
    if (std::memcmp(plain.logits.data() + s * nv, graph.logits.data() + s * nv,
                    nv * sizeof(float)) != 0) {
      first_diff = static_cast<int>(s);
      break;
    }
  }
  EXPECT_EQ(first_diff, -1) << name << ": logits of forward " << first_diff << " differ";
  EXPECT_EQ(plain.tokens, graph.tokens);
  if (replays != Replays::UNCHECKED) {
    std::printf(
        "    %s kv %s: graph steps %lld (replayed %lld), plain steps %lld, capture "
        "failures %lld\n",
        name.c_str(), kv_mode_name(kv_mode), static_cast<long long>(graph.stats.graph_steps),
        static_cast<long long>(graph.stats.replays),
        static_cast<long long>(graph.stats.plain_steps),
        static_cast<long long>(graph.stats.capture_failures));
    // 41 one-token steps; the first runs plainly (it sizes the buffers).
    EXPECT_GE(graph.stats.graph_steps, 35);
    EXPECT_EQ(graph.stats.capture_failures, 0);
    EXPECT_EQ(plain.stats.graph_steps, 0);
    // Row modes: captures only at the first step, after the long prefill (its token ids moved
    // to a larger scratch) and around a centred cache's position 0.
    if (replays == Replays::MOST) {
      EXPECT_GE(graph.stats.replays, 32);
    } else {
      EXPECT_EQ(graph.stats.replays, 0);
    }
  }
}

TEST(CudaGraphs, LlamaGraphStepsBitwiseEqualPlainLaunches) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  for (KvMode m : {KvMode::F32, KvMode::F16, KvMode::Q8, KvMode::Q4, KvMode::KIVI4}) {
    expect_bitwise("stories260K.gguf", m, Replays::UNCHECKED);
  }
}

// stories260K quantized to Q8_0: its prefills take the 8-bit prefill kernels, with q / k / v
// sharing one quantization and gate / up + swiglu in one launch (matmul_prefill_swiglu; 172
// columns, not a multiple of any tile's).
TEST(CudaGraphs, LlamaQ8PrefillsAndStepsBitwiseEqualPlainLaunches) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  const std::string path = ::testing::TempDir() + "geist_cuda_graphs_stories260K_q8_0.gguf";
  const Status st = quantize_file(fixture_path("models/stories260K.gguf"), path, "q8_0", 1, {});
  ASSERT_TRUE(st.is_ok()) << st.message();
  expect_bitwise(path, KvMode::F16, Replays::UNCHECKED);
  expect_bitwise(path, KvMode::Q8, Replays::UNCHECKED);
  std::remove(path.c_str());
}

TEST(CudaGraphs, Qwen35GraphStepsBitwiseEqualPlainLaunches) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  expect_bitwise("stories-qwen35-f32.gguf", KvMode::F32, Replays::MOST);
  expect_bitwise("stories-qwen35-f32.gguf", KvMode::Q8, Replays::MOST);
  expect_bitwise("stories-qwen35-f32.gguf", KvMode::KIVI4, Replays::NONE);
  // Q8_0: the gate / up matmuls + swiglu in one launch (matmul_swiglu); F16: rope + KV rows.
  expect_bitwise("stories-qwen35-q8_0.gguf", KvMode::F16, Replays::MOST);
}

// Greedy steps that ask for the argmax only (LogitsOut::argmax: cuda::argmax_first in the
// graph, 4 bytes copied out) pick the argmax of the rows that row steps copy out, token for
// token. Sessions decode this way when their sampler is greedy without penalties. Steps
// alternating between the two kinds in runs of 5 change the captured step each time; a row
// step at the end gives bitwise the logits of the all-rows run.
void expect_argmax_steps(const std::string& name) {
  SCOPED_TRACE(name);
  qwen35_test::Loaded l;
  {
    Status st = GgufFile::open(fixture_path("models/" + name), &l.file);
    ASSERT_TRUE(st.is_ok()) << st.message();
    st = load_arch_model(*l.file, BackendKind::CUDA, Logger{}, &l.model);
    ASSERT_TRUE(st.is_ok()) << name << ": " << st.message();
  }
  const ArchModel& m = *l.model;
  const std::vector<int32_t> prompt = qwen35_test::json_int_array(
      read_text_file(fixture_path("reference/stories260K/prompt1.json")), "prompt_tokens");
  const int32_t nv = m.info().n_vocab, n_pos = static_cast<int32_t>(prompt.size());
  constexpr int kSteps = 40;
  // mode 0: rows only; 1: argmax only; 2: runs of 5 of each. Returns the tokens; last_row: a
  // row step's logits after them.
  auto run = [&](int mode, std::vector<float>* last_row) {
    std::vector<int32_t> toks;
    std::unique_ptr<ArchState> state;
    ThreadPool pool(1);
    const Status st = m.create_state(256, KvMode::F32, &state);
    EXPECT_TRUE(st.is_ok()) << st.message();
    if (!st) return toks;
    std::vector<float> row(static_cast<size_t>(nv));
    EXPECT_TRUE(m.forward(*state, prompt.data(), n_pos, 0, false, row.data(), pool).is_ok());
    int32_t tok = static_cast<int32_t>(argmax_first(row.data(), nv));
    for (int i = 0; i < kSteps; ++i) {
      toks.push_back(tok);
      const bool argmax = mode == 1 || (mode == 2 && i / 5 % 2 == 1);
      std::fill(row.begin(), row.end(), 0.0f);
      int32_t id = -1;
      const LogitsOut out{row.data(), false, argmax ? &id : nullptr};
      const Status fs = m.forward(*state, &tok, 1, n_pos + i, out, pool);
      EXPECT_TRUE(fs.is_ok()) << fs.message();
      if (!fs) return toks;
      tok = argmax ? id : static_cast<int32_t>(argmax_first(row.data(), nv));
    }
    toks.push_back(tok);
    last_row->assign(static_cast<size_t>(nv), 0.0f);
    EXPECT_TRUE(m.forward(*state, &tok, 1, n_pos + kSteps, false, last_row->data(), pool).is_ok());
    return toks;
  };
  std::vector<float> rows0, rows1, rows2;
  const std::vector<int32_t> t0 = run(0, &rows0), t1 = run(1, &rows1), t2 = run(2, &rows2);
  ASSERT_EQ(t0.size(), static_cast<size_t>(kSteps + 1));
  EXPECT_EQ(t1, t0);
  EXPECT_EQ(t2, t0);
  EXPECT_EQ(std::memcmp(rows1.data(), rows0.data(), rows0.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(rows2.data(), rows0.data(), rows0.size() * sizeof(float)), 0);
  // A one-token argmax step of a longer call, or with every row, is refused.
  std::unique_ptr<ArchState> state;
  ASSERT_TRUE(m.create_state(64, KvMode::F32, &state).is_ok());
  ThreadPool pool(1);
  std::vector<float> row(static_cast<size_t>(nv) * 2);
  int32_t id = 0;
  EXPECT_EQ(m.forward(*state, prompt.data(), 2, 0, LogitsOut{row.data(), false, &id}, pool).code(),
            GEIST_E_INVALID_ARG);
  EXPECT_EQ(m.forward(*state, prompt.data(), 1, 0, LogitsOut{row.data(), true, &id}, pool).code(),
            GEIST_E_INVALID_ARG);
}

TEST(CudaGraphs, ArgmaxStepsPickTheArgmaxOfTheirRows) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  expect_argmax_steps("stories260K.gguf");
  expect_argmax_steps("stories-qwen35-q8_0.gguf");
}

}  // namespace
}  // namespace geist::test
