// Qwen3.5 hybrid forward pass on the CPU: DeltaNet layers (conv1d + gated delta rule with a
// recurrent state) and gated attention layers (KV cache), each followed by a SwiGLU FFN.
#include "archs/qwen35.h"

#include <algorithm>
#include <cmath>
#include <new>

#include "archs/loaders.h"
#include "kernels/attention.h"
#include "kernels/deltanet.h"
#include "kernels/ops.h"

namespace geist {
namespace {

// Tokens per internal step: bounds scratch memory for long prompts. Rows do not depend on it
// except through the delta rule's chunking, which starts afresh at each step.
constexpr int32_t kUbatch = 256;
// Chunk of the chunked delta rule (the Hugging Face reference uses 64 too).
constexpr int32_t kDeltaChunk = 64;

template <class T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace

void Qwen35State::reset() {
  n_past = 0;
  std::fill(conv.begin(), conv.end(), 0.0f);
  std::fill(ssm.begin(), ssm.end(), 0.0f);
}

Status Qwen35Model::create_state(int32_t max_seq_len, KvMode kv_mode,
                                 std::unique_ptr<ArchState>* out) const {
  if (max_seq_len <= 0) {
    return Status::error(GEIST_E_INVALID_ARG, "qwen35: max_seq_len must be positive, got %d",
                         max_seq_len);
  }
  const Qwen35Config& c = cfg_;
  std::vector<KvLayerSpec> specs(static_cast<size_t>(c.n_layer));
  for (int32_t il = 0; il < c.n_layer; ++il) {
    if (!c.is_recurrent(il)) {
      specs[static_cast<size_t>(il)].n_embd_k = c.n_head_kv * c.head_dim;
      specs[static_cast<size_t>(il)].n_embd_v = c.n_head_kv * c.head_dim;
      specs[static_cast<size_t>(il)].head_dim_k = c.head_dim;
      specs[static_cast<size_t>(il)].head_dim_v = c.head_dim;
    }
  }
  std::unique_ptr<Qwen35State> st(new (std::nothrow) Qwen35State());
  if (!st) return Status(GEIST_E_OOM, "qwen35: out of memory for the session state");
  GEIST_RETURN_IF_ERROR(KvCache::create(kv_mode, specs, max_seq_len, &st->kv));
  st->max_seq_len_ = max_seq_len;
  st->rec_slot_ = rec_slot_;
  st->conv_layer_floats = int64_t{c.conv_kernel - 1} * c.conv_dim();
  st->ssm_layer_floats = int64_t{c.n_v_heads} * c.d_k * c.d_v;
  try {
    st->conv.assign(static_cast<size_t>(st->conv_layer_floats * n_rec_), 0.0f);
    st->ssm.assign(static_cast<size_t>(st->ssm_layer_floats * n_rec_), 0.0f);
  } catch (const std::bad_alloc&) {
    return Status(GEIST_E_OOM, "qwen35: out of memory for the recurrent state");
  }
  *out = std::move(st);
  return Status::ok();
}

Status Qwen35Model::forward(ArchState& state, const int32_t* tokens, int32_t n, int32_t pos,
                            bool all_logits, float* logits, ThreadPool& pool) const {
  auto* stp = dynamic_cast<Qwen35State*>(&state);
  if (!stp) return Status(GEIST_E_INVALID_ARG, "qwen35: state was not created by a qwen35 model");
  Qwen35State& st = *stp;
  if (n <= 0 || pos < 0 || pos + n > st.max_seq_len()) {
    return Status::error(GEIST_E_INVALID_ARG, "qwen35: positions [%d, %d) outside [0, %d)", pos,
                         pos + n, st.max_seq_len());
  }
  for (int32_t t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= cfg_.n_vocab) {
      return Status::error(GEIST_E_INVALID_ARG, "qwen35: token id %d outside the vocabulary",
                           tokens[t]);
    }
  }
  if (pos != 0 && pos != st.n_past) {
    return Status::error(GEIST_E_INVALID_STATE,
                         "qwen35: the recurrent state is at position %d and cannot continue at "
                         "%d (it cannot be rolled back; restore a snapshot instead)",
                         st.n_past, pos);
  }

