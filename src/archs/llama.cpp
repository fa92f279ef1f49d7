// Llama family (general.architecture = "llama"): pre-norm decoder with RMSNorm, grouped-query
// attention with normal-style RoPE (the GGUF converter permutes Q/K rows into adjacent pairs),
// SwiGLU feed-forward. Weights are views into the GGUF mapping.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "archs/loaders.h"
#include "archs/rope_yarn.h"
#include "archs/tensors.h"
#include "backends/backend.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kv/kv_cache.h"

namespace geist {
namespace {

constexpr int32_t kMicroBatch = 256;  // rows per micro-batch on the CPU

struct LlamaConfig {
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t n_ff = 0;
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  int32_t n_rot = 0;
  float rope_freq_base = 10000;
  float rope_freq_scale = 1;
  bool yarn = false;  // rope.scaling.type yarn: rope_freq_scale stays 1, yarn_cfg applies
  YarnConfig yarn_cfg;
  float rms_eps = 0;
};

struct LlamaLayer {
  const float* attn_norm = nullptr;  // [n_embd]
  WeightMatrix wq;                   // [n_head * head_dim_k][n_embd]
  WeightMatrix wk;                   // [n_head_kv * head_dim_k][n_embd]
  WeightMatrix wv;                   // [n_head_kv * head_dim_v][n_embd]
  WeightMatrix wo;                   // [n_embd][n_head * head_dim_v]
  const float* ffn_norm = nullptr;   // [n_embd]
  WeightMatrix w_gate;               // [n_ff][n_embd]
  WeightMatrix w_up;                 // [n_ff][n_embd]
  WeightMatrix w_down;               // [n_embd][n_ff]
  // Optional biases (llama.cpp reads them when present), added after their matrix: [n_q],
  // [n_k], [n_v], [n_embd], [n_ff], [n_ff], [n_embd]; nullptr where the file has none.
  const float* bq = nullptr;
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* bo = nullptr;
  const float* b_gate = nullptr;
  const float* b_up = nullptr;
  const float* b_down = nullptr;
};

// A forward's activations (archs/workspace.h), device memory of the backend, `rows` rows.
struct LlamaWorkspace final : ArchWorkspace {
  std::unique_ptr<Buffer> x;     // [rows][n_embd] residual stream
  std::unique_ptr<Buffer> xn;    // [rows][n_embd] normed input / projection output
  std::unique_ptr<Buffer> q;     // [rows][n_head * head_dim_k]
  std::unique_ptr<Buffer> k;     // [rows][n_head_kv * head_dim_k]
  std::unique_ptr<Buffer> v;     // [rows][n_head_kv * head_dim_v]
  std::unique_ptr<Buffer> attn;  // [rows][n_head * head_dim_v]
  std::unique_ptr<Buffer> gate;  // [rows][n_ff]
  std::unique_ptr<Buffer> up;    // [rows][n_ff]
};

class LlamaState : public ArchState {
 public:
  int32_t max_seq_len() const override { return max_seq_len_; }
  void reset() override {}  // positions are the caller's; stale KV rows are overwritten
  Stream& compute_stream() const override { return *stream; }
  int32_t micro_batch() const override { return n_batch; }
  ArchWorkspace* own_workspace() const override { return workspace.get(); }
  // A KIVI cache holds only the f16 rows of the group it is filling: continuing elsewhere in
  // an earlier group (after a call that failed partway) would read rows of other positions.
  Status can_continue_at(int32_t pos) const override {
    if (kv->can_resume_at(pos)) return Status::ok();
    return Status::error(GEIST_E_INVALID_STATE,
                         "llama: the %s KV cache cannot continue at position %d (its residual "
                         "rows were overwritten); reset the session or restore a snapshot",
                         kv_mode_name(kv->mode()), pos);
  }
  KvMode kv_mode() const override { return kv->mode(); }
  void state_regions(int32_t n_pos, std::vector<StateRegion>* out) const override {
    out->clear();
    kv_state_regions(*kv, n_pos, out);
  }
  void download_region(const StateRegion& r, int32_t n_pos, uint8_t* dst) const override {
    kv->download_region(kv_region_of(r), n_pos, dst);
  }
  void upload_region(const StateRegion& r, int32_t n_pos, const uint8_t* src) override {
    kv->upload_region(kv_region_of(r), n_pos, src);
  }
  void set_positions(int32_t) override {}  // positions are the caller's

