// The fixture models on the cuda backend: logits against the external references with the
// CPU tests' tolerances, greedy continuations exact, snapshots bit-identical within the
// backend, and images moving between cuda and cpu in both directions (greedy tokens equal
// for 32 steps, logits within the backend tolerance).
//
// Backend tolerance: the CUDA kernels use f32 arithmetic like the CPU ones but sum in other
// orders and keep activations in f32 where the CPU quantizes them to int16 for quantized
// weights; on these f32 models the two backends agree to ~1e-5 relative. We allow 1e-3 on
// logits of magnitude ~10 (stories260K vs llama.cpp, the CPU gets 1.9e-5) and the issue's
// 5e-3 for tiny-qwen35 vs the fp64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "archs/test_qwen35_support.h"
#include "cuda/cuda_test_util.h"
#include "formats/gguf.h"
#include "geist/geist.hpp"
#include "geist/geist_backend.h"
#include "snapshot/snapshot_util.h"

namespace geist::test {
namespace {

using qwen35_test::argmax;
using qwen35_test::compare;
using qwen35_test::Diff;
using qwen35_test::json_int_array;

struct CudaLoaded {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<ArchModel> model;
};

CudaLoaded load_cuda(const std::string& name) {
  CudaLoaded l;
  Status st = GgufFile::open(fixture_path("models/" + name), &l.file);
  EXPECT_TRUE(st) << st.message();
  if (!st) return l;
  st = load_arch_model(*l.file, BackendKind::CUDA, Logger{}, &l.model);
  EXPECT_TRUE(st) << name << ": " << st.message();
  if (!st) l.model.reset();
  return l;
}

TEST(CudaModels, Stories260KMatchesLlamaCppOnAllRows) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  CudaLoaded l = load_cuda("stories260K.gguf");
  ASSERT_TRUE(l.model);
  const std::vector<int32_t> toks = json_int_array(
      read_text_file(fixture_path("reference/stories260K/random200.json")), "prompt_tokens");
  ASSERT_EQ(toks.size(), 200u);
  const std::vector<float> ref = read_f32_file(fixture_path("reference/stories260K/random200.f32"));
  ThreadPool pool(1);
  const std::vector<float> got = qwen35_test::run_rows_fresh(*l.model, toks, {200}, pool);
  const Diff d = compare(got, ref, l.model->info().n_vocab);
  std::printf("    stories260K cuda vs llama.cpp: max %.3g mean %.3g argmax %d/200\n", d.max_abs,
              d.mean_abs, d.argmax_equal);
  EXPECT_LE(d.max_abs, 1e-3);
  EXPECT_GE(d.argmax_equal, 199);  // random ids make near-ties; the CPU gets 200
}

// Llama files' attention / FFN biases (tests/archs/test_metadata_variants.cpp checks the CPU
// against a double-precision forward): stories260K with random biases on every layer gives the
// CPU's logits on the GPU too, within the backend tolerance.
TEST(CudaModels, Stories260KWithBiasesMatchesCpu) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  std::unique_ptr<GgufFile> src;
  ASSERT_TRUE(GgufFile::open(fixture_path("models/stories260K.gguf"), &src).is_ok());
  GgufWriter w;
  w.set_alignment(static_cast<uint32_t>(src->alignment()));
  for (const GgufKv& kv : src->kvs()) {
    if (kv.key != "general.alignment") w.add_kv(kv);
  }
  for (const GgufTensorInfo& t : src->tensors()) {
    w.add_tensor(std::string(t.name), t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                 std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  for (int il = 0; il < 5; ++il) {
    for (const char* kind :
         {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      const int64_t n = src->find_tensor("blk.0." + std::string(kind) + ".weight")->ne[1];
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = nd(rng);
      std::vector<uint8_t> bytes(v.size() * sizeof(float));
      std::memcpy(bytes.data(), v.data(), bytes.size());
      w.add_tensor("blk." + std::to_string(il) + "." + kind + ".bias", GgmlType::F32, {n}, bytes);
    }
  }
  std::vector<uint8_t> image;
  ASSERT_TRUE(w.to_bytes(&image).is_ok());
  std::unique_ptr<GgufFile> file;
  ASSERT_TRUE(GgufFile::open_memory(image.data(), image.size(), &file).is_ok());
  std::unique_ptr<ArchModel> cpu, gpu;
  Status st = load_arch_model(*file, BackendKind::CPU, Logger{}, &cpu);
  ASSERT_TRUE(st) << st.message();
  st = load_arch_model(*file, BackendKind::CUDA, Logger{}, &gpu);
  ASSERT_TRUE(st) << st.message();
  const std::vector<int32_t> toks = json_int_array(
      read_text_file(fixture_path("reference/stories260K/random200.json")), "prompt_tokens");
  ThreadPool pool(1);
  const std::vector<float> want = qwen35_test::run_rows_fresh(*cpu, toks, {200}, pool);
  const std::vector<float> got = qwen35_test::run_rows_fresh(*gpu, toks, {64, 1, 135}, pool);
  const Diff d = compare(got, want, gpu->info().n_vocab);
  std::printf("    stories260K + biases, cuda vs cpu: max %.3g mean %.3g\n", d.max_abs, d.mean_abs);
  EXPECT_LE(d.max_abs, 1e-3);
}

// YaRN runs on the CPU only for now (its magnitude scale is not in the CUDA rope kernels): the
// cuda backend refuses the file naming the key rather than running it unscaled.
TEST(CudaModels, YarnIsRefusedNamingTheKey) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  std::unique_ptr<GgufFile> src;
  ASSERT_TRUE(GgufFile::open(fixture_path("models/stories260K.gguf"), &src).is_ok());
  GgufWriter w;
  w.set_alignment(static_cast<uint32_t>(src->alignment()));
  for (const GgufKv& kv : src->kvs()) {
    if (kv.key != "general.alignment") w.add_kv(kv);
  }
  w.add_str("llama.rope.scaling.type", "yarn");
  w.add_f32("llama.rope.scaling.factor", 4.0f);
  for (const GgufTensorInfo& t : src->tensors()) {
    w.add_tensor(std::string(t.name), t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                 std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  std::vector<uint8_t> image;
  ASSERT_TRUE(w.to_bytes(&image).is_ok());
  std::unique_ptr<GgufFile> file;
  ASSERT_TRUE(GgufFile::open_memory(image.data(), image.size(), &file).is_ok());
  std::unique_ptr<ArchModel> gpu;
  const Status st = load_arch_model(*file, BackendKind::CUDA, Logger{}, &gpu);
  EXPECT_EQ(st.code(), GEIST_E_UNSUPPORTED) << st.message();
  EXPECT_NE(st.message().find("llama.rope.scaling.type 'yarn'"), std::string::npos) << st.message();
}

TEST(CudaModels, Stories260KGreedyPrompt1Exact) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  CudaLoaded l = load_cuda("stories260K.gguf");
  ASSERT_TRUE(l.model);
  const std::string js = read_text_file(fixture_path("reference/stories260K/prompt1.json"));
  const std::vector<int32_t> prompt = json_int_array(js, "prompt_tokens");
  const std::vector<int32_t> want = json_int_array(js, "greedy_tokens");
  ThreadPool pool(1);
  std::vector<float> step_logits;
  const std::vector<int32_t> got =
      qwen35_test::greedy(*l.model, prompt, static_cast<int32_t>(want.size()), pool, &step_logits);
  EXPECT_EQ(got, want);
}

// A prefill longer than the CUDA micro-batch (2048 tokens) in one call gives the rows of the
// same tokens in calls of 300 (ArchModel::forward's split contract), with the prefill kernels
// at their largest batch: bitwise for stories260K (F32 matmuls, attention, the KV modes of
// rows, quantized rows and KIVI groups). For the Qwen3.5 fixture (Q8_0 ring kernel, delta
// rule, gated attention) the recurrent state is rounded to f32 where a call ends, and the
// Q8_0 activation codes can turn that ulp into one code step (1/254 of a block's scale) in
// every later layer and token: the same kind of perturbation as a change of backend, so the
// bound is the backend tolerance, 5e-3 (measured on the H200: 9.1e-4 over 2300 rows), with
// the same argmax in every row.
TEST(CudaModels, LongPrefillInOneCallEqualsShortCalls) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  struct Case {
    const char* name;
    KvMode mode;
  };
  const Case cases[] = {
      {"stories260K.gguf", KvMode::F32},   {"stories260K.gguf", KvMode::F16},
      {"stories260K.gguf", KvMode::Q8},    {"stories260K.gguf", KvMode::Q4},
      {"stories260K.gguf", KvMode::KIVI4}, {"stories-qwen35-q8_0.gguf", KvMode::F16}};
  for (const Case& cs : cases) {
    const char* name = cs.name;
    SCOPED_TRACE(std::string(name) + " kv " + kv_mode_name(cs.mode));
    CudaLoaded l = load_cuda(name);
    ASSERT_TRUE(l.model);
    const ArchModel& m = *l.model;
    const int32_t nv = m.info().n_vocab, n = 2300;
    std::vector<int32_t> toks(static_cast<size_t>(n));
    uint32_t x = 777;
    for (int32_t& t : toks) {
      x = x * 1664525u + 1013904223u;
      t = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(nv));
    }
    ThreadPool pool(1);
    std::vector<float> one(static_cast<size_t>(n) * static_cast<size_t>(nv));
    std::vector<float> parts(one.size(), 1.0f);
    std::unique_ptr<ArchState> a, b;
    ASSERT_TRUE(m.create_state(n + 8, cs.mode, &a).is_ok());
    ASSERT_TRUE(m.create_state(n + 8, cs.mode, &b).is_ok());
    ASSERT_TRUE(m.forward(*a, toks.data(), n, 0, true, one.data(), pool).is_ok());
    for (int32_t done = 0; done < n; done += 300) {
      const int32_t c = std::min(300, n - done);
      ASSERT_TRUE(m.forward(*b, toks.data() + done, c, done, true,
                            parts.data() + static_cast<size_t>(done) * nv, pool)
                      .is_ok());
    }
    if (m.layer_kinds().find('D') == std::string::npos) {
      size_t first_diff = one.size();
      for (size_t i = 0; i < one.size() && first_diff == one.size(); ++i) {
        if (std::memcmp(&one[i], &parts[i], sizeof(float)) != 0) first_diff = i;
      }
      EXPECT_EQ(first_diff, one.size()) << "first difference in row " << first_diff / nv;
    } else {
      const Diff d = compare(parts, one, nv);
      std::printf("    %s: %d rows in one call vs calls of 300: max %.3g\n", name, n, d.max_abs);
      EXPECT_LE(d.max_abs, 5e-3);
      EXPECT_EQ(d.argmax_equal, n);
    }
  }
}

TEST(CudaModels, TinyQwen35MatchesHfFp64AndGreedy) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  CudaLoaded l = load_cuda("tiny-qwen35-f32.gguf");
  ASSERT_TRUE(l.model);
  const std::string js = read_text_file(fixture_path("reference/tiny-qwen35/hf_reference.json"));
  const std::vector<int32_t> toks = json_int_array(js, "tokens");
  const std::vector<float> ref =
      read_f32_file(fixture_path("reference/tiny-qwen35/hf_fp64_logits.f32"));
  ThreadPool pool(1);
  const int32_t nv = l.model->info().n_vocab;
  const Diff d = compare(qwen35_test::run_rows_fresh(*l.model, toks, {200}, pool), ref, nv);
  std::printf("    tiny-qwen35 cuda vs HF fp64: max %.3g mean %.3g argmax %d/200\n", d.max_abs,
              d.mean_abs, d.argmax_equal);
  EXPECT_LE(d.max_abs, 5e-3);
  EXPECT_EQ(d.argmax_equal, 200);
  // Token by token (the recurrent form) too.
  const Diff d1 = compare(qwen35_test::run_rows_fresh(*l.model, toks, {1}, pool), ref, nv);
  EXPECT_LE(d1.max_abs, 5e-3);

