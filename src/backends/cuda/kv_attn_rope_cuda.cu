// A decode step's rope of q and k, its plain KV rows and its attention as one launch of
// attn_dec_kernel's ROPE variant (kv_attention_rope), and the same for the tokens of a batched
// decode step, one per session, as one launch per kDecRowsPerLaunch sessions
// (kv_attention_rope_rows, attn_dec_rows_kernel): every row's launch arguments are built by
// the one function both use (dec_args), and a rows launch carries only what differs between
// its rows, so each row is computed with exactly the arguments of its own kv_attention_rope.
#include <algorithm>
#include <vector>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/kv_attn_mma_cuda.cuh"
#include "backends/cuda/kv_attn_rope_cuda.h"

namespace geist::cuda {

namespace {

using namespace attn;  // NOLINT(build/namespaces): the launch arguments of attn_dec_kernel

// kv_attention_rope's launch arguments (but for its pos0 >= 0 test); false where it declines.
bool dec_args(const AttentionShape& sh, const RopeStep& r, int32_t pos0, const KvDevSrc& k,
              const KvDevSrc& v, float* out, int64_t out_stride, const int32_t* pos_dev, MmaArgs* a,
              RopeIn* in, bool* f16) {
  const int32_t hd = sh.head_dim_k;
  // Only where kv_attention takes attn_dec_kernel for one token (kv_attn_mma_cuda.cu's launch),
  // and the step is rope_kv's without norms; anything else goes the separate way, which also
  // reports errors.
  if (!mma_args(sh, k, v, a, f16) || a->group > kDecRows || r.head_dim != hd || r.q.x == nullptr ||
      r.k.x == nullptr || r.q.n_head != sh.n_head || r.k.n_head != sh.n_head_kv ||
      r.q.src != nullptr || r.k.src != nullptr || r.p.n_rot <= 0 || r.p.n_rot % 2 != 0 ||
      r.p.n_rot > hd || r.kv.f16 != *f16 || r.kv.nv != sh.n_head_kv * hd || r.kv.k_dst == nullptr ||
      r.kv.v_dst == nullptr || r.kv.v == nullptr) {
    return false;
  }
  a->q = r.q.x;
  a->q_stride = r.q.x_stride;
  a->n_tok = 1;
  a->pos0 = pos0;
  a->pos_dev = pos_dev;
  set_out(out, out_stride, a);
  in->q = r.q.x;
  in->k = r.k.x;
  in->v = r.kv.v;
  in->k_dst = r.kv.k_dst;
  in->k_row_bytes = r.kv.k_row_bytes;
  in->v_dst = r.kv.v_dst;
  in->v_row_bytes = r.kv.v_row_bytes;
  in->row_dev = r.kv.row_dev;
  in->pos0 = r.pos0;
  in->pos_dev = r.pos_dev;
  in->n_rot = r.p.n_rot;
  in->neox = r.p.style == RopeStyle::NEOX ? 1 : 0;
  in->freq_base = r.p.freq_base;
  in->freq_scale = r.p.freq_scale;
  in->freq_factors = r.p.freq_factors;
  in->f16 = *f16;
  return true;
}

bool same_rows(const Rows& x, const Rows& y) {  // but for the addresses
  return x.lo_bytes == y.lo_bytes && x.hi_bytes == y.hi_bytes && x.lo_first == y.lo_first &&
         x.hi_first == y.hi_first && x.lo_ring == y.lo_ring && x.hi_ring == y.hi_ring &&
         x.split == y.split;
}

// Row x's arguments (a, in) are those of row 0 (a0, in0) with DecRowsArgs's per-row fields
// changed, x rows on (k_stride / v_stride: floats between the rows' k / v rows).
bool row_fits(const MmaArgs& a0, const RopeIn& in0, int64_t k_stride, int64_t v_stride, int64_t x,
              const MmaArgs& a, const RopeIn& in) {
  return a.group == a0.group && a.scale == a0.scale && a.q == a0.q + x * a0.q_stride &&
         a.q_stride == a0.q_stride && a.n_tok == 1 && a.pos0 == in.pos0 &&
         a.pos_dev == a0.pos_dev && a.k.lo == a.k.hi && a.v.lo == a.v.hi && same_rows(a.k, a0.k) &&
         same_rows(a.v, a0.v) && a.out == a0.out + x * a0.out_stride &&
         a.out_stride == a0.out_stride && a.out_vec == a0.out_vec && in.q == a.q &&
         in.k == in0.k + x * k_stride && in.v == in0.v + x * v_stride &&
         in.k_row_bytes == in0.k_row_bytes && in.v_row_bytes == in0.v_row_bytes &&
         in.row_dev == in0.row_dev && in.pos_dev == in0.pos_dev && in.pos_dev == a.pos_dev &&
         in.n_rot == in0.n_rot && in.neox == in0.neox && in.freq_base == in0.freq_base &&
         in.freq_scale == in0.freq_scale && in.freq_factors == in0.freq_factors &&
         in.f16 == in0.f16;
}

// Floats spanned by n rows of len at stride.
int64_t span(int32_t n, int64_t stride, int64_t len) { return (n - 1) * stride + len; }

bool apart(const float* a, int64_t na, const float* b, int64_t nb) {
  return a + na <= b || b + nb <= a;
}

// The rows' launch arguments (a[r], in[r]) where kv_attention_rope_rows takes them.
bool rows_args(const AttentionShape& sh, const RopeRow* rows, int32_t n, const int32_t* pos_dev,
               int64_t out_stride, std::vector<MmaArgs>* a, std::vector<RopeIn>* in, bool* f16) {
  if (n <= 0) return false;
  a->resize(static_cast<size_t>(n));
  in->resize(static_cast<size_t>(n));
  const RopeStep& s0 = rows[0].st;
  const int64_t ks = s0.k.x_stride, vs = s0.kv.v_stride;
  std::vector<const uint8_t*> caches;  // every row's K and V rows: no two rows share a cache
  caches.reserve(2 * static_cast<size_t>(n));
  for (int32_t r = 0; r < n; ++r) {
    const RopeRow& w = rows[r];
    MmaArgs& ar = (*a)[static_cast<size_t>(r)];
    RopeIn& ir = (*in)[static_cast<size_t>(r)];
    bool rf16 = false;
    // A position below 0 only as an offset to the step's position on the device.
    if ((w.pos0 < 0 && pos_dev == nullptr) || w.st.pos_dev != pos_dev ||
        !dec_args(sh, w.st, w.pos0, w.k, w.v, w.out, out_stride, pos_dev, &ar, &ir, &rf16) ||
        !row_fits((*a)[0], (*in)[0], ks, vs, r, ar, ir)) {
      return false;
    }
    if (r == 0) *f16 = rf16;
    caches.push_back(ar.k.lo);
    caches.push_back(ar.v.lo);
  }
  std::sort(caches.begin(), caches.end());
  if (std::adjacent_find(caches.begin(), caches.end()) != caches.end()) return false;
  // The rows' blocks run at once, each reading its q, k and v rows while it writes its q and k
  // rows and then its out row: out must be apart from q, k and v, and v from q and k (as
  // StreamCore::rope_attention asks of one token), over all the rows.
  const int64_t hd = sh.head_dim_k;
  const int64_t nq = span(n, s0.q.x_stride, sh.n_head * hd);
  const int64_t nk = span(n, ks, sh.n_head_kv * hd);
  const int64_t nv = span(n, vs, s0.kv.nv);
  const int64_t no = span(n, out_stride, sh.n_head * hd);
  const float* q = s0.q.x;
  const float* k = s0.k.x;
  const float* v = s0.kv.v;
  const float* o = rows[0].out;
  return s0.q.x_stride >= sh.n_head * hd && ks >= sh.n_head_kv * hd && vs >= s0.kv.nv &&
         out_stride >= sh.n_head * hd && apart(q, nq, k, nk) && apart(v, nv, q, nq) &&
         apart(v, nv, k, nk) && apart(o, no, q, nq) && apart(o, no, k, nk) && apart(o, no, v, nv);
}

}  // namespace

bool kv_attention_rope(cudaStream_t s, const AttentionShape& sh, const RopeStep& r, int32_t pos0,
                       const KvDevSrc& k, const KvDevSrc& v, float* out, int64_t out_stride,
                       const int32_t* pos_dev, cudaError_t* err) {
  MmaArgs a;
  RopeIn in;
  bool f16 = false;
  if (pos0 < 0 || !dec_args(sh, r, pos0, k, v, out, out_stride, pos_dev, &a, &in, &f16)) {
    return false;
  }
  *err = attn_dec_launch(s, a, f16, sh.head_dim_k, static_cast<unsigned>(sh.n_head_kv), &in);
  return true;
}

bool kv_attention_rope_rows_fit(const AttentionShape& sh, const RopeRow* rows, int32_t n_rows,
                                const int32_t* pos_dev, int64_t out_stride) {
  std::vector<MmaArgs> a;
  std::vector<RopeIn> in;
  bool f16 = false;
  return rows_args(sh, rows, n_rows, pos_dev, out_stride, &a, &in, &f16);
}

cudaError_t kv_attention_rope_rows(cudaStream_t s, const AttentionShape& sh, const RopeRow* rows,
                                   int32_t n_rows, const int32_t* pos_dev, int64_t out_stride) {
  std::vector<MmaArgs> a;
  std::vector<RopeIn> in;
  bool f16 = false;
  if (!rows_args(sh, rows, n_rows, pos_dev, out_stride, &a, &in, &f16)) {
    return cudaErrorInvalidValue;
  }
  for (int32_t r0 = 0; r0 < n_rows; r0 += kDecRowsPerLaunch) {
    DecRowsArgs p{};
    p.a = a[static_cast<size_t>(r0)];
    p.r = in[static_cast<size_t>(r0)];
    p.k_stride = rows[0].st.k.x_stride;
    p.v_stride = rows[0].st.kv.v_stride;
    p.n = std::min(kDecRowsPerLaunch, n_rows - r0);
    for (int32_t x = 0; x < p.n; ++x) {
      const MmaArgs& ar = a[static_cast<size_t>(r0 + x)];
      const RopeIn& ir = in[static_cast<size_t>(r0 + x)];
      p.row[x] = DecRow{ar.k.lo, ar.v.lo, ir.k_dst, ir.v_dst, ir.pos0};
    }
    const cudaError_t e =
        attn_dec_rows_launch(s, p, f16, sh.head_dim_k, static_cast<unsigned>(sh.n_head_kv));
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace geist::cuda