  // Declared first so that it is destroyed last: every buffer below comes from it.
  std::unique_ptr<Stream> stream;
  int32_t max_seq_len_ = 0;
  int32_t n_batch = 0;  // micro-batch capacity: min(backend's micro_batch, max_seq_len)
  std::unique_ptr<KvStore> kv;
  // Device backends: the state's own activations, n_batch rows (nullptr on the CPU backends,
  // where each forward borrows the model's).
  std::unique_ptr<ArchWorkspace> workspace;
};

class LlamaModel : public ArchModel {
 public:
  const ModelInfo& info() const override { return info_; }
  const Backend& backend() const override { return *backend_; }
  using ArchModel::create_state;
  Status create_state(int32_t max_seq_len, KvMode kv_mode,
                      std::unique_ptr<ArchState>* out) const override;
  // Replaces every host weight view by its copy on the backend (identity on the CPU).
  Status upload_weights(const GgufFile& file);

  std::unique_ptr<Backend> backend_;
  ModelInfo info_;
  LlamaConfig cfg_;
  RopeParams rope_;                            // freq_factors: device address after upload_weights
  std::vector<float> rope_freq_factors_host_;  // [n_rot / 2] or empty: for the KV cache's spec
  WeightMatrix tok_embd_;                      // [n_vocab][n_embd]
  const float* output_norm_ = nullptr;         // [n_embd]
  WeightMatrix output_;                        // [n_vocab][n_embd]; token_embd when tied
  std::vector<LlamaLayer> layers_;             // [n_layer]

