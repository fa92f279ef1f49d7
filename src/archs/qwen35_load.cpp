// Loading and validating a qwen35 GGUF: hyper-parameters into Qwen35Config, tensors into
// weight views (matrices) or f32 copies (small vectors).
#include <cmath>
#include <new>
#include <string>

#include "archs/loaders.h"
#include "archs/qwen35.h"
#include "kernels/quant.h"

namespace geist {
namespace {

// Hyper-parameters far beyond any real model are refused rather than allowed to overflow
// size computations.
constexpr int64_t kMaxDim = int64_t{1} << 20;

Status get_dim(const GgufFile& f, const std::string& key, int32_t* out, bool required = true,
               int32_t fallback = 0) {
  Status st = f.get_i32(key, out);
  if (st.code() == GEIST_E_NOT_FOUND && !required) {
    *out = fallback;
    return Status::ok();
  }
  if (!st) return Status(GEIST_E_FORMAT, "qwen35: " + st.message());
  if (*out < 0 || *out > kMaxDim) {
    return Status::error(GEIST_E_FORMAT, "qwen35: %s = %d is out of range", key.c_str(), *out);
  }
  return Status::ok();
}

Status find_checked(const GgufFile& f, const std::string& name, int64_t ne0, int64_t ne1,
                    const GgufTensorInfo** out) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (!t) return Status::error(GEIST_E_FORMAT, "qwen35: missing tensor %s", name.c_str());
  const bool is_2d = ne1 > 1;
  const bool dims_ok = t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == 1 && t->ne[3] == 1 &&
                       (is_2d ? t->n_dims == 2 : t->n_dims <= 2);
  if (!dims_ok) {
    return Status::error(GEIST_E_FORMAT,
                         "qwen35: tensor %s has shape [%lld, %lld, %lld, %lld], expected "
                         "[%lld, %lld]",
                         name.c_str(), static_cast<long long>(t->ne[0]),
                         static_cast<long long>(t->ne[1]), static_cast<long long>(t->ne[2]),
                         static_cast<long long>(t->ne[3]), static_cast<long long>(ne0),
                         static_cast<long long>(ne1));
  }
  if (!quant_type_supported(t->type)) {
    return Status::error(GEIST_E_UNSUPPORTED,
                         "qwen35: tensor %s has unsupported type %s (supported: %s)", name.c_str(),
                         ggml_type_name(t->type), quant_supported_types());
  }
  if (ggml_row_size(t->type, ne0) == 0) {
    return Status::error(GEIST_E_FORMAT, "qwen35: tensor %s: row of %lld is not whole blocks of %s",
                         name.c_str(), static_cast<long long>(ne0), ggml_type_name(t->type));
  }
  *out = t;
  return Status::ok();
}

// A matrix mapping n_in -> n_out (GGUF ne = {n_in, n_out}), viewed in place.
Status load_matrix(const GgufFile& f, const std::string& name, int64_t n_in, int64_t n_out,
                   WeightMatrix* w) {
  const GgufTensorInfo* t = nullptr;
  GEIST_RETURN_IF_ERROR(find_checked(f, name, n_in, n_out, &t));
  w->type = t->type;
  w->data = t->data;
  w->n_in = n_in;
  w->n_out = n_out;
  w->row_bytes = ggml_row_size(t->type, n_in);
  return Status::ok();
}

// A small tensor of ne0 x ne1 elements, dequantized into an owned f32 copy.
Status load_f32(const GgufFile& f, const std::string& name, int64_t ne0, int64_t ne1,
                std::vector<float>* out) {
  const GgufTensorInfo* t = nullptr;
  GEIST_RETURN_IF_ERROR(find_checked(f, name, ne0, ne1, &t));
  out->resize(static_cast<size_t>(ne0 * ne1));
  const size_t row_bytes = ggml_row_size(t->type, ne0);
  for (int64_t r = 0; r < ne1; ++r) {
    dequantize_row(t->type, t->data + static_cast<size_t>(r) * row_bytes, out->data() + r * ne0,
                   ne0);
  }
  for (float x : *out) {
    if (!std::isfinite(x)) {
      return Status::error(GEIST_E_FORMAT, "qwen35: tensor %s holds a non-finite value",
                           name.c_str());
    }
  }
  return Status::ok();
}

Status read_config(const GgufFile& f, Qwen35Config* c) {
  const std::string a = "qwen35.";
  int32_t block_count = 0;
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "block_count", &block_count));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "nextn_predict_layers", &c->n_layer_nextn, false, 0));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "context_length", &c->n_ctx_train, false, 0));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "embedding_length", &c->n_embd));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "feed_forward_length", &c->n_ff));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "attention.head_count", &c->n_head));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "attention.head_count_kv", &c->n_head_kv));
  int32_t key_length = 0, value_length = 0;
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "attention.key_length", &key_length));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "attention.value_length", &value_length));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "rope.dimension_count", &c->n_rot, false, key_length));
  GEIST_RETURN_IF_ERROR(
      get_dim(f, a + "full_attention_interval", &c->full_attention_interval, false, 4));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "ssm.conv_kernel", &c->conv_kernel));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "ssm.state_size", &c->d_k));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "ssm.group_count", &c->n_k_heads));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "ssm.time_step_rank", &c->n_v_heads));
  int32_t inner = 0;
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "ssm.inner_size", &inner));

  Status st = f.get_f32(a + "attention.layer_norm_rms_epsilon", &c->norm_eps);
  if (!st) return Status(GEIST_E_FORMAT, "qwen35: " + st.message());
  st = f.get_f32(a + "rope.freq_base", &c->rope_base);
  if (st.code() == GEIST_E_NOT_FOUND) {
    c->rope_base = 10000.0f;
  } else if (!st) {
    return Status(GEIST_E_FORMAT, "qwen35: " + st.message());
  }

  auto bad = [](const char* what) {
    return Status::error(GEIST_E_FORMAT, "qwen35: invalid hyper-parameters: %s", what);
  };
  if (c->n_layer_nextn >= block_count) return bad("nextn_predict_layers >= block_count");
  c->n_layer = block_count - c->n_layer_nextn;
  if (c->n_embd <= 0 || c->n_ff <= 0) return bad("embedding_length and feed_forward_length > 0");
  if (c->n_head <= 0 || c->n_head_kv <= 0 || c->n_head % c->n_head_kv != 0) {
    return bad("head_count must be a positive multiple of head_count_kv");
  }
  if (key_length <= 0 || key_length != value_length) {
    return bad("key_length must equal value_length and be positive");
  }
  c->head_dim = key_length;
  if (c->n_rot <= 0 || c->n_rot % 2 != 0 || c->n_rot > c->head_dim) {
    return bad("rope.dimension_count must be even, positive and <= key_length");
  }
  if (c->full_attention_interval <= 0) return bad("full_attention_interval must be positive");
  if (c->conv_kernel <= 0) return bad("ssm.conv_kernel must be positive");
  if (c->n_k_heads <= 0 || c->n_v_heads <= 0 || c->n_v_heads % c->n_k_heads != 0) {
    return bad("ssm.time_step_rank must be a positive multiple of ssm.group_count");
  }
  if (c->d_k <= 0 || inner <= 0 || inner % c->n_v_heads != 0) {
    return bad("ssm.state_size > 0 and ssm.inner_size a multiple of ssm.time_step_rank");
  }
  c->d_v = inner / c->n_v_heads;
  if (!(c->norm_eps > 0.0f) || !std::isfinite(c->norm_eps)) return bad("rms epsilon");
  if (!(c->rope_base > 0.0f) || !std::isfinite(c->rope_base)) return bad("rope.freq_base");
  return Status::ok();
}

