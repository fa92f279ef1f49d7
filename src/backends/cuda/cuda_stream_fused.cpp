// StreamCore's held ops of the decode fusions (cuda_stream.h): per-head rms_norms waiting for
// the rope that takes them in, a one-token delta rule waiting for its gated norm, and a rope
// pair launched with the KV rows it feeds (and, for one token, with the attention that reads
// them).
#include <utility>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_stream.h"
#include "backends/cuda/deltanet_cuda.h"

namespace geist::cuda {

namespace {

constexpr int32_t kRopeKvMaxTokens = 8;  // the decode steps (matmul_batchable's n_tok)

// Floats spanned by n_rows rows of n at the given stride.
int64_t rows_span(int32_t n_rows, int64_t stride, int64_t n) {
  return n_rows > 0 ? (n_rows - 1) * stride + n : 0;
}

bool apart(const float* a, int64_t na, const float* b, int64_t nb) {
  return a + na <= b || b + nb <= a;
}

}  // namespace

void StreamCore::flush_fused() {
  for (PendingHeadNorm& h : hnorm) {  // hnorm[0] was issued first
    if (h.n_rows == 0) continue;
    const PendingHeadNorm q = h;
    h = PendingHeadNorm{};
    ok(cuda::rms_norm(stream, q.x, q.x_stride, q.w, q.y, q.n, q.n_rows, q.n, q.eps),
       "rms_norm kernel launch");
  }
}

bool StreamCore::rope_kv_fits(const float* k, int64_t k_stride, int32_t n_tok, int32_t nk,
                              const KvRowsOut& kv, RopeTensor* a, RopeTensor* b) const {
  const PendingRope& r = rope;
  const bool alone = hnorm[0].n_rows == 0 && hnorm[1].n_rows == 0;
  *a = r.t;
  *b = r.b;
  if (a->x == k) std::swap(*a, *b);             // the keys are the launch's second tensor
  const auto span = [&](const RopeTensor& u) {  // floats a tensor's rows cover
    return (n_tok - 1) * u.x_stride + int64_t{u.n_head} * r.head_dim;
  };
  const int64_t v_span = n_tok > 0 ? (n_tok - 1) * kv.v_stride + kv.nv : 0;
  // The launch reads v while it turns a and b in place: v must be apart from both. Decode
  // steps only: rope_kv_kernel's blocks each compute their token's angles, which a prefill's
  // separate rope computes once per token (H200 llama-1b pp2048: 37.8k -> 35.4k tok/s fused).
  return alone && r.n_tok > 0 && r.n_tok <= kRopeKvMaxTokens && r.n_tok == n_tok && b->n_head > 0 &&
         b->x == k && b->x_stride == k_stride && int64_t{b->n_head} * r.head_dim == nk &&
         (kv.nv == 0 ||
          (apart(kv.v, v_span, a->x, span(*a)) && apart(kv.v, v_span, b->x, span(*b))));
}

bool StreamCore::flush_rope_kv(const float* k, int64_t k_stride, int32_t n_tok, int32_t nk,
                               const KvRowsOut& kv, bool* good) {
  RopeTensor a, b;
  if (!rope_kv_fits(k, k_stride, n_tok, nk, kv, &a, &b)) {
    flush();
    return false;
  }
  const PendingRope r = rope;
  rope.n_tok = 0;
  rope.b = RopeTensor{};
  *good = ok(cuda::rope_kv(stream, a, b, n_tok, r.head_dim, r.pos_off, r.pos_dev, r.p, kv),
             "rope_kv kernel launch");
  return true;
}

bool StreamCore::flush_rope_attend(const AttentionShape& sh, const float* q, const float* k,
                                   int64_t k_stride, const KvRowsOut& kv, const KvDevSrc& ks,
                                   const KvDevSrc& vs, int32_t pos0, const int32_t* pos_dev,
                                   float* out, int64_t out_stride, bool* good) {
  RopeTensor a, b;
  if (!rope_kv_fits(k, k_stride, 1, sh.n_head_kv * sh.head_dim_k, kv, &a, &b) || a.x != q ||
      a.src != nullptr || b.src != nullptr) {
    return false;
  }
  // The launch reads q, k and v while its blocks write their heads of q and k and then of out:
  // out must be apart from all three.
  const int64_t no = int64_t{sh.n_head} * sh.head_dim_v;
  if (!apart(out, no, a.x, int64_t{a.n_head} * rope.head_dim) ||
      !apart(out, no, b.x, int64_t{b.n_head} * rope.head_dim) || !apart(out, no, kv.v, kv.nv)) {
    return false;
  }
  RopeStep st;
  st.q = a;
  st.k = b;
  st.head_dim = rope.head_dim;
  st.pos0 = rope.pos_off;
  st.pos_dev = rope.pos_dev;
  st.p = rope.p;
  st.kv = kv;
  cudaError_t e = cudaSuccess;
  if (!kv_attention_rope(stream, sh, st, pos0, ks, vs, out, out_stride, pos_dev, &e)) return false;
  rope.n_tok = 0;
  rope.b = RopeTensor{};
  *good = ok(e, "rope + kv attention kernel launch");
  return true;
}

bool StreamCore::hold_head_norm(const float* x, int64_t x_stride, const float* w, float* y,
                                int64_t y_stride, int32_t n_rows, int64_t n, float eps) {
  if (n_rows <= 0 || y_stride != n || n > 1024 || !rope_can_norm(static_cast<int32_t>(n)) ||
      x_stride < n) {
    return false;
  }
  const int64_t xs = rows_span(n_rows, x_stride, n), ys = rows_span(n_rows, n, n);
  // In place, or apart: each block of the fused kernel reads its source row before it writes.
  if (!(x == y ? x_stride == n : apart(x, xs, y, ys))) return false;
  PendingHeadNorm* slot = nullptr;
  if (hnorm[0].n_rows == 0) {
    slot = &hnorm[0];
  } else if (hnorm[1].n_rows == 0) {
    // The two may run in either order (flush_fused, or the first with its rope): they must
    // share no memory that one writes.
    const PendingHeadNorm& o = hnorm[0];
    const int64_t oxs = rows_span(o.n_rows, o.x_stride, o.n), oys = rows_span(o.n_rows, o.n, o.n);
    if (apart(y, ys, o.x, oxs) && apart(y, ys, o.y, oys) && apart(x, xs, o.y, oys)) {
      slot = &hnorm[1];
    }
  }
  if (slot == nullptr) return false;
  *slot = PendingHeadNorm{x, x_stride, w, y, n_rows, n, eps};
  return true;
}

void StreamCore::take_head_norm(RopeTensor* t, int32_t n_tok, int32_t head_dim) {
  if (t->x_stride != int64_t{t->n_head} * head_dim) return;
  for (PendingHeadNorm& h : hnorm) {
    if (h.n_rows > 0 && h.y == t->x && h.n == head_dim &&
        int64_t{h.n_rows} == int64_t{n_tok} * t->n_head) {
      t->src = h.x;
      t->src_stride = h.x_stride;
      t->norm_w = h.w;
      t->norm_eps = h.eps;
      h = PendingHeadNorm{};
      if (hnorm[0].n_rows == 0 && hnorm[1].n_rows > 0) {  // keep issue order in the slots
        hnorm[0] = hnorm[1];
        hnorm[1] = PendingHeadNorm{};
      }
      return;
    }
  }
}

}  // namespace geist::cuda
