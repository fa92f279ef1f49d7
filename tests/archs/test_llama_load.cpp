// Loading synthetic Llama GGUFs built in memory: validation errors name what is wrong, tied
// output embeddings, and the registry's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "archs/arch.h"
#include "base/thread_pool.h"
#include "formats/gguf.h"
#include "support/bytes.h"

namespace geist {
namespace {

constexpr int kEmbd = 32, kHead = 4, kHeadKv = 2, kFf = 48, kLayer = 2, kVocab = 16;

using test::f32_bytes;

struct Spec {
  std::string arch = "llama";
  uint32_t rope_dims = kEmbd / kHead;
  std::function<void(GgufWriter&)> extra_kv;
  // Returns false to drop the tensor; may change its type/shape/data.
  std::function<bool(std::string&, GgmlType&, std::vector<int64_t>&, std::vector<uint8_t>&)> edit;
};

struct Built {
  std::vector<uint8_t> bytes;
  std::unique_ptr<GgufFile> file;
  std::vector<float> embd;  // [kVocab][kEmbd]
  std::vector<float> out_norm;
};

Status build(const Spec& s, Built* b) {
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto randv = [&](size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = nd(rng);
    return v;
  };
  GgufWriter w;
  w.add_str("general.architecture", s.arch);
  const std::string p = s.arch + ".";
  w.add_u32(p + "context_length", 64);
  w.add_u32(p + "embedding_length", kEmbd);
  w.add_u32(p + "block_count", kLayer);
  w.add_u32(p + "feed_forward_length", kFf);
  w.add_u32(p + "attention.head_count", kHead);
  w.add_u32(p + "attention.head_count_kv", kHeadKv);
  w.add_u32(p + "rope.dimension_count", s.rope_dims);
  w.add_f32(p + "attention.layer_norm_rms_epsilon", 1e-5f);
  if (s.extra_kv) s.extra_kv(w);

  auto add = [&](std::string name, std::vector<int64_t> ne, std::vector<float> data) {
    GgmlType type = GgmlType::F32;
    std::vector<uint8_t> bytes = f32_bytes(data);
    if (s.edit && !s.edit(name, type, ne, bytes)) return;
    w.add_tensor(name, type, ne, bytes);
  };
  b->embd = randv(kVocab * kEmbd);
  b->out_norm = randv(kEmbd);
  add("token_embd.weight", {kEmbd, kVocab}, b->embd);
  add("output_norm.weight", {kEmbd}, b->out_norm);
  // No output.weight: tied to token_embd.
  const int hd = kEmbd / kHead;
  // Every block matrix is zero, so each block passes the residual stream through unchanged.
  auto mat = [](size_t n) { return std::vector<float>(n, 0.0f); };
  for (int il = 0; il < kLayer; ++il) {
    const std::string bl = "blk." + std::to_string(il) + ".";
    add(bl + "attn_norm.weight", {kEmbd}, randv(kEmbd));
    add(bl + "attn_q.weight", {kEmbd, kHead * hd}, mat(kEmbd * kHead * hd));
    add(bl + "attn_k.weight", {kEmbd, kHeadKv * hd}, mat(kEmbd * kHeadKv * hd));
    add(bl + "attn_v.weight", {kEmbd, kHeadKv * hd}, mat(kEmbd * kHeadKv * hd));
    add(bl + "attn_output.weight", {kHead * hd, kEmbd}, mat(kEmbd * kHead * hd));
    add(bl + "ffn_norm.weight", {kEmbd}, randv(kEmbd));
    add(bl + "ffn_gate.weight", {kEmbd, kFf}, mat(kEmbd * kFf));
    add(bl + "ffn_up.weight", {kEmbd, kFf}, mat(kEmbd * kFf));
    add(bl + "ffn_down.weight", {kFf, kEmbd}, mat(kEmbd * kFf));
  }
  GEIST_RETURN_IF_ERROR(w.to_bytes(&b->bytes));
  return GgufFile::open_memory(b->bytes.data(), b->bytes.size(), &b->file);
}

Status load(const Spec& s, Built* b, std::unique_ptr<ArchModel>* m) {
  Status st = build(s, b);
  EXPECT_TRUE(st) << st.message();
  if (!st) return st;
  return load_arch_model(*b->file, Logger{}, m);
}

TEST(LlamaLoad, TiedOutputUsesTokenEmbedding) {
  // With every block matrix zero the residual stream keeps the embedding e_t, so by definition
  // logits[j] = dot(rmsnorm(e_t) * output_norm, e_j).
  Built b;
  std::unique_ptr<ArchModel> m;
  ASSERT_TRUE(load(Spec{}, &b, &m));
  std::unique_ptr<ArchState> state;
  ASSERT_TRUE(m->create_state(8, &state));
  ThreadPool pool(2);
  const int32_t toks[3] = {3, 9, 3};
  std::vector<float> logits(3 * kVocab);
  ASSERT_TRUE(m->forward(*state, toks, 3, 0, true, logits.data(), pool));
  for (int t = 0; t < 3; ++t) {
    const float* e = &b.embd[toks[t] * kEmbd];
    double ss = 0;
    for (int i = 0; i < kEmbd; ++i) ss += static_cast<double>(e[i]) * e[i];
    const double inv = 1.0 / std::sqrt(ss / kEmbd + 1e-5);
    for (int j = 0; j < kVocab; ++j) {
      double ref = 0;
      for (int i = 0; i < kEmbd; ++i) ref += e[i] * inv * b.out_norm[i] * b.embd[j * kEmbd + i];
      EXPECT_NEAR(logits[t * kVocab + j], ref, 1e-4) << t << " " << j;
    }
  }
}

TEST(LlamaLoad, MissingTensorIsFormatError) {
  Spec s;
  s.edit = [](std::string& n, GgmlType&, std::vector<int64_t>&, std::vector<uint8_t>&) {
    return n != "blk.1.ffn_up.weight";
  };
  Built b;
  std::unique_ptr<ArchModel> m;
  Status st = load(s, &b, &m);
  EXPECT_EQ(st.code(), GEIST_E_FORMAT);
  EXPECT_NE(st.message().find("blk.1.ffn_up.weight"), std::string::npos) << st.message();
}

TEST(LlamaLoad, WrongShapeIsFormatError) {
  Spec s;
  s.edit = [](std::string& n, GgmlType&, std::vector<int64_t>& ne, std::vector<uint8_t>&) {
    if (n == "blk.0.attn_k.weight") std::swap(ne[0], ne[1]);
    return true;
  };
  Built b;
  std::unique_ptr<ArchModel> m;
  Status st = load(s, &b, &m);
  EXPECT_EQ(st.code(), GEIST_E_FORMAT);
  EXPECT_NE(st.message().find("blk.0.attn_k.weight"), std::string::npos) << st.message();
}

TEST(LlamaLoad, UnsupportedTypeNamesTensorAndType) {
  Spec s;
  s.edit = [](std::string& n, GgmlType& t, std::vector<int64_t>& ne, std::vector<uint8_t>& d) {
    if (n == "blk.1.attn_v.weight") {
      t = GgmlType::I8;
      d.assign(static_cast<size_t>(ne[0] * ne[1]), 0);
    }
    return true;
  };
  Built b;
  std::unique_ptr<ArchModel> m;
  Status st = load(s, &b, &m);
  EXPECT_EQ(st.code(), GEIST_E_UNSUPPORTED);
  EXPECT_NE(st.message().find("blk.1.attn_v.weight"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(ggml_type_name(GgmlType::I8)), std::string::npos) << st.message();
}

TEST(LlamaLoad, BadHyperParameters) {
  {
    Spec s;
    s.rope_dims = 64;  // larger than the head
    Built b;
    std::unique_ptr<ArchModel> m;
    Status st = load(s, &b, &m);
    EXPECT_EQ(st.code(), GEIST_E_FORMAT);
    EXPECT_NE(st.message().find("rope.dimension_count"), std::string::npos) << st.message();
  }
  {
    Spec s;
    s.extra_kv = [](GgufWriter& w) { w.add_str("llama.rope.scaling.type", "longrope"); };
    Built b;
    std::unique_ptr<ArchModel> m;
    Status st = load(s, &b, &m);
    EXPECT_EQ(st.code(), GEIST_E_UNSUPPORTED);
    EXPECT_NE(st.message().find("longrope"), std::string::npos) << st.message();
  }
  {  // YaRN is applied (test_metadata_variants.cpp), a negative factor is a format error
    Spec s;
    s.extra_kv = [](GgufWriter& w) {
      w.add_str("llama.rope.scaling.type", "yarn");
      w.add_f32("llama.rope.scaling.factor", -2.0f);
    };
    Built b;
    std::unique_ptr<ArchModel> m;
    Status st = load(s, &b, &m);
    EXPECT_EQ(st.code(), GEIST_E_FORMAT);
    EXPECT_NE(st.message().find("llama.rope.scaling.factor"), std::string::npos) << st.message();
  }
}

TEST(LlamaLoad, RegistryRefusals) {
  for (const char* arch : {"qwen35moe", "gpt2"}) {
    Spec s;
    s.arch = arch;
    Built b;
    std::unique_ptr<ArchModel> m;
    Status st = load(s, &b, &m);
    EXPECT_EQ(st.code(), GEIST_E_UNSUPPORTED) << arch;
    EXPECT_NE(st.message().find(arch), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace geist
