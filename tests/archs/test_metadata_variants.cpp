// Metadata and tensor-name variants found in GGUFs in the wild, made by rewriting the fixture
// models (stories260K: llama; tiny-qwen35: qwen35): variants that mean the same model load and
// compute exactly the same logits; variants the forward cannot honour are refused, naming the
// key or tensor (never run silently without it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "archs/arch.h"
#include "base/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/quant.h"
#include "support/bytes.h"
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

// The biases llama.cpp reads for llama files (attn_q/k/v/output, ffn_gate/up/down .bias).
const char* const kBiasKinds[] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                  "ffn_gate", "ffn_up", "ffn_down"};

// Output size of blk.N.<kind>.weight: its ne[1].
int64_t bias_len(const GgufFile& f, const std::string& kind) {
  return f.find_tensor("blk.0." + kind + ".weight")->ne[1];
}

// A tensor of the file as f32 (its rows dequantized: the weights are the test's input data).
std::vector<double> tensor_f64(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  const int64_t ne0 = t->ne[0], rows = t->n_elements() / ne0;
  std::vector<float> row(static_cast<size_t>(ne0));
  std::vector<double> out;
  const size_t rb = ggml_row_size(t->type, ne0);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t->type, t->data + r * rb, row.data(), ne0);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// The llama forward of a one-layer model in double, with biases b (kind -> values, may be