  const Qwen35Config& c = cfg_;
  const size_t ub = static_cast<size_t>(std::min(n, kUbatch));
  const size_t nt = static_cast<size_t>(pool.n_threads());
  const int64_t max_in = std::max({c.n_embd, c.n_ff, c.value_dim(), c.n_head * c.head_dim});
  const size_t e = static_cast<size_t>(c.n_embd);
  const size_t big =
      static_cast<size_t>(std::max({c.conv_dim(), 2 * c.n_head * c.head_dim, c.n_ff}));
  const size_t mid = static_cast<size_t>(
      std::max({c.value_dim(), c.n_head_kv * c.head_dim, c.n_head * c.head_dim}));
  try {
    Qwen35State::Scratch& s = st.s;
    grow(s.x, ub * e);
    grow(s.xn, ub * e);
    grow(s.mix, ub * e);
    grow(s.big0, ub * big);
    grow(s.big1, ub * big);
    grow(s.mid0, ub * mid);
    grow(s.mid1, ub * mid);
    grow(s.mid2, ub * mid);
    grow(s.heads0, ub * static_cast<size_t>(c.n_v_heads));
    grow(s.heads1, ub * static_cast<size_t>(c.n_v_heads));
    grow(s.matmul, matmul_scratch_floats(max_in, pool.n_threads()));
    const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim, c.head_dim, 0.0f};
    grow(s.attn, KvCache::attention_scratch_floats(shape, pos + n, pool.n_threads()));
    grow(s.delta, nt * gated_delta_rule_scratch_doubles(kDeltaChunk, c.d_k, c.d_v));
  } catch (const std::bad_alloc&) {
    return Status(GEIST_E_OOM, "qwen35: out of memory for activations");
  }

  if (pos == 0) st.reset();  // a sequence starting over: the recurrent state starts from zero
  for (int32_t done = 0; done < n;) {
    const int32_t m = std::min(n - done, kUbatch);
    float* out = nullptr;
    if (all_logits) {
      out = logits + static_cast<int64_t>(done) * c.n_vocab;
    } else if (done + m == n) {
      out = logits;
    }
    forward_ubatch(st, tokens + done, m, pos + done, all_logits, out, pool);
    done += m;
    st.n_past = pos + done;
  }
  return Status::ok();
}

void Qwen35Model::forward_ubatch(Qwen35State& st, const int32_t* tokens, int32_t n, int32_t pos,
                                 bool all_logits, float* logits, ThreadPool& pool) const {
  const Qwen35Config& c = cfg_;
  const int64_t e = c.n_embd;
  float* x = st.s.x.data();      // [n][n_embd]
  float* xn = st.s.xn.data();    // [n][n_embd]
  float* mix = st.s.mix.data();  // [n][n_embd]
  for (int32_t t = 0; t < n; ++t) get_row(tok_embd_, tokens[t], x + t * e);

  for (int32_t il = 0; il < c.n_layer; ++il) {
    const Qwen35Layer& L = layers_[static_cast<size_t>(il)];
    for (int32_t t = 0; t < n; ++t)
      rms_norm(x + t * e, L.attn_norm.data(), xn + t * e, e, c.norm_eps);
    if (L.recurrent) {
      deltanet_layer(st, il, n, pool);
    } else {
      attention_layer(st, il, n, pos, pool);
    }
    for (int64_t i = 0; i < n * e; ++i) x[i] += mix[i];
    for (int32_t t = 0; t < n; ++t)
      rms_norm(x + t * e, L.post_norm.data(), xn + t * e, e, c.norm_eps);
    ffn(st, il, n, pool);
    for (int64_t i = 0; i < n * e; ++i) x[i] += mix[i];
  }

  if (!logits) return;
  const int32_t r0 = all_logits ? 0 : n - 1;
  for (int32_t t = r0; t < n; ++t) {
    rms_norm(x + t * e, output_norm_.data(), xn + t * e, e, c.norm_eps);
  }
  matmul(output_, xn + r0 * e, e, n - r0, logits, c.n_vocab, st.s.matmul.data(), pool);
}

