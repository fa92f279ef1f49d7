// llama.cpp's tokenizer test vectors (fixtures/tokenizer/ggml-vocab-X.gguf{,.inp,.out}) and
// helpers shared by the tokenizer tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace geist::test {

// Splits the text of an .inp file into its inputs. Each input is followed by "\n" and the
// line "__ggml_vocab_test__", so that an input may itself be empty or end in newlines.
std::vector<std::string> parse_vocab_inputs(const std::string& inp);
// One id list per line of an .out file (ids space separated, an empty line for no ids).
std::vector<std::vector<int32_t>> parse_vocab_outputs(const std::string& out);

// Loads the tokenizer of a GGUF given relative to the fixtures directory. Fails the current
// test (and returns null) when the file cannot be opened or its tokenizer cannot be built.
std::unique_ptr<Tokenizer> load_fixture_tokenizer(const std::string& rel_path);

// Runs every case of tokenizer/ggml-vocab-<vocab_name>.gguf.inp against .out, encoding with
// add_special = false and parse_special = false, and reports each mismatch as a test
// failure naming the case. Where the tokenizer is lossless (SentencePiece with byte tokens;
// byte-level BPE whose decode does not clean up spaces) it also checks that
// decode(encode(x)) == x. Call it from a test that has run GEIST_REQUIRE_FIXTURES().
void check_vectors(const std::string& vocab_name);

// The bytes of `s` with non-printable ones as \xAB escapes, for failure messages.
std::string escape_for_message(const std::string& s);

}  // namespace geist::test
