// A split GGUF set (written by the formats layer in llama-gguf-split's layout) loaded through
// the C API is the same model as its one-file original: same logits, and snapshot images of
// one restore into sessions of the other (the model id ignores the layout).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "geist/geist.h"
#include "geist/geist_snapshot.h"
#include "support/fixtures.h"

namespace geist::test {
namespace {

TEST(ApiSplit, SplitSetIsTheSameModel) {
  GEIST_REQUIRE_FIXTURES();
  const std::string whole_path = fixture_path("models/stories260K.gguf");
  std::unique_ptr<GgufFile> whole;
  ASSERT_TRUE(GgufFile::open(whole_path, &whole).is_ok());
  const std::string dir = temp_path("api_split");
  std::filesystem::create_directories(dir);
  std::vector<std::string> paths;
  ASSERT_TRUE(gguf_write_split(*whole, dir + "/stories", 7, &paths).is_ok());
  ASSERT_EQ(paths.size(), 7u);  // 48 tensors

  geist_model* a = nullptr;
  geist_model* b = nullptr;
  char err[512] = "";
  ASSERT_EQ(geist_model_load(whole_path.c_str(), nullptr, &a, err, sizeof err), GEIST_OK) << err;
  ASSERT_EQ(geist_model_load(paths[0].c_str(), nullptr, &b, err, sizeof err), GEIST_OK) << err;
  geist_session* sa = nullptr;
  geist_session* sb = nullptr;
  ASSERT_EQ(geist_session_create(a, nullptr, &sa), GEIST_OK);
  ASSERT_EQ(geist_session_create(b, nullptr, &sb), GEIST_OK);
  const geist_token tokens[] = {1, 403, 407, 261, 378, 275};
  ASSERT_EQ(geist_session_prefill(sa, tokens, 6), GEIST_OK);
  ASSERT_EQ(geist_session_prefill(sb, tokens, 6), GEIST_OK);
  size_t size = 0;
  ASSERT_EQ(geist_session_snapshot_size(sb, &size), GEIST_OK);
  std::vector<uint8_t> image(size);
  ASSERT_EQ(geist_session_snapshot(sb, image.data(), image.size(), &size), GEIST_OK);
  geist_session_destroy(sb);
  geist_session* sc = nullptr;
  ASSERT_EQ(geist_session_create(a, nullptr, &sc), GEIST_OK);
  EXPECT_EQ(geist_session_restore(sc, image.data(), size), GEIST_OK) << geist_model_last_error(a);
  // Both continue identically from the same state (default sampler: greedy or seeded).
  auto continuation = [](geist_session* s) {
    std::vector<geist_token> out;
    for (int i = 0; i < 8; ++i) {
      geist_token t = -1;
      EXPECT_EQ(geist_session_decode(s, &t), GEIST_OK);
      out.push_back(t);
    }
    return out;
  };
  EXPECT_EQ(continuation(sa), continuation(sc));
  geist_session_destroy(sa);
  geist_session_destroy(sc);
  geist_model_free(a);
  geist_model_free(b);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace geist::test
