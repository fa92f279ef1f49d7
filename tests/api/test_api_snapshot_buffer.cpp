// geist_session_snapshot writes every byte of the image: the same state snapshotted into a
// zeroed buffer and into buffers full of other bytes gives memcmp-equal images. The server's
// prefix cache takes its checkpoints into buffers that held evicted images
// (cache/image_buffer.h BufferPool), so a byte the snapshot skipped would carry an old image's
// bytes into a new one. Both families (Qwen3.5's recurrent state, Llama's KV only), every KV
// mode, a state with pending logits and one with an owed forward after decode steps.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "api/api_util.h"
#include "geist/geist.h"
#include "geist/geist_snapshot.h"

namespace geist::test {
namespace {

std::vector<uint8_t> snapshot_into(geist_session* s, uint8_t fill, size_t slack) {
  size_t n = 0;
  EXPECT_EQ(geist_session_snapshot_size(s, &n), GEIST_OK) << geist_session_last_error(s);
  std::vector<uint8_t> img(n + slack, fill);
  size_t written = 0;
  EXPECT_EQ(geist_session_snapshot(s, img.data(), img.size(), &written), GEIST_OK)
      << geist_session_last_error(s);
  EXPECT_EQ(written, n);
  img.resize(written);
  return img;
}

void check_model(const std::string& file) {
  ModelHandle model;
  char err[512] = "";
  const std::string path = fixture_path("models/" + file);
  ASSERT_EQ(geist_model_load(path.c_str(), nullptr, &model.m, err, sizeof err), GEIST_OK) << err;
  const int32_t nv = geist_model_n_vocab(model.m);
  std::vector<geist_token> toks(150);
  for (size_t i = 0; i < toks.size(); ++i)
    toks[i] = static_cast<geist_token>(1 + (i * 37) % (nv - 1));
  for (int32_t kv = GEIST_KV_F32; kv <= GEIST_KV_KIVI2; ++kv) {
    geist_session_params p;
    geist_session_params_default(&p);
    p.kv_mode = kv;
    p.max_seq_len = 256;
    p.n_threads = 2;
    SessionHandle s;
    ASSERT_EQ(geist_session_create(model.m, &p, &s.s), GEIST_OK) << geist_model_last_error(model.m);
    ASSERT_EQ(geist_session_prefill(s.s, toks.data(), toks.size()), GEIST_OK);
    for (int step = 0; step < 2; ++step) {  // 0: pending logits; 1: an owed forward
      const std::vector<uint8_t> zeroed = snapshot_into(s.s, 0x00, 0);
      ASSERT_GT(zeroed.size(), 0u);
      for (uint8_t fill : {uint8_t{0xA5}, uint8_t{0xFF}}) {
        const std::vector<uint8_t> dirty = snapshot_into(s.s, fill, 4096);
        ASSERT_EQ(dirty.size(), zeroed.size());
        EXPECT_EQ(std::memcmp(dirty.data(), zeroed.data(), zeroed.size()), 0)
            << file << " kv " << kv << " step " << step << " fill " << int(fill);
      }
      for (int i = 0; i < 3; ++i) {
        geist_token t = 0;
        ASSERT_EQ(geist_session_decode(s.s, &t), GEIST_OK) << geist_session_last_error(s.s);
      }
    }
  }
}

TEST(ApiSnapshotBuffer, QwenImageOverwritesEveryByteOfItsBuffer) {
  GEIST_REQUIRE_FIXTURES();
  check_model("tiny-qwen35-f32.gguf");
}

TEST(ApiSnapshotBuffer, LlamaImageOverwritesEveryByteOfItsBuffer) {
  GEIST_REQUIRE_FIXTURES();
  check_model("stories260K.gguf");
}

}  // namespace
}  // namespace geist::test
