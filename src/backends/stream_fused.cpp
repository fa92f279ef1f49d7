// The fused ops' defaults (backend.h): each runs the plain ops it names, in that order.
#include "backends/backend.h"
#include "base/status.h"

namespace geist {

void Stream::add_rms_norm(float* y, const float* x, const float* w, float* out, int64_t out_stride,
                          int32_t n_rows, int64_t n, float eps) {
  add(y, x, n_rows * n);
  rms_norm(y, n, w, out, out_stride, n_rows, n, eps);
}

void Stream::rope_attend(KvStore& kv, int32_t il, const AttentionShape& s, const RopeParams& p,
                         const HeadNorms* norms, float* q, int64_t q_stride, float* k,
                         int64_t k_stride, const float* v, int64_t v_stride, int32_t n_tok,
                         int32_t pos, float* out, int64_t out_stride) {
  const int32_t hd = s.head_dim_k;
  if (norms != nullptr) {
    GEIST_CHECK(q_stride == int64_t{s.n_head} * hd && k_stride == int64_t{s.n_head_kv} * hd,
                "rope_attend: head norms need contiguous q and k rows");
    rms_norm(norms->q_src, norms->q_src_stride, norms->q_w, q, hd, n_tok * s.n_head, hd,
             norms->eps);
    rms_norm(norms->k_src, norms->k_src_stride, norms->k_w, k, hd, n_tok * s.n_head_kv, hd,
             norms->eps);
  }
  rope(q, q_stride, n_tok, s.n_head, hd, pos, p);
  rope(k, k_stride, n_tok, s.n_head_kv, hd, pos, p);
  kv.attend_on(*this, il, s, q, q_stride, n_tok, pos, k, k_stride, v, v_stride, out, out_stride);
}

void Stream::matmul_many(const MatmulDst* outs, int32_t n, const float* x, int64_t x_stride,
                         int32_t n_tok) {
  for (int32_t i = 0; i < n; ++i)
    matmul(*outs[i].w, x, x_stride, n_tok, outs[i].y, outs[i].y_stride);
}

void Stream::matmul_swiglu(const WeightMatrix& gate_w, const WeightMatrix& up_w, const float* x,
                           int64_t x_stride, int32_t n_tok, float* gate, float* up, float* out) {
  matmul(gate_w, x, x_stride, n_tok, gate, gate_w.n_out);
  matmul(up_w, x, x_stride, n_tok, up, up_w.n_out);
  swiglu(gate, up, out, n_tok * gate_w.n_out);
}

void Stream::l2_norm_heads_pair(float* q, float q_scale, float* k, float k_scale, int64_t x_stride,
                                int32_t n_tok, int32_t n_heads, int32_t d, float eps) {
  l2_norm_heads(q, x_stride, n_tok, n_heads, d, eps, q_scale);
  l2_norm_heads(k, x_stride, n_tok, n_heads, d, eps, k_scale);
}

void Stream::deltanet_prep(const DeltaNetPrepArgs& p) {
  if (p.beta != nullptr) deltanet_gates(p.beta, p.g, p.n_tok, p.gate_heads, p.a, p.dt_bias);
  conv1d_silu(p.x, p.x_stride, p.n_tok, p.n_ch, p.w, p.kernel, p.state, p.out, p.out_stride);
  l2_norm_heads_pair(p.out, p.q_scale, p.out + int64_t{p.l2_heads} * p.d, 1.0f, p.out_stride,
                     p.n_tok, p.l2_heads, p.d, p.eps);
}

void Stream::gated_delta_rule_norm(const GatedDeltaArgs& a, int32_t chunk, const float* z,
                                   const float* w, float eps) {
  GEIST_CHECK(a.out_stride == int64_t{a.n_v_heads} * a.d_v,
              "gated_delta_rule_norm: the output rows are not contiguous");
  gated_delta_rule_many(&a, 1, chunk);
  rms_norm_gated(a.out, z, w, a.n_tokens * a.n_v_heads, a.d_v, eps, a.out);
}

}  // namespace geist