Status load_layer(const GgufFile& f, const Qwen35Config& c, int32_t il, Qwen35Layer* L) {
  const std::string p = "blk." + std::to_string(il) + ".";
  const int64_t e = c.n_embd;
  L->recurrent = c.is_recurrent(il);
  GEIST_RETURN_IF_ERROR(load_f32(f, p + "attn_norm.weight", e, 1, &L->attn_norm));
  GEIST_RETURN_IF_ERROR(load_f32(f, p + "post_attention_norm.weight", e, 1, &L->post_norm));
  GEIST_RETURN_IF_ERROR(load_matrix(f, p + "ffn_gate.weight", e, c.n_ff, &L->ffn_gate));
  GEIST_RETURN_IF_ERROR(load_matrix(f, p + "ffn_up.weight", e, c.n_ff, &L->ffn_up));
  GEIST_RETURN_IF_ERROR(load_matrix(f, p + "ffn_down.weight", c.n_ff, e, &L->ffn_down));
  if (!L->recurrent) {
    const int64_t hd = c.head_dim;
    GEIST_RETURN_IF_ERROR(load_matrix(f, p + "attn_q.weight", e, 2 * c.n_head * hd, &L->wq));
    GEIST_RETURN_IF_ERROR(load_matrix(f, p + "attn_k.weight", e, c.n_head_kv * hd, &L->wk));
    GEIST_RETURN_IF_ERROR(load_matrix(f, p + "attn_v.weight", e, c.n_head_kv * hd, &L->wv));
    GEIST_RETURN_IF_ERROR(load_matrix(f, p + "attn_output.weight", c.n_head * hd, e, &L->wo));
    GEIST_RETURN_IF_ERROR(load_f32(f, p + "attn_q_norm.weight", hd, 1, &L->q_norm));
    GEIST_RETURN_IF_ERROR(load_f32(f, p + "attn_k_norm.weight", hd, 1, &L->k_norm));
    return Status::ok();
  }
  GEIST_RETURN_IF_ERROR(load_matrix(f, p + "attn_qkv.weight", e, c.conv_dim(), &L->wqkv));
  GEIST_RETURN_IF_ERROR(load_matrix(f, p + "attn_gate.weight", e, c.value_dim(), &L->wz));
  GEIST_RETURN_IF_ERROR(load_matrix(f, p + "ssm_alpha.weight", e, c.n_v_heads, &L->w_alpha));
  GEIST_RETURN_IF_ERROR(load_matrix(f, p + "ssm_beta.weight", e, c.n_v_heads, &L->w_beta));
  GEIST_RETURN_IF_ERROR(load_matrix(f, p + "ssm_out.weight", c.value_dim(), e, &L->ssm_out));
  GEIST_RETURN_IF_ERROR(
      load_f32(f, p + "ssm_conv1d.weight", c.conv_kernel, c.conv_dim(), &L->conv1d));
  GEIST_RETURN_IF_ERROR(load_f32(f, p + "ssm_dt.bias", c.n_v_heads, 1, &L->dt_bias));
  GEIST_RETURN_IF_ERROR(load_f32(f, p + "ssm_a", c.n_v_heads, 1, &L->ssm_a));
  GEIST_RETURN_IF_ERROR(load_f32(f, p + "ssm_norm.weight", c.d_v, 1, &L->ssm_norm));
  return Status::ok();
}

}  // namespace

