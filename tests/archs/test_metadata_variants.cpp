// Metadata and tensor-name variants found in GGUFs in the wild, made by rewriting the fixture
// models (stories260K: llama; tiny-qwen35: qwen35): variants that mean the same model load and
// compute exactly the same logits; variants the forward cannot honour are refused, naming the
// key or tensor (never run silently without it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "archs/arch.h"
#include "base/thread_pool.h"
#include "formats/gguf.h"
#include "support/fixtures.h"

namespace geist {
namespace {

struct Rewrite {
  // Returns false to drop the key (the callback may add keys of its own to w instead).
  std::function<bool(const GgufKv&, GgufWriter&)> kv;
  std::function<void(GgufWriter&)> extra_kv;
  // Returns the name the tensor is written under ("" drops it).
  std::function<std::string(std::string_view)> tensor_name;
  std::function<void(GgufWriter&)> extra_tensors;
};

struct Rewritten {
  std::vector<uint8_t> bytes;
  std::unique_ptr<GgufFile> file;
};

void rewrite(const GgufFile& in, const Rewrite& r, Rewritten* out) {
  GgufWriter w;
  w.set_alignment(static_cast<uint32_t>(in.alignment()));
  for (const GgufKv& kv : in.kvs()) {
    if (kv.key == "general.alignment") continue;
    if (r.kv && !r.kv(kv, w)) continue;
    w.add_kv(kv);
  }
  if (r.extra_kv) r.extra_kv(w);
  for (const GgufTensorInfo& t : in.tensors()) {
    const std::string name = r.tensor_name ? r.tensor_name(t.name) : std::string(t.name);
    if (name.empty()) continue;
    w.add_tensor(name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                 std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  if (r.extra_tensors) r.extra_tensors(w);
  ASSERT_TRUE(w.to_bytes(&out->bytes).is_ok());
  ASSERT_TRUE(GgufFile::open_memory(out->bytes.data(), out->bytes.size(), &out->file).is_ok());
}

Status logits_of(const GgufFile& file, std::vector<float>* out) {
  std::unique_ptr<ArchModel> model;
  GEIST_RETURN_IF_ERROR(load_arch_model(file, BackendKind::CPU, Logger{}, &model));
  std::unique_ptr<ArchState> state;
  GEIST_RETURN_IF_ERROR(model->create_state(32, &state));
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 275, 300, 5};
  out->assign(tokens.size() * static_cast<size_t>(model->info().n_vocab), 0.0f);
  ThreadPool pool(2);
  return model->forward(*state, tokens.data(), static_cast<int32_t>(tokens.size()), 0, true,
                        out->data(), pool);
}

class Variants : public ::testing::Test {
 protected:
  void open(const char* fixture) {
    const Status st = GgufFile::open(test::fixture_path(fixture), &file_);
    ASSERT_TRUE(st.is_ok()) << st.message();
    ASSERT_TRUE(logits_of(*file_, &want_).is_ok());
  }
  // The rewritten model loads and computes the fixture's logits exactly.
  void expect_same(const Rewrite& r) {
    Rewritten rw;
    rewrite(*file_, r, &rw);
    std::vector<float> got;
    const Status st = logits_of(*rw.file, &got);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(got, want_);
  }
  // The rewritten model loads and runs, with finite logits that differ from the fixture's.
  void expect_changed(const Rewrite& r) {
    Rewritten rw;
    rewrite(*file_, r, &rw);
    std::vector<float> got;
    const Status st = logits_of(*rw.file, &got);
    ASSERT_TRUE(st.is_ok()) << st.message();
    ASSERT_EQ(got.size(), want_.size());
    double diff = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << i;
      diff = std::max(diff, std::fabs(double{got[i]} - want_[i]));
    }
    EXPECT_GT(diff, 1e-3);
  }
  // The rewritten model is refused with `code`, the message naming `needle`.
  void expect_refused(const Rewrite& r, geist_status code, const std::string& needle) {
    Rewritten rw;
    rewrite(*file_, r, &rw);
    std::unique_ptr<ArchModel> model;
    const Status st = load_arch_model(*rw.file, BackendKind::CPU, Logger{}, &model);
    EXPECT_EQ(st.code(), code) << st.message();
    EXPECT_NE(st.message().find(needle), std::string::npos)
        << "message should name '" << needle << "': " << st.message();
  }

  std::unique_ptr<GgufFile> file_;
  std::vector<float> want_;
};

// A scalar key written as an array of one value per block.
Rewrite as_array(const std::string& key, std::vector<int32_t> values) {
  Rewrite r;
  r.kv = [key, values](const GgufKv& kv, GgufWriter& w) {
    if (kv.key != key) return true;
    w.add_arr_i32(key, values);
    return false;
  };
  return r;
}

Rewrite with_kv(std::function<void(GgufWriter&)> add) {
  Rewrite r;
  r.extra_kv = std::move(add);
  return r;
}

TEST_F(Variants, LlamaPerLayerHeadCounts) {
  GEIST_REQUIRE_FIXTURES();
  open("models/stories260K.gguf");  // 5 layers, 8 heads, 4 KV heads
  expect_same(as_array("llama.attention.head_count_kv", {4, 4, 4, 4, 4}));
  expect_same(as_array("llama.attention.head_count", {8, 8, 8, 8, 8}));
  expect_refused(as_array("llama.attention.head_count_kv", {4, 4, 2, 4, 4}), GEIST_E_UNSUPPORTED,
                 "llama.attention.head_count_kv differs between layers");
  expect_refused(as_array("llama.attention.head_count_kv", {4, 4}), GEIST_E_FORMAT,
                 "llama.attention.head_count_kv holds 2 values for 5 layers");
}

TEST_F(Variants, LlamaRopeScalingIsAppliedOrRefused) {
  GEIST_REQUIRE_FIXTURES();
  open("models/stories260K.gguf");
  // Factor 1 and "none" change nothing.
  expect_same(with_kv([](GgufWriter& w) { w.add_f32("llama.rope.scaling.factor", 1.0f); }));
  expect_same(with_kv([](GgufWriter& w) { w.add_str("llama.rope.scaling.type", "none"); }));
  // YaRN with factor 1 is the unscaled rope: every frequency factor 1, mscale 1, same bits.
  expect_same(with_kv([](GgufWriter& w) {
    w.add_str("llama.rope.scaling.type", "yarn");
    w.add_f32("llama.rope.scaling.factor", 1.0f);
    w.add_i32("llama.rope.scaling.original_context_length", 64);
  }));
  // YaRN factor 4 (its frequencies and mscale: OpsRope.YarnMatchesTheYarnFormulas) runs and
  // moves the logits.
  expect_changed(with_kv([](GgufWriter& w) {
    w.add_str("llama.rope.scaling.type", "yarn");
    w.add_f32("llama.rope.scaling.factor", 4.0f);
    w.add_i32("llama.rope.scaling.original_context_length", 64);
  }));
  expect_refused(with_kv([](GgufWriter& w) {
                   w.add_str("llama.rope.scaling.type", "yarn");
                   w.add_f32("llama.rope.scaling.factor", 4.0f);
                   w.add_f32("llama.rope.scaling.yarn_log_multiplier", 0.1f);
                 }),
                 GEIST_E_UNSUPPORTED, "llama.rope.scaling.yarn_log_multiplier");
  expect_refused(with_kv([](GgufWriter& w) { w.add_str("llama.rope.scaling.type", "longrope"); }),
                 GEIST_E_UNSUPPORTED, "'longrope'");
  expect_refused(with_kv([](GgufWriter& w) { w.add_f32("llama.rope.scaling.attn_factor", 0.5f); }),
                 GEIST_E_UNSUPPORTED, "llama.rope.scaling.attn_factor");
}

TEST_F(Variants, LlamaBiasesAreRefusedByName) {
  GEIST_REQUIRE_FIXTURES();
  open("models/stories260K.gguf");  // n_embd 64, 4 KV heads of 8
  for (const char* name : {"blk.0.attn_q.bias", "blk.2.attn_v.bias", "blk.4.ffn_down.bias"}) {
    Rewrite r;
    r.extra_tensors = [name](GgufWriter& w) {
      const int64_t n = std::strstr(name, "attn_v") ? 32 : 64;
      w.add_tensor(name, GgmlType::F32, {n}, std::vector<uint8_t>(static_cast<size_t>(n) * 4, 0));
    };
    expect_refused(r, GEIST_E_UNSUPPORTED, std::string("'") + name + "'");
  }
}

TEST_F(Variants, Qwen35SsmDtWithoutBiasSuffix) {
  GEIST_REQUIRE_FIXTURES();
  open("models/tiny-qwen35-f32.gguf");
  Rewrite r;  // Ollama's exports: blk.N.ssm_dt instead of blk.N.ssm_dt.bias
  r.tensor_name = [](std::string_view n) {
    const std::string s(n);
    const std::string suffix = ".ssm_dt.bias";
    if (s.size() > suffix.size() &&
        s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return s.substr(0, s.size() - 5);
    }
    return s;
  };
  expect_same(r);
}

TEST_F(Variants, Qwen35PerLayerHeadCounts) {
  GEIST_REQUIRE_FIXTURES();
  open("models/tiny-qwen35-f32.gguf");  // 8 layers, attention at 3 and 7: 4 heads / 2 KV heads
  // The DeltaNet blocks' entries are 0, as hybrid converters write them.
  expect_same(as_array("qwen35.attention.head_count_kv", {0, 0, 0, 2, 0, 0, 0, 2}));
  expect_same(as_array("qwen35.attention.head_count", {4, 4, 4, 4, 4, 4, 4, 4}));
  expect_refused(as_array("qwen35.attention.head_count_kv", {0, 0, 0, 2, 0, 0, 0, 1}),
                 GEIST_E_UNSUPPORTED, "qwen35.attention.head_count_kv differs");
}

TEST_F(Variants, Qwen35RopeScalingIsAppliedOrRefusedByKey) {
  GEIST_REQUIRE_FIXTURES();
  open("models/tiny-qwen35-f32.gguf");
  expect_same(with_kv([](GgufWriter& w) { w.add_str("qwen35.rope.scaling.type", "none"); }));
  expect_same(with_kv([](GgufWriter& w) { w.add_f32("qwen35.rope.scaling.factor", 1.0f); }));
  // YaRN: factor 1 is the unscaled rope (same bits); factor 4 runs and moves the logits.
  expect_same(with_kv([](GgufWriter& w) {
    w.add_str("qwen35.rope.scaling.type", "yarn");
    w.add_f32("qwen35.rope.scaling.factor", 1.0f);
    w.add_i32("qwen35.rope.scaling.original_context_length", 64);
  }));
  expect_changed(with_kv([](GgufWriter& w) {
    w.add_str("qwen35.rope.scaling.type", "yarn");
    w.add_f32("qwen35.rope.scaling.factor", 4.0f);
    w.add_i32("qwen35.rope.scaling.original_context_length", 64);
  }));
  expect_refused(with_kv([](GgufWriter& w) {
                   w.add_str("qwen35.rope.scaling.type", "yarn");
                   w.add_f32("qwen35.rope.scaling.yarn_ext_factor", 0.5f);
                 }),
                 GEIST_E_UNSUPPORTED, "qwen35.rope.scaling.yarn_ext_factor");
  expect_refused(with_kv([](GgufWriter& w) { w.add_f32("qwen35.rope.scaling.factor", 2.0f); }),
                 GEIST_E_UNSUPPORTED, "qwen35.rope.scaling.factor 2");
  expect_refused(with_kv([](GgufWriter& w) { w.add_f32("qwen35.rope.scaling.attn_factor", 0.8f); }),
                 GEIST_E_UNSUPPORTED, "qwen35.rope.scaling.attn_factor");
}

}  // namespace
}  // namespace geist