 protected:
  bool owns(const ArchState& state) const override {
    return dynamic_cast<const LlamaState*>(&state) != nullptr;
  }
  int32_t cpu_micro_batch() const override { return kMicroBatch; }
  void run_micro_batch(ArchState& state, ArchWorkspace& ws, const MicroBatch& mb) const override;
  Status create_workspace(Stream& s, int32_t rows,
                          std::unique_ptr<ArchWorkspace>* out) const override;
};

// ---- loading ---------------------------------------------------------------------------------

Status read_i32(const GgufFile& f, const std::string& key, bool required, int32_t* out) {
  Status st = f.get_i32(key, out);
  if (st.code() == GEIST_E_NOT_FOUND && !required) return Status::ok();
  if (!st) return Status(st.code() == GEIST_E_NOT_FOUND ? GEIST_E_FORMAT : st.code(), st.message());
  if (*out <= 0)
    return Status::error(GEIST_E_FORMAT, "%s = %d must be positive", key.c_str(), *out);
  return Status::ok();
}

Status read_f32(const GgufFile& f, const std::string& key, bool required, float* out) {
  Status st = f.get_f32(key, out);
  if (st.code() == GEIST_E_NOT_FOUND && !required) return Status::ok();
  if (!st) return Status(st.code() == GEIST_E_NOT_FOUND ? GEIST_E_FORMAT : st.code(), st.message());
  if (!std::isfinite(*out)) return Status::error(GEIST_E_FORMAT, "%s is not finite", key.c_str());
  return Status::ok();
}

// A per-layer hyper-parameter (scalar or array) that must be the same in every layer: the
// forward keeps one head layout. Differing values are refused by key.
Status read_uniform(const GgufFile& f, const std::string& key, int32_t n_layer, bool required,
                    int32_t* out) {
  std::vector<int32_t> per_layer;
  GEIST_RETURN_IF_ERROR(read_per_layer_i32(f, key, n_layer, &per_layer));
  if (per_layer.empty()) {
    return required ? Status::error(GEIST_E_FORMAT, "%s is missing", key.c_str()) : Status::ok();
  }
  for (int32_t v : per_layer) {
    if (v != per_layer[0]) {
      return Status::error(GEIST_E_UNSUPPORTED, "%s differs between layers (%d and %d)",
                           key.c_str(), per_layer[0], v);
    }
  }
  if (per_layer[0] <= 0) {
    return Status::error(GEIST_E_FORMAT, "%s = %d must be positive", key.c_str(), per_layer[0]);
  }
  *out = per_layer[0];
  return Status::ok();
}

Status read_config(const GgufFile& f, LlamaConfig* c) {
  const std::string p = "llama.";
  GEIST_RETURN_IF_ERROR(read_i32(f, p + "context_length", true, &c->n_ctx_train));
  GEIST_RETURN_IF_ERROR(read_i32(f, p + "embedding_length", true, &c->n_embd));
  GEIST_RETURN_IF_ERROR(read_i32(f, p + "block_count", true, &c->n_layer));
  GEIST_RETURN_IF_ERROR(read_i32(f, p + "feed_forward_length", true, &c->n_ff));
  // Scalars or, as llama.cpp reads them (get_key_or_arr), one value per layer.
  GEIST_RETURN_IF_ERROR(read_uniform(f, p + "attention.head_count", c->n_layer, true, &c->n_head));
  c->n_head_kv = c->n_head;
  GEIST_RETURN_IF_ERROR(
      read_uniform(f, p + "attention.head_count_kv", c->n_layer, false, &c->n_head_kv));
  if (c->n_head % c->n_head_kv != 0) {
    return Status::error(GEIST_E_FORMAT,
                         "attention.head_count %d is not a multiple of head_count_kv %d", c->n_head,
                         c->n_head_kv);
  }
  if (c->n_embd % c->n_head != 0 && !f.find(p + "attention.key_length")) {
    return Status::error(GEIST_E_FORMAT, "embedding_length %d is not a multiple of head_count %d",
                         c->n_embd, c->n_head);
  }
  c->head_dim_k = c->n_embd / c->n_head;
  c->head_dim_v = c->head_dim_k;
  GEIST_RETURN_IF_ERROR(read_i32(f, p + "attention.key_length", false, &c->head_dim_k));
  GEIST_RETURN_IF_ERROR(read_i32(f, p + "attention.value_length", false, &c->head_dim_v));
  c->n_rot = c->head_dim_k;
  GEIST_RETURN_IF_ERROR(read_i32(f, p + "rope.dimension_count", false, &c->n_rot));
  if (c->n_rot % 2 != 0 || c->n_rot > c->head_dim_k) {
    return Status::error(GEIST_E_FORMAT, "rope.dimension_count %d must be even and <= head dim %d",
                         c->n_rot, c->head_dim_k);
  }
  GEIST_RETURN_IF_ERROR(read_f32(f, p + "rope.freq_base", false, &c->rope_freq_base));
  if (c->rope_freq_base <= 0) return Status(GEIST_E_FORMAT, "rope.freq_base must be positive");
  GEIST_RETURN_IF_ERROR(read_f32(f, p + "attention.layer_norm_rms_epsilon", true, &c->rms_eps));
  if (c->rms_eps < 0) return Status(GEIST_E_FORMAT, "attention.layer_norm_rms_epsilon is negative");

  int32_t n_expert = 0;
  Status st = f.get_i32(p + "expert_count", &n_expert);
  if (st && n_expert > 0) {
    return Status::error(GEIST_E_UNSUPPORTED, "llama with %d experts (MoE) is not supported",
                         n_expert);
  }

  // Like llama.cpp: a missing type means linear; the factor comes from rope.scaling.factor or
  // the older rope.scale_linear. Llama-3.x's frequency scaling is the rope_freqs tensor.
  std::string_view scaling = "linear";
  st = f.get_str(p + "rope.scaling.type", &scaling);
  if (!st && st.code() != GEIST_E_NOT_FOUND) return st;
  float factor = 0;
  if (scaling == "linear") {
    GEIST_RETURN_IF_ERROR(read_f32(f, p + "rope.scaling.factor", false, &factor));
    if (factor == 0) GEIST_RETURN_IF_ERROR(read_f32(f, p + "rope.scale_linear", false, &factor));
    if (factor < 0) return Status(GEIST_E_FORMAT, "rope scaling factor is negative");
    c->rope_freq_scale = factor == 0 ? 1.0f : 1.0f / factor;
  } else if (scaling == "yarn") {
    c->yarn = true;
    GEIST_RETURN_IF_ERROR(read_yarn_config(f, p, c->n_ctx_train, &c->yarn_cfg));
  } else if (scaling != "none") {
    return Status::error(GEIST_E_UNSUPPORTED, "%srope.scaling.type '%.*s' is not supported",
                         p.c_str(), static_cast<int>(scaling.size()), scaling.data());
  }
  // ggml's rope multiplies cos and sin by the attention factor: applied with YaRN (mscale),
  // refused rather than ignored otherwise.
  float attn_factor = 1;
  GEIST_RETURN_IF_ERROR(read_f32(f, p + "rope.scaling.attn_factor", false, &attn_factor));
  if (c->yarn) {
    if (!(attn_factor > 0) || !std::isfinite(attn_factor)) {
      return Status::error(GEIST_E_FORMAT, "%srope.scaling.attn_factor %g must be positive",
                           p.c_str(), static_cast<double>(attn_factor));
    }
    c->yarn_cfg.attn_factor = attn_factor;
  } else if (attn_factor != 1.0f) {
    return Status::error(GEIST_E_UNSUPPORTED, "%srope.scaling.attn_factor %g is not supported",
                         p.c_str(), static_cast<double>(attn_factor));
  }
  return Status::ok();
}

// The biases llama.cpp reads for llama files when present (create_tensor with
// TENSOR_NOT_REQUIRED): f32 vectors of their matrix's output size.
Status load_biases(const TensorChecks& tc, int32_t il, int64_t n_q, int64_t n_k, int64_t n_v,
                   int64_t n_embd, int64_t n_ff, LlamaLayer* l) {
  const struct {
    Tn t;
    int64_t n;
    const float** out;
  } biases[] = {{Tn::ATTN_Q, n_q, &l->bq},         {Tn::ATTN_K, n_k, &l->bk},
                {Tn::ATTN_V, n_v, &l->bv},         {Tn::ATTN_OUTPUT, n_embd, &l->bo},
                {Tn::FFN_GATE, n_ff, &l->b_gate},  {Tn::FFN_UP, n_ff, &l->b_up},
                {Tn::FFN_DOWN, n_embd, &l->b_down}};
  for (const auto& b : biases) {
    const std::string name = tn(b.t, "bias", il);
    if (tc.has(name)) GEIST_RETURN_IF_ERROR(tc.f32_view(name, b.n, b.out));
  }
  return Status::ok();
}

Status load_weights(const GgufFile& f, LlamaModel* m) {
  LlamaConfig& c = m->cfg_;
  const TensorChecks tc(f, "llama");
  // n_vocab comes from token_embd; llama.vocab_size, when present, must agree.
  const std::string embd = tn(Tn::TOKEN_EMBD, "weight");
  const GgufTensorInfo* te = f.find_tensor(embd);
  if (!te) return Status(GEIST_E_FORMAT, "llama: tensor '" + embd + "' is missing");
  if (te->ne[1] <= 0 || te->ne[1] > INT32_MAX) {
    return Status(GEIST_E_FORMAT, "llama: tensor '" + embd + "' has an invalid vocabulary size");
  }
  c.n_vocab = static_cast<int32_t>(te->ne[1]);
  int32_t vocab_key = c.n_vocab;
  GEIST_RETURN_IF_ERROR(read_i32(f, "llama.vocab_size", false, &vocab_key));
  if (vocab_key != c.n_vocab) {
    return Status::error(GEIST_E_FORMAT, "llama.vocab_size %d disagrees with token_embd (%d rows)",
                         vocab_key, c.n_vocab);
  }
  GEIST_RETURN_IF_ERROR(tc.matrix(embd, c.n_embd, c.n_vocab, &m->tok_embd_));
  GEIST_RETURN_IF_ERROR(tc.f32_view(tn(Tn::OUTPUT_NORM, "weight"), c.n_embd, &m->output_norm_));
  const std::string output = tn(Tn::OUTPUT, "weight");
  if (tc.has(output)) {
    GEIST_RETURN_IF_ERROR(tc.matrix(output, c.n_embd, c.n_vocab, &m->output_));
  } else {
    m->output_ = m->tok_embd_;
  }
  const std::string rope_freqs = tn(Tn::ROPE_FREQS, "weight");
  if (tc.has(rope_freqs)) {
    GEIST_RETURN_IF_ERROR(tc.f32_view(rope_freqs, c.n_rot / 2, &m->rope_.freq_factors));
    m->rope_freq_factors_host_.assign(m->rope_.freq_factors, m->rope_.freq_factors + c.n_rot / 2);
  }
  const int64_t n_q = static_cast<int64_t>(c.n_head) * c.head_dim_k;
  const int64_t n_k = static_cast<int64_t>(c.n_head_kv) * c.head_dim_k;
  const int64_t n_v = static_cast<int64_t>(c.n_head_kv) * c.head_dim_v;
  const int64_t n_o = static_cast<int64_t>(c.n_head) * c.head_dim_v;
  m->layers_.resize(static_cast<size_t>(c.n_layer));
  for (int32_t il = 0; il < c.n_layer; ++il) {
    LlamaLayer& l = m->layers_[static_cast<size_t>(il)];
    auto w = [il](Tn t) { return tn(t, "weight", il); };
    GEIST_RETURN_IF_ERROR(tc.f32_view(w(Tn::ATTN_NORM), c.n_embd, &l.attn_norm));
    GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::ATTN_Q), c.n_embd, n_q, &l.wq));
    GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::ATTN_K), c.n_embd, n_k, &l.wk));
    GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::ATTN_V), c.n_embd, n_v, &l.wv));
    GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::ATTN_OUTPUT), n_o, c.n_embd, &l.wo));
    GEIST_RETURN_IF_ERROR(tc.f32_view(w(Tn::FFN_NORM), c.n_embd, &l.ffn_norm));
    GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::FFN_GATE), c.n_embd, c.n_ff, &l.w_gate));
    GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::FFN_UP), c.n_embd, c.n_ff, &l.w_up));
    GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::FFN_DOWN), c.n_ff, c.n_embd, &l.w_down));
    GEIST_RETURN_IF_ERROR(load_biases(tc, il, n_q, n_k, n_v, c.n_embd, c.n_ff, &l));
  }
  return Status::ok();
}

