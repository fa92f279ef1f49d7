// geist mkmodel: the files have llama.cpp's converter layout and load and run in geist.
// Expected values come from the task's statement of the presets, Llama-3.2-1B's published
// config.json, llama.cpp's enums (LlamaFileType, token types) and definitions recomputed here
// (GPT-2's byte alphabet, the Llama-3 rope scaling formula).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "cli/cli_gguf.h"
#include "cli/cli_util.h"
#include "engine/mkmodel.h"
#include "formats/gguf.h"
#include "kernels/quant.h"

namespace geist::test {
namespace {

struct Shape {
  int n_vocab, n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_ctx;
};
constexpr Shape kTiny = {3072, 256, 704, 4, 8, 4, 32, 2048};
// meta-llama/Llama-3.2-1B config.json.
constexpr Shape kLlama1b = {128256, 2048, 8192, 16, 32, 8, 64, 131072};

struct TypeCase {
  const char* name;
  GgmlType weight;
  uint32_t file_type;  // llama.cpp LlamaFileType
};
constexpr TypeCase kTypes[] = {{"f32", GgmlType::F32, 0},
                               {"f16", GgmlType::F16, 1},
                               {"bf16", GgmlType::BF16, 32},
                               {"q8_0", GgmlType::Q8_0, 7},
                               {"q4_0", GgmlType::Q4_0, 2}};

uint32_t u32(const GgufFile& f, const char* key) {
  uint32_t v = 0;
  const Status st = f.get_u32(key, &v);
  EXPECT_TRUE(st.is_ok()) << key << ": " << st.message();
  return v;
}

float f32(const GgufFile& f, const char* key) {
  float v = 0;
  const Status st = f.get_f32(key, &v);
  EXPECT_TRUE(st.is_ok()) << key << ": " << st.message();
  return v;
}

std::string str(const GgufFile& f, const char* key) {
  std::string_view v;
  const Status st = f.get_str(key, &v);
  EXPECT_TRUE(st.is_ok()) << key << ": " << st.message();
  return std::string(v);
}

// The hyper-parameter keys llama.cpp's converter writes for LlamaForCausalLM.
void check_llama_metadata(const GgufFile& f, const Shape& s, uint32_t file_type) {
  EXPECT_EQ(str(f, "general.architecture"), "llama");
  EXPECT_EQ(str(f, "general.type"), "model");
  EXPECT_EQ(u32(f, "general.file_type"), file_type);
  EXPECT_EQ(u32(f, "general.quantization_version"), 2u);
  EXPECT_EQ(u32(f, "llama.block_count"), static_cast<uint32_t>(s.n_layer));
  EXPECT_EQ(u32(f, "llama.context_length"), static_cast<uint32_t>(s.n_ctx));
  EXPECT_EQ(u32(f, "llama.embedding_length"), static_cast<uint32_t>(s.n_embd));
  EXPECT_EQ(u32(f, "llama.feed_forward_length"), static_cast<uint32_t>(s.n_ff));
  EXPECT_EQ(u32(f, "llama.attention.head_count"), static_cast<uint32_t>(s.n_head));
  EXPECT_EQ(u32(f, "llama.attention.head_count_kv"), static_cast<uint32_t>(s.n_head_kv));
  EXPECT_EQ(u32(f, "llama.attention.key_length"), static_cast<uint32_t>(s.head_dim));
  EXPECT_EQ(u32(f, "llama.attention.value_length"), static_cast<uint32_t>(s.head_dim));
  EXPECT_EQ(u32(f, "llama.rope.dimension_count"), static_cast<uint32_t>(s.head_dim));
  EXPECT_EQ(u32(f, "llama.vocab_size"), static_cast<uint32_t>(s.n_vocab));
  EXPECT_EQ(f32(f, "llama.rope.freq_base"), 500000.0f);
  EXPECT_EQ(f32(f, "llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(str(f, "tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(str(f, "tokenizer.ggml.pre"), "llama-bpe");
  const std::vector<std::string_view>* tokens = nullptr;
  ASSERT_TRUE(f.get_arr_str("tokenizer.ggml.tokens", &tokens).is_ok());
  ASSERT_EQ(tokens->size(), static_cast<size_t>(s.n_vocab));
  EXPECT_EQ((*tokens)[u32(f, "tokenizer.ggml.bos_token_id")], "<|begin_of_text|>");
  EXPECT_EQ((*tokens)[u32(f, "tokenizer.ggml.eos_token_id")], "<|end_of_text|>");
}

struct Expected {
  GgmlType type;
  std::vector<int64_t> ne;
};

// Tensor names, shapes and types of a tied-embedding Llama-3 checkpoint after conversion.
std::map<std::string, Expected> expected_tensors(const Shape& s, GgmlType w) {
  const GgmlType embd = w == GgmlType::Q4_0 ? GgmlType::Q8_0 : w;  // documented choice
  const int64_t q = static_cast<int64_t>(s.n_head) * s.head_dim;
  const int64_t kv = static_cast<int64_t>(s.n_head_kv) * s.head_dim;
  std::map<std::string, Expected> m;
  m["rope_freqs.weight"] = {GgmlType::F32, {s.head_dim / 2}};
  m["token_embd.weight"] = {embd, {s.n_embd, s.n_vocab}};
  m["output_norm.weight"] = {GgmlType::F32, {s.n_embd}};
  for (int i = 0; i < s.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    m[b + "attn_norm.weight"] = {GgmlType::F32, {s.n_embd}};
    m[b + "ffn_norm.weight"] = {GgmlType::F32, {s.n_embd}};
    m[b + "attn_q.weight"] = {w, {s.n_embd, q}};
    m[b + "attn_k.weight"] = {w, {s.n_embd, kv}};
    m[b + "attn_v.weight"] = {w, {s.n_embd, kv}};
    m[b + "attn_output.weight"] = {w, {q, s.n_embd}};
    m[b + "ffn_gate.weight"] = {w, {s.n_embd, s.n_ff}};
    m[b + "ffn_up.weight"] = {w, {s.n_embd, s.n_ff}};
    m[b + "ffn_down.weight"] = {w, {s.n_ff, s.n_embd}};
  }
  return m;
}

// Llama-3 rope scaling as the HF converter defines it, in double precision.
std::vector<double> rope_factors(int head_dim, double theta, double factor, double low, double high,
                                 double orig_ctx) {
  std::vector<double> out;
  for (int i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(theta, static_cast<double>(i) / head_dim);
    const double wavelen = 2.0 * M_PI / freq;
    if (wavelen < orig_ctx / high) {
      out.push_back(1.0);
    } else if (wavelen > orig_ctx / low) {
      out.push_back(factor);
    } else {
      const double smooth = (orig_ctx / wavelen - low) / (high - low);
      out.push_back(1.0 / ((1.0 - smooth) / factor + smooth));
    }
  }
  return out;
}

// GPT-2's byte -> unicode code point map, from its definition.
std::map<uint32_t, uint8_t> gpt2_unicode_to_byte() {
  std::map<uint32_t, uint8_t> m;
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable =
        (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    m[printable ? static_cast<uint32_t>(b) : next++] = static_cast<uint8_t>(b);
  }
  return m;
}

// Decodes a byte-level token text back to the bytes it stands for.
std::string decode_byte_level(std::string_view t, const std::map<uint32_t, uint8_t>& map) {
  std::string out;
  for (size_t i = 0; i < t.size();) {
    const unsigned char c = static_cast<unsigned char>(t[i]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else {
      cp = ((c & 0x1F) << 6) | (static_cast<unsigned char>(t[i + 1]) & 0x3F);
      i += 2;
    }
    auto it = map.find(cp);
    EXPECT_NE(it, map.end()) << "code point " << cp << " is not in GPT-2's byte alphabet";
    if (it != map.end()) out.push_back(static_cast<char>(it->second));
  }
  return out;
}

std::string make_tiny(const TempDir& dir, const char* type, const char* seed = "7") {
  const std::string path = dir.file(std::string("tiny-") + type + "-" + seed + ".gguf");
  const CliResult r =
      run_geist({"mkmodel", "--preset", "tiny-llama", "--type", type, "-o", path, "--seed", seed},
                dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

TEST(CliMkModel, TinyLlamaEveryTypeHasConverterLayoutAndRuns) {
  TempDir dir;
  for (const TypeCase& tc : kTypes) {
    SCOPED_TRACE(tc.name);
    const std::string path = make_tiny(dir, tc.name);
    auto f = open_gguf(path);
    ASSERT_NE(f, nullptr);
    check_llama_metadata(*f, kTiny, tc.file_type);
    const auto expected = expected_tensors(kTiny, tc.weight);
    EXPECT_EQ(f->tensors().size(), expected.size());
    for (const GgufTensorInfo& t : f->tensors()) {
      auto it = expected.find(std::string(t.name));
      ASSERT_NE(it, expected.end()) << "unexpected tensor " << t.name;
      EXPECT_EQ(t.type, it->second.type) << t.name;
      ASSERT_EQ(t.n_dims, it->second.ne.size()) << t.name;
      for (uint32_t d = 0; d < t.n_dims; ++d) EXPECT_EQ(t.ne[d], it->second.ne[d]) << t.name;
    }

    CliResult r = run_geist({"info", "-m", path}, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("llama"), std::string::npos) << r.out;

    r = run_geist({"run", "-m", path, "-p", "Hello world", "-n", "8", "--temp", "0", "--ids"},
                  dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<int> ids = parse_ids(r.out);
    EXPECT_FALSE(ids.empty());
    EXPECT_LE(ids.size(), 8u);
    for (int id : ids) EXPECT_TRUE(id >= 0 && id < kTiny.n_vocab) << id;

    r = run_geist({"run", "-m", path, "-p", "Hello world", "-n", "8", "--seed", "3"}, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
}

TEST(CliMkModel, TinyLlamaVocabularyIsConsistentByteLevelBpe) {
  TempDir dir;
  const std::string path = make_tiny(dir, "q8_0");
  auto f = open_gguf(path);
  ASSERT_NE(f, nullptr);
  const std::vector<std::string_view>* tokens = nullptr;
  const std::vector<std::string_view>* merges = nullptr;
  std::vector<int32_t> types;
  ASSERT_TRUE(f->get_arr_str("tokenizer.ggml.tokens", &tokens).is_ok());
  ASSERT_TRUE(f->get_arr_str("tokenizer.ggml.merges", &merges).is_ok());
  ASSERT_TRUE(f->get_arr_i32("tokenizer.ggml.token_type", &types).is_ok());
  ASSERT_EQ(types.size(), tokens->size());

  std::map<std::string_view, size_t> id_of;
  for (size_t i = 0; i < tokens->size(); ++i) {
    EXPECT_TRUE(id_of.emplace((*tokens)[i], i).second) << "duplicate token " << (*tokens)[i];
  }
  // The first 256 tokens are the 256 bytes in GPT-2's alphabet.
  const auto alphabet = gpt2_unicode_to_byte();
  std::set<std::string> bytes;
  for (size_t i = 0; i < 256; ++i) {
    const std::string b = decode_byte_level((*tokens)[i], alphabet);
    EXPECT_EQ(b.size(), 1u) << (*tokens)[i];
    bytes.insert(b);
    EXPECT_EQ(types[i], 1) << "byte tokens are NORMAL in GPT-2 style vocabularies";
  }
  EXPECT_EQ(bytes.size(), 256u);
  // Merge k creates token 256 + k from two earlier tokens.
  ASSERT_GT(merges->size(), 0u);
  for (size_t k = 0; k < merges->size(); ++k) {
    const std::string_view m = (*merges)[k];
    const size_t sp = m.find(' ');
    ASSERT_NE(sp, std::string_view::npos) << m;
    const std::string_view a = m.substr(0, sp), b = m.substr(sp + 1);
    ASSERT_TRUE(id_of.count(a) && id_of.count(b)) << m;
    EXPECT_LT(id_of[a], 256 + k) << m;
    EXPECT_LT(id_of[b], 256 + k) << m;
    const std::string joined = std::string(a) + std::string(b);
    ASSERT_TRUE(id_of.count(joined)) << m;
    EXPECT_EQ(id_of[joined], 256 + k) << m;
  }
  // Control tokens fill the rest.
  const size_t first_special = 256 + merges->size();
  EXPECT_EQ((*tokens)[first_special], "<|begin_of_text|>");
  for (size_t i = first_special; i < tokens->size(); ++i) {
    EXPECT_EQ(types[i], 3) << (*tokens)[i];
    EXPECT_EQ((*tokens)[i].substr(0, 2), "<|") << (*tokens)[i];
  }
  ASSERT_TRUE(id_of.count("<|eot_id|>"));

  // Tokenizing and concatenating the pieces gives back the text.
  const std::string text = "The quick brown fox, 42 times: caf\xC3\xA9!";
  const CliResult r = run_geist({"tokenize", "-m", path, "-p", text, "--no-special"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string back;
  for (int id : parse_ids(r.out)) {
    ASSERT_TRUE(id >= 0 && static_cast<size_t>(id) < first_special) << id;
    back += decode_byte_level((*tokens)[id], alphabet);
  }
  EXPECT_EQ(back, text);
  EXPECT_LT(parse_ids(r.out).size(), text.size()) << "merges should shorten the sequence";
}

TEST(CliMkModel, TinyLlamaWeightsRopeFreqsAndSeeds) {
  TempDir dir;
  const std::string path = make_tiny(dir, "f32");
  auto f = open_gguf(path);
  ASSERT_NE(f, nullptr);

  const GgufTensorInfo* rf = f->find_tensor("rope_freqs.weight");
  ASSERT_NE(rf, nullptr);
  const std::vector<double> want = rope_factors(kTiny.head_dim, 500000.0, 32.0, 1.0, 4.0, 8192.0);
  ASSERT_EQ(rf->nbytes, want.size() * sizeof(float));
  std::vector<float> got(want.size());
  std::memcpy(got.data(), rf->data, rf->nbytes);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * want[i]) << i;
  EXPECT_EQ(got.front(), 1.0f);
  EXPECT_EQ(got.back(), 32.0f);

  // Weights: mean 0, std 1/sqrt(fan_in) (fan_in = ne[0] = n_embd for token_embd).
  const GgufTensorInfo* te = f->find_tensor("token_embd.weight");
  ASSERT_NE(te, nullptr);
  const float* w = reinterpret_cast<const float*>(te->data);
  double sum = 0, sum2 = 0;
  const int64_t n = te->n_elements();
  for (int64_t i = 0; i < n; ++i) {
    sum += w[i];
    sum2 += static_cast<double>(w[i]) * w[i];
  }
  const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(sd, 1.0 / std::sqrt(256.0), 0.05 / std::sqrt(256.0));
  const GgufTensorInfo* on = f->find_tensor("output_norm.weight");
  ASSERT_NE(on, nullptr);
  const float* g = reinterpret_cast<const float*>(on->data);
  for (int64_t i = 0; i < on->n_elements(); ++i) EXPECT_NEAR(g[i], 1.0f, 0.5f);

  // Same seed: same bytes; another seed: other weights.
  const std::string again = dir.file("again.gguf");
  ASSERT_EQ(
      run_geist({"mkmodel", "--preset", "tiny-llama", "--type", "f32", "-o", again, "--seed", "7"},
                dir.path())
          .exit_code,
      0);
  const std::string other = make_tiny(dir, "f32", "8");
  auto slurp = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_TRUE(slurp(path) == slurp(again));
  EXPECT_FALSE(slurp(path) == slurp(other));
}

TEST(MkModelPreset, Llama1bHasLlama32_1BShapes) {
  const MkModelPreset* p = find_mkmodel_preset("llama-1b");
  ASSERT_NE(p, nullptr);
  const auto expected = expected_tensors(kLlama1b, GgmlType::Q4_0);
  const std::vector<MkTensorSpec> specs = mkmodel_tensor_specs(*p, GgmlType::Q4_0);
  EXPECT_EQ(specs.size(), expected.size());
  int64_t n_params = 0;
  for (const MkTensorSpec& s : specs) {
    auto it = expected.find(s.name);
    ASSERT_NE(it, expected.end()) << s.name;
    EXPECT_EQ(s.type, it->second.type) << s.name;
    EXPECT_EQ(s.ne, it->second.ne) << s.name;
    int64_t k = 1;
    for (int64_t d : s.ne) k *= d;
    if (s.name != "rope_freqs.weight") n_params += k;
  }
  // Llama-3.2-1B's published parameter count (tied embeddings).
  EXPECT_EQ(n_params, 1235814400);

  const std::vector<float> got = llama3_rope_factors(*p);
  const std::vector<double> want = rope_factors(64, 500000.0, 32.0, 1.0, 4.0, 8192.0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * want[i]) << i;
}

TEST(MkModelPreset, Llama1bMetadata) {
  const MkModelPreset* p = find_mkmodel_preset("llama-1b");
  ASSERT_NE(p, nullptr);
  TempDir dir;
  const std::string path = dir.file("llama-1b-meta.gguf");
  const Status st = mkmodel_write(*p, "q8_0", path, 0, {}, /*metadata_only=*/true);
  ASSERT_TRUE(st.is_ok()) << st.message();
  auto f = open_gguf(path);
  ASSERT_NE(f, nullptr);
  check_llama_metadata(*f, kLlama1b, 7);
  EXPECT_EQ(f->tensors().size(), 0u);
  // Llama 3's special tokens sit at their real ids.
  const std::vector<std::string_view>* tokens = nullptr;
  ASSERT_TRUE(f->get_arr_str("tokenizer.ggml.tokens", &tokens).is_ok());
  EXPECT_EQ((*tokens)[128000], "<|begin_of_text|>");
  EXPECT_EQ((*tokens)[128001], "<|end_of_text|>");
  EXPECT_EQ((*tokens)[128006], "<|start_header_id|>");
  EXPECT_EQ((*tokens)[128007], "<|end_header_id|>");
  EXPECT_EQ((*tokens)[128009], "<|eot_id|>");
  EXPECT_EQ((*tokens)[128255], "<|reserved_special_token_247|>");
}

}  // namespace
}  // namespace geist::test
