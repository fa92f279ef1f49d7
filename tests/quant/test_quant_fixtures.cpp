// Evidence for the weight types against llama.cpp's own quantizer (shared/fixtures/quant, see its
// README): every file llama-quantize wrote there loads, and on the same 200 tokens (one batch,
// F32 KV cache, as the references were made) geist's logits are no further from each reference
// than llama.cpp's logits on the same file: mean |d| <= 1.1x and max |d| <= 2x llama.cpp's
// (manifest.json; quant/quant_fixture_eval.h, which tests/cuda runs on the GPU). The fixtures carry
// no llama.cpp greedy continuations of the quantized files, so greedy agreement is checked where an
// outside reference exists: the teacher-forced argmax of the first 16 positions against llama.cpp's
// logits on the same file (trained model only).
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
#include "quant/quant_fixture_eval.h"
#include "support/fixtures.h"

namespace geist {
namespace {

TEST(QuantFixtures, EveryLlamaQuantizeFileWithinLlamaCppsOwnError) {
  GEIST_REQUIRE_FIXTURES();
  quant_test::check_every_quant_fixture(BackendKind::CPU);
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