// ---- state and forward -----------------------------------------------------------------------

Status LlamaModel::upload_weights(const GgufFile& file) {
  Backend& b = *backend_;
  GEIST_RETURN_IF_ERROR(upload_embeddings(b, file, &tok_embd_, &output_));
  const size_t e = static_cast<size_t>(cfg_.n_embd);
  GEIST_RETURN_IF_ERROR(b.upload_floats(output_norm_, e, &output_norm_));
  if (rope_.freq_factors) {
    GEIST_RETURN_IF_ERROR(b.upload_floats(rope_.freq_factors, static_cast<size_t>(cfg_.n_rot / 2),
                                          &rope_.freq_factors));
  }
  for (LlamaLayer& l : layers_) {
    GEIST_RETURN_IF_ERROR(b.upload_floats(l.attn_norm, e, &l.attn_norm));
    GEIST_RETURN_IF_ERROR(b.upload_floats(l.ffn_norm, e, &l.ffn_norm));
    for (WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      GEIST_RETURN_IF_ERROR(upload_matrix(b, file, w));
    }
    const std::pair<const float**, int64_t> biases[] = {
        {&l.bq, l.wq.n_out},        {&l.bk, l.wk.n_out},         {&l.bv, l.wv.n_out},
        {&l.bo, l.wo.n_out},        {&l.b_gate, l.w_gate.n_out}, {&l.b_up, l.w_up.n_out},
        {&l.b_down, l.w_down.n_out}};
    for (const auto& [bias, n] : biases) {
      if (*bias) GEIST_RETURN_IF_ERROR(b.upload_floats(*bias, static_cast<size_t>(n), bias));
    }
  }
  return Status::ok();
}

