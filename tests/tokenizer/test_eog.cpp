// End-of-generation sets on the fixture vocabularies and on hand-made ones. The expected ids
// were looked up in each file's tokenizer.ggml.tokens / *_token_id metadata with an
// independent Python GGUF reader, not with this code; the rules are llama.cpp's
// (src/llama-vocab.cpp): eos/eot/eom, FIM pad/repo/file-separator, and turn terminators by text.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "formats/gguf.h"
#include "support/fixtures.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_base.h"
#include "tokenizer/vectors.h"
#include "tokenizer/vocab.h"

namespace geist {
namespace {

using test::load_fixture_tokenizer;

struct EogCase {
  const char* file;
  std::vector<int32_t> eog;
};

class FixtureEog : public ::testing::TestWithParam<EogCase> {};

TEST_P(FixtureEog, MatchesLlamaCppRules) {
  GEIST_REQUIRE_FIXTURES();
  const EogCase& c = GetParam();
  std::unique_ptr<Tokenizer> tok = load_fixture_tokenizer(c.file);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->eog_tokens(), c.eog);
  for (int32_t id = 0; id < tok->n_vocab(); ++id) {
    const bool want = std::find(c.eog.begin(), c.eog.end(), id) != c.eog.end();
    ASSERT_EQ(tok->is_eog(id), want) << "id " << id;
  }
}

// qwen2: <|endoftext|> 151643 (eos), <|im_end|> 151645, <|fim_pad|> 151662, <|repo_name|>
// 151663, <|file_sep|> 151664, and "</s>" 128247 (a plain BPE token there, but llama.cpp's
// text list has it for PaddleOCR). starcoder: <|endoftext|> 0 and <fim_pad> 4. bert-bge:
// [PAD] 0 (Kimi-K2's FIM pad text). deepseek-llm: <｜end▁of▁sentence｜> 100001 (eos).
INSTANTIATE_TEST_SUITE_P(
    Vocabs, FixtureEog,
    ::testing::Values(EogCase{"tokenizer/ggml-vocab-qwen2.gguf",
                              {128247, 151643, 151645, 151662, 151663, 151664}},
                      EogCase{"tokenizer/ggml-vocab-llama-spm.gguf", {2}},
                      EogCase{"tokenizer/ggml-vocab-gpt-2.gguf", {50256}},
                      EogCase{"tokenizer/ggml-vocab-gpt-neox.gguf", {0}},
                      EogCase{"tokenizer/ggml-vocab-starcoder.gguf", {0, 4}},
                      EogCase{"tokenizer/ggml-vocab-falcon.gguf", {11}},
                      EogCase{"tokenizer/ggml-vocab-deepseek-llm.gguf", {100001}},
                      EogCase{"tokenizer/ggml-vocab-baichuan.gguf", {2}},
                      EogCase{"tokenizer/ggml-vocab-bert-bge.gguf", {0}},
                      EogCase{"models/stories260K.gguf", {2}},
                      EogCase{"models/tiny-qwen35-f32.gguf", {2}}),
    [](const ::testing::TestParamInfo<EogCase>& info) {
      std::string name = info.param.file;
      name = name.substr(name.find('/') + 1);
      name = name.substr(0, name.find(".gguf"));
      for (char& ch : name) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

TEST(FixtureEogIds, Qwen2FoundByText) {
  GEIST_REQUIRE_FIXTURES();
  std::unique_ptr<Tokenizer> tok = load_fixture_tokenizer("tokenizer/ggml-vocab-qwen2.gguf");
  ASSERT_TRUE(tok);
  const Vocab& v = static_cast<const TokenizerBase&>(*tok).vocab();
  EXPECT_EQ(v.eos, 151643);
  EXPECT_EQ(v.eot, 151645);  // <|im_end|> is preferred over <|endoftext|>
  EXPECT_EQ(v.eom, -1);
  EXPECT_EQ(v.fim_pad, 151662);
  EXPECT_EQ(v.fim_rep, 151663);
  EXPECT_EQ(v.fim_sep, 151664);
  // Found by text, so control: never printed.
  std::string piece;
  ASSERT_TRUE(tok->token_to_piece(151645, &piece).is_ok());
  EXPECT_EQ(piece, "");
}

// A hand-made SentencePiece vocabulary with the given extra tokens (NORMAL type) after
// <unk> <s> </s>, plus optional integer keys.
Vocab make_vocab(const std::vector<std::string>& extra,
                 const std::vector<std::pair<std::string, int32_t>>& ids = {}) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  std::vector<int32_t> types(tokens.size(), 1);
  types[0] = 2;
  types[1] = types[2] = 3;
  GgufWriter w;
  w.add_str("tokenizer.ggml.model", "llama");
  w.add_arr_str("tokenizer.ggml.tokens", tokens);
  w.add_arr_f32("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f));
  w.add_arr_i32("tokenizer.ggml.token_type", types);
  for (const auto& [k, v] : ids) w.add_i32("tokenizer.ggml." + k, v);
  std::vector<uint8_t> bytes;
  Vocab v;
  EXPECT_TRUE(w.to_bytes(&bytes).is_ok());
  std::unique_ptr<GgufFile> file;
  EXPECT_TRUE(GgufFile::open_memory(bytes.data(), bytes.size(), &file).is_ok());
  const Status st = Vocab::load(*file, &v);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return v;
}

TEST(Eog, TurnTerminatorsAndFim) {
  // 3 <|eot_id|>, 4 <|eom_id|>, 5 hello, 6 <end_of_turn>, 7 <|fim_pad|>, 8 <|file_sep|>
  Vocab v = make_vocab(
      {"<|eot_id|>", "<|eom_id|>", "hello", "<end_of_turn>", "<|fim_pad|>", "<|file_sep|>"});
  EXPECT_EQ(v.eog_ids, (std::vector<int32_t>{2, 3, 4, 6, 7, 8}));
  EXPECT_EQ(v.eot, 3);
  EXPECT_EQ(v.eom, 4);
  EXPECT_EQ(v.types[3], TokenAttr::CONTROL);
  EXPECT_EQ(v.types[7], TokenAttr::CONTROL);
  EXPECT_EQ(v.types[5], TokenAttr::NORMAL);
}

TEST(Eog, MetadataIdsJoin) {
  // eot/eom/fim ids from the file are kept even when their text is unknown.
  Vocab v = make_vocab(
      {"a", "b", "c", "d"},
      {{"eot_token_id", 3}, {"eom_token_id", 4}, {"fim_rep_token_id", 5}, {"fim_sep_token_id", 6}});
  EXPECT_EQ(v.eog_ids, (std::vector<int32_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(v.types[3], TokenAttr::NORMAL);  // named by the file: its type stays
}

TEST(Eog, HarmonyEndIsNotEog) {
  // gpt-oss: <|end|> ends a message, not the reply, when <|return|> and <|call|> exist.
  Vocab v = make_vocab({"<|end|>", "<|return|>", "<|call|>"});
  EXPECT_EQ(v.eog_ids, (std::vector<int32_t>{2, 4, 5}));
  EXPECT_EQ(v.types[3], TokenAttr::USER_DEFINED);
  Vocab phi = make_vocab({"<|end|>"});  // Phi-3: <|end|> alone ends the turn
  EXPECT_EQ(phi.eog_ids, (std::vector<int32_t>{2, 3}));
}

TEST(Eog, Gemma4KeepsSlashS) {
  Vocab v = make_vocab({"<|tool_response>", "<turn|>"});
  EXPECT_EQ(v.eog_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(v.types[2], TokenAttr::NORMAL);
}

}  // namespace
}  // namespace geist
