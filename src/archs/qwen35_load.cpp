// Loading and validating a qwen35 GGUF: hyper-parameters into Qwen35Config, tensors into
// weight views (matrices) or f32 copies (small vectors).
#include <cmath>
#include <new>
#include <string>

#include "archs/loaders.h"
#include "archs/qwen35.h"
#include "archs/rope_yarn.h"
#include "archs/tensors.h"

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

// attention.<key>: the value of the attention blocks (block_count counts MTP blocks too, as
// the arrays do), which must agree: geist keeps one head layout for all of them.
Status read_head_counts(const GgufFile& f, const std::string& a, int32_t block_count,
                        const Qwen35Config& c, const char* key, int32_t* out) {
  const std::string full = a + "attention." + key;
  std::vector<int32_t> per_layer;
  Status st = read_per_layer_i32(f, full, block_count, &per_layer);
  if (!st) return Status(GEIST_E_FORMAT, "qwen35: " + st.message());
  if (per_layer.empty())
    return Status::error(GEIST_E_FORMAT, "qwen35: %s is missing", full.c_str());
  *out = -1;
  for (int32_t il = 0; il < block_count; ++il) {
    if (c.is_recurrent(il) && il < block_count - c.n_layer_nextn) continue;
    const int32_t v = per_layer[static_cast<size_t>(il)];
    if (*out >= 0 && v != *out) {
      return Status::error(GEIST_E_UNSUPPORTED,
                           "qwen35: %s differs between attention blocks (%d, then %d at block %d)",
                           full.c_str(), *out, v, il);
    }
    *out = v;
  }
  if (*out < 0 || *out > kMaxDim) {
    return Status::error(GEIST_E_FORMAT, "qwen35: %s has no usable value", full.c_str());
  }
  return Status::ok();
}

// YaRN is applied (rope_yarn.h; CPU only); any other scaling a file asks for is refused by key
// rather than ignored: longrope, a linear factor other than 1, an attention factor other than 1
// without YaRN.
Status check_rope_scaling(const GgufFile& f, const std::string& a, Qwen35Config* c) {
  std::string_view type = "linear";  // llama.cpp's default when the key is absent
  Status st = f.get_str(a + "rope.scaling.type", &type);
  if (!st && st.code() != GEIST_E_NOT_FOUND)
    return Status(GEIST_E_FORMAT, "qwen35: " + st.message());
  float attn_factor = 1;
  st = f.get_f32(a + "rope.scaling.attn_factor", &attn_factor);
  if (!st && st.code() != GEIST_E_NOT_FOUND)
    return Status(GEIST_E_FORMAT, "qwen35: " + st.message());
  if (type == "yarn") {
    c->yarn = true;
    st = read_yarn_config(f, a, c->n_ctx_train, &c->yarn_cfg);
    if (!st) return Status(st.code(), "qwen35: " + st.message());
    if (!(attn_factor > 0) || !std::isfinite(attn_factor)) {
      return Status::error(GEIST_E_FORMAT, "qwen35: %srope.scaling.attn_factor %g must be positive",
                           a.c_str(), static_cast<double>(attn_factor));
    }
    c->yarn_cfg.attn_factor = attn_factor;
    return Status::ok();
  }
  float factor = 0;
  st = f.get_f32(a + "rope.scaling.factor", &factor);
  if (!st && st.code() != GEIST_E_NOT_FOUND)
    return Status(GEIST_E_FORMAT, "qwen35: " + st.message());
  if (type != "none" && !(factor == 0.0f || factor == 1.0f)) {
    return Status::error(GEIST_E_UNSUPPORTED,
                         "qwen35: %srope.scaling.type '%.*s' with %srope.scaling.factor %g is not "
                         "supported (geist runs qwen35 RoPE unscaled unless it is YaRN)",
                         a.c_str(), static_cast<int>(type.size()), type.data(), a.c_str(),
                         static_cast<double>(factor));
  }
  if (type != "none" && type != "linear") {
    return Status::error(GEIST_E_UNSUPPORTED, "qwen35: %srope.scaling.type '%.*s' is not supported",
                         a.c_str(), static_cast<int>(type.size()), type.data());
  }
  if (attn_factor != 1.0f) {
    return Status::error(GEIST_E_UNSUPPORTED,
                         "qwen35: %srope.scaling.attn_factor %g is not supported", a.c_str(),
                         static_cast<double>(attn_factor));
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
  int32_t key_length = 0, value_length = 0;
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "attention.key_length", &key_length));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "attention.value_length", &value_length));
  GEIST_RETURN_IF_ERROR(get_dim(f, a + "rope.dimension_count", &c->n_rot, false, key_length));
  GEIST_RETURN_IF_ERROR(
      get_dim(f, a + "full_attention_interval", &c->full_attention_interval, false, 4));
  if (c->full_attention_interval <= 0) {
    return Status(GEIST_E_FORMAT, "qwen35: full_attention_interval must be positive");
  }
  // Scalars or, as llama.cpp reads them (get_key_or_arr), one value per block; the DeltaNet
  // blocks' entries (often 0) are not used.
  GEIST_RETURN_IF_ERROR(read_head_counts(f, a, block_count, *c, "head_count", &c->n_head));
  GEIST_RETURN_IF_ERROR(read_head_counts(f, a, block_count, *c, "head_count_kv", &c->n_head_kv));
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

  GEIST_RETURN_IF_ERROR(check_rope_scaling(f, a, c));

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

