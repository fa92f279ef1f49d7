// qwen35 against external references: Hugging Face transformers in float64 and llama.cpp, on
// the tiny random-weight fixtures and the trained stories-qwen35 model.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "test_qwen35_support.h"

namespace geist {
namespace {

using qwen35_test::compare;
using qwen35_test::Diff;
using qwen35_test::json_int_array;
using qwen35_test::load_model;
using qwen35_test::Loaded;

// The bound for f32 weights against both references (the two references differ from
// each other by 1.7e-4 on tiny-qwen35).
constexpr double kF32Tol = 5e-3;

struct RefCase {
  const char* model;        // file under models/
  const char* ref_dir;      // directory under reference/
  const char* weight_type;  // f32, f16, q8_0 (selects llamacpp_<type>_logits.f32)
};

void check_f32_against_references(const RefCase& rc) {
  Loaded l = load_model(rc.model);
  ASSERT_TRUE(l.model);
  const ArchModel& m = *l.model;
  const int32_t nv = m.info().n_vocab;
  const std::string dir = test::fixture_path(std::string("reference/") + rc.ref_dir + "/");
  const std::string json = test::read_text_file(dir + "hf_reference.json");
  const std::vector<int32_t> toks = json_int_array(json, "tokens");
  ASSERT_EQ(toks.size(), 200u);
  const std::vector<float> hf = test::read_f32_file(dir + "hf_fp64_logits.f32");
  const std::vector<float> lc = test::read_f32_file(dir + "llamacpp_f32_logits.f32");
  ASSERT_EQ(hf.size(), toks.size() * static_cast<size_t>(nv));

  ThreadPool pool(2);
  const std::vector<float> ours = qwen35_test::run_rows_fresh(m, toks, {200}, pool);
  const Diff d_hf = compare(ours, hf, nv);
  const Diff d_lc = compare(ours, lc, nv);
  std::printf(
      "[ %s ] vs HF fp64: max %.3g mean %.3g argmax %d/%d; vs llama.cpp f32: max %.3g "
      "mean %.3g\n",
      rc.model, d_hf.max_abs, d_hf.mean_abs, d_hf.argmax_equal, d_hf.rows, d_lc.max_abs,
      d_lc.mean_abs);
  EXPECT_LE(d_hf.max_abs, kF32Tol);
  EXPECT_LE(d_lc.max_abs, kF32Tol);
  EXPECT_EQ(d_hf.argmax_equal, 200);

  const std::vector<int32_t> prompt = json_int_array(json, "greedy_prompt");
  const std::vector<int32_t> expect = json_int_array(json, "greedy_tokens");
  ASSERT_FALSE(prompt.empty());
  ASSERT_FALSE(expect.empty());
  const std::vector<float> hf_steps = test::read_f32_file(dir + "hf_fp64_greedy_logits.f32");
  ASSERT_EQ(hf_steps.size(), expect.size() * static_cast<size_t>(nv));
  std::vector<float> steps;
  const std::vector<int32_t> got =
      qwen35_test::greedy(m, prompt, static_cast<int32_t>(expect.size()), pool, &steps);
  EXPECT_EQ(got, expect);
  const Diff d_steps = compare(steps, hf_steps, nv);
  std::printf("[ %s ] greedy step logits vs HF fp64: max %.3g mean %.3g\n", rc.model,
              d_steps.max_abs, d_steps.mean_abs);
  EXPECT_LE(d_steps.max_abs, kF32Tol);
}

// Quantized weights: our mean |error| against fp64 must be no worse than what llama.cpp's run
// of the same file reaches (it also quantizes activations, so it is an upper bound).
void check_quantized_against_llamacpp(const RefCase& rc) {
  Loaded l = load_model(rc.model);
  ASSERT_TRUE(l.model);
  const ArchModel& m = *l.model;
  const int32_t nv = m.info().n_vocab;
  const std::string dir = test::fixture_path(std::string("reference/") + rc.ref_dir + "/");
  const std::vector<int32_t> toks =
      json_int_array(test::read_text_file(dir + "hf_reference.json"), "tokens");
  const std::vector<float> hf = test::read_f32_file(dir + "hf_fp64_logits.f32");
  const std::vector<float> lc =
      test::read_f32_file(dir + "llamacpp_" + rc.weight_type + "_logits.f32");
  ThreadPool pool(2);
  const std::vector<float> ours = qwen35_test::run_rows_fresh(m, toks, {200}, pool);
  const Diff d_ours = compare(ours, hf, nv);
  const Diff d_lc = compare(lc, hf, nv);
  std::printf(
      "[ %s ] vs HF fp64: geist max %.3g mean %.3g argmax %d/%d | llama.cpp max %.3g "
      "mean %.3g argmax %d/%d\n",
      rc.model, d_ours.max_abs, d_ours.mean_abs, d_ours.argmax_equal, d_ours.rows, d_lc.max_abs,
      d_lc.mean_abs, d_lc.argmax_equal, d_lc.rows);
  EXPECT_LE(d_ours.mean_abs, d_lc.mean_abs);
}

TEST(Qwen35, TinyF32MatchesReferences) {
  GEIST_REQUIRE_FIXTURES();
  check_f32_against_references({"tiny-qwen35-f32.gguf", "tiny-qwen35", "f32"});
}

// The MTP block is ignored: the same references apply.
TEST(Qwen35, TinyMtpF32MatchesReferences) {
  GEIST_REQUIRE_FIXTURES();
  check_f32_against_references({"tiny-qwen35-mtp-f32.gguf", "tiny-qwen35", "f32"});
}

TEST(Qwen35, StoriesF32MatchesReferences) {
  GEIST_REQUIRE_FIXTURES();
  check_f32_against_references({"stories-qwen35-f32.gguf", "stories-qwen35", "f32"});
}

TEST(Qwen35, TinyF16NoWorseThanLlamaCpp) {
  GEIST_REQUIRE_FIXTURES();
  check_quantized_against_llamacpp({"tiny-qwen35-f16.gguf", "tiny-qwen35", "f16"});
}

TEST(Qwen35, TinyQ8_0NoWorseThanLlamaCpp) {
  GEIST_REQUIRE_FIXTURES();
  check_quantized_against_llamacpp({"tiny-qwen35-q8_0.gguf", "tiny-qwen35", "q8_0"});
}

TEST(Qwen35, StoriesF16NoWorseThanLlamaCpp) {
  GEIST_REQUIRE_FIXTURES();
  check_quantized_against_llamacpp({"stories-qwen35-f16.gguf", "stories-qwen35", "f16"});
}

TEST(Qwen35, StoriesQ8_0NoWorseThanLlamaCpp) {
  GEIST_REQUIRE_FIXTURES();
  check_quantized_against_llamacpp({"stories-qwen35-q8_0.gguf", "stories-qwen35", "q8_0"});
}

TEST(Qwen35, ConfigFromFile) {
  GEIST_REQUIRE_FIXTURES();
  Loaded l = load_model("tiny-qwen35-mtp-f32.gguf");
  ASSERT_TRUE(l.model);
  const ModelInfo& i = l.model->info();
  // Values from the fixtures README / hf_config.json; block_count 9 includes the MTP block.
  EXPECT_EQ(i.architecture, "qwen35");
  EXPECT_EQ(i.n_layer, 8);
  EXPECT_EQ(i.n_embd, 128);
  EXPECT_EQ(i.n_vocab, 512);
  EXPECT_EQ(i.n_head, 4);
  EXPECT_EQ(i.n_head_kv, 2);
  EXPECT_EQ(i.head_dim, 32);
  EXPECT_EQ(i.n_ff, 256);
}

TEST(Qwen35, RefusesMoeAndIncompleteFiles) {
  {
    GgufWriter w;
    w.add_str("general.architecture", "qwen35moe");
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(w.to_bytes(&bytes).is_ok());
    std::unique_ptr<GgufFile> f;
    ASSERT_TRUE(GgufFile::open_memory(bytes.data(), bytes.size(), &f).is_ok());
    std::unique_ptr<ArchModel> m;
    const Status st = load_arch_model(*f, Logger{}, &m);
    EXPECT_EQ(st.code(), GEIST_E_UNSUPPORTED);
    EXPECT_NE(st.message().find("qwen35moe"), std::string::npos) << st.message();
  }
  {
    // Valid hyper-parameters but no tensors: a format error naming the first missing tensor.
    GgufWriter w;
    w.add_str("general.architecture", "qwen35");
    const std::pair<const char*, uint32_t> dims[] = {{"block_count", 4},
                                                     {"embedding_length", 64},
                                                     {"feed_forward_length", 128},
                                                     {"attention.head_count", 2},
                                                     {"attention.head_count_kv", 1},
                                                     {"attention.key_length", 32},
                                                     {"attention.value_length", 32},
                                                     {"rope.dimension_count", 8},
                                                     {"ssm.conv_kernel", 4},
                                                     {"ssm.state_size", 16},
                                                     {"ssm.group_count", 1},
                                                     {"ssm.time_step_rank", 2},
                                                     {"ssm.inner_size", 32},
                                                     {"full_attention_interval", 4}};
    for (const auto& [k, v] : dims) w.add_u32(std::string("qwen35.") + k, v);
    w.add_f32("qwen35.attention.layer_norm_rms_epsilon", 1e-6f);
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(w.to_bytes(&bytes).is_ok());
    std::unique_ptr<GgufFile> f;
    ASSERT_TRUE(GgufFile::open_memory(bytes.data(), bytes.size(), &f).is_ok());
    std::unique_ptr<ArchModel> m;
    const Status st = load_arch_model(*f, Logger{}, &m);
    EXPECT_EQ(st.code(), GEIST_E_FORMAT);
    EXPECT_NE(st.message().find("token_embd.weight"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace geist
