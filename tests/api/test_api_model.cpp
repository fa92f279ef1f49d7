// C API: library functions, model load errors, tokenizer entry points, describe.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/api_util.h"
#include "geist/geist.h"
#include "geist/geist_util.h"
#include "support/fixtures.h"

namespace geist::test {
namespace {

TEST(ApiBasics, StatusStringsNameEveryCode) {
  const std::pair<geist_status, const char*> codes[] = {
      {GEIST_OK, "GEIST_OK"},
      {GEIST_E_OOM, "GEIST_E_OOM"},
      {GEIST_E_INVALID_ARG, "GEIST_E_INVALID_ARG"},
      {GEIST_E_INTERNAL, "GEIST_E_INTERNAL"},
      {GEIST_E_FILE_NOT_FOUND, "GEIST_E_FILE_NOT_FOUND"},
      {GEIST_E_IO, "GEIST_E_IO"},
      {GEIST_E_FORMAT, "GEIST_E_FORMAT"},
      {GEIST_E_UNSUPPORTED, "GEIST_E_UNSUPPORTED"},
      {GEIST_E_NOT_FOUND, "GEIST_E_NOT_FOUND"},
      {GEIST_E_BACKEND, "GEIST_E_BACKEND"},
      {GEIST_E_INVALID_STATE, "GEIST_E_INVALID_STATE"},
      {GEIST_E_TOO_MANY_TOKENS, "GEIST_E_TOO_MANY_TOKENS"},
      {GEIST_E_CANCELLED, "GEIST_E_CANCELLED"},
  };
  for (const auto& [code, name] : codes) {
    const std::string s = geist_status_string(code);
    EXPECT_EQ(s.rfind(std::string(name) + ":", 0), 0u) << s;
  }
  // 15 is inside the enum's C++ value range (0..15) but names no code.
  EXPECT_EQ(
      std::string(geist_status_string(static_cast<geist_status>(15))).rfind("GEIST_E_UNKNOWN:", 0),
      0u);
}

// The version declared in the top-level CMakeLists.txt's project() call.
TEST(ApiBasics, VersionMatchesTheProject) {
  std::ifstream in(std::string(GEIST_SOURCE_DIR) + "/CMakeLists.txt");
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const std::string key = "project(geist VERSION ";
  const size_t at = s.find(key);
  ASSERT_NE(at, std::string::npos) << "no project() call with a VERSION";
  const size_t begin = at + key.size();
  const size_t end = s.find_first_not_of("0123456789.", begin);
  ASSERT_GT(end, begin);
  EXPECT_EQ(std::string(geist_version()), s.substr(begin, end - begin));
}

TEST(ApiBasics, NullHandlesAreHarmless) {
  geist_model_free(nullptr);
  geist_session_destroy(nullptr);
  EXPECT_STREQ(geist_model_last_error(nullptr), "");
  EXPECT_STREQ(geist_session_last_error(nullptr), "");
  EXPECT_EQ(geist_model_n_vocab(nullptr), 0);
  EXPECT_EQ(geist_model_token_bos(nullptr), -1);
  EXPECT_EQ(geist_session_position(nullptr), 0);
  geist_token t;
  EXPECT_EQ(geist_session_decode(nullptr, &t), GEIST_E_INVALID_ARG);
  size_t n;
  EXPECT_EQ(geist_tokenize(nullptr, "a", 1, 0, 0, nullptr, 0, &n), GEIST_E_INVALID_ARG);
  geist_session* s = reinterpret_cast<geist_session*>(0x1);
  EXPECT_EQ(geist_session_create(nullptr, nullptr, &s), GEIST_E_INVALID_ARG);
  EXPECT_EQ(s, nullptr);
}

TEST(ModelHandle, MissingFileIsFileNotFound) {
  geist_model* m = reinterpret_cast<geist_model*>(0x1);
  char err[256] = "x";
  EXPECT_EQ(geist_model_load("/nonexistent/dir/model.gguf", nullptr, &m, err, sizeof err),
            GEIST_E_FILE_NOT_FOUND);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(err).find("/nonexistent/dir/model.gguf"), std::string::npos) << err;
}

TEST(ModelHandle, GarbageFileIsFormatError) {
  const std::string path = test::temp_path("garbage.gguf");
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  for (int i = 0; i < 4096; ++i) std::fputc((i * 7919 + 13) & 0xff, f);
  std::fclose(f);
  geist_model* m = nullptr;
  char err[256] = "";
  EXPECT_EQ(geist_model_load(path.c_str(), nullptr, &m, err, sizeof err), GEIST_E_FORMAT);
  EXPECT_EQ(m, nullptr);
  EXPECT_GT(std::strlen(err), 0u);
  // A short error buffer gets a truncated, NUL-terminated message.
  char small[8];
  std::memset(small, 'z', sizeof small);
  EXPECT_EQ(geist_model_load(path.c_str(), nullptr, &m, small, sizeof small), GEIST_E_FORMAT);
  EXPECT_EQ(std::strlen(small), sizeof small - 1);
  std::remove(path.c_str());
}

TEST(ModelHandle, LoadArgumentErrors) {
  char err[256] = "";
  EXPECT_EQ(geist_model_load(nullptr, nullptr, nullptr, err, sizeof err), GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(err).find("out_model"), std::string::npos) << err;
  geist_model* m = nullptr;
  EXPECT_EQ(geist_model_load(nullptr, nullptr, &m, err, sizeof err), GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(err).find("path"), std::string::npos) << err;
  geist_model_params p;
  geist_model_params_default(&p);
  p.struct_size = 3;
  EXPECT_EQ(geist_model_load("x.gguf", &p, &m, err, sizeof err), GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(err).find("struct_size"), std::string::npos) << err;
}

// A vocab-only load (llama.cpp's vocab_only): a file without tensors of an architecture geist
// cannot run gives a working tokenizer; calls that need the weights are INVALID_STATE.
TEST(ModelHandle, VocabOnlyLoad) {
  GEIST_REQUIRE_FIXTURES();
  const std::string path = fixture_path("tokenizer/ggml-vocab-bert-bge.gguf");
  geist_model* m = nullptr;
  char err[512] = "";
  // Without vocab_only the architecture is refused by name.
  EXPECT_EQ(geist_model_load(path.c_str(), nullptr, &m, err, sizeof err), GEIST_E_UNSUPPORTED);
  EXPECT_NE(std::string(err).find("'bert'"), std::string::npos) << err;
  geist_model_params p;
  geist_model_params_default(&p);
  p.vocab_only = 1;
  ASSERT_EQ(geist_model_load(path.c_str(), &p, &m, err, sizeof err), GEIST_OK) << err;
  EXPECT_GT(geist_model_n_vocab(m), 30000);
  // llama.cpp's vector for "Hello world" (without [CLS]/[SEP]).
  const std::string text = "Hello world";
  geist_token ids[16];
  size_t n = 0;
  ASSERT_EQ(geist_tokenize(m, text.data(), text.size(), 0, 0, ids, 16, &n), GEIST_OK);
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(ids[0], 7592);
  EXPECT_EQ(ids[1], 2088);
  geist_session* s = nullptr;
  EXPECT_EQ(geist_session_create(m, nullptr, &s), GEIST_E_INVALID_STATE);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(geist_model_last_error(m)).find("vocab-only"), std::string::npos)
      << geist_model_last_error(m);
  double up = 0, down = 0;
  EXPECT_EQ(geist_model_time_copies(m, 64, &up, &down), GEIST_E_INVALID_STATE);
  size_t dn = 0;
  std::string d(4096, '\0');
  ASSERT_EQ(geist_model_describe(m, d.data(), d.size(), &dn), GEIST_OK);
  d.resize(dn);
  EXPECT_NE(d.find("architecture: bert"), std::string::npos) << d;
  EXPECT_NE(d.find("vocab only"), std::string::npos) << d;
  geist_model_free(m);