  const std::vector<int32_t> prompt = json_int_array(js, "greedy_prompt");
  const std::vector<int32_t> want = json_int_array(js, "greedy_tokens");
  std::vector<float> step_logits;
  EXPECT_EQ(
      qwen35_test::greedy(*l.model, prompt, static_cast<int32_t>(want.size()), pool, &step_logits),
      want);
  const std::vector<float> ref_steps =
      read_f32_file(fixture_path("reference/tiny-qwen35/hf_fp64_greedy_logits.f32"));
  EXPECT_LE(compare(step_logits, ref_steps, nv).max_abs, 5e-3);
}

// ---- snapshots through the public API ----

using Param = SnapshotParam;

class CudaSnapshot : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    GEIST_REQUIRE_FIXTURES();
    GEIST_REQUIRE_CUDA();
    cuda_ = load_model(std::get<0>(GetParam()), GEIST_BACKEND_CUDA);
    cpu_ = load_model(std::get<0>(GetParam()), GEIST_BACKEND_CPU);
    ASSERT_TRUE(cuda_ && cpu_);
    nv_ = cuda_.n_vocab();
  }
  ::geist::SessionHandle session(const ::geist::ModelHandle& m) {
    return make_session(m, std::get<1>(GetParam()), std::get<2>(GetParam()));
  }
  ::geist::ModelHandle cuda_, cpu_;
  int32_t nv_ = 0;
};

