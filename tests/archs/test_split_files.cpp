// Models loaded from split GGUF sets (the llama-gguf-split layout, written here by
// gguf_write_split) compute what the same model in one file computes, bit for bit, and
// against llama.cpp's logits as the one-file tests do.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "archs/arch.h"
#include "base/thread_pool.h"
#include "formats/gguf.h"
#include "support/fixtures.h"

namespace geist {
namespace {

// All logits of `tokens` on `file`'s model, f32 KV, one call.
std::vector<float> all_logits(const GgufFile& file, const std::vector<int32_t>& tokens) {
  std::unique_ptr<ArchModel> model;
  const Status st = load_arch_model(file, BackendKind::CPU, Logger{}, &model);
  EXPECT_TRUE(st.is_ok()) << st.message();
  if (!model) return {};
  std::unique_ptr<ArchState> state;
  EXPECT_TRUE(model->create_state(64, &state).is_ok());
  const int32_t n = static_cast<int32_t>(tokens.size());
  std::vector<float> out(static_cast<size_t>(n) * model->info().n_vocab);
  ThreadPool pool(2);
  EXPECT_TRUE(model->forward(*state, tokens.data(), n, 0, true, out.data(), pool).is_ok());
  return out;
}

void check_split_model(const std::string& fixture, size_t max_tensors, size_t want_shards) {
  GEIST_REQUIRE_FIXTURES();
  std::unique_ptr<GgufFile> whole;
  ASSERT_TRUE(GgufFile::open(test::fixture_path(fixture), &whole).is_ok());
  const std::string dir = test::temp_path("split_model");
  std::filesystem::create_directories(dir);
  std::vector<std::string> paths;
  const Status st = gguf_write_split(*whole, dir + "/model", max_tensors, &paths);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(paths.size(), want_shards);
  std::unique_ptr<GgufFile> set;
  const Status so = GgufFile::open(paths[0], &set);
  ASSERT_TRUE(so.is_ok()) << so.message();
  EXPECT_EQ(set->n_files(), want_shards);
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 275, 300, 5, 11, 499, 2, 77};
  const std::vector<float> a = all_logits(*whole, tokens);
  const std::vector<float> b = all_logits(*set, tokens);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b) << fixture << ": a split model must compute exactly what the file does";
  std::filesystem::remove_all(dir);
}

TEST(SplitFiles, LlamaStories260K) { check_split_model("models/stories260K.gguf", 10, 5); }
TEST(SplitFiles, Qwen35Tiny) { check_split_model("models/tiny-qwen35-q8_0.gguf", 40, 3); }

}  // namespace
}  // namespace geist