// empty): embedding, RMSNorm, q / k / v (+ bias), RoPE (adjacent pairs, theta 10000), causal
// softmax attention with grouped KV heads, output (+ bias), residual, RMSNorm, SwiGLU FFN (+
// biases), residual, output norm, output matrix. Logits [n_tok][n_vocab].
std::vector<double> llama_one_layer_f64(const GgufFile& f, const std::vector<int32_t>& toks,
                                        const std::map<std::string, std::vector<float>>& b) {
  int32_t n_embd = 0, n_head = 0, n_head_kv = 0, n_ff = 0;
  float eps = 0;
  EXPECT_TRUE(f.get_i32("llama.embedding_length", &n_embd).is_ok());
  EXPECT_TRUE(f.get_i32("llama.attention.head_count", &n_head).is_ok());
  EXPECT_TRUE(f.get_i32("llama.attention.head_count_kv", &n_head_kv).is_ok());
  EXPECT_TRUE(f.get_i32("llama.feed_forward_length", &n_ff).is_ok());
  EXPECT_TRUE(f.get_f32("llama.attention.layer_norm_rms_epsilon", &eps).is_ok());
  const int hd = n_embd / n_head, n = static_cast<int>(toks.size());
  const std::vector<double> emb = tensor_f64(f, "token_embd.weight");
  const int64_t n_vocab = static_cast<int64_t>(emb.size()) / n_embd;
  auto w = [&](const std::string& k) { return tensor_f64(f, "blk.0." + k + ".weight"); };
  const std::vector<double> wq = w("attn_q"), wk = w("attn_k"), wv = w("attn_v"),
                            wo = w("attn_output"), wg = w("ffn_gate"), wu = w("ffn_up"),
                            wd = w("ffn_down"), an = w("attn_norm"), fn = w("ffn_norm");
  const std::vector<double> on = tensor_f64(f, "output_norm.weight");
  const std::vector<double> wout = tensor_f64(f, "output.weight");
  auto mv = [&](const std::vector<double>& m, const std::vector<double>& x, const char* kind) {
    const size_t n_in = x.size(), n_out = m.size() / n_in;
    std::vector<double> y(n_out, 0.0);
    for (size_t o = 0; o < n_out; ++o) {
      for (size_t i = 0; i < n_in; ++i) y[o] += m[o * n_in + i] * x[i];
      if (kind != nullptr && b.count(kind)) y[o] += b.at(kind)[o];
    }
    return y;
  };
  auto norm = [&](const std::vector<double>& x, const std::vector<double>& g) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double r = 1.0 / std::sqrt(ss / x.size() + eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * g[i];
    return y;
  };
  auto rope = [&](std::vector<double>& x, int pos) {
    for (size_t h = 0; h < x.size() / hd; ++h) {
      for (int i = 0; i < hd / 2; ++i) {
        const double th = pos * std::pow(10000.0, -2.0 * i / hd);
        double& a = x[h * hd + 2 * i];
        double& c = x[h * hd + 2 * i + 1];
        const double a0 = a, c0 = c;
        a = a0 * std::cos(th) - c0 * std::sin(th);
        c = a0 * std::sin(th) + c0 * std::cos(th);
      }
    }
  };
  std::vector<std::vector<double>> xs, ks, vs, qs;
  for (int t = 0; t < n; ++t) {
    xs.emplace_back(emb.begin() + toks[t] * n_embd, emb.begin() + (toks[t] + 1) * n_embd);
    const std::vector<double> xn = norm(xs[t], an);
    qs.push_back(mv(wq, xn, "attn_q"));
    ks.push_back(mv(wk, xn, "attn_k"));
    vs.push_back(mv(wv, xn, "attn_v"));
    rope(qs[t], t);
    rope(ks[t], t);
  }
  std::vector<double> logits;
  for (int t = 0; t < n; ++t) {
    std::vector<double> att(static_cast<size_t>(n_head * hd), 0.0);
    for (int h = 0; h < n_head; ++h) {
      const int kh = h / (n_head / n_head_kv);
      std::vector<double> sc(static_cast<size_t>(t + 1));
      double mx = -1e300, sum = 0;
      for (int u = 0; u <= t; ++u) {
        double d = 0;
        for (int i = 0; i < hd; ++i) d += qs[t][h * hd + i] * ks[u][kh * hd + i];
        sc[u] = d / std::sqrt(static_cast<double>(hd));
        mx = std::max(mx, sc[u]);
      }
      for (int u = 0; u <= t; ++u) sum += (sc[u] = std::exp(sc[u] - mx));
      for (int u = 0; u <= t; ++u) {
        for (int i = 0; i < hd; ++i) att[h * hd + i] += sc[u] / sum * vs[u][kh * hd + i];
      }
    }
    std::vector<double> x = xs[t];
    const std::vector<double> o = mv(wo, att, "attn_output");
    for (int i = 0; i < n_embd; ++i) x[i] += o[i];
    const std::vector<double> xn = norm(x, fn);
    const std::vector<double> g = mv(wg, xn, "ffn_gate"), u = mv(wu, xn, "ffn_up");
    std::vector<double> hdn(static_cast<size_t>(n_ff));
    for (int i = 0; i < n_ff; ++i) hdn[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    const std::vector<double> d = mv(wd, hdn, "ffn_down");
    for (int i = 0; i < n_embd; ++i) x[i] += d[i];
    const std::vector<double> l = mv(wout, norm(x, on), nullptr);
    EXPECT_EQ(static_cast<int64_t>(l.size()), n_vocab);
    logits.insert(logits.end(), l.begin(), l.end());
  }
  return logits;
}

using test::f32_bytes;

TEST_F(Variants, LlamaBiasesAreApplied) {
  GEIST_REQUIRE_FIXTURES();
  open("models/stories260K.gguf");  // 5 layers, n_embd 64, 8 heads / 4 KV heads of 8
  // All seven biases, zero, on every layer: the same logits as the file without them.
  Rewrite zeros;
  zeros.extra_tensors = [this](GgufWriter& w) {
    for (int il = 0; il < 5; ++il) {
      for (const char* kind : kBiasKinds) {
        const int64_t n = bias_len(*file_, kind);
        w.add_tensor("blk." + std::to_string(il) + "." + kind + ".bias", GgmlType::F32, {n},
                     f32_bytes(std::vector<float>(static_cast<size_t>(n), 0.0f)));
      }
    }
  };
  expect_same(zeros);
  // Nonzero biases on a one-layer cut of the model against the double-precision forward.
  std::map<std::string, std::vector<float>> biases;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  for (const char* kind : kBiasKinds) {
    std::vector<float>& v = biases[kind];
    v.resize(static_cast<size_t>(bias_len(*file_, kind)));
    for (float& x : v) x = nd(rng);
  }
  auto one_layer = [&](bool with_biases) {
    Rewrite r;
    r.kv = [](const GgufKv& kv, GgufWriter& w) {
      if (kv.key != "llama.block_count") return true;
      w.add_u32("llama.block_count", 1);
      return false;
    };
    r.tensor_name = [](std::string_view name) {
      const bool other_layer = name.substr(0, 4) == "blk." && name.substr(0, 6) != "blk.0.";
      return other_layer ? std::string() : std::string(name);
    };
    if (with_biases) {
      r.extra_tensors = [&biases](GgufWriter& w) {
        for (const auto& [kind, v] : biases) {
          w.add_tensor("blk.0." + kind + ".bias", GgmlType::F32, {static_cast<int64_t>(v.size())},
                       f32_bytes(v));
        }
      };
    }
    auto rw = std::make_unique<Rewritten>();
    rewrite(*file_, r, rw.get());
    return rw;
  };
  const std::unique_ptr<Rewritten> plain = one_layer(false), biased = one_layer(true);
  std::vector<float> got;
  ASSERT_TRUE(logits_of(*biased->file, &got).is_ok());
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 275, 300, 5};  // logits_of's
  const std::vector<double> ref = llama_one_layer_f64(*biased->file, tokens, biases);
  const std::vector<double> ref_plain = llama_one_layer_f64(*plain->file, tokens, {});
  ASSERT_EQ(got.size(), ref.size());
  double err = 0, effect = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::fabs(got[i] - ref[i]));
    effect = std::max(effect, std::fabs(ref[i] - ref_plain[i]));
  }
  std::printf("one-layer llama with biases: max |geist - f64| %.3g, bias effect %.3g\n", err,
              effect);
  EXPECT_GT(effect, 0.1);         // the biases matter
  EXPECT_LT(err, 0.01 * effect);  // and geist applies them as the double forward does
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