std::vector<int32_t> ids(int n, uint32_t seed) {
  std::vector<int32_t> t{1};
  uint32_t x = seed;
  for (int i = 1; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    t.push_back(static_cast<int32_t>(3 + (x >> 8) % 500));
  }
  return t;
}

TEST_P(CudaSnapshot, RestoreIsBitIdenticalWithinCuda) {
  const std::vector<int32_t> p = ids(45, 3);
  ::geist::SessionHandle ref = session(cuda_);
  ASSERT_EQ(ref.prefill(p), GEIST_OK) << ref.last_error();
  std::vector<uint8_t> img;
  ASSERT_EQ(ref.snapshot(&img), GEIST_OK) << ref.last_error();
  const Trace want = run_steps(ref, nv_, 64);
  // Same session (after it moved on) and another session.
  ASSERT_EQ(ref.restore(img), GEIST_OK) << ref.last_error();
  EXPECT_TRUE(same_continuation(want, 0, run_steps(ref, nv_, 64), nv_));
  ::geist::SessionHandle other = session(cuda_);
  ASSERT_EQ(other.restore(img), GEIST_OK) << other.last_error();
  EXPECT_TRUE(same_continuation(want, 0, run_steps(other, nv_, 64), nv_));
  // A corrupt image is refused and the session continues as if nothing happened.
  ::geist::SessionHandle third = session(cuda_);
  ASSERT_EQ(third.prefill(p), GEIST_OK);
  std::vector<uint8_t> bad = img;
  bad[bad.size() - 9] ^= 1;
  EXPECT_EQ(third.restore(bad), GEIST_E_FORMAT);
  EXPECT_TRUE(same_continuation(want, 0, run_steps(third, nv_, 64), nv_));
}

