// attn_dec_kernel: the tensor-core attention of one token (a decode step) whose query heads
// of a kv head fit one 16-row tile, with attn_mma_kernel's per-row arithmetic (described at the
// top of kv_attn_mma_cuda.cu) bitwise. Its ROPE variant first turns the token's q and k and
// writes the token's K / V rows itself (RopeIn; kv_attention_rope): one launch instead of
// rope_kv's and this one per attention layer of a decode step. attn_dec_rows_kernel runs that
// variant for the tokens of up to kDecRowsPerLaunch sessions of a batched decode step, one row
// per blockIdx.x, each with its own cache and position (kv_attention_rope_rows): one launch per
// attention layer of the step instead of one per session, every row through the same body.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "backends/cuda/kv_attn_mma_cuda.cuh"
#include "backends/cuda/kv_codec_cuda.cuh"
#include "backends/cuda/launch_cuda.cuh"
#include "backends/cuda/rope_cuda.cuh"

namespace geist::cuda::attn {

namespace {

// attn_mma_kernel's arithmetic for every row, bitwise: warp w computes the scores of key
// n-tile w (keys 8w..8w+7 of the tile; an element depends only on its row and key), the row
// maxima combine over the warps (a max is exact in any order), the p_j go through shared
// memory so that every warp forms l's lane sums in attn_mma_kernel's order and the P fragments
// of its value step, and warp w accumulates output n-tiles [w kNv / 8, (w + 1) kNv / 8). In
// attn_mma_kernel a decode row is one live row of a 64-row block whose warp runs every mma of
// the tile alone; here eight warps share them.
constexpr int kDecWarps = 8;  // == kNt: one score n-tile per warp
constexpr int kDecThreads = 32 * kDecWarps;
static_assert(kDecWarps == kNt, "one score n-tile per warp");

template <int HD>
struct DecLay {
  static constexpr int kLq = HD / 2 + 4;
  static constexpr int kLk = HD + 8;
  static constexpr int kLv = kKeys + 8;
  static constexpr int kLp = kKeys + 4;  // floats of a p row
  template <bool F16>
  static constexpr size_t bytes() {
    const size_t es = F16 ? 2 : 4;
    return 2 * sizeof(uint32_t) * kDecRows * kLq + es * kKeys * kLk + es * HD * kLv +
           sizeof(float) * (kDecRows * kLp + kDecWarps * kDecRows);
  }
};

// RopeIn's part of block g (kv head g, query heads h_first..h_first + nq - 1): their pairs
// turned in place with rope_kv_kernel's arithmetic (cs: the token's cos / sin), k's turned head
// (and its channels past n_rot as they are) into the K row, v's head into the V row, each
// element as kv_encode_rows writes it. The blocks' heads and row slices are disjoint.
template <int HD>
__device__ __forceinline__ void turn_and_write(const RopeIn& r, int32_t g, int32_t h_first,
                                               int32_t nq, const float (&cs)[2][128], int tid) {
  const int32_t half = r.n_rot / 2, tail = HD - r.n_rot;
  const int64_t row = r.row_dev != nullptr ? *r.row_dev : 0;
  uint8_t* krow = r.k_dst + row * r.k_row_bytes;
  uint8_t* vrow = r.v_dst + row * r.v_row_bytes;
  const int64_t c0 = static_cast<int64_t>(g) * HD;  // the head's channels in k, v and the rows
  float* kx = r.k + c0;
  const int32_t n_pairs = (1 + nq) * half, n_k = n_pairs + tail, total = n_k + HD;
  for (int32_t e = tid; e < total; e += kDecThreads) {
    if (e < n_pairs) {
      const int32_t hh = e / half, i = e % half;  // hh 0: k's head, else query head hh - 1
      float* x = hh == 0 ? kx : r.q + static_cast<int64_t>(h_first + hh - 1) * HD;
      int32_t i0, i1;
      ropek::pair_at(i, half, r.neox != 0, &i0, &i1);
      float y0, y1;
      ropek::turn(x[i0], x[i1], cs[0][i], cs[1][i], &y0, &y1);
      x[i0] = y0;
      x[i1] = y1;
      if (hh == 0) {
        kvdev::kv_put(r.f16, krow, c0 + i0, y0);
        kvdev::kv_put(r.f16, krow, c0 + i1, y1);
      }
    } else if (e < n_k) {
      const int32_t c = r.n_rot + (e - n_pairs);
      kvdev::kv_put(r.f16, krow, c0 + c, kx[c]);
    } else {
      const int32_t c = e - n_k;
      kvdev::kv_put(r.f16, vrow, c0 + c, r.v[c0 + c]);
    }
  }
}

// The kernel's body for the token of a (and rp, ROPE), blocks (kv head blockIdx.y, query
// chunk blockIdx.z) of 256 threads: attn_dec_kernel's, and attn_dec_rows_kernel's for the row
// of its blockIdx.x, so that a row of a batched decode step is computed by the very code of
// its lone step.
template <bool F16, int HD, bool ROPE>
__device__ __forceinline__ void dec_body(const MmaArgs& a, const RopeIn& rp) {
  using E = typename std::conditional<F16, __half, float>::type;
  using L = DecLay<HD>;
  constexpr int kNvW = HD / 8 / kDecWarps;  // output n-tiles per warp
  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint32_t* sQh = reinterpret_cast<uint32_t*>(smem_raw);   // [16][kLq]
  uint32_t* sQl = sQh + kDecRows * L::kLq;                 // [16][kLq]
  E* sK = reinterpret_cast<E*>(sQl + kDecRows * L::kLq);   // [kKeys][kLk]
  E* sV = sK + kKeys * L::kLk;                             // [HD][kLv], transposed
  float* sP = reinterpret_cast<float*>(sV + HD * L::kLv);  // [16][kLp] p of the tile
  float* sMax = sP + kDecRows * L::kLp;                    // [warp][16] the warps' row maxima
  __shared__ float cs[2][ROPE ? 128 : 1];                  // ROPE: the token's [cos / sin][pair]
  if constexpr (ROPE) {  // the angles need only the position: before the wait, as rope_kernel
    const int32_t pos = rp.pos0 + (rp.pos_dev != nullptr ? *rp.pos_dev : 0);
    ropek::block_angles(cs, pos, rp.n_rot, rp.freq_base, rp.freq_scale, rp.freq_factors);
  }
  pdl_begin();
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int gq = lane >> 2, qd = lane & 3;
  const int32_t g = static_cast<int32_t>(blockIdx.y);
  const int32_t h0 = static_cast<int32_t>(blockIdx.z) * a.nq;
  const int32_t h_first = g * a.group + h0;
  const int32_t n_tok_blk = a.n_tok < a.qt ? a.n_tok : a.qt;
  const int32_t nq_blk = a.group - h0 < a.nq ? a.group - h0 : a.nq;
  const int32_t pos0 = a.pos_dev != nullptr ? a.pos0 + *a.pos_dev : a.pos0;
  const int32_t last_pos = pos0 + n_tok_blk - 1;
  const auto row_ok = [&](int r) { return r / a.nq < n_tok_blk && r % a.nq < nq_blk; };
  const auto row_pos = [&](int r) { return row_ok(r) ? pos0 + r / a.nq : last_pos; };
  const int64_t k_off = static_cast<int64_t>(sizeof(E)) * g * HD;
  if constexpr (ROPE) {
    __syncthreads();  // cs
    turn_and_write<HD>(rp, g, h_first, nq_blk, cs, tid);
    __syncthreads();  // the turned queries and the token's rows are read below
  }

  for (int e = tid; e < kDecRows * (HD / 2); e += kDecThreads) {
    const int r = e / (HD / 2), w = e % (HD / 2);
    float x0 = 0.0f, x1 = 0.0f;
    if (row_ok(r)) {
      const float* qr = a.q + static_cast<int64_t>(r / a.nq) * a.q_stride +
                        static_cast<int64_t>(h_first + r % a.nq) * HD + 2 * w;
      x0 = qr[0];
      x1 = qr[1];
    }
    split2(x0, x1, &sQh[r * L::kLq + w], &sQl[r * L::kLq + w]);
  }
  const int r0 = gq, r1 = gq + 8;
  const int32_t p0 = row_pos(r0), p1 = row_pos(r1);
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  float acc[kNvW][4];
#pragma unroll
  for (int i = 0; i < kNvW; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = 0.0f;
  }
  const int nt = warp;  // this warp's score n-tile
  for (int32_t j0 = 0; j0 <= last_pos; j0 += kKeys) {
    __syncthreads();  // the previous tile fully used
    load_k_tile<E, HD, L::kLk>(a.k, j0, last_pos, k_off, sK, tid, kDecThreads);
    load_v_tile<E, HD, L::kLv>(a.v, j0, last_pos, k_off, sV, tid, kDecThreads);
    __syncthreads();
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 2
    for (int ks = 0; ks < HD / 16; ++ks) {
      uint32_t ah[4], al[4];
      q_frags<L::kLq>(sQh, sQl, r0, r1, ks, qd, ah, al);
      split_mma3<F16>(s, ah, al, sK + (8 * nt + gq) * L::kLk + 16 * ks + 2 * qd);
    }
    float mx0 = -INFINITY, mx1 = -INFINITY;
    scale_mask(s, j0 + 8 * nt + 2 * qd, p0, p1, a.scale, &mx0, &mx1);
    quad_max(&mx0, &mx1);
    if (qd == 0) {
      sMax[warp * kDecRows + r0] = mx0;
      sMax[warp * kDecRows + r1] = mx1;
    }
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kDecWarps; ++w) {
      mx0 = fmaxf(mx0, sMax[w * kDecRows + r0]);
      mx1 = fmaxf(mx1, sMax[w * kDecRows + r1]);
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    const float al0 = expf(__fsub_rn(m0, mn0)), al1 = expf(__fsub_rn(m1, mn1));
    m0 = mn0;
    m1 = mn1;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e < 2 ? r0 : r1;
      sP[r * L::kLp + 8 * nt + 2 * qd + (e & 1)] = expf(__fsub_rn(s[e], e < 2 ? mn0 : mn1));
    }
    __syncthreads();
    // l: attn_mma_kernel's lane sums (keys 8i + 2qd, then + 1, for i = 0..7) and shuffles.
    float u0 = 0.0f, u1 = 0.0f;
#pragma unroll
    for (int i = 0; i < kNt; ++i) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        u0 = __fadd_rn(u0, sP[r0 * L::kLp + 8 * i + 2 * qd + e]);
        u1 = __fadd_rn(u1, sP[r1 * L::kLp + 8 * i + 2 * qd + e]);
      }
    }
    quad_sum(&u0, &u1);
    rescale(u0, u1, al0, al1, &l0, &l1, acc);
#pragma unroll
    for (int ks = 0; ks < kKeys / 16; ++ks) {
      const float* pr0 = sP + r0 * L::kLp + 16 * ks + 2 * qd;
      const float* pr1 = sP + r1 * L::kLp + 16 * ks + 2 * qd;
      uint32_t ph[4], pl[4];
      split2(pr0[0], pr0[1], &ph[0], &pl[0]);
      split2(pr1[0], pr1[1], &ph[1], &pl[1]);
      split2(pr0[8], pr0[9], &ph[2], &pl[2]);
      split2(pr1[8], pr1[9], &ph[3], &pl[3]);
#pragma unroll
      for (int i = 0; i < kNvW; ++i) {
        split_mma3<F16>(acc[i], ph, pl,
                        sV + (8 * (warp * kNvW + i) + gq) * L::kLv + 16 * ks + 2 * qd);
      }
    }
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = half == 0 ? r0 : r1;
    if (!row_ok(r)) continue;
    const float l = half == 0 ? l0 : l1;
    float* orow = a.out + static_cast<int64_t>(r / a.nq) * a.out_stride +
                  static_cast<int64_t>(h_first + r % a.nq) * HD + 2 * qd;
#pragma unroll
    for (int i = 0; i < kNvW; ++i) {
      const int nv = warp * kNvW + i;
      float2 o;
      o.x = __fdiv_rn(acc[i][2 * half], l);
      o.y = __fdiv_rn(acc[i][2 * half + 1], l);
      if (a.out_vec) {
        *reinterpret_cast<float2*>(orow + 8 * nv) = o;
      } else {
        orow[8 * nv] = o.x;
        orow[8 * nv + 1] = o.y;
      }
    }
  }
}

