// Many sessions, one forward on the CUDA backend (geist_batch.h, ArchModel::forward_batch): the
// invariance scenario of tests/api/batch_scenario.h with the model loaded on the GPU. Every
// session's logits and tokens are memcmp-equal, step by step, to its twin run alone on the
// GPU (whose decode steps run as CUDA graphs with the decode fusions, while the batch's
// steps of several rows run their rows through the prefill kernels, plain); a session
// snapshotted mid-batch and restored into a lone session continues bit-identically. On
// stories260K (f32), tiny-qwen35 (q8_0) and stories-qwen35 (f32), every KV mode.
//
// Below the API, ArchModel::forward_batch directly: a steady batched decode step of sessions at
// different positions runs as a replayed CUDA graph on the lead's stream, its DeltaNet rows as
// one launch each, and every row still equals its session's lone step bitwise; with the
// fusions off (GEIST_CUDA_FUSE=0, GEIST_CUDA_GRAPHS=0) on the batched states, the per-row path
// gives the same bits.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/batch_scenario.h"
#include "archs/arch.h"
#include "archs/test_qwen35_support.h"
#include "backends/cuda/cuda_stream.h"
#include "cuda/cuda_test_util.h"
#include "geist/geist_backend.h"

namespace geist::test {
namespace {

TEST(CudaBatch, Stories260KSessionsEqualLoneRuns) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  batch::check_model("stories260K.gguf", 1100, GEIST_BACKEND_CUDA);
}

TEST(CudaBatch, TinyQwen35SessionsEqualLoneRuns) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  batch::check_model("tiny-qwen35-q8_0.gguf", 1200, GEIST_BACKEND_CUDA);
}

TEST(CudaBatch, StoriesQwen35SessionsEqualLoneRuns) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  batch::check_model("stories-qwen35-f32.gguf", 1300, GEIST_BACKEND_CUDA);
}

// b sessions prefilled alone with prompts of different lengths, then `steps` decode steps:
// the batched states in one forward_batch per step, their twins one forward each. Returns the
// lead's stream stats; every step's rows are compared bitwise.
cuda::CudaStepStats batched_decode(const ArchModel& m, int32_t b, int steps, bool plain) {
  const int32_t nv = m.info().n_vocab;
  ThreadPool pool(1);
  std::vector<std::unique_ptr<ArchState>> batched(static_cast<size_t>(b)), alone(batched.size());
  if (plain) {
    setenv("GEIST_CUDA_GRAPHS", "0", 1);
    setenv("GEIST_CUDA_FUSE", "0", 1);
  }
  for (auto& st : batched) EXPECT_TRUE(m.create_state(256, &st).is_ok());
  unsetenv("GEIST_CUDA_GRAPHS");
  unsetenv("GEIST_CUDA_FUSE");
  for (auto& st : alone) EXPECT_TRUE(m.create_state(256, &st).is_ok());
  std::vector<int32_t> pos(batched.size()), tok(batched.size());
  std::vector<float> row(static_cast<size_t>(nv));
  for (int32_t i = 0; i < b; ++i) {
    const size_t k = static_cast<size_t>(i);
    std::vector<int32_t> prompt(static_cast<size_t>(3 + 7 * i));
    for (size_t t = 0; t < prompt.size(); ++t) {
      prompt[t] = static_cast<int32_t>((t * 31 + k * 17 + 1) % static_cast<size_t>(nv));
    }
    const int32_t n = static_cast<int32_t>(prompt.size());
    EXPECT_TRUE(m.forward(*batched[k], prompt.data(), n, 0, false, row.data(), pool).is_ok());
    EXPECT_TRUE(m.forward(*alone[k], prompt.data(), n, 0, false, row.data(), pool).is_ok());
    pos[k] = n;
    tok[k] = qwen35_test::argmax(row.data(), nv);
  }
  std::vector<float> got(static_cast<size_t>(b) * nv);
  std::vector<Segment> segs(batched.size());
  for (int step = 0; step < steps; ++step) {
    for (int32_t i = 0; i < b; ++i) {
      const size_t k = static_cast<size_t>(i);
      segs[k] = Segment{batched[k].get(), &tok[k], 1, pos[k], i, true};
    }
    EXPECT_TRUE(m.forward_batch(*batched[0], segs.data(), b, got.data(), nullptr, pool).is_ok());
    for (int32_t i = 0; i < b; ++i) {
      const size_t k = static_cast<size_t>(i);
      EXPECT_TRUE(m.forward(*alone[k], &tok[k], 1, pos[k], false, row.data(), pool).is_ok());
      EXPECT_EQ(std::memcmp(got.data() + k * nv, row.data(), row.size() * sizeof(float)), 0)
          << "session " << i << " step " << step;
      tok[k] = qwen35_test::argmax(row.data(), nv);
      ++pos[k];
    }
  }
  cuda::CudaStepStats stats;
  EXPECT_TRUE(cuda::cuda_stream_stats(batched[0]->compute_stream(), &stats).is_ok());
  for (auto& st : batched) EXPECT_TRUE(st->status().is_ok()) << st->status().message();
  return stats;
}

void expect_batched_decode(const char* name) {
  SCOPED_TRACE(name);
  qwen35_test::Loaded l;
  {
    Status st = GgufFile::open(fixture_path(std::string("models/") + name), &l.file);
    ASSERT_TRUE(st.is_ok()) << st.message();
    st = load_arch_model(*l.file, BackendKind::CUDA, Logger{}, &l.model);
    ASSERT_TRUE(st.is_ok()) << name << ": " << st.message();
  }
  for (const int32_t b : {5, 12}) {  // the decode matmul kernel's rows, and the prefill one's
    SCOPED_TRACE("b=" + std::to_string(b));
    const cuda::CudaStepStats g = batched_decode(*l.model, b, 12, false);
    std::printf(
        "    %s b=%d: graph steps %lld (replayed %lld), plain %lld, capture failures %lld\n", name,
        b, static_cast<long long>(g.graph_steps), static_cast<long long>(g.replays),
        static_cast<long long>(g.plain_steps), static_cast<long long>(g.capture_failures));
    EXPECT_GE(g.replays, 8) << "a steady batched decode replays its graph";
    EXPECT_EQ(g.capture_failures, 0);
    const cuda::CudaStepStats p = batched_decode(*l.model, b, 6, true);
    EXPECT_EQ(p.graph_steps, 0);
  }
}

TEST(CudaBatch, SteadyDecodeStepsReplayAGraphBitwiseLoneSteps) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  expect_batched_decode("stories260K.gguf");
  expect_batched_decode("tiny-qwen35-q8_0.gguf");
}

}  // namespace
}  // namespace geist::test