void Qwen35Model::deltanet_layer(Qwen35State& st, int32_t il, int32_t n, ThreadPool& pool) const {
  const Qwen35Config& c = cfg_;
  const Qwen35Layer& L = layers_[static_cast<size_t>(il)];
  Qwen35State::Scratch& s = st.s;
  const int64_t e = c.n_embd;
  const int64_t cd = c.conv_dim();
  const int64_t vd = c.value_dim();
  const int32_t nv = c.n_v_heads;
  float* ms = s.matmul.data();
  float* qkv = s.big0.data();       // [n][conv_dim] projections before the conv
  float* conv_out = s.big1.data();  // [n][conv_dim] q | k | v after conv + SiLU
  float* z = s.mid0.data();         // [n][value_dim] output gate
  float* core = s.mid1.data();      // [n][value_dim] delta rule output
  float* beta = s.heads0.data();    // [n][n_v_heads]
  float* g = s.heads1.data();       // [n][n_v_heads] log decay

  matmul(L.wqkv, s.xn.data(), e, n, qkv, cd, ms, pool);
  matmul(L.wz, s.xn.data(), e, n, z, vd, ms, pool);
  matmul(L.w_beta, s.xn.data(), e, n, beta, nv, ms, pool);
  matmul(L.w_alpha, s.xn.data(), e, n, g, nv, ms, pool);
  for (int32_t t = 0; t < n; ++t) {
    for (int32_t h = 0; h < nv; ++h) {
      const int64_t i = int64_t{t} * nv + h;
      beta[i] = sigmoid_f32(beta[i]);
      g[i] =
          L.ssm_a[static_cast<size_t>(h)] * softplus_f32(g[i] + L.dt_bias[static_cast<size_t>(h)]);
    }
  }

  const int32_t slot = rec_slot(il);
  float* conv_state = st.conv.data() + slot * st.conv_layer_floats;  // [kernel-1][conv_dim]
  float* ssm = st.ssm.data() + slot * st.ssm_layer_floats;           // [n_v][d_k][d_v]
  pool.run([&](int ti, int tn) {
    const int64_t c0 = cd * ti / tn, c1 = cd * (ti + 1) / tn;
    if (c0 >= c1) return;
    conv1d_causal(qkv, cd, n, cd, L.conv1d.data(), c.conv_kernel, conv_state, conv_out, cd, c0, c1);
    for (int32_t t = 0; t < n; ++t) silu_inplace(conv_out + t * cd + c0, c1 - c0);
  });

  const float q_scale = 1.0f / std::sqrt(static_cast<float>(c.d_k));
  for (int32_t t = 0; t < n; ++t) {
    for (int32_t kh = 0; kh < c.n_k_heads; ++kh) {
      float* q = conv_out + t * cd + int64_t{kh} * c.d_k;
      float* k = conv_out + t * cd + c.key_dim() + int64_t{kh} * c.d_k;
      l2_norm_inplace(q, c.d_k, c.norm_eps);
      l2_norm_inplace(k, c.d_k, c.norm_eps);
      for (int32_t i = 0; i < c.d_k; ++i) q[i] *= q_scale;
    }
  }

  GatedDeltaArgs a;
  a.n_tokens = n;
  a.n_k_heads = c.n_k_heads;
  a.n_v_heads = nv;
  a.d_k = c.d_k;
  a.d_v = c.d_v;
  a.q = conv_out;
  a.k = conv_out + c.key_dim();
  a.v = conv_out + 2 * c.key_dim();
  a.q_stride = a.k_stride = a.v_stride = cd;
  a.g = g;
  a.beta = beta;
  a.state = ssm;
  a.out = core;
  a.out_stride = vd;
  const size_t per_thread = gated_delta_rule_scratch_doubles(kDeltaChunk, c.d_k, c.d_v);
  pool.run([&](int ti, int tn) {
    const int32_t h0 = nv * ti / tn, h1 = nv * (ti + 1) / tn;
    if (h0 >= h1) return;
    double* scratch = s.delta.data() + static_cast<size_t>(ti) * per_thread;
    if (n == 1) {
      gated_delta_rule_recurrent(a, h0, h1, scratch);
    } else {
      gated_delta_rule_chunked(a, kDeltaChunk, h0, h1, scratch);
    }
  });

  for (int32_t t = 0; t < n; ++t) {
    for (int32_t h = 0; h < nv; ++h) {
      float* o = core + t * vd + int64_t{h} * c.d_v;
      rms_norm_gated(o, z + t * vd + int64_t{h} * c.d_v, L.ssm_norm.data(), c.d_v, c.norm_eps, o);
    }
  }
  matmul(L.ssm_out, core, vd, n, s.mix.data(), e, ms, pool);
}