Status load_layer(const TensorChecks& tc, const Qwen35Config& c, int32_t il, Qwen35Layer* L) {
  const int64_t e = c.n_embd;
  auto w = [il](Tn t) { return tn(t, "weight", il); };
  L->recurrent = c.is_recurrent(il);
  GEIST_RETURN_IF_ERROR(tc.f32_copy(w(Tn::ATTN_NORM), e, 0, &L->attn_norm));
  GEIST_RETURN_IF_ERROR(tc.f32_copy(w(Tn::ATTN_POST_NORM), e, 0, &L->post_norm));
  GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::FFN_GATE), e, c.n_ff, &L->ffn_gate));
  GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::FFN_UP), e, c.n_ff, &L->ffn_up));
  GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::FFN_DOWN), c.n_ff, e, &L->ffn_down));
  if (!L->recurrent) {
    const int64_t hd = c.head_dim;
    GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::ATTN_Q), e, 2 * c.n_head * hd, &L->wq));
    GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::ATTN_K), e, c.n_head_kv * hd, &L->wk));
    GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::ATTN_V), e, c.n_head_kv * hd, &L->wv));
    GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::ATTN_OUTPUT), c.n_head * hd, e, &L->wo));
    GEIST_RETURN_IF_ERROR(tc.f32_copy(w(Tn::ATTN_Q_NORM), hd, 0, &L->q_norm));
    GEIST_RETURN_IF_ERROR(tc.f32_copy(w(Tn::ATTN_K_NORM), hd, 0, &L->k_norm));
    return Status::ok();
  }
  GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::ATTN_QKV), e, c.conv_dim(), &L->wqkv));
  GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::ATTN_GATE), e, c.value_dim(), &L->wz));
  GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::SSM_ALPHA), e, c.n_v_heads, &L->w_alpha));
  GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::SSM_BETA), e, c.n_v_heads, &L->w_beta));
  GEIST_RETURN_IF_ERROR(tc.matrix(w(Tn::SSM_OUT), c.value_dim(), e, &L->ssm_out));
  GEIST_RETURN_IF_ERROR(tc.f32_copy(w(Tn::SSM_CONV1D), c.conv_kernel, c.conv_dim(), &L->conv1d));
  // llama.cpp's converter writes ssm_dt.bias; Ollama's exports name the same vector ssm_dt.
  const std::string dt = tn(Tn::SSM_DT, "bias", il);
  const std::string dt_bare = tn(Tn::SSM_DT, "", il);
  GEIST_RETURN_IF_ERROR(
      tc.f32_copy(tc.has(dt) || !tc.has(dt_bare) ? dt : dt_bare, c.n_v_heads, 0, &L->dt_bias));
  GEIST_RETURN_IF_ERROR(tc.f32_copy(tn(Tn::SSM_A, "", il), c.n_v_heads, 0, &L->ssm_a));
  GEIST_RETURN_IF_ERROR(tc.f32_copy(w(Tn::SSM_NORM), c.d_v, 0, &L->ssm_norm));
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

  const TensorChecks tc(file, "qwen35");
  const std::string embd = tn(Tn::TOKEN_EMBD, "weight");
  const GgufTensorInfo* emb = file.find_tensor(embd);
  if (!emb) return Status(GEIST_E_FORMAT, "qwen35: tensor '" + embd + "' is missing");
  if (emb->ne[1] <= 0 || emb->ne[1] > (int64_t{1} << 24)) {
    return Status(GEIST_E_FORMAT, "qwen35: " + embd + " has an invalid vocabulary size");
  }
  c.n_vocab = static_cast<int32_t>(emb->ne[1]);
  GEIST_RETURN_IF_ERROR(tc.matrix(embd, c.n_embd, c.n_vocab, &m->tok_embd_));
  const std::string output = tn(Tn::OUTPUT, "weight");
  if (tc.has(output)) {
    GEIST_RETURN_IF_ERROR(tc.matrix(output, c.n_embd, c.n_vocab, &m->output_));
  } else {
    m->output_ = m->tok_embd_;  // tied embeddings
  }
  GEIST_RETURN_IF_ERROR(tc.f32_copy(tn(Tn::OUTPUT_NORM, "weight"), c.n_embd, 0, &m->output_norm_));

  m->layers_.resize(static_cast<size_t>(c.n_layer));
  m->rec_slot_.assign(static_cast<size_t>(c.n_layer), -1);
  for (int32_t il = 0; il < c.n_layer; ++il) {
    GEIST_RETURN_IF_ERROR(load_layer(tc, c, il, &m->layers_[static_cast<size_t>(il)]));
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
  if (c.yarn) {
    // The CUDA rope kernels have no magnitude scale yet: refused there rather than run wrong.
    if (m->backend_->kind() == BackendKind::CUDA) {
      return Status(GEIST_E_UNSUPPORTED,
                    "qwen35: qwen35.rope.scaling.type 'yarn' is not supported on the cuda backend");
    }
    m->rope_factors_host_.assign(static_cast<size_t>(c.n_rot / 2), 1.0f);
    yarn_rope_factors(c.yarn_cfg, c.n_rot, c.rope_base, m->rope_factors_host_.data(),
                      &m->rope_mscale_);
  }
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
