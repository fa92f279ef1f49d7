// SentencePiece ("llama") tokenizer: llama.cpp's vectors, stories260K's reference prompt,
// special tokens, decode, and merge rules on small hand-made vocabularies.
#include <gtest/gtest.h>

#include <algorithm>

#include "formats/gguf.h"
#include "support/fixtures.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_base.h"
#include "tokenizer/vectors.h"

namespace geist {
namespace {

using test::load_fixture_tokenizer;

std::vector<int32_t> enc(const Tokenizer& tok, const std::string& text, bool add_special,
                         bool parse_special) {
  std::vector<int32_t> ids;
  const Status st = tok.encode(text, add_special, parse_special, &ids);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return ids;
}

std::string dec(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string text;
  const Status st = tok.decode(ids.data(), ids.size(), &text);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return text;
}

// Reads the JSON string value of `key` (escapes \" \\ \n \t \/ and \u00XX only, enough for
// the fixture) and the integer array of `arr_key` from a small JSON document.
bool json_string(const std::string& doc, const std::string& key, std::string* out) {
  size_t p = doc.find("\"" + key + "\"");
  if (p == std::string::npos) return false;
  p = doc.find('"', doc.find(':', p) + 1);
  if (p == std::string::npos) return false;
  out->clear();
  for (++p; p < doc.size() && doc[p] != '"'; ++p) {
    if (doc[p] != '\\') {
      out->push_back(doc[p]);
      continue;
    }
    const char e = doc[++p];
    if (e == 'n')
      out->push_back('\n');
    else if (e == 't')
      out->push_back('\t');
    else if (e == 'u') {
      const unsigned cp = std::stoul(doc.substr(p + 1, 4), nullptr, 16);
      if (cp >= 0x80) return false;
      out->push_back(static_cast<char>(cp));
      p += 4;
    } else {
      out->push_back(e);
    }
  }
  return p < doc.size();
}

bool read_int_array(const std::string& doc, const std::string& key, std::vector<int32_t>* out) {
  size_t p = doc.find("\"" + key + "\"");
  if (p == std::string::npos) return false;
  const size_t open = doc.find('[', p), close = doc.find(']', p);
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  out->clear();
  const std::string body = doc.substr(open + 1, close - open - 1);
  size_t i = 0;
  while (i < body.size()) {
    if (isdigit(static_cast<unsigned char>(body[i]))) {
      size_t used = 0;
      out->push_back(static_cast<int32_t>(std::stol(body.substr(i), &used)));
      i += used;
    } else {
      ++i;
    }
  }
  return true;
}

TEST(Spm, LlamaSpmVectors) {
  GEIST_REQUIRE_FIXTURES();
  test::check_vectors("llama-spm");
}

// stories260K's prompt as llama.cpp tokenized it, BOS included (add_special).
TEST(Spm, Stories260KPrompt1) {
  GEIST_REQUIRE_FIXTURES();
  const std::string doc =
      test::read_text_file(test::fixture_path("reference/stories260K/prompt1.json"));
  std::string prompt;
  std::vector<int32_t> expected;
  ASSERT_TRUE(json_string(doc, "prompt", &prompt));
  ASSERT_TRUE(read_int_array(doc, "prompt_tokens", &expected));
  ASSERT_EQ(expected.size(), 32u);
  auto tok = load_fixture_tokenizer("models/stories260K.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(enc(*tok, prompt, /*add_special=*/true, /*parse_special=*/false), expected);
  EXPECT_EQ(enc(*tok, prompt, true, true), expected);
  // llama.cpp's ids decode to the prompt: BOS renders as nothing, and the space that encode
  // put in front of the text is dropped again.
  EXPECT_EQ(dec(*tok, expected), prompt);
}

TEST(Spm, AddSpecialPrependsBos) {
  GEIST_REQUIRE_FIXTURES();
  auto tok = load_fixture_tokenizer("models/stories260K.gguf");
  ASSERT_NE(tok, nullptr);
  ASSERT_EQ(tok->bos(), 1);
  ASSERT_EQ(tok->eos(), 2);
  const std::string text = "Lily saw a cat.";
  std::vector<int32_t> plain = enc(*tok, text, false, false);
  std::vector<int32_t> with = enc(*tok, text, true, false);
  ASSERT_FALSE(plain.empty());
  plain.insert(plain.begin(), 1);
  EXPECT_EQ(with, plain);
  // Empty text: nothing, or BOS alone (as SentencePiece's encode('') does).
  EXPECT_TRUE(enc(*tok, "", false, false).empty());
  EXPECT_EQ(enc(*tok, "", true, false), std::vector<int32_t>{1});
}

TEST(Spm, ParseSpecial) {
  GEIST_REQUIRE_FIXTURES();
  auto tok = load_fixture_tokenizer("models/stories260K.gguf");
  ASSERT_NE(tok, nullptr);
  const std::string text = "The end.</s>Once upon";
  // With parse_special, "</s>" is the EOS token, and the text after it starts afresh (it
  // gets the SentencePiece space prefix again, as after BOS).
  std::vector<int32_t> expected = enc(*tok, "The end.", false, false);
  expected.push_back(2);
  for (int32_t id : enc(*tok, "Once upon", false, false)) expected.push_back(id);
  EXPECT_EQ(enc(*tok, text, false, true), expected);
  // Without it the characters are ordinary text: no EOS, and the text round-trips.
  const std::vector<int32_t> plain = enc(*tok, text, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  EXPECT_EQ(dec(*tok, plain), text);
  // The EOS token is end-of-generation and prints as nothing.
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_FALSE(tok->is_eog(1));
  std::string piece = "x";
  ASSERT_TRUE(tok->token_to_piece(2, &piece).is_ok());
  EXPECT_EQ(piece, "");
}

TEST(Spm, TokenToPiece) {
  GEIST_REQUIRE_FIXTURES();
  auto tok = load_fixture_tokenizer("tokenizer/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  const Vocab& v = dynamic_cast<const TokenizerBase&>(*tok).vocab();
  std::string piece;
  // Byte tokens give the raw byte, including non-UTF-8 ones.
  const int32_t b41 = v.tokens.find("<0x41>");
  ASSERT_GE(b41, 0);
  ASSERT_TRUE(tok->token_to_piece(b41, &piece).is_ok());
  EXPECT_EQ(piece, "A");
  const int32_t bf0 = v.tokens.find("<0xF0>");
  ASSERT_GE(bf0, 0);
  ASSERT_TRUE(tok->token_to_piece(bf0, &piece).is_ok());
  EXPECT_EQ(piece, "\xF0");
  // U+2581 is a space; control and unknown tokens print nothing.
  const int32_t hello = v.tokens.find("\xE2\x96\x81Hello");
  ASSERT_GE(hello, 0);
  ASSERT_TRUE(tok->token_to_piece(hello, &piece).is_ok());
  EXPECT_EQ(piece, " Hello");
  for (int32_t id : {0, 1, 2}) {
    ASSERT_TRUE(tok->token_to_piece(id, &piece).is_ok());
    EXPECT_EQ(piece, "") << id;
  }
  // Only the first piece loses its leading space.
  EXPECT_EQ(dec(*tok, {hello, hello}), "Hello Hello");
  EXPECT_EQ(dec(*tok, {1, hello, hello}), "Hello Hello");
  // Ids outside the vocabulary are an argument error, never a crash.
  const int32_t bad[] = {hello, 32000};
  std::string text;
  EXPECT_EQ(tok->decode(bad, 2, &text).code(), GEIST_E_INVALID_ARG);
  EXPECT_EQ(tok->token_to_piece(-1, &piece).code(), GEIST_E_INVALID_ARG);
}

// Baichuan's vocabulary has no vectors upstream; byte fallback makes it lossless, so every
// llama.cpp input must come back unchanged, and every id must be in range.
TEST(Spm, BaichuanRoundTrip) {
  GEIST_REQUIRE_FIXTURES();
  auto tok = load_fixture_tokenizer("tokenizer/ggml-vocab-baichuan.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->model_name(), "llama");
  EXPECT_EQ(tok->pre_name(), "");
  const auto inputs = test::parse_vocab_inputs(
      test::read_text_file(test::fixture_path("tokenizer/ggml-vocab-llama-spm.gguf.inp")));
  ASSERT_FALSE(inputs.empty());
  for (const std::string& in : inputs) {
    const std::vector<int32_t> ids = enc(*tok, in, true, false);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], tok->bos());
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->n_vocab());
    EXPECT_EQ(dec(*tok, ids), in) << test::escape_for_message(in);
  }
}

// A vocabulary small enough to work the expected merges out by hand.
std::unique_ptr<Tokenizer> tiny_spm(float score_ab, bool with_bytes) {
  std::vector<std::string> tokens = {"<unk>",
                                     "<s>",
                                     "</s>",
                                     "\xE2\x96\x81",
                                     "a",
                                     "b",
                                     "\xE2\x96\x81"
                                     "a",
                                     "ab"};
  std::vector<float> scores = {0, 0, 0, -5, -3, -3, -1, score_ab};
  std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1, 1};
  if (with_bytes) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      tokens.push_back(name);
      scores.push_back(0);
      types.push_back(6);
    }
  }
  GgufWriter w;
  w.add_str("tokenizer.ggml.model", "llama");
  w.add_arr_str("tokenizer.ggml.tokens", tokens);
  w.add_arr_f32("tokenizer.ggml.scores", scores);
  w.add_arr_i32("tokenizer.ggml.token_type", types);
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  EXPECT_TRUE(w.to_bytes(bytes.get()).is_ok());
  std::unique_ptr<GgufFile> file;
  EXPECT_TRUE(GgufFile::open_memory(bytes->data(), bytes->size(), &file).is_ok());
  if (!file) return nullptr;
  std::unique_ptr<Tokenizer> tok;
  const Status st = Tokenizer::load(*file, Logger{}, &tok);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return tok;
}

