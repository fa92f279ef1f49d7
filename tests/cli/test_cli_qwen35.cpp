// geist mkmodel's Qwen3.5 presets and the CLI verbs on qwen35 files.
// Where the expected values come from:
// - the converter's layout: the fixture tiny-qwen35-{f32,f16,q8_0}.gguf, written by llama.cpp's
//   own converter (key order and value types, tensor names, order, dimensions, and which
//   tensors each file type keeps in F32);
// - shapes: the Qwen3.5 definitions (attn_q carries query and gate rows, DeltaNet conv channels
//   = q + k + v, ...) evaluated on the published configs (fixture README / hf_reference.json,
//   Qwen/Qwen3.5-0.8B's config.json text_config) and on the tiny preset's stated shapes;
// - logits: llama.cpp's (reference/tiny-qwen35/llamacpp_f32_logits.f32);
// - state sizes: recomputed here from the hyper-parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "cli/cli_gguf.h"
#include "cli/cli_util.h"
#include "engine/mkmodel.h"
#include "formats/gguf.h"
#include "support/fixtures.h"

namespace geist::test {
namespace {

struct QShape {
  int64_t n_vocab, n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim;
  int64_t conv_kernel, n_k, n_v, d_k, d_v, interval;
  int64_t conv_dim() const { return 2 * n_k * d_k + n_v * d_v; }
  bool attention(int64_t il) const { return (il + 1) % interval == 0; }
};
// fixtures/README.md and reference/tiny-qwen35/hf_reference.json.
constexpr QShape kFixture = {512, 128, 256, 8, 4, 2, 32, 4, 2, 4, 32, 32, 4};
// The tiny-qwen35 preset as documented in mkmodel.cpp.
constexpr QShape kTinyQwen35 = {4096, 128, 384, 8, 4, 2, 64, 4, 2, 4, 32, 32, 4};
// Qwen/Qwen3.5-0.8B config.json text_config.
constexpr QShape kQwen35_08b = {248320, 1024, 3584, 24, 8, 2, 256, 4, 16, 16, 128, 128, 4};

const char* kFixtureF32 = "models/tiny-qwen35-f32.gguf";

// "blk.5.attn_q.weight" -> "attn_q.weight".
std::string role_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return std::string(name);
  return std::string(name.substr(name.find('.', 4) + 1));
}

// The ggml shape of a tensor role from the Qwen3.5 definitions.
std::vector<int64_t> expected_ne(const std::string& role, const QShape& s) {
  const int64_t e = s.n_embd, vd = s.n_v * s.d_v;
  const std::map<std::string, std::vector<int64_t>> m = {
      {"token_embd.weight", {e, s.n_vocab}},
      {"output_norm.weight", {e}},
      {"attn_norm.weight", {e}},
      {"post_attention_norm.weight", {e}},
      {"ffn_down.weight", {s.n_ff, e}},
      {"ffn_gate.weight", {e, s.n_ff}},
      {"ffn_up.weight", {e, s.n_ff}},
      {"ssm_a", {s.n_v}},
      {"ssm_dt.bias", {s.n_v}},
      {"ssm_conv1d.weight", {s.conv_kernel, s.conv_dim()}},
      {"ssm_alpha.weight", {e, s.n_v}},
      {"ssm_beta.weight", {e, s.n_v}},
      {"attn_qkv.weight", {e, s.conv_dim()}},
      {"attn_gate.weight", {e, vd}},
      {"ssm_norm.weight", {s.d_v}},
      {"ssm_out.weight", {vd, e}},
      {"attn_k_norm.weight", {s.head_dim}},
      {"attn_q_norm.weight", {s.head_dim}},
      {"attn_k.weight", {e, s.n_head_kv * s.head_dim}},
      {"attn_v.weight", {e, s.n_head_kv * s.head_dim}},
      {"attn_output.weight", {s.n_head * s.head_dim, e}},
      {"attn_q.weight", {e, 2 * s.n_head * s.head_dim}},
  };
  auto it = m.find(role);
  EXPECT_NE(it, m.end()) << "unknown role " << role;
  return it == m.end() ? std::vector<int64_t>{} : it->second;
}

void check_shapes(const GgufFile& f, const QShape& s, const char* what) {
  for (const GgufTensorInfo& t : f.tensors()) {
    const std::vector<int64_t> want = expected_ne(role_of(t.name), s);
    ASSERT_EQ(t.n_dims, want.size()) << what << ": " << t.name;
    for (uint32_t d = 0; d < t.n_dims; ++d) EXPECT_EQ(t.ne[d], want[d]) << what << ": " << t.name;
  }
}

// The type the converter gives a tensor role in a file of type `file_type`, read from the
// converter's fixture of that type; q4_0 and bf16 (no fixture) derive from q8_0 and f16.
GgmlType converter_type(const GgufFile& fixture_of_type, std::string_view name,
                        GgmlType file_type) {
  const GgufTensorInfo* t = fixture_of_type.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return GgmlType::F32;
  if (t->type == GgmlType::F32) return GgmlType::F32;
  if (file_type == GgmlType::Q4_0) {
    // llama-quantize's q4_0 (documented choice: the tied embedding stays Q8_0).
    return name == "token_embd.weight" ? GgmlType::Q8_0 : GgmlType::Q4_0;
  }
  if (file_type == GgmlType::BF16) return GgmlType::BF16;
  return t->type;
}

struct Qwen35TypeCase {
  const char* name;
  GgmlType type;
  const char* fixture;  // the converter's file whose per-tensor types apply
  uint32_t file_type;   // llama.cpp LlamaFileType
};
constexpr Qwen35TypeCase kQwen35Types[] = {
    {"f32", GgmlType::F32, "models/tiny-qwen35-f32.gguf", 0},
    {"f16", GgmlType::F16, "models/tiny-qwen35-f16.gguf", 1},
    {"bf16", GgmlType::BF16, "models/tiny-qwen35-f16.gguf", 32},
    {"q8_0", GgmlType::Q8_0, "models/tiny-qwen35-q8_0.gguf", 7},
    {"q4_0", GgmlType::Q4_0, "models/tiny-qwen35-q8_0.gguf", 2},
};

bool is_tokenizer_key(std::string_view k) { return k.substr(0, 10) == "tokenizer."; }

std::string make_tiny_qwen35(const TempDir& dir, const char* type) {
  const std::string path = dir.file(std::string("tiny-qwen35-") + type + ".gguf");
  const CliResult r =
      run_geist({"mkmodel", "--preset", "tiny-qwen35", "--type", type, "-o", path, "--seed", "5"},
                dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

TEST(CliQwen35, TinyPresetHasTheConverterLayoutForEveryType) {
  GEIST_REQUIRE_FIXTURES();
  auto fixture = open_gguf(fixture_path(kFixtureF32));
  ASSERT_NE(fixture, nullptr);
  check_shapes(*fixture, kFixture, "fixture");  // the definitions agree with the converter
  TempDir dir;
  for (const Qwen35TypeCase& tc : kQwen35Types) {
    SCOPED_TRACE(tc.name);
    auto typed = open_gguf(fixture_path(tc.fixture));
    auto f = open_gguf(make_tiny_qwen35(dir, tc.name));
    ASSERT_TRUE(typed && f);

    // Hyper-parameter keys: the converter's, in its order, with its value types.
    std::vector<std::pair<std::string_view, GgufValueType>> want, got;
    for (const GgufKv& kv : fixture->kvs()) {
      if (!is_tokenizer_key(kv.key)) want.emplace_back(kv.key, kv.type);
    }
    for (const GgufKv& kv : f->kvs()) {
      if (!is_tokenizer_key(kv.key)) got.emplace_back(kv.key, kv.type);
    }
    EXPECT_EQ(got, want);
    // Tokenizer keys both vocabularies have (SPM vs byte-level BPE) share value types.
    for (const GgufKv& kv : f->kvs()) {
      const GgufKv* other = fixture->find(kv.key);
      if (is_tokenizer_key(kv.key) && other != nullptr) {
        EXPECT_EQ(kv.type, other->type) << kv.key;
        EXPECT_EQ(kv.arr_type, other->arr_type) << kv.key;
      }
    }
    uint32_t file_type = 0;
    ASSERT_TRUE(f->get_u32("general.file_type", &file_type).is_ok());
    EXPECT_EQ(file_type, tc.file_type);
    std::vector<int32_t> sections;
    ASSERT_TRUE(f->get_arr_i32("qwen35.rope.dimension_sections", &sections).is_ok());
    uint32_t n_rot = 0;
    ASSERT_TRUE(f->get_u32("qwen35.rope.dimension_count", &n_rot).is_ok());
    ASSERT_EQ(sections.size(), 4u);
    EXPECT_EQ(sections[0] + sections[1] + sections[2] + sections[3], static_cast<int>(n_rot / 2));

    // Tensors: the same names in the same order (both have 8 layers of pattern DDDA), the
    // shapes of the definitions, and the converter's type for each.
    ASSERT_EQ(f->tensors().size(), fixture->tensors().size());
    for (size_t i = 0; i < f->tensors().size(); ++i) {
      const GgufTensorInfo& t = f->tensors()[i];
      EXPECT_EQ(t.name, fixture->tensors()[i].name) << i;
      EXPECT_EQ(t.type, converter_type(*typed, t.name, tc.type)) << t.name;
    }
    check_shapes(*f, kTinyQwen35, tc.name);
  }
}

TEST(CliQwen35, TinyPresetVocabularyHasQwenSpecialTokens) {
  TempDir dir;
  const std::string path = make_tiny_qwen35(dir, "q8_0");
  auto f = open_gguf(path);
  ASSERT_NE(f, nullptr);
  std::string_view pre;
  ASSERT_TRUE(f->get_str("tokenizer.ggml.pre", &pre).is_ok());
  EXPECT_EQ(pre, "qwen35");
  const std::vector<std::string_view>* tokens = nullptr;
  ASSERT_TRUE(f->get_arr_str("tokenizer.ggml.tokens", &tokens).is_ok());
  ASSERT_EQ(tokens->size(), static_cast<size_t>(kTinyQwen35.n_vocab));
  uint32_t eos = 0, bos = 0;
  ASSERT_TRUE(f->get_u32("tokenizer.ggml.eos_token_id", &eos).is_ok());
  ASSERT_TRUE(f->get_u32("tokenizer.ggml.bos_token_id", &bos).is_ok());
  EXPECT_EQ((*tokens)[eos], "<|im_end|>");
  EXPECT_EQ((*tokens)[bos], "<|endoftext|>");
  EXPECT_EQ((*tokens)[bos + 1], "<|im_start|>");

  // Special token texts parse to their ids; the rest round-trips through the byte-level BPE.
  const CliResult r =
      run_geist({"tokenize", "-m", path, "-p", "<|im_start|>user hello<|im_end|>"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<int> ids = parse_ids(r.out);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), static_cast<int>(bos + 1)) << "no BOS is added (add_bos_token false)";
  EXPECT_EQ(ids.back(), static_cast<int>(eos));
}

std::string info_of(const std::string& model, const TempDir& dir) {
  const CliResult r = run_geist({"info", "-m", model}, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

TEST(CliQwen35, InfoShowsLayerPatternAndStateSizes) {
  GEIST_REQUIRE_FIXTURES();
  TempDir dir;
  const QShape& s = kTinyQwen35;
  std::string out = info_of(make_tiny_qwen35(dir, "f16"), dir);
  EXPECT_NE(out.find("architecture: qwen35"), std::string::npos) << out;
  EXPECT_NE(out.find("layers: 8 (DDDA DDDA; D = gated DeltaNet, A = gated attention)"),
            std::string::npos)
      << out;
  // KV: K and V rows of n_head_kv * head_dim per attention layer (2 of 8).
  const int64_t kv_f32 = 2 * 2 * s.n_head_kv * s.head_dim * 4;
  EXPECT_NE(out.find("state per token: " + std::to_string(kv_f32) + " bytes with f32 KV, " +
                     std::to_string(kv_f32 / 2) + " bytes with f16 KV"),
            std::string::npos)
      << out;
  // Per DeltaNet layer (6 of 8): conv window (kernel - 1) x conv channels, and the
  // n_v x d_k x d_v delta-rule state, f32.
  const int64_t fixed = 6 * ((s.conv_kernel - 1) * s.conv_dim() + s.n_v * s.d_k * s.d_v) * 4;
  EXPECT_NE(out.find("state per session: " + std::to_string(fixed) + " bytes fixed"),
            std::string::npos)
      << out;

  // The MTP block of the converter's MTP fixture is not part of the main stack.
  out = info_of(fixture_path("models/tiny-qwen35-mtp-f32.gguf"), dir);
  EXPECT_NE(out.find("layers: 8 (DDDA DDDA;"), std::string::npos) << out;

  // Llama: all attention, no fixed state. stories260K: 5 layers, 4 KV heads of dim 64 / 8.
  out = info_of(fixture_path("models/stories260K.gguf"), dir);
  EXPECT_NE(out.find("layers: 5 (all attention)"), std::string::npos) << out;
  EXPECT_NE(out.find("state per token: " + std::to_string(5 * 2 * 4 * 8 * 4) + " bytes with f32"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("state per session: 0 bytes fixed"), std::string::npos) << out;
}

// The DeltaNet parameters follow the stated inits: ssm_a = -A with A in [1, 16], and
// softplus(ssm_dt.bias) = dt in [1e-3, 1e-1] (the recurrence then decays instead of growing).
TEST(CliQwen35, TinyPresetDeltaNetParametersAreStable) {
  TempDir dir;
  auto f = open_gguf(make_tiny_qwen35(dir, "f32"));
  ASSERT_NE(f, nullptr);
  int n_checked = 0;
  for (const GgufTensorInfo& t : f->tensors()) {
    const std::string role = role_of(t.name);
    if (role != "ssm_a" && role != "ssm_dt.bias") continue;
    ASSERT_EQ(t.type, GgmlType::F32);
    const float* v = reinterpret_cast<const float*>(t.data);
    for (int64_t i = 0; i < t.n_elements(); ++i) {
      if (role == "ssm_a") {
        EXPECT_TRUE(v[i] <= -1.0f && v[i] >= -16.0f) << t.name << " " << v[i];
      } else {
        const double dt = std::log1p(std::exp(static_cast<double>(v[i])));
        EXPECT_TRUE(dt >= 0.999e-3 && dt <= 1.001e-1) << t.name << " " << dt;
      }
      ++n_checked;
    }
  }
  EXPECT_EQ(n_checked, 2 * 6 * kTinyQwen35.n_v);
}

bool all_finite(const std::vector<float>& v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

TEST(CliQwen35, RunAndLogitsStayFiniteOnMkmodelFiles) {
  TempDir dir;
  for (const char* type : {"f32", "q8_0", "q4_0"}) {
    SCOPED_TRACE(type);
    const std::string path = make_tiny_qwen35(dir, type);
    CliResult r = run_geist(
        {"run", "-m", path, "-p", "The little dog ran", "-n", "16", "--temp", "0", "--ids"},
        dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<int> ids = parse_ids(r.out);
    EXPECT_FALSE(ids.empty());
    for (int id : ids) EXPECT_TRUE(id >= 0 && id < kTinyQwen35.n_vocab) << id;

    // 64 positions: long enough for the DeltaNet decay and the attention to mix.
    std::string text;
    for (int i = 0; i < 16; ++i) text += "the cat sat on ";
    const std::string out = dir.file(std::string("logits-") + type + ".f32");
    r = run_geist({"logits", "-m", path, "-p", text, "-o", out, "--batch", "5"}, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<float> logits = read_f32_file(out);
    ASSERT_FALSE(logits.empty());
    ASSERT_EQ(logits.size() % kTinyQwen35.n_vocab, 0u);
    EXPECT_TRUE(all_finite(logits));
    // Not collapsed: random weights of std 1/sqrt(fan_in) give logits of std about 1.
    double sum2 = 0;
    for (float x : logits) sum2 += static_cast<double>(x) * x;
    const double rms = std::sqrt(sum2 / logits.size());
    EXPECT_GT(rms, 0.2);
    EXPECT_LT(rms, 20.0);
  }
}

TEST(CliQwen35, FixtureLogitsMatchLlamaCpp) {
  GEIST_REQUIRE_FIXTURES();
  const std::string json = read_text_file(fixture_path("reference/tiny-qwen35/hf_reference.json"));
  const std::vector<int> tokens = json_int_array(json, "tokens");
  ASSERT_EQ(tokens.size(), 200u);
  const std::vector<float> ref =
      read_f32_file(fixture_path("reference/tiny-qwen35/llamacpp_f32_logits.f32"));
  ASSERT_EQ(ref.size(), 200u * kFixture.n_vocab);
  TempDir dir;
  std::vector<std::string> args = {"logits",
                                   "-m",
                                   fixture_path(kFixtureF32),
                                   "--tokens",
                                   join_ids(tokens, ','),
                                   "-o",
                                   dir.file("logits.f32")};
  // The reference was made with an F32 KV cache; pass it where the CLI offers a KV mode.
  const CliResult help = run_geist({"logits", "--help"}, dir.path());
  if ((help.out + help.err).find("--kv-mode") != std::string::npos) {
    args.insert(args.end(), {"--kv-mode", "f32"});
  }
  const CliResult r = run_geist(args, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<float> got = read_f32_file(dir.file("logits.f32"));
  ASSERT_EQ(got.size(), ref.size());
  double max_diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(got[i] - ref[i])));
  }
  EXPECT_LT(max_diff, 5e-3);
}

// Parameters of a tied-embedding Qwen3.5 text model, from its definition.
int64_t qwen35_params(const QShape& s) {
  const int64_t e = s.n_embd, vd = s.n_v * s.d_v;
  const int64_t common = 2 * e + 3 * e * s.n_ff;  // two norms, SwiGLU FFN
  const int64_t deltanet = 2 * s.n_v + s.conv_kernel * s.conv_dim() + 2 * e * s.n_v +
                           e * s.conv_dim() + e * vd + s.d_v + vd * e;
  const int64_t attention = 2 * s.head_dim + 2 * e * s.n_head_kv * s.head_dim +
                            s.n_head * s.head_dim * e + e * 2 * s.n_head * s.head_dim;
  int64_t n = s.n_vocab * e + e;  // embedding (tied) + output norm
  for (int64_t il = 0; il < s.n_layer; ++il) {
    n += common + (s.attention(il) ? attention : deltanet);
  }
  return n;
}

void check_preset_table(const char* name, const QShape& s) {
  const MkModelPreset* p = find_mkmodel_preset(name);
  ASSERT_NE(p, nullptr) << name;
  const std::vector<MkTensorSpec> specs = mkmodel_tensor_specs(*p, GgmlType::Q8_0);
  // token_embd + per layer 14 (DeltaNet) or 11 (attention) + output_norm.
  int64_t n_tensors = 2;
  for (int64_t il = 0; il < s.n_layer; ++il) n_tensors += s.attention(il) ? 11 : 14;
  EXPECT_EQ(static_cast<int64_t>(specs.size()), n_tensors);
  int64_t n_params = 0;
  for (const MkTensorSpec& t : specs) {
    EXPECT_EQ(t.ne, expected_ne(role_of(t.name), s)) << t.name;
    if (t.name.find("blk.") == 0) {
      // DeltaNet tensors only in DeltaNet layers, attention tensors only in attention layers.
      const std::string role = role_of(t.name);
      const bool ssm_role =
          role.find("ssm_") == 0 || role == "attn_qkv.weight" || role == "attn_gate.weight";
      const bool attn_role = !ssm_role && role.find("attn_") == 0 && role != "attn_norm.weight";
      const bool attention = s.attention(std::stoll(t.name.substr(4)));
      EXPECT_FALSE(attention ? ssm_role : attn_role) << t.name;
    }
    int64_t k = 1;
    for (int64_t d : t.ne) k *= d;
    n_params += k;
  }
  EXPECT_EQ(n_params, qwen35_params(s));
  EXPECT_EQ(mkmodel_param_count(*p), qwen35_params(s));
}

TEST(MkModelPreset, Qwen35_08bHasPublishedShapes) {
  check_preset_table("qwen35-0.8b", kQwen35_08b);
  // About 0.75B parameters in the text model (the published 0.8B includes the vision tower).
  EXPECT_NEAR(static_cast<double>(qwen35_params(kQwen35_08b)), 0.75e9, 0.02e9);

  const MkModelPreset* p = find_mkmodel_preset("qwen35-0.8b");
  ASSERT_NE(p, nullptr);
  TempDir dir;
  const std::string path = dir.file("q08-meta.gguf");
  const Status st = mkmodel_write(*p, "q4_0", path, 0, {}, /*metadata_only=*/true);
  ASSERT_TRUE(st.is_ok()) << st.message();
  auto f = open_gguf(path);
  ASSERT_NE(f, nullptr);
  auto u32 = [&](const char* key) {
    uint32_t v = 0;
    EXPECT_TRUE(f->get_u32(key, &v).is_ok()) << key;
    return static_cast<int64_t>(v);
  };
  const QShape& s = kQwen35_08b;
  EXPECT_EQ(u32("qwen35.block_count"), s.n_layer);
  EXPECT_EQ(u32("qwen35.context_length"), 262144);
  EXPECT_EQ(u32("qwen35.embedding_length"), s.n_embd);
  EXPECT_EQ(u32("qwen35.feed_forward_length"), s.n_ff);
  EXPECT_EQ(u32("qwen35.attention.head_count"), s.n_head);
  EXPECT_EQ(u32("qwen35.attention.head_count_kv"), s.n_head_kv);
  EXPECT_EQ(u32("qwen35.attention.key_length"), s.head_dim);
  EXPECT_EQ(u32("qwen35.attention.value_length"), s.head_dim);
  EXPECT_EQ(u32("qwen35.rope.dimension_count"), s.head_dim / 4);  // partial_rotary_factor 0.25
  EXPECT_EQ(u32("qwen35.ssm.conv_kernel"), s.conv_kernel);
  EXPECT_EQ(u32("qwen35.ssm.state_size"), s.d_k);
  EXPECT_EQ(u32("qwen35.ssm.group_count"), s.n_k);
  EXPECT_EQ(u32("qwen35.ssm.time_step_rank"), s.n_v);
  EXPECT_EQ(u32("qwen35.ssm.inner_size"), s.n_v * s.d_v);
  EXPECT_EQ(u32("qwen35.full_attention_interval"), s.interval);
  EXPECT_EQ(u32("general.file_type"), 2);
  float theta = 0;
  ASSERT_TRUE(f->get_f32("qwen35.rope.freq_base", &theta).is_ok());
  EXPECT_EQ(theta, 1e7f);
  std::vector<int32_t> sections;
  ASSERT_TRUE(f->get_arr_i32("qwen35.rope.dimension_sections", &sections).is_ok());
  EXPECT_EQ(sections, (std::vector<int32_t>{11, 11, 10, 0}));
  // Qwen3.5's special tokens at their published ids (config.json: eos 248044,
  // vision_start 248053, vision_end 248054, image 248056, video 248057).
  const std::vector<std::string_view>* tokens = nullptr;
  ASSERT_TRUE(f->get_arr_str("tokenizer.ggml.tokens", &tokens).is_ok());
  ASSERT_EQ(tokens->size(), static_cast<size_t>(s.n_vocab));
  EXPECT_EQ((*tokens)[248044], "<|endoftext|>");
  EXPECT_EQ((*tokens)[248045], "<|im_start|>");
  EXPECT_EQ((*tokens)[248046], "<|im_end|>");
  EXPECT_EQ((*tokens)[248053], "<|vision_start|>");
  EXPECT_EQ((*tokens)[248054], "<|vision_end|>");
  EXPECT_EQ((*tokens)[248056], "<|image_pad|>");
  EXPECT_EQ((*tokens)[248057], "<|video_pad|>");
  EXPECT_EQ((*tokens)[248319], "[PAD248319]");
}

TEST(MkModelPreset, Qwen35_2bShapes) {
  // Qwen3.5-2B's text model: Qwen3.5-0.8B's layout with n_embd 2048 and n_ff 6144.
  QShape s = kQwen35_08b;
  s.n_embd = 2048;
  s.n_ff = 6144;
  check_preset_table("qwen35-2b", s);
}

}  // namespace
}  // namespace geist::test
