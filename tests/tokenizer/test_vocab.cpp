// Vocab::load and Tokenizer::load on real files and on malformed metadata.
#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "support/fixtures.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_base.h"
#include "tokenizer/vocab.h"

namespace geist {
namespace {

// A valid three-token SentencePiece vocabulary; each test breaks one thing.
struct Meta {
  std::string model = "llama";
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  std::vector<std::pair<std::string, uint32_t>> u32s;
  std::vector<std::pair<std::string, int32_t>> i32s;
  bool with_model = true, with_tokens = true;
};

Status load_meta(const Meta& m, Vocab* vocab, std::unique_ptr<Tokenizer>* tok = nullptr) {
  GgufWriter w;
  if (m.with_model) w.add_str("tokenizer.ggml.model", m.model);
  if (m.with_tokens) w.add_arr_str("tokenizer.ggml.tokens", m.tokens);
  w.add_arr_f32("tokenizer.ggml.scores", m.scores);
  w.add_arr_i32("tokenizer.ggml.token_type", m.types);
  for (const auto& [k, v] : m.u32s) w.add_u32(k, v);
  for (const auto& [k, v] : m.i32s) w.add_i32(k, v);
  std::vector<uint8_t> bytes;
  GEIST_RETURN_IF_ERROR(w.to_bytes(&bytes));
  std::unique_ptr<GgufFile> file;
  GEIST_RETURN_IF_ERROR(GgufFile::open_memory(bytes.data(), bytes.size(), &file));
  if (tok) return Tokenizer::load(*file, Logger{}, tok);
  return Vocab::load(*file, vocab);
}

TEST(Vocab, MinimalDefaults) {
  Meta m;
  Vocab v;
  ASSERT_TRUE(load_meta(m, &v).is_ok());
  EXPECT_EQ(v.n_vocab(), 3);
  // llama.cpp's defaults for a SentencePiece vocabulary without the optional keys.
  EXPECT_EQ(v.bos, 1);
  EXPECT_EQ(v.eos, 2);
  EXPECT_EQ(v.unk, 0);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_TRUE(v.add_space_prefix);
  EXPECT_EQ(v.types[1], TokenAttr::CONTROL);
  EXPECT_EQ(v.tokens.find("</s>"), 2);
  EXPECT_EQ(v.eog_ids, std::vector<int32_t>{2});
}

TEST(Vocab, MismatchedArrayLengths) {
  Vocab v;
  Meta a;
  a.scores = {0, 0};
  EXPECT_EQ(load_meta(a, &v).code(), GEIST_E_FORMAT);
  Meta b;
  b.types = {2, 3, 3, 1};
  EXPECT_EQ(load_meta(b, &v).code(), GEIST_E_FORMAT);
}

TEST(Vocab, MissingOrBadKeys) {
  Vocab v;
  Meta no_model;
  no_model.with_model = false;
  EXPECT_EQ(load_meta(no_model, &v).code(), GEIST_E_FORMAT);
  Meta no_tokens;
  no_tokens.with_tokens = false;
  EXPECT_EQ(load_meta(no_tokens, &v).code(), GEIST_E_FORMAT);
  Meta bad_type;
  bad_type.types = {2, 3, 42};
  EXPECT_EQ(load_meta(bad_type, &v).code(), GEIST_E_FORMAT);
  Meta dup;
  dup.tokens = {"<unk>", "<s>", "<s>"};
  EXPECT_EQ(load_meta(dup, &v).code(), GEIST_E_FORMAT);
  Meta no_merges;  // a gpt2 vocabulary cannot work without its merges
  no_merges.model = "gpt2";
  EXPECT_EQ(load_meta(no_merges, &v).code(), GEIST_E_FORMAT);
}

TEST(Vocab, DuplicateAndEmptyTokenTexts) {
  // A repeated text is refused (its id would be ambiguous), naming the later index.
  Vocab v;
  Meta dup;
  dup.tokens = {"<unk>", "x", "<s>", "x"};
  dup.scores = {0, 0, 0, 0};
  dup.types = {2, 1, 3, 1};
  const Status st = load_meta(dup, &v);
  EXPECT_EQ(st.code(), GEIST_E_FORMAT);
  EXPECT_NE(st.message().find("token 3 duplicates 'x'"), std::string::npos) << st.message();
  // An empty text is renamed as llama.cpp renames it, and found under that name.
  Meta empty;
  empty.tokens = {"<unk>", "<s>", "</s>", ""};
  empty.scores = {0, 0, 0, 0};
  empty.types = {2, 3, 3, 1};
  ASSERT_TRUE(load_meta(empty, &v).is_ok());
  EXPECT_EQ(v.tokens[3], "[EMPTY_3]");
  EXPECT_EQ(v.tokens.find("[EMPTY_3]"), 3);
  EXPECT_EQ(v.tokens.find(""), -1);
  // ... so that it can collide with a token that has that name.
  empty.tokens = {"<unk>", "[EMPTY_3]", "</s>", ""};
  EXPECT_EQ(load_meta(empty, &v).code(), GEIST_E_FORMAT);
}

TEST(Vocab, SpecialIdsOutOfRange) {
  Vocab v;
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"}) {
    Meta m;
    m.u32s = {{key, 3}};
    EXPECT_EQ(load_meta(m, &v).code(), GEIST_E_FORMAT) << key;
    Meta n;
    n.i32s = {{key, -7}};
    EXPECT_EQ(load_meta(n, &v).code(), GEIST_E_FORMAT) << key;
  }
  // -1, also written as uint32 0xFFFFFFFF, means "none" (stories260K.gguf has it).
  Meta none;
  none.u32s = {{"tokenizer.ggml.seperator_token_id", 0xFFFFFFFFu}};
  none.i32s = {{"tokenizer.ggml.padding_token_id", -1}};
  ASSERT_TRUE(load_meta(none, &v).is_ok());
  EXPECT_EQ(v.sep, -1);
  EXPECT_EQ(v.pad, -1);
  // A BOS that must be added but does not exist is inconsistent.
  Meta no_bos;
  no_bos.u32s = {{"tokenizer.ggml.bos_token_id", 0xFFFFFFFFu}};
  EXPECT_EQ(load_meta(no_bos, &v).code(), GEIST_E_FORMAT);
}

TEST(Vocab, UnsupportedModel) {
  Meta m;
  m.model = "t5";
  Vocab v;
  std::unique_ptr<Tokenizer> tok;
  EXPECT_EQ(load_meta(m, &v, &tok).code(), GEIST_E_UNSUPPORTED);
  EXPECT_EQ(tok, nullptr);
}

TEST(Vocab, Fixtures) {
  GEIST_REQUIRE_FIXTURES();
  struct Case {
    const char* path;
    const char* model;
    int32_t n_vocab, bos, eos, unk, sep;
    bool add_bos, add_sep;
  };
  // Values read from the files' metadata (and llama.cpp's defaults where a key is absent).
  const Case cases[] = {
      {"models/stories260K.gguf", "llama", 512, 1, 2, 0, -1, true, false},
      {"tokenizer/ggml-vocab-llama-spm.gguf", "llama", 32000, 1, 2, 0, -1, true, false},
      {"tokenizer/ggml-vocab-baichuan.gguf", "llama", 64000, 1, 2, 0, -1, true, false},
      {"tokenizer/ggml-vocab-bert-bge.gguf", "bert", 30522, 101, -1, 100, 102, true, true},
  };
  for (const Case& c : cases) {
    std::unique_ptr<GgufFile> file;
    ASSERT_TRUE(GgufFile::open(test::fixture_path(c.path), &file).is_ok()) << c.path;
    Vocab v;
    const Status st = Vocab::load(*file, &v);
    ASSERT_TRUE(st.is_ok()) << c.path << ": " << st.message();
    EXPECT_EQ(v.model, c.model) << c.path;
    EXPECT_EQ(v.n_vocab(), c.n_vocab) << c.path;
    EXPECT_EQ(v.bos, c.bos) << c.path;
    EXPECT_EQ(v.eos, c.eos) << c.path;
    EXPECT_EQ(v.unk, c.unk) << c.path;
    EXPECT_EQ(v.sep, c.sep) << c.path;
    EXPECT_EQ(v.add_bos, c.add_bos) << c.path;
    EXPECT_EQ(v.add_sep, c.add_sep) << c.path;
    EXPECT_EQ(static_cast<size_t>(v.n_vocab()), v.scores.size());
    EXPECT_EQ(static_cast<size_t>(v.n_vocab()), v.types.size());
  }
}

}  // namespace
}  // namespace geist