Status LlamaModel::create_state(int32_t max_seq_len, KvMode kv_mode,
                                std::unique_ptr<ArchState>* out) const {
  if (max_seq_len <= 0) {
    return Status::error(GEIST_E_INVALID_ARG, "max_seq_len %d must be positive", max_seq_len);
  }
  const LlamaConfig& c = cfg_;
  std::unique_ptr<LlamaState> st(new (std::nothrow) LlamaState());
  if (!st) return Status(GEIST_E_OOM, "llama: out of memory for the session state");
  GEIST_RETURN_IF_ERROR(backend_->new_stream(&st->stream));
  Stream& s = *st->stream;
  st->max_seq_len_ = max_seq_len;
  st->n_batch = std::min(micro_batch(), max_seq_len);
  RopeParams kv_rope = rope_;  // q4 keys are relative to the RoPE-turned key of position 0
  kv_rope.freq_factors = rope_freq_factors_host_.empty() ? nullptr : rope_freq_factors_host_.data();
  std::vector<KvLayerSpec> specs(static_cast<size_t>(c.n_layer),
                                 KvLayerSpec{c.n_head_kv * c.head_dim_k, c.n_head_kv * c.head_dim_v,
                                             c.head_dim_k, c.head_dim_v, kv_rope});
  GEIST_RETURN_IF_ERROR(s.create_kv(kv_mode, specs, max_seq_len, &st->kv));
  GEIST_RETURN_IF_ERROR(state_workspace(s, st->n_batch, &st->workspace));
  *out = std::move(st);
  return Status::ok();
}

