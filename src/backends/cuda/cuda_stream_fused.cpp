// Stream::rope_attend on CUDA (CudaStream::rope_attend) and the rope pair's launches with a plain
// KV cache's rows (StreamCore::rope_kv / rope_attention, cuda_stream.h): the per-head rms_norms
// (Qwen3.5's q and k norms) taken into the rope where they fit, the rope of q and k as one launch,
// and that launch taken into the cache's write of the step's rows (and, for one token, into the
// attention that reads them).
#include <utility>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_stream_impl.h"

namespace geist::cuda {

namespace {

constexpr int32_t kRopeKvMaxTokens = kBatchMaxTok;  // the decode steps (matmul_batchable's n_tok)

// Floats spanned by n_rows rows of n at the given stride.
int64_t rows_span(int32_t n_rows, int64_t stride, int64_t n) {
  return n_rows > 0 ? (n_rows - 1) * stride + n : 0;
}

bool apart(const float* a, int64_t na, const float* b, int64_t nb) {
  return a + na <= b || b + nb <= a;
}

// A per-head rms_norm that the rope of its output rows may take in (at most two, disjoint).
struct HeadNorm {
  const float* x = nullptr;  // row r at x + r * x_stride
  int64_t x_stride = 0;
  const float* w = nullptr;
  float* y = nullptr;  // [n_rows][n], rows contiguous
  int32_t n_rows = 0;  // 0: none
  int64_t n = 0;
  float eps = 0;
};

// Puts the norm into a free slot of h when a rope may take it in (rows of an even length <=
// 1024 written contiguously, in place or apart from the source, and apart from a norm already
// there). False: nothing changed.
bool hold_head_norm(HeadNorm* h, const HeadNorm& m) {
  const int64_t n = m.n;
  if (m.n_rows <= 0 || n > 1024 || !rope_can_norm(static_cast<int32_t>(n)) || m.x_stride < n) {
    return false;
  }
  const int64_t xs = rows_span(m.n_rows, m.x_stride, n), ys = rows_span(m.n_rows, n, n);
  // In place, or apart: each block of the fused kernel reads its source row before it writes.
  if (!(m.x == m.y ? m.x_stride == n : apart(m.x, xs, m.y, ys))) return false;
  HeadNorm* slot = nullptr;
  if (h[0].n_rows == 0) {
    slot = &h[0];
  } else if (h[1].n_rows == 0) {
    // The two may run in either order (launched, or the first with its rope): they must share
    // no memory that one writes.
    const HeadNorm& o = h[0];
    const int64_t oxs = rows_span(o.n_rows, o.x_stride, o.n), oys = rows_span(o.n_rows, o.n, o.n);
    if (apart(m.y, ys, o.x, oxs) && apart(m.y, ys, o.y, oys) && apart(m.x, xs, o.y, oys)) {
      slot = &h[1];
    }
  }
  if (slot == nullptr) return false;
  *slot = m;
  return true;
}

// Attaches to t the norm of h whose output rows are t's (n_tok tokens of t.n_head heads of
// head_dim), removing it from h (h[0] stays the earlier one).
void take_head_norm(HeadNorm* h, RopeTensor* t, int32_t n_tok, int32_t head_dim) {
  if (t->x_stride != int64_t{t->n_head} * head_dim) return;
  for (int i = 0; i < 2; ++i) {
    if (h[i].n_rows > 0 && h[i].y == t->x && h[i].n == head_dim &&
        int64_t{h[i].n_rows} == int64_t{n_tok} * t->n_head) {
      t->src = h[i].x;
      t->src_stride = h[i].x_stride;
      t->norm_w = h[i].w;
      t->norm_eps = h[i].eps;
      h[i] = HeadNorm{};
      if (h[0].n_rows == 0 && h[1].n_rows > 0) std::swap(h[0], h[1]);
      return;
    }
  }
}

}  // namespace

void StreamCore::launch_rope(RopePair* r) {
  if (r == nullptr || r->n_tok == 0) return;
  const RopePair q = *r;
  *r = RopePair{};
  ok(cuda::rope(stream, q.t, q.b, q.n_tok, q.head_dim, q.pos_off, q.pos_dev, q.p),
     "rope kernel launch");
}

bool StreamCore::rope_kv_fits(const RopePair& r, const float* k, int64_t k_stride, int32_t n_tok,
                              int32_t nk, const KvRowsOut& kv, RopeTensor* a, RopeTensor* b) const {
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
  return r.n_tok > 0 && r.n_tok <= kRopeKvMaxTokens && r.n_tok == n_tok && b->n_head > 0 &&
         b->x == k && b->x_stride == k_stride && int64_t{b->n_head} * r.head_dim == nk &&
         (kv.nv == 0 ||
          (apart(kv.v, v_span, a->x, span(*a)) && apart(kv.v, v_span, b->x, span(*b))));
}

bool StreamCore::rope_kv(RopePair* r, const float* k, int64_t k_stride, int32_t n_tok, int32_t nk,
                         const KvRowsOut& kv, bool* good) {
  RopeTensor a, b;
  if (r == nullptr || !rope_kv_fits(*r, k, k_stride, n_tok, nk, kv, &a, &b)) {
    launch_rope(r);
    return false;
  }
  const RopePair q = *r;
  *r = RopePair{};
  *good = ok(cuda::rope_kv(stream, a, b, n_tok, q.head_dim, q.pos_off, q.pos_dev, q.p, kv),
             "rope_kv kernel launch");
  return true;
}

bool StreamCore::rope_attention(RopePair* r, const AttentionShape& sh, const float* q,
                                const float* k, int64_t k_stride, const KvRowsOut& kv,
                                const KvDevSrc& ks, const KvDevSrc& vs, int32_t pos0,
                                const int32_t* pos_dev, float* out, int64_t out_stride,
                                bool* good) {
  RopeTensor a, b;
  if (r == nullptr || !rope_kv_fits(*r, k, k_stride, 1, sh.n_head_kv * sh.head_dim_k, kv, &a, &b) ||
      a.x != q || a.src != nullptr || b.src != nullptr) {
    return false;
  }
  // The launch reads q, k and v while its blocks write their heads of q and k and then of out:
  // out must be apart from all three.
  const int64_t no = int64_t{sh.n_head} * sh.head_dim_v;
  if (!apart(out, no, a.x, int64_t{a.n_head} * r->head_dim) ||
      !apart(out, no, b.x, int64_t{b.n_head} * r->head_dim) || !apart(out, no, kv.v, kv.nv)) {
    return false;
  }
  RopeStep st;
  st.q = a;
  st.k = b;
  st.head_dim = r->head_dim;
  st.pos0 = r->pos_off;
  st.pos_dev = r->pos_dev;
  st.p = r->p;
  st.kv = kv;
  cudaError_t e = cudaSuccess;
  if (!kv_attention_rope(stream, sh, st, pos0, ks, vs, out, out_stride, pos_dev, &e)) return false;
  *r = RopePair{};
  *good = ok(e, "rope + kv attention kernel launch");
  return true;
}

void CudaStream::rope_attend(KvStore& kv, int32_t il, const AttentionShape& s, const RopeParams& p,
                             const HeadNorms* norms, float* q, int64_t q_stride, float* k,
                             int64_t k_stride, const float* v, int64_t v_stride, int32_t n_tok,
                             int32_t pos, float* out, int64_t out_stride) {
  if (!fuse_ || !in_step_) {
    Stream::rope_attend(kv, il, s, p, norms, q, q_stride, k, k_stride, v, v_stride, n_tok, pos, out,
                        out_stride);
    return;
  }
  StreamCore& c = *core_;
  const int32_t hd = s.head_dim_k;
  int32_t off = 0;
  const int32_t* pd = c.pos_ref(pos, &off);
  bool replay = c.note_op(kRecRopeAttend, q, q_stride, k, k_stride, n_tok, s.n_head, s.n_head_kv,
                          hd, off, pd, p.style, p.n_rot, p.freq_base, p.freq_scale, p.freq_factors);
  if (norms != nullptr) {
    replay = c.note_op(norms->q_src, norms->q_src_stride, norms->q_w, norms->k_src,
                       norms->k_src_stride, norms->k_w, norms->eps) ||
             replay;
  }
  if (replay) {  // the graph has the launches; the store notes its own part
    cuda_kv_attend_rope(kv, c, nullptr, il, s, q, q_stride, n_tok, pos, k, k_stride, v, v_stride,
                        out, out_stride);
    return;
  }
  HeadNorm held[2];  // norms waiting for the rope that takes them in ([0] issued first)
  RopePair r;        // the rope waiting for its pair, then for the store
  const auto launch_norms = [&] {
    for (HeadNorm& h : held) {
      if (h.n_rows == 0) continue;
      const HeadNorm m = h;
      h = HeadNorm{};
      c.ok(cuda::rms_norm(c.stream, m.x, m.x_stride, m.w, m.y, m.n, m.n_rows, m.n, m.eps),
           "rms_norm kernel launch");
    }
  };
  const auto launch_all = [&] {  // in issue order: the norms were issued before the rope
    launch_norms();
    c.launch_rope(&r);
  };
  const auto norm = [&](const HeadNorm& m) {
    if (hold_head_norm(held, m)) return;
    launch_norms();
    if (hold_head_norm(held, m)) return;
    c.ok(cuda::rms_norm(c.stream, m.x, m.x_stride, m.w, m.y, m.n, m.n_rows, m.n, m.eps),
         "rms_norm kernel launch");
  };
  const auto rope = [&](float* x, int64_t x_stride, int32_t n_head) {
    RopeTensor t{x, x_stride, n_head};
    take_head_norm(held, &t, n_tok, hd);          // its norm joins
    const auto span = [&](const RopeTensor& u) {  // floats a tensor's rows cover
      return rows_span(n_tok, u.x_stride, int64_t{u.n_head} * hd);
    };
    const auto src_span = [&](const RopeTensor& u) {  // floats a norm reads (0: none)
      return u.src != nullptr ? (int64_t{n_tok} * u.n_head - 1) * u.src_stride + hd : 0;
    };
    if (r.n_tok > 0 && r.b.n_head == 0 && n_head > 0 && apart(x, span(t), r.t.x, span(r.t)) &&
        (t.src == nullptr || apart(t.src, src_span(t), r.t.x, span(r.t))) &&
        (r.t.src == nullptr || apart(r.t.src, src_span(r.t), x, span(t)))) {
      r.b = t;  // the pair: one launch
      return;
    }
    // A norm still held (k's, while q's rope is held) stays for the next rope: it may run
    // before this one (hold_head_norm made the two norms independent).
    const bool hold = n_tok > 0 && n_head > 0;
    if (!hold || r.n_tok > 0) launch_all();
    if (hold) {
      r = RopePair{t, RopeTensor{}, n_tok, hd, off, pd, p};
      return;
    }
    c.ok(cuda::rope(c.stream, t, RopeTensor{}, n_tok, hd, off, pd, p), "rope kernel launch");
  };
  if (norms != nullptr) {
    norm(HeadNorm{norms->q_src, norms->q_src_stride, norms->q_w, q, n_tok * s.n_head, hd,
                  norms->eps});
    norm(HeadNorm{norms->k_src, norms->k_src_stride, norms->k_w, k, n_tok * s.n_head_kv, hd,
                  norms->eps});
  }
  rope(q, q_stride, s.n_head);
  rope(k, k_stride, s.n_head_kv);
  // A norm no rope took goes first, and the rope after it: the store then gets no pair.
  if (held[0].n_rows > 0 || held[1].n_rows > 0) launch_all();
  cuda_kv_attend_rope(kv, c, &r, il, s, q, q_stride, n_tok, pos, k, k_stride, v, v_stride, out,
                      out_stride);
  c.launch_rope(&r);  // the store takes or launches it; nothing is left here
}

}  // namespace geist::cuda
