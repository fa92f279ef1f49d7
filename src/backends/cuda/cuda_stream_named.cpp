// CudaStream's fused ops (backend.h, "fused ops"; cuda_stream_impl.h): each launches its fused
// kernel where the operands fit it, with the arguments the separate ops would pass, and is
// otherwise the plain ops (Stream's default). The fit tests are those the fused kernels state
// (cuda_kernels.h, deltanet_cuda.h); a fused launch notes one record entry of its own (graph
// capture / replay), the plain ops note theirs.
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_stream_impl.h"
#include "backends/cuda/deltanet_cuda.h"
#include "backends/cuda/matmul_prefill_cuda.h"

namespace geist::cuda {

namespace {

// [a, a + na) and [b, b + nb) (floats) share no element.
bool disjoint(const float* a, int64_t na, const float* b, int64_t nb) {
  return a + na <= b || b + nb <= a;
}

// Floats spanned by n_rows rows of n at the given stride.
int64_t rows_span(int32_t n_rows, int64_t stride, int64_t n) {
  return n_rows > 0 ? (n_rows - 1) * stride + n : 0;
}

// An 8-bit prefill matmul: those of one type share one quantization of x.
bool prefill_matmul(const WeightMatrix& w, int32_t n_tok) {
  return n_tok > cuda::kBatchMaxTok && cuda::matmul_prefill_supported(w.type) && w.n_in % 32 == 0;
}

// Matmuls of one x that share a launch (launch_matmuls).
struct MatmulGroup {
  int count = 0;
  MatmulOut out[kMaxMatmulBatch];
  void* scratch = nullptr;  // prefill: the activation codes' device scratch
  size_t scratch_bytes = 0;
};

// d may be in a group at all: a decode or 8-bit prefill matmul whose rows are apart from x.
bool groupable(const MatmulDst& d, const float* x, int64_t x_stride, int32_t n_tok) {
  const WeightMatrix& w = *d.w;
  return (prefill_matmul(w, n_tok) || cuda::matmul_batchable(w, n_tok)) &&
         disjoint(d.y, rows_span(n_tok, d.y_stride, w.n_out), x,
                  rows_span(n_tok, x_stride, w.n_in));
}

// A groupable d joins g: room left, the same n_in (and type for prefill), its rows apart from
// those of every member.
bool joins(const MatmulGroup& g, const MatmulDst& d, int32_t n_tok) {
  const WeightMatrix& w = *d.w;
  if (g.count == 0 || g.count >= kMaxMatmulBatch || g.out[0].w.n_in != w.n_in ||
      (prefill_matmul(w, n_tok) && g.out[0].w.type != w.type)) {
    return false;
  }
  for (int i = 0; i < g.count; ++i) {
    const MatmulOut& o = g.out[i];
    if (!disjoint(d.y, rows_span(n_tok, d.y_stride, w.n_out), o.y,
                  rows_span(n_tok, o.y_stride, o.w.n_out))) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool CudaStream::one_matmul_group(const MatmulDst* outs, int32_t n, const float* x,
                                  int64_t x_stride, int32_t n_tok) const {
  MatmulGroup g;
  for (int32_t i = 0; i < n; ++i) {
    if (!groupable(outs[i], x, x_stride, n_tok) || (i > 0 && !joins(g, outs[i], n_tok))) {
      return false;
    }
    g.out[g.count++] = MatmulOut{*outs[i].w, outs[i].y, outs[i].y_stride};
  }
  return n > 0;
}

void CudaStream::launch_matmuls(const MatmulDst* outs, int32_t n, const float* x, int64_t x_stride,
                                int32_t n_tok) {
  MatmulGroup g;
  const auto launch = [&] {
    if (g.count == 0) return;
    const int k = g.count;
    g.count = 0;
    if (n_tok > cuda::kBatchMaxTok) {
      core_->ok(cuda::matmul_prefill_batch(core_->stream, g.out, k, x, x_stride, n_tok, g.scratch,
                                           g.scratch_bytes),
                "matmul kernel launch");
    } else {
      core_->ok(cuda::matmul_batch(core_->stream, g.out, k, x, x_stride, n_tok, g.scratch,
                                   g.scratch_bytes),
                "matmul kernel launch");
    }
  };
  for (int32_t i = 0; i < n; ++i) {
    const MatmulDst& d = outs[i];
    const WeightMatrix& w = *d.w;
    if (!groupable(d, x, x_stride, n_tok)) {
      launch();
      core_->ok(matmul_ws(w, x, x_stride, n_tok, d.y, d.y_stride), "matmul kernel launch");
      continue;
    }
    if (!joins(g, d, n_tok)) {
      launch();
      // The activation codes' scratch: a prefill's, or 3-16 decode tokens' (the same size for
      // any type of the group).
      size_t ws_bytes = cuda::matmul_scratch_bytes(w, n_tok);
      void* ws =
          ws_bytes > 0 ? act_q8_.get(*core_, ws_bytes, "matmul activation scratch") : nullptr;
      if (ws == nullptr && prefill_matmul(w, n_tok)) {
        // No scratch: matmul() takes the tokens through the decode kernel.
        core_->ok(matmul_ws(w, x, x_stride, n_tok, d.y, d.y_stride), "matmul kernel launch");
        continue;
      }
      if (ws == nullptr) ws_bytes = 0;  // decode: the slower kernel, the same bits
      g.scratch = ws;
      g.scratch_bytes = ws_bytes;
    }
    g.out[g.count++] = MatmulOut{w, d.y, d.y_stride};
  }
  launch();
}

void CudaStream::add_rms_norm(float* y, const float* x, const float* w, float* out,
                              int64_t out_stride, int32_t n_rows, int64_t n, float eps) {
  const int64_t total = n_rows * n;                                         // floats of y and x
  const int64_t rows_len = n_rows > 0 ? (n_rows - 1) * out_stride + n : 0;  // floats out spans
  // In place or apart: the kernel's blocks read their rows of y and x before they write out.
  const bool fits = fuse_ && in_step_ && total > 0 &&
                    (out == y ? out_stride == n : disjoint(out, rows_len, y, total)) &&
                    (out == x ? out_stride == n : disjoint(out, rows_len, x, total));
  if (!fits) {
    Stream::add_rms_norm(y, x, w, out, out_stride, n_rows, n, eps);
    return;
  }
  if (core_->note_op(kRecAddRmsNorm, y, x, w, out, out_stride, n_rows, n, eps)) return;
  core_->ok(cuda::add_rms_norm(core_->stream, y, x, w, out, out_stride, n_rows, n, eps),
            "add_rms_norm kernel launch");
}

void CudaStream::matmul_many(const MatmulDst* outs, int32_t n, const float* x, int64_t x_stride,
                             int32_t n_tok) {
  if (!fuse_ || !in_step_) {
    Stream::matmul_many(outs, n, x, x_stride, n_tok);
    return;
  }
  const bool replay = core_->note_op(kRecMatmulMany, n, x, x_stride, n_tok);
  for (int32_t i = 0; i < n; ++i) {
    const WeightMatrix& w = *outs[i].w;
    core_->note_op(w.type, w.data, w.n_in, w.n_out, w.row_bytes, w.layout, outs[i].y,
                   outs[i].y_stride);
  }
  if (replay) return;
  launch_matmuls(outs, n, x, x_stride, n_tok);
}

void CudaStream::matmul_swiglu(const WeightMatrix& gate_w, const WeightMatrix& up_w, const float* x,
                               int64_t x_stride, int32_t n_tok, float* gate, float* up,
                               float* out) {
  const int64_t n_out = gate_w.n_out;
  const int64_t n = n_tok * n_out;  // floats of out
  const MatmulDst two[] = {{&gate_w, gate, n_out}, {&up_w, up, up_w.n_out}};
  if (!fuse_ || !in_step_) {
    Stream::matmul_swiglu(gate_w, up_w, x, x_stride, n_tok, gate, up, out);
    return;
  }
  // One group of the two matmuls, a kernel for the type and shapes, and out gate, up, or apart
  // from both and from x.
  const bool decode = n_tok == 1;
  const bool kernel_ok =
      decode ? cuda::matmul_swiglu_ok(gate_w, up_w)
             : n_tok > cuda::kBatchMaxTok && cuda::matmul_prefill_swiglu_ok(gate_w, up_w);
  const bool fits =
      kernel_ok && one_matmul_group(two, 2, x, x_stride, n_tok) &&
      (out == gate || out == up || (disjoint(out, n, gate, n) && disjoint(out, n, up, n))) &&
      disjoint(out, n, x, rows_span(n_tok, x_stride, gate_w.n_in));
  if (!fits) {
    matmul_many(two, 2, x, x_stride, n_tok);
    swiglu(gate, up, out, n);
    return;
  }
  if (core_->note_op(kRecMatmulSwiglu, gate_w.type, gate_w.data, gate_w.n_in, gate_w.n_out,
                     gate_w.row_bytes, gate_w.layout, up_w.type, up_w.data, up_w.n_out,
                     up_w.row_bytes, up_w.layout, x, x_stride, n_tok, gate, up, out)) {
    return;
  }
  const MatmulOut g{gate_w, gate, n_out}, u{up_w, up, up_w.n_out};
  if (decode) {
    core_->ok(cuda::matmul_swiglu(core_->stream, g, u, x, out), "matmul_swiglu kernel launch");
    return;
  }
  const size_t ws_bytes = cuda::matmul_scratch_bytes(gate_w, n_tok);
  void* ws = act_q8_.get(*core_, ws_bytes, "matmul activation scratch");
  if (ws == nullptr) {  // no scratch: each matmul through the decode kernel, then the swiglu
    core_->ok(matmul_ws(gate_w, x, x_stride, n_tok, gate, n_out), "matmul kernel launch");
    core_->ok(matmul_ws(up_w, x, x_stride, n_tok, up, up_w.n_out), "matmul kernel launch");
    core_->ok(cuda::swiglu(core_->stream, gate, up, out, n), "swiglu kernel launch");
    return;
  }
  core_->ok(cuda::matmul_prefill_swiglu(core_->stream, g, u, x, x_stride, n_tok, out, n_out, ws,
                                        ws_bytes),
            "matmul_prefill_swiglu kernel launch");
}

void CudaStream::launch_l2_pair(float* q, float q_scale, float* k, float k_scale, int64_t x_stride,
                                int32_t n_tok, int32_t n_heads, int32_t d, float eps) {
  const int64_t len = rows_span(n_tok, x_stride, int64_t{n_heads} * d);
  if (n_tok > 0 && n_heads > 0 && d > 0 && x_stride >= int64_t{n_heads} * d &&
      disjoint(k, len, q, len)) {
    cuda::l2_norm_heads2(core_->stream, q, q_scale, k, k_scale, x_stride, n_tok, n_heads, d, eps);
    core_->ok(cudaGetLastError(), "l2_norm_heads kernel launch");
    return;
  }
  cuda::l2_norm_heads(core_->stream, q, x_stride, n_tok, n_heads, d, eps, q_scale);
  core_->ok(cudaGetLastError(), "l2_norm_heads kernel launch");
  cuda::l2_norm_heads(core_->stream, k, x_stride, n_tok, n_heads, d, eps, k_scale);
  core_->ok(cudaGetLastError(), "l2_norm_heads kernel launch");
}

void CudaStream::l2_norm_heads_pair(float* q, float q_scale, float* k, float k_scale,
                                    int64_t x_stride, int32_t n_tok, int32_t n_heads, int32_t d,
                                    float eps) {
  if (!fuse_ || !in_step_) {
    Stream::l2_norm_heads_pair(q, q_scale, k, k_scale, x_stride, n_tok, n_heads, d, eps);
    return;
  }
  if (core_->note_op(kRecL2Pair, q, q_scale, k, k_scale, x_stride, n_tok, n_heads, d, eps)) return;
  launch_l2_pair(q, q_scale, k, k_scale, x_stride, n_tok, n_heads, d, eps);
}

void CudaStream::deltanet_prep(const DeltaNetPrepArgs& p) {
  if (!fuse_ || !in_step_ || p.n_tok != 1) {
    Stream::deltanet_prep(p);
    return;
  }
  if (core_->note_op(kRecDeltaPrep, p.beta, p.g, p.gate_heads, p.a, p.dt_bias, p.x, p.x_stride,
                     p.n_ch, p.w, p.kernel, p.state, p.out, p.out_stride, p.l2_heads, p.d, p.eps,
                     p.q_scale)) {
    return;
  }
  const auto gates_alone = [&] {
    cuda::deltanet_gates(core_->stream, p.beta, p.g, 1, p.gate_heads, p.a, p.dt_bias);
    core_->ok(cudaGetLastError(), "deltanet prologue kernel launch");
  };
  const int64_t n_ch = p.n_ch;
  const int64_t hist_len = int64_t{p.kernel - 1} * n_ch;  // floats of state
  const int64_t gh = p.gate_heads;
  // The launch writes out while it reads x and the state (so out is apart from both), and runs
  // the gates first: they join only where they share no memory with the conv.
  const bool conv_ok = n_ch > 0 && p.kernel >= 1 && disjoint(p.out, n_ch, p.x, n_ch) &&
                       disjoint(p.out, n_ch, p.state, hist_len);
  bool gates = p.beta != nullptr;
  const bool gates_apart =
      gh > 0 && disjoint(p.beta, gh, p.x, n_ch) && disjoint(p.g, gh, p.x, n_ch) &&
      disjoint(p.beta, gh, p.out, n_ch) && disjoint(p.g, gh, p.out, n_ch) &&
      disjoint(p.beta, gh, p.state, hist_len) && disjoint(p.g, gh, p.state, hist_len);
  if (gates && !(conv_ok && gates_apart)) {
    gates_alone();
    gates = false;
  }
  float* k = p.out + int64_t{p.l2_heads} * p.d;
  if (!conv_ok) {
    cuda::conv1d_silu(core_->stream, p.x, p.x_stride, 1, n_ch, p.w, p.kernel, p.state, p.out,
                      p.out_stride);
    core_->ok(cudaGetLastError(), "conv1d_silu kernel launch");
    launch_l2_pair(p.out, p.q_scale, k, 1.0f, p.out_stride, 1, p.l2_heads, p.d, p.eps);
    return;
  }
  // q's heads start the conv's output and k's follow them: each norm joins while it fits.
  const int64_t run = int64_t{p.l2_heads} * p.d;
  const bool q_joins = p.l2_heads > 0 && p.d > 0 && run <= n_ch;
  const bool k_joins = q_joins && 2 * run <= n_ch;
  DeltaPrep dp;
  if (gates) {
    dp.beta = p.beta;
    dp.g = p.g;
    dp.a = p.a;
    dp.dt_bias = p.dt_bias;
    dp.gate_heads = p.gate_heads;
  }
  dp.x = p.x;
  dp.n_ch = n_ch;
  dp.w = p.w;
  dp.kernel = p.kernel;
  dp.state = p.state;
  dp.out = p.out;
  if (q_joins) {
    dp.n_l2 = k_joins ? 2 : 1;
    dp.l2_heads = p.l2_heads;
    dp.d = p.d;
    dp.eps = p.eps;
    dp.scale_q = p.q_scale;
  }
  cuda::deltanet_prep(core_->stream, dp);
  core_->ok(cudaGetLastError(), "deltanet prologue kernel launch");
  if (!q_joins) {
    launch_l2_pair(p.out, p.q_scale, k, 1.0f, p.out_stride, 1, p.l2_heads, p.d, p.eps);
  } else if (!k_joins) {
    cuda::l2_norm_heads(core_->stream, k, p.out_stride, 1, p.l2_heads, p.d, p.eps, 1.0f);
    core_->ok(cudaGetLastError(), "l2_norm_heads kernel launch");
  }
}

void CudaStream::gated_delta_rule_norm(const GatedDeltaArgs& a, int32_t chunk, const float* z,
                                       const float* w, float eps) {
  const int64_t rows = int64_t{a.n_v_heads} * a.d_v;  // floats of out (and of z)
  const int64_t state = int64_t{a.n_v_heads} * a.d_k * a.d_v;
  // z is read while the launch writes out and the state.
  if (!fuse_ || !in_step_ || a.n_tokens != 1 || a.out_stride != rows ||
      !disjoint(z, rows, a.out, rows) || !disjoint(z, rows, a.state, state)) {
    Stream::gated_delta_rule_norm(a, chunk, z, w, eps);
    return;
  }
  const size_t bytes = cuda::gated_delta_rule_scratch_bytes(a, chunk);
  void* scratch = nullptr;
  if (bytes > 0) {
    scratch = dn_scratch_.get(*core_, bytes, "gated_delta_rule scratch");
    if (scratch == nullptr) {  // no delta rule (the failure is recorded): the norm alone
      rms_norm_gated(a.out, z, w, a.n_v_heads, a.d_v, eps, a.out);
      return;
    }
  }
  if (core_->note_op(kRecDeltaNorm, a.n_k_heads, a.n_v_heads, a.d_k, a.d_v, a.q, a.q_stride, a.k,
                     a.k_stride, a.v, a.v_stride, a.g, a.beta, a.state, a.out, chunk, scratch, z, w,
                     eps)) {
    return;
  }
  // [n_v_heads] counters, zero at rest.
  auto* count = static_cast<unsigned*>(dn_count_.get(
      *core_, static_cast<size_t>(a.n_v_heads) * sizeof(unsigned), "delta rule counters", true));
  if (count == nullptr) {  // the separate launches
    cuda::gated_delta_rule(core_->stream, a, chunk, scratch);
    core_->ok(cudaGetLastError(), "gated_delta_rule kernel launch");
    cuda::rms_norm_gated(core_->stream, a.out, z, w, a.n_v_heads, a.d_v, eps, a.out);
    core_->ok(cudaGetLastError(), "rms_norm_gated kernel launch");
    return;
  }
  cuda::gated_delta_rule_norm(core_->stream, a, z, w, eps, count);
  core_->ok(cudaGetLastError(), "gated_delta_rule kernel launch");
}

}  // namespace geist::cuda