Status LlamaModel::create_workspace(Stream& s, int32_t rows,
                                    std::unique_ptr<ArchWorkspace>* out) const {
  const LlamaConfig& c = cfg_;
  std::unique_ptr<LlamaWorkspace> w(new (std::nothrow) LlamaWorkspace());
  if (!w) return Status(GEIST_E_OOM, "llama: out of memory for a workspace");
  const size_t nb = static_cast<size_t>(rows) * sizeof(float);
  const size_t n_q = static_cast<size_t>(c.n_head) * static_cast<size_t>(c.head_dim_k);
  const size_t n_k = static_cast<size_t>(c.n_head_kv) * static_cast<size_t>(c.head_dim_k);
  const size_t n_v = static_cast<size_t>(c.n_head_kv) * static_cast<size_t>(c.head_dim_v);
  const size_t n_o = static_cast<size_t>(c.n_head) * static_cast<size_t>(c.head_dim_v);
  const size_t e = static_cast<size_t>(c.n_embd);
  const size_t f = static_cast<size_t>(c.n_ff);
  GEIST_RETURN_IF_ERROR(s.alloc(nb * e, &w->x));
  GEIST_RETURN_IF_ERROR(s.alloc(nb * e, &w->xn));
  GEIST_RETURN_IF_ERROR(s.alloc(nb * n_q, &w->q));
  GEIST_RETURN_IF_ERROR(s.alloc(nb * n_k, &w->k));
  GEIST_RETURN_IF_ERROR(s.alloc(nb * n_v, &w->v));
  GEIST_RETURN_IF_ERROR(s.alloc(nb * n_o, &w->attn));
  GEIST_RETURN_IF_ERROR(s.alloc(nb * f, &w->gate));
  GEIST_RETURN_IF_ERROR(s.alloc(nb * f, &w->up));
  *out = std::move(w);
  return Status::ok();
}

