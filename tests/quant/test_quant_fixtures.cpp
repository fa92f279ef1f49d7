// Evidence for the weight types against llama.cpp's own quantizer (shared/fixtures/quant, see its
// README): every file llama-quantize wrote there loads, and on the same 200 tokens (one batch,
// F32 KV cache, as the references were made) geist's logits are no further from each reference
// than llama.cpp's logits on the same file: mean |d| <= 1.1x and max |d| <= 2x llama.cpp's
// (manifest.json). The fixtures carry no llama.cpp greedy continuations of the quantized files,
// so greedy agreement is checked where an outside reference exists: the teacher-forced argmax of
// the first 16 positions against llama.cpp's logits on the same file (trained model only).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "archs/arch.h"
#include "archs/test_qwen35_support.h"
#include "base/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/quant.h"
#include "support/fixtures.h"

namespace geist {
namespace {

using qwen35_test::compare;
using qwen35_test::Diff;

constexpr double kMeanBound = 1.10;  // the README's rule
constexpr double kMaxBound = 2.0;    // over the measured worst case of an exact engine (1.44x)
constexpr int kArgmaxPrefix = 16;
constexpr double kTieMargin = 0.05;  // llama.cpp's own 8-bit activations move logits by ~0.2

struct Row {
  std::string file, types;
  Diff geist_f32, geist_hf, geist_same;
  double llama_f32_mean = 0, llama_f32_max = 0, llama_hf_mean = 0, llama_hf_max = 0;
  bool has_hf = false;
  int prefix_agree = 0;
  int prefix_ties = 0;
};

std::string type_mix(const nlohmann::json& types) {
  std::vector<std::pair<int, std::string>> v;
  for (auto it = types.begin(); it != types.end(); ++it) {
    v.emplace_back(-it.value().get<int>(), it.key());
  }
  std::sort(v.begin(), v.end());
  std::string s;
  for (const auto& [neg, name] : v) s += (s.empty() ? "" : " ") + name + ":" + std::to_string(-neg);
  return s;
}

TEST(QuantFixtures, EveryLlamaQuantizeFileWithinLlamaCppsOwnError) {
  GEIST_REQUIRE_FIXTURES();
  const std::string dir = test::fixture_path("quant/");
  const nlohmann::json m = nlohmann::json::parse(test::read_text_file(dir + "manifest.json"));
  std::map<std::string, std::vector<int32_t>> tokens;  // source model -> its 200 tokens
  for (const auto& s : m.at("sources")) {
    tokens[s.at("model").get<std::string>()] = s.at("tokens").get<std::vector<int32_t>>();
  }
  const std::vector<float> hf =
      test::read_f32_file(test::fixture_path("reference/stories-qwen35/hf_fp64_logits.f32"));
  ThreadPool pool(2);
  std::vector<Row> rows;
  for (const auto& f : m.at("files")) {
    Row row;
    row.file = f.at("file").get<std::string>();
    row.types = type_mix(f.at("tensor_types"));
    SCOPED_TRACE(row.file);
    const std::string model = f.at("source_model").get<std::string>();
    const std::vector<int32_t>& toks = tokens.at(model);
    std::unique_ptr<GgufFile> file;
    Status st = GgufFile::open(dir + row.file, &file);
    ASSERT_TRUE(st.is_ok()) << st.message();
    std::unique_ptr<ArchModel> arch;
    st = load_arch_model(*file, BackendKind::CPU, Logger{}, &arch);
    ASSERT_TRUE(st.is_ok()) << row.file << ": " << st.message();
    const int32_t nv = arch->info().n_vocab;
    const std::vector<float> got = qwen35_test::run_rows_fresh(
        *arch, toks, {static_cast<int32_t>(toks.size())}, pool);  // one batch, F32 KV
    const std::vector<float> same =
        test::read_f32_file(dir + f.at("llamacpp_logits").get<std::string>());
    const std::vector<float> f32 = test::read_f32_file(dir + model + "-f32.llamacpp.f32");
    ASSERT_EQ(got.size(), f32.size());
    row.geist_f32 = compare(got, f32, nv);
    row.geist_same = compare(got, same, nv);
    const auto& lf = f.at("llamacpp_vs_f32_llamacpp");
    row.llama_f32_mean = lf.at("mean_abs").get<double>();
    row.llama_f32_max = lf.at("max_abs").get<double>();
    EXPECT_LE(row.geist_f32.mean_abs, kMeanBound * row.llama_f32_mean) << "vs f32 llama.cpp";
    EXPECT_LE(row.geist_f32.max_abs, kMaxBound * row.llama_f32_max) << "vs f32 llama.cpp";
    if (f.contains("llamacpp_vs_hf_fp64")) {
      row.has_hf = true;
      row.geist_hf = compare(got, hf, nv);
      const auto& lh = f.at("llamacpp_vs_hf_fp64");
      row.llama_hf_mean = lh.at("mean_abs").get<double>();
      row.llama_hf_max = lh.at("max_abs").get<double>();
      EXPECT_LE(row.geist_hf.mean_abs, kMeanBound * row.llama_hf_mean) << "vs HF fp64";
      EXPECT_LE(row.geist_hf.max_abs, kMaxBound * row.llama_hf_max) << "vs HF fp64";
      for (int i = 0; i < kArgmaxPrefix; ++i) {
        const float* a = got.data() + static_cast<size_t>(i) * nv;
        const float* b = same.data() + static_cast<size_t>(i) * nv;
        const int32_t ga = qwen35_test::argmax(a, nv), la = qwen35_test::argmax(b, nv);
        if (ga == la) {
          ++row.prefix_agree;
          continue;
        }
        // A near tie in llama.cpp's own row (its top two closer than the arithmetic noise between
        // the engines) may go either way; anything wider is a real disagreement.
        const double margin = double{b[la]} - double{b[ga]};
        std::printf("%s row %d: geist picks %d, llama.cpp %d, llama.cpp's margin %.4f\n",
                    row.file.c_str(), i, ga, la, margin);
        if (margin <= kTieMargin) ++row.prefix_ties;
        EXPECT_LE(margin, kTieMargin) << "row " << i << ": argmax differs from llama.cpp's";
      }
    }
    rows.push_back(row);
  }
  std::printf("\n%-36s %-44s %-29s %-29s %s\n", "file", "tensor types",
              "vs f32 ref: geist / llama.cpp", "vs HF fp64: geist / llama.cpp",
              "vs llama.cpp same file (argmax/200)");
  for (const Row& r : rows) {
    char hf_col[64] = "-";
    if (r.has_hf) {
      std::snprintf(hf_col, sizeof(hf_col), "%.4f/%.3f  %.4f/%.3f", r.geist_hf.mean_abs,
                    r.geist_hf.max_abs, r.llama_hf_mean, r.llama_hf_max);
    }
    std::printf("%-36s %-44s %.4f/%.3f  %.4f/%.3f  %-29s %.4f/%.3f (%d)\n", r.file.c_str(),
                r.types.c_str(), r.geist_f32.mean_abs, r.geist_f32.max_abs, r.llama_f32_mean,
                r.llama_f32_max, hf_col, r.geist_same.mean_abs, r.geist_same.max_abs,
                r.geist_same.argmax_equal);
  }
}

}  // namespace
}  // namespace geist