Status load_qwen35(const GgufFile& file, std::unique_ptr<Backend> backend, const Logger& log,
                   std::unique_ptr<ArchModel>* out) {
  std::unique_ptr<Qwen35Model> m(new (std::nothrow) Qwen35Model());
  if (!m) return Status(GEIST_E_OOM, "qwen35: out of memory");
  m->backend_ = std::move(backend);
  Qwen35Config& c = m->cfg_;
  GEIST_RETURN_IF_ERROR(read_config(file, &c));

  const GgufTensorInfo* emb = file.find_tensor("token_embd.weight");
  if (!emb) return Status(GEIST_E_FORMAT, "qwen35: missing tensor token_embd.weight");
  if (emb->ne[1] <= 0 || emb->ne[1] > (int64_t{1} << 24)) {
    return Status(GEIST_E_FORMAT, "qwen35: token_embd.weight has an invalid vocabulary size");
  }
  c.n_vocab = static_cast<int32_t>(emb->ne[1]);
  GEIST_RETURN_IF_ERROR(load_matrix(file, "token_embd.weight", c.n_embd, c.n_vocab, &m->tok_embd_));
  if (file.find_tensor("output.weight")) {
    GEIST_RETURN_IF_ERROR(load_matrix(file, "output.weight", c.n_embd, c.n_vocab, &m->output_));
  } else {
    m->output_ = m->tok_embd_;  // tied embeddings
  }
  GEIST_RETURN_IF_ERROR(load_f32(file, "output_norm.weight", c.n_embd, 1, &m->output_norm_));

  m->layers_.resize(static_cast<size_t>(c.n_layer));
  m->rec_slot_.assign(static_cast<size_t>(c.n_layer), -1);
  for (int32_t il = 0; il < c.n_layer; ++il) {
    GEIST_RETURN_IF_ERROR(load_layer(file, c, il, &m->layers_[static_cast<size_t>(il)]));
    if (c.is_recurrent(il)) m->rec_slot_[static_cast<size_t>(il)] = m->n_rec_++;
  }

  ModelInfo& i = m->info_;
  i.architecture = "qwen35";
  i.n_vocab = c.n_vocab;
  i.n_ctx_train = c.n_ctx_train;
  i.n_embd = c.n_embd;
  i.n_layer = c.n_layer;
  i.n_head = c.n_head;
  i.n_head_kv = c.n_head_kv;
  i.n_ff = c.n_ff;
  i.head_dim = c.head_dim;
  log.log(GEIST_LOG_INFO,
          "qwen35: %d layers (%d DeltaNet, %d attention%s), n_embd %d, %d/%d heads of %d, "
          "DeltaNet %d key / %d value heads of %d/%d",
          c.n_layer, m->n_rec_, c.n_layer - m->n_rec_,
          c.n_layer_nextn > 0 ? ", MTP blocks ignored" : "", c.n_embd, c.n_head, c.n_head_kv,
          c.head_dim, c.n_k_heads, c.n_v_heads, c.d_k, c.d_v);
  GEIST_RETURN_IF_ERROR(m->upload_weights(file));
  log.log(GEIST_LOG_INFO, "qwen35: backend %s", m->backend_->description().c_str());
  *out = std::move(m);
  return Status::ok();
}

}  // namespace geist

namespace geist {

std::string Qwen35Model::layer_kinds() const {
  std::string kinds;
  for (int32_t il = 0; il < cfg_.n_layer; ++il) kinds.push_back(cfg_.is_recurrent(il) ? 'D' : 'A');
  return kinds;
}

uint64_t Qwen35Model::fixed_state_bytes() const {
  // Per DeltaNet layer: the conv window ([conv_kernel-1][conv_dim]) and the delta-rule state
  // ([n_v_heads][d_k][d_v]), both f32 (Qwen35State::conv and ::ssm).
  const uint64_t conv = static_cast<uint64_t>(cfg_.conv_kernel - 1) * cfg_.conv_dim();
  const uint64_t ssm = static_cast<uint64_t>(cfg_.n_v_heads) * cfg_.d_k * cfg_.d_v;
  return static_cast<uint64_t>(n_rec_) * (conv + ssm) * sizeof(float);
}

}  // namespace geist