// y[t][0, len) += bias for the n rows of y (stride floats apart); nothing without a bias.
void add_bias(Stream& s, float* y, int64_t stride, int32_t n, const float* bias, int64_t len) {
  if (bias == nullptr) return;
  for (int32_t t = 0; t < n; ++t) s.add(y + t * stride, bias, len);
}

void LlamaModel::run_micro_batch(ArchState& state, ArchWorkspace& ws, const MicroBatch& mb) const {
  LlamaState& st = static_cast<LlamaState&>(state);
  const LlamaWorkspace& w = static_cast<const LlamaWorkspace&>(ws);
  const int32_t n = mb.n_rows;
  const LlamaConfig& c = cfg_;
  Stream& s = *st.stream;
  const int64_t n_embd = c.n_embd;
  const int64_t n_q = static_cast<int64_t>(c.n_head) * c.head_dim_k;
  const int64_t n_k = static_cast<int64_t>(c.n_head_kv) * c.head_dim_k;
  const int64_t n_v = static_cast<int64_t>(c.n_head_kv) * c.head_dim_v;
  const int64_t n_o = static_cast<int64_t>(c.n_head) * c.head_dim_v;
  float* x = w.x->f32();
  float* xn = w.xn->f32();
  float* q = w.q->f32();
  float* k = w.k->f32();
  float* v = w.v->f32();
  float* attn = w.attn->f32();
  float* gate = w.gate->f32();
  float* up = w.up->f32();
  const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim_k, c.head_dim_v,
                             1.0f / std::sqrt(static_cast<float>(c.head_dim_k))};

  // A batched decode step (row r is session r's token): each layer's attention of the rows is
  // one op (Stream::rope_attend_rows), which a device may run as one launch.
  std::vector<KvStore*> row_kv;
  std::vector<int32_t> row_pos;
  if (mb.n_seg == n && n > 1) {
    for (const Segment& g : segments(mb)) {
      row_kv.push_back(static_cast<LlamaState*>(g.state)->kv.get());
      row_pos.push_back(g.pos);
    }
  }

  s.get_rows(tok_embd_, mb.tokens, n, x);
  // Each block's residual add and the norm after it are one op (Stream::add_rms_norm): the
  // last block's add goes with the next layer's input norm, the very last with the head's.
  const float* res = nullptr;  // the residual still to be added to x
  for (int32_t il = 0; il < c.n_layer; ++il) {
    const LlamaLayer& l = layers_[static_cast<size_t>(il)];
    if (res == nullptr) {
      s.rms_norm(x, n_embd, l.attn_norm, xn, n_embd, n, n_embd, c.rms_eps);
    } else {
      s.add_rms_norm(x, res, l.attn_norm, xn, n_embd, n, n_embd, c.rms_eps);
    }
    const MatmulDst qkv[] = {{&l.wq, q, n_q}, {&l.wk, k, n_k}, {&l.wv, v, n_v}};
    s.matmul_many(qkv, 3, xn, n_embd, n);
    add_bias(s, q, n_q, n, l.bq, n_q);
    add_bias(s, k, n_k, n, l.bk, n_k);
    add_bias(s, v, n_v, n, l.bv, n_v);
    if (!row_kv.empty()) {
      s.rope_attend_rows(il, shape, rope_, row_kv.data(), row_pos.data(), n, q, n_q, k, n_k, v, n_v,
                         attn, n_o);
    } else {
      for (const Segment& g : segments(mb)) {  // positions and the KV cache are the session's
        const int64_t r = g.row0;
        s.rope_attend(*static_cast<LlamaState*>(g.state)->kv, il, shape, rope_, nullptr,
                      q + r * n_q, n_q, k + r * n_k, n_k, v + r * n_v, n_v, g.n, g.pos,
                      attn + r * n_o, n_o);
      }
    }
    s.matmul(l.wo, attn, n_o, n, xn, n_embd);
    add_bias(s, xn, n_embd, n, l.bo, n_embd);
    s.add_rms_norm(x, xn, l.ffn_norm, xn, n_embd, n, n_embd, c.rms_eps);
    if (l.b_gate == nullptr && l.b_up == nullptr) {
      s.matmul_swiglu(l.w_gate, l.w_up, xn, n_embd, n, gate, up, gate);
    } else {
      const MatmulDst gate_up[] = {{&l.w_gate, gate, c.n_ff}, {&l.w_up, up, c.n_ff}};
      s.matmul_many(gate_up, 2, xn, n_embd, n);
      add_bias(s, gate, c.n_ff, n, l.b_gate, c.n_ff);
      add_bias(s, up, c.n_ff, n, l.b_up, c.n_ff);
      s.swiglu(gate, up, gate, static_cast<int64_t>(n) * c.n_ff);
    }
    s.matmul(l.w_down, gate, c.n_ff, n, xn, n_embd);
    add_bias(s, xn, n_embd, n, l.b_down, n_embd);
    res = xn;
  }
  logits_head(s, mb, x, res, xn, n_embd, output_norm_, c.rms_eps, output_, c.n_vocab);
}

}  // namespace