  // A 0.2 caller's struct (without vocab_only) still loads with weights.
  p.struct_size = static_cast<uint32_t>(offsetof(geist_model_params, vocab_only));
  m = nullptr;
  EXPECT_EQ(geist_model_load(path.c_str(), &p, &m, err, sizeof err), GEIST_E_UNSUPPORTED);
}

struct LoadLog {
  std::vector<float> progress;
  int n_logs = 0;
  int cancel_at_call = -1;
};

int on_progress(void* user, float f) {
  auto* l = static_cast<LoadLog*>(user);
  l->progress.push_back(f);
  return static_cast<int>(l->progress.size()) - 1 == l->cancel_at_call ? 1 : 0;
}

void on_log(void* user, geist_log_level, const char* msg) {
  ASSERT_NE(msg, nullptr);
  ++static_cast<LoadLog*>(user)->n_logs;
}

TEST(ModelHandle, ProgressAndLogCallbacks) {
  GEIST_REQUIRE_FIXTURES();
  LoadLog log;
  geist_model_params p;
  geist_model_params_default(&p);
  p.progress_fn = on_progress;
  p.progress_user = &log;
  p.log_fn = on_log;
  p.log_user = &log;
  ModelHandle m;
  ASSERT_EQ(geist_model_load(stories260k_path().c_str(), &p, &m.m, nullptr, 0), GEIST_OK);
  ASSERT_GE(log.progress.size(), 2u);
  EXPECT_EQ(log.progress.front(), 0.0f);
  EXPECT_EQ(log.progress.back(), 1.0f);
  for (size_t i = 1; i < log.progress.size(); ++i) {
    EXPECT_GE(log.progress[i], log.progress[i - 1]);
  }
  EXPECT_GT(log.n_logs, 0);

  LoadLog cancel;
  cancel.cancel_at_call = 1;
  p.progress_user = &cancel;
  p.log_user = &cancel;
  geist_model* m2 = nullptr;
  char err[256] = "";
  EXPECT_EQ(geist_model_load(stories260k_path().c_str(), &p, &m2, err, sizeof err),
            GEIST_E_INVALID_STATE);
  EXPECT_EQ(m2, nullptr);
  EXPECT_NE(std::string(err).find("cancel"), std::string::npos) << err;
}