void Qwen35Model::attention_layer(Qwen35State& st, int32_t il, int32_t n, int32_t pos,
                                  ThreadPool& pool) const {
  const Qwen35Config& c = cfg_;
  const Qwen35Layer& L = layers_[static_cast<size_t>(il)];
  Qwen35State::Scratch& s = st.s;
  const int64_t e = c.n_embd;
  const int32_t hd = c.head_dim;
  const int64_t qd = int64_t{c.n_head} * hd;      // query / output width
  const int64_t kvd = int64_t{c.n_head_kv} * hd;  // key / value width
  float* ms = s.matmul.data();
  float* qg = s.big0.data();   // [n][n_head][2][head_dim]: query then gate per head
  float* q = s.big1.data();    // [n][n_head][head_dim]
  float* k = s.mid0.data();    // [n][n_head_kv][head_dim]
  float* v = s.mid1.data();    // [n][n_head_kv][head_dim]
  float* att = s.mid2.data();  // [n][n_head][head_dim]

  matmul(L.wq, s.xn.data(), e, n, qg, 2 * qd, ms, pool);
  matmul(L.wk, s.xn.data(), e, n, k, kvd, ms, pool);
  matmul(L.wv, s.xn.data(), e, n, v, kvd, ms, pool);

  RopeParams rp;
  rp.style = RopeStyle::NEOX;
  rp.n_rot = c.n_rot;
  rp.freq_base = c.rope_base;
  for (int32_t t = 0; t < n; ++t) {
    for (int32_t h = 0; h < c.n_head; ++h) {
      rms_norm(qg + t * 2 * qd + int64_t{h} * 2 * hd, L.q_norm.data(), q + t * qd + int64_t{h} * hd,
               hd, c.norm_eps);
    }
    for (int32_t h = 0; h < c.n_head_kv; ++h) {
      float* kh = k + t * kvd + int64_t{h} * hd;
      rms_norm(kh, L.k_norm.data(), kh, hd, c.norm_eps);
    }
    rope(q + t * qd, c.n_head, hd, pos + t, rp);
    rope(k + t * kvd, c.n_head_kv, hd, pos + t, rp);
  }

  AttentionShape shape;
  shape.n_head = c.n_head;
  shape.n_head_kv = c.n_head_kv;
  shape.head_dim_k = hd;
  shape.head_dim_v = hd;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  st.kv->attend(il, shape, q, qd, n, pos, k, kvd, v, kvd, att, qd, s.attn.data(), pool);

  for (int32_t t = 0; t < n; ++t) {
    for (int32_t h = 0; h < c.n_head; ++h) {
      float* o = att + t * qd + int64_t{h} * hd;
      const float* gate = qg + t * 2 * qd + int64_t{h} * 2 * hd + hd;
      for (int32_t d = 0; d < hd; ++d) o[d] *= sigmoid_f32(gate[d]);
    }
  }
  matmul(L.wo, att, qd, n, s.mix.data(), e, ms, pool);
}

void Qwen35Model::ffn(Qwen35State& st, int32_t il, int32_t n, ThreadPool& pool) const {
  const Qwen35Config& c = cfg_;
  const Qwen35Layer& L = layers_[static_cast<size_t>(il)];
  Qwen35State::Scratch& s = st.s;
  const int64_t e = c.n_embd;
  const int64_t f = c.n_ff;
  float* gate = s.big0.data();  // [n][n_ff]
  float* up = s.big1.data();    // [n][n_ff]
  matmul(L.ffn_gate, s.xn.data(), e, n, gate, f, s.matmul.data(), pool);
  matmul(L.ffn_up, s.xn.data(), e, n, up, f, s.matmul.data(), pool);
  swiglu(gate, up, gate, n * f);
  matmul(L.ffn_down, gate, f, n, s.mix.data(), e, s.matmul.data(), pool);
}

}  // namespace geist