Status load_llama(const GgufFile& file, std::unique_ptr<Backend> backend, const Logger& log,
                  std::unique_ptr<ArchModel>* out) {
  std::unique_ptr<LlamaModel> m(new (std::nothrow) LlamaModel());
  if (!m) return Status(GEIST_E_OOM, "llama: out of memory");
  m->backend_ = std::move(backend);
  GEIST_RETURN_IF_ERROR(read_config(file, &m->cfg_));
  GEIST_RETURN_IF_ERROR(load_weights(file, m.get()));
  const LlamaConfig& c = m->cfg_;
  m->rope_.style = RopeStyle::NORMAL;
  m->rope_.n_rot = c.n_rot;
  m->rope_.freq_base = c.rope_freq_base;
  m->rope_.freq_scale = c.rope_freq_scale;
  if (c.yarn) {
    // The CUDA rope kernels have no magnitude scale yet: refused there rather than run wrong.
    if (m->backend_->kind() == BackendKind::CUDA) {
      return Status(GEIST_E_UNSUPPORTED,
                    "llama.rope.scaling.type 'yarn' is not supported on the cuda backend");
    }
    // YaRN as per-pair frequency factors (times the file's rope_freqs) and mscale.
    std::vector<float>& ff = m->rope_freq_factors_host_;
    if (ff.empty()) ff.assign(static_cast<size_t>(c.n_rot / 2), 1.0f);
    yarn_rope_factors(c.yarn_cfg, c.n_rot, c.rope_freq_base, ff.data(), &m->rope_.mscale);
    m->rope_.freq_factors = ff.data();
  }
  m->info_ = ModelInfo{"llama",  c.n_vocab,   c.n_ctx_train, c.n_embd,    c.n_layer,
                       c.n_head, c.n_head_kv, c.n_ff,        c.head_dim_k};
  log.log(GEIST_LOG_INFO,
          "llama: %d layers, n_embd %d, %d/%d heads of %d, n_ff %d, vocab %d, rope %d dims "
          "base %g scale %g%s%s",
          c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim_k, c.n_ff, c.n_vocab, c.n_rot,
          c.rope_freq_base, c.rope_freq_scale,
          m->rope_.freq_factors && !c.yarn ? " with rope_freqs" : "", c.yarn ? " yarn" : "");
  GEIST_RETURN_IF_ERROR(m->upload_weights(file));
  log.log(GEIST_LOG_INFO, "llama: backend %s", m->backend_->description().c_str());
  *out = std::move(m);
  return Status::ok();
}

}  // namespace geist