class ApiStories : public testing::Test {
 protected:
  void SetUp() override {
    GEIST_REQUIRE_FIXTURES();
    char err[512] = "";
    ASSERT_EQ(geist_model_load(stories260k_path().c_str(), nullptr, &model_.m, err, sizeof err),
              GEIST_OK)
        << err;
    ref_ = load_prompt1();
  }
  ModelHandle model_;
  Prompt1 ref_;
};

TEST_F(ApiStories, Metadata) {
  EXPECT_EQ(geist_model_n_vocab(model_.m), 512);
  EXPECT_GT(geist_model_n_ctx_train(model_.m), 0);
  EXPECT_EQ(geist_model_token_bos(model_.m), ref_.prompt_tokens[0]);
  const geist_token eos = geist_model_token_eos(model_.m);
  ASSERT_GE(eos, 0);
  EXPECT_EQ(geist_model_token_is_eog(model_.m, eos), 1);
  EXPECT_EQ(geist_model_token_is_eog(model_.m, ref_.greedy_tokens[0]), 0);
  EXPECT_EQ(geist_model_token_is_eog(model_.m, 100000), 0);
}

TEST_F(ApiStories, TokenizeMatchesLlamaCppAndBufferProtocol) {
  const std::string& text = ref_.prompt;
  size_t needed = 0;
  EXPECT_EQ(geist_tokenize(model_.m, text.data(), text.size(), 1, 0, nullptr, 0, &needed),
            GEIST_E_INVALID_ARG);
  EXPECT_EQ(needed, ref_.prompt_tokens.size());
  EXPECT_NE(std::string(geist_model_last_error(model_.m)).find("needed"), std::string::npos);

  std::vector<geist_token> ids(needed - 1);
  size_t n = 0;
  EXPECT_EQ(geist_tokenize(model_.m, text.data(), text.size(), 1, 0, ids.data(), ids.size(), &n),
            GEIST_E_INVALID_ARG);
  EXPECT_EQ(n, needed);

  ids.resize(needed);
  ASSERT_EQ(geist_tokenize(model_.m, text.data(), text.size(), 1, 0, ids.data(), ids.size(), &n),
            GEIST_OK);
  EXPECT_EQ(ids, ref_.prompt_tokens);

  EXPECT_EQ(
      geist_tokenize(model_.m, text.data(), text.size(), 1, 0, ids.data(), ids.size(), nullptr),
      GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(geist_model_last_error(model_.m)).find("n_out"), std::string::npos);
}