// Greedy tokens equal for 32 steps and logits within the backend tolerance, both directions.
// With an f32 KV cache the backends differ only by f32 summation order (5e-3 on these logits,
// as against fp64). With f16 KV the two sides may round a K/V element to neighbouring halves
// (2^-11 relative), which moves stories260K's logits (magnitude ~15) by up to ~1e-2 over 32
// steps (measured 8.2e-3 on the H200; the CPU's own f16-vs-f32 KV shift is ~2e-3 per row).
void expect_traces_close(const Trace& a, const Trace& b, int32_t kv_mode) {
  ASSERT_EQ(a.tokens.size(), b.tokens.size());
  EXPECT_EQ(a.tokens, b.tokens);
  double worst = 0;
  for (size_t i = 0; i < a.logits.size(); ++i) {
    worst = std::max(worst, std::fabs(double{a.logits[i]} - double{b.logits[i]}));
  }
  // Quantized modes: f32 noise can move a K/V element across a rounding boundary, which
  // changes it by one quantization step (1/127 of its block's range for q8, more for 4 and 2
  // bits); on stories260K q8 that moved logits by 0.051 over 32 steps (H200).
  const double tol = kv_mode == static_cast<int32_t>(KvMode::F32)   ? 5e-3
                     : kv_mode == static_cast<int32_t>(KvMode::F16) ? 2e-2
                                                                    : 0.15;
  std::printf("    cross-backend logits: max %.3g (tolerance %.3g)\n", worst, tol);
  EXPECT_LE(worst, tol) << "logits across backends";
}

TEST_P(CudaSnapshot, ImagesMoveBetweenCudaAndCpu) {
  if (std::get<2>(GetParam()))
    GTEST_SKIP() << "cross-backend: greedy only (sampling amplifies "
                    "last-bit differences by design)";
  const std::vector<int32_t> p = ids(40, 9);
  ::geist::SessionHandle c = session(cpu_);
  ASSERT_EQ(c.prefill(p), GEIST_OK);
  std::vector<uint8_t> cpu_img;
  ASSERT_EQ(c.snapshot(&cpu_img), GEIST_OK);
  const Trace cpu_run = run_steps(c, nv_, 32);
  ::geist::SessionHandle g = session(cuda_);
  ASSERT_EQ(g.prefill(p), GEIST_OK);
  std::vector<uint8_t> gpu_img;
  ASSERT_EQ(g.snapshot(&gpu_img), GEIST_OK);
  const Trace gpu_run = run_steps(g, nv_, 32);
  EXPECT_EQ(gpu_img.size(), cpu_img.size());
  expect_traces_close(cpu_run, gpu_run, std::get<1>(GetParam()));

  ::geist::SessionHandle g2 = session(cuda_);  // CPU -> GPU
  ASSERT_EQ(g2.restore(cpu_img), GEIST_OK) << g2.last_error();
  expect_traces_close(cpu_run, run_steps(g2, nv_, 32), std::get<1>(GetParam()));
  ::geist::SessionHandle c2 = session(cpu_);  // GPU -> CPU
  ASSERT_EQ(c2.restore(gpu_img), GEIST_OK) << c2.last_error();
  expect_traces_close(cpu_run, run_steps(c2, nv_, 32), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Models, CudaSnapshot,
                         ::testing::Combine(::testing::Values("models/stories260K.gguf",
                                                              "models/tiny-qwen35-f32.gguf",
                                                              "models/stories-qwen35-f32.gguf"),
                                            ::testing::Range(0, kKvModeCount), ::testing::Bool()),
                         snapshot_param_name);

}  // namespace
}  // namespace geist::test