template <bool F16, int HD, bool ROPE>
__global__ void __launch_bounds__(kDecThreads) attn_dec_kernel(const MmaArgs a, const RopeIn rp) {
  dec_body<F16, HD, ROPE>(a, rp);
}

// Row blockIdx.x of p: p.a and p.r with that row's fields (DecRowsArgs), then dec_body.
template <bool F16, int HD>
__global__ void __launch_bounds__(kDecThreads) attn_dec_rows_kernel(const DecRowsArgs p) {
  const int32_t x = static_cast<int32_t>(blockIdx.x);
  const DecRow& w = p.row[x];
  MmaArgs a = p.a;
  RopeIn r = p.r;
  r.q += x * p.a.q_stride;
  r.k += x * p.k_stride;
  r.v += x * p.v_stride;
  r.k_dst = w.k_dst;
  r.v_dst = w.v_dst;
  r.pos0 = w.pos0;
  a.q = r.q;
  a.out += x * p.a.out_stride;
  a.pos0 = w.pos0;
  a.k.lo = a.k.hi = w.k;
  a.v.lo = a.v.hi = w.v;
  dec_body<F16, HD, true>(a, r);
}

template <bool F16, int HD>
cudaError_t set_smem() {
  const int bytes = static_cast<int>(DecLay<HD>::template bytes<F16>());
  cudaError_t e = cudaFuncSetAttribute(attn_dec_kernel<F16, HD, false>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) {
    e = cudaFuncSetAttribute(attn_dec_kernel<F16, HD, true>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  }
  if (e == cudaSuccess) {
    e = cudaFuncSetAttribute(attn_dec_rows_kernel<F16, HD>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  }
  return e;
}

template <bool F16, int HD>
cudaError_t launch(cudaStream_t s, MmaArgs a, unsigned n_head_kv, const RopeIn* r) {
  a.nq = a.group;
  a.qt = kDecRows / a.nq;
  const dim3 grid(1, n_head_kv, 1);
  const size_t smem = DecLay<HD>::template bytes<F16>();
  if (r != nullptr) {
    return launch_pdl(attn_dec_kernel<F16, HD, true>, grid, dim3(kDecThreads), smem, s, a, *r);
  }
  return launch_pdl(attn_dec_kernel<F16, HD, false>, grid, dim3(kDecThreads), smem, s, a, RopeIn{});
}

template <bool F16, int HD>
cudaError_t launch_rows(cudaStream_t s, DecRowsArgs p, unsigned n_head_kv) {
  p.a.nq = p.a.group;
  p.a.qt = kDecRows / p.a.nq;
  const dim3 grid(static_cast<unsigned>(p.n), n_head_kv, 1);
  return launch_pdl(attn_dec_rows_kernel<F16, HD>, grid, dim3(kDecThreads),
                    DecLay<HD>::template bytes<F16>(), s, p);
}

}  // namespace

cudaError_t attn_dec_setup() {
  cudaError_t e = set_smem<true, 64>();
  if (e == cudaSuccess) e = set_smem<true, 128>();
  if (e == cudaSuccess) e = set_smem<true, 256>();
  if (e == cudaSuccess) e = set_smem<false, 64>();
  if (e == cudaSuccess) e = set_smem<false, 128>();
  if (e == cudaSuccess) e = set_smem<false, 256>();
  return e;
}

cudaError_t attn_dec_launch(cudaStream_t s, const MmaArgs& a, bool f16, int hd, unsigned n_head_kv,
                            const RopeIn* r) {
  if (a.n_tok != 1 || a.group < 1 || a.group > kDecRows) return cudaErrorInvalidValue;
  if (f16) {
    return hd == 64    ? launch<true, 64>(s, a, n_head_kv, r)
           : hd == 128 ? launch<true, 128>(s, a, n_head_kv, r)
                       : launch<true, 256>(s, a, n_head_kv, r);
  }
  return hd == 64    ? launch<false, 64>(s, a, n_head_kv, r)
         : hd == 128 ? launch<false, 128>(s, a, n_head_kv, r)
                     : launch<false, 256>(s, a, n_head_kv, r);
}

cudaError_t attn_dec_rows_launch(cudaStream_t s, const DecRowsArgs& p, bool f16, int hd,
                                 unsigned n_head_kv) {
  if (p.n < 1 || p.n > kDecRowsPerLaunch || p.a.n_tok != 1 || p.a.group < 1 ||
      p.a.group > kDecRows) {
    return cudaErrorInvalidValue;
  }
  if (f16) {
    return hd == 64    ? launch_rows<true, 64>(s, p, n_head_kv)
           : hd == 128 ? launch_rows<true, 128>(s, p, n_head_kv)
                       : launch_rows<true, 256>(s, p, n_head_kv);
  }
  return hd == 64    ? launch_rows<false, 64>(s, p, n_head_kv)
         : hd == 128 ? launch_rows<false, 128>(s, p, n_head_kv)
                     : launch_rows<false, 256>(s, p, n_head_kv);
}

}  // namespace geist::cuda::attn