namespace geist {
namespace {

// geist quantize's codes against llama-quantize's: every tensor of the stories-qwen35 files in a
// type whose quantizer follows ggml's reference one is quantized again from the f32 source, row by
// row, and must come out byte for byte as llama-quantize wrote it.
TEST(QuantFixtures, QuantizerWritesLlamaQuantizesBytes) {
  GEIST_REQUIRE_FIXTURES();
  const std::string dir = test::fixture_path("quant/");
  std::unique_ptr<GgufFile> src;
  Status st = GgufFile::open(test::fixture_path("models/stories-qwen35-f32.gguf"), &src);
  ASSERT_TRUE(st.is_ok()) << st.message();
  const GgmlType matched[] = {GgmlType::Q4_0,   GgmlType::Q4_1,  GgmlType::Q5_0, GgmlType::Q5_1,
                              GgmlType::Q8_0,   GgmlType::Q2_K,  GgmlType::Q3_K, GgmlType::Q5_K,
                              GgmlType::IQ4_NL, GgmlType::IQ4_XS};
  std::map<std::string, std::pair<size_t, size_t>> per_type;  // type -> (equal rows, rows)
  for (const char* name :
       {"Q4_K_M", "Q5_K_M", "Q3_K_M", "Q2_K", "IQ4_XS", "IQ4_NL", "Q4_0", "Q4_1", "Q5_0", "Q5_1"}) {
    const std::string path = dir + "stories-qwen35-" + name + ".gguf";
    SCOPED_TRACE(path);
    std::unique_ptr<GgufFile> q;
    st = GgufFile::open(path, &q);
    ASSERT_TRUE(st.is_ok()) << st.message();
    for (const GgufTensorInfo& t : q->tensors()) {
      if (std::find(std::begin(matched), std::end(matched), t.type) == std::end(matched)) continue;
      const GgufTensorInfo* f = src->find_tensor(t.name);
      ASSERT_NE(f, nullptr) << t.name;
      ASSERT_EQ(f->type, GgmlType::F32);
      const int64_t ne0 = t.ne[0], rows = t.n_elements() / ne0;
      const size_t rb = ggml_row_size(t.type, ne0);
      std::vector<uint8_t> mine(rb);
      auto& [equal, total] = per_type[ggml_type_name(t.type)];
      for (int64_t r = 0; r < rows; ++r) {
        quantize_row(t.type, reinterpret_cast<const float*>(f->data) + r * ne0, mine.data(), ne0);
        equal += std::memcmp(mine.data(), t.data + static_cast<size_t>(r) * rb, rb) == 0 ? 1 : 0;
        ++total;
      }
    }
  }
  std::printf("\nrows byte-identical to llama-quantize's, per type:\n");
  for (const auto& [type, c] : per_type) {
    std::printf("  %-7s %zu / %zu\n", type.c_str(), c.first, c.second);
    EXPECT_EQ(c.first, c.second) << type;
  }
}

}  // namespace
}  // namespace geist