TEST_F(ApiStories, DetokenizeRoundTrip) {
  size_t needed = 0;
  const auto& toks = ref_.prompt_tokens;
  EXPECT_EQ(geist_detokenize(model_.m, toks.data(), toks.size(), nullptr, 0, &needed),
            GEIST_E_INVALID_ARG);
  ASSERT_EQ(needed, ref_.prompt.size());
  std::string out(needed, '\0');
  size_t n = 0;
  ASSERT_EQ(geist_detokenize(model_.m, toks.data(), toks.size(), out.data(), out.size(), &n),
            GEIST_OK);
  EXPECT_EQ(n, needed);
  EXPECT_EQ(out, ref_.prompt);

  const geist_token bad[] = {5, 512};
  EXPECT_EQ(geist_detokenize(model_.m, bad, 2, out.data(), out.size(), &n), GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(geist_model_last_error(model_.m)).find("512"), std::string::npos);
}

TEST_F(ApiStories, TokenToPiece) {
  // The pieces of the greedy continuation concatenate to its detokenized text.
  std::string pieces;
  for (geist_token t : ref_.greedy_tokens) {
    char buf[64];
    size_t n = 0;
    ASSERT_EQ(geist_token_to_piece(model_.m, t, buf, sizeof buf, &n), GEIST_OK);
    pieces.append(buf, n);
  }
  std::vector<geist_token> all = ref_.prompt_tokens;
  all.insert(all.end(), ref_.greedy_tokens.begin(), ref_.greedy_tokens.end());
  size_t n = 0;
  (void)geist_detokenize(model_.m, all.data(), all.size(), nullptr, 0, &n);
  std::string text(n, '\0');
  ASSERT_EQ(geist_detokenize(model_.m, all.data(), all.size(), text.data(), n, &n), GEIST_OK);
  EXPECT_EQ(text, ref_.prompt + pieces);
  size_t need = 0;
  EXPECT_EQ(geist_token_to_piece(model_.m, -1, nullptr, 0, &need), GEIST_E_INVALID_ARG);
}

TEST_F(ApiStories, Describe) {
  size_t n = 0;
  EXPECT_EQ(geist_model_describe(model_.m, nullptr, 0, &n), GEIST_E_INVALID_ARG);
  ASSERT_GT(n, 0u);
  std::string d(n, '\0');
  ASSERT_EQ(geist_model_describe(model_.m, d.data(), d.size(), &n), GEIST_OK);
  // Facts from the fixture README: Llama-2 architecture, 5 layers, n_embd 64, 8 heads,
  // 4 KV heads, n_ff 172, all tensors F32, SentencePiece ("llama") vocab of 512.
  for (const char* want :
       {"architecture: llama", "n_layer: 5", "n_embd: 64", "n_head: 8", "n_head_kv: 4", "n_ff: 172",
        "n_vocab: 512", "tokenizer: model llama", "512 tokens"}) {
    EXPECT_NE(d.find(want), std::string::npos) << want << "\n" << d;
  }
  EXPECT_NE(d.find("f32="), std::string::npos) << d;
  EXPECT_EQ(d.find("f16="), std::string::npos) << d;
}

}  // namespace
}  // namespace geist::test