TEST(Spm, MergesByBestScore) {
  // "ab" becomes "\u2581ab" as symbols [\u2581][a][b]. The pair with the better token score
  // merges first: "\u2581a" (-1) beats "ab" (-2), leaving [\u2581a][b]; with "ab" at 0 it
  // wins instead, leaving [\u2581][ab].
  auto lo = tiny_spm(-2.0f, false);
  auto hi = tiny_spm(0.0f, false);
  ASSERT_NE(lo, nullptr);
  ASSERT_NE(hi, nullptr);
  EXPECT_EQ(enc(*lo, "ab", false, false), (std::vector<int32_t>{6, 5}));
  EXPECT_EQ(enc(*hi, "ab", false, false), (std::vector<int32_t>{3, 7}));
}

TEST(Spm, UnknownWithoutByteTokens) {
  // "a c" -> [\u2581a][\u2581][c]: 'c' has no token and there are no byte tokens, so <unk>.
  auto tok = tiny_spm(-2.0f, false);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(enc(*tok, "a c", false, false), (std::vector<int32_t>{6, 3, 0}));
  // With byte tokens 'c' (0x63) and a two-byte character fall back to their bytes.
  auto bytes = tiny_spm(-2.0f, true);
  ASSERT_NE(bytes, nullptr);
  const int32_t b0 = 8;  // id of <0x00>
  EXPECT_EQ(enc(*bytes, "a c\xC3\xA9", false, false),
            (std::vector<int32_t>{6, 3, b0 + 0x63, b0 + 0xC3, b0 + 0xA9}));
  EXPECT_EQ(dec(*bytes, enc(*bytes, "a c\xC3\xA9", true, false)), "a c\xC3\xA9");
}

}  // namespace
}  // namespace geist
