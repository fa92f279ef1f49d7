// attn_dec_kernel: the tensor-core attention of one token (a decode step) whose query heads
// of a kv head fit one 16-row tile, with attn_mma_kernel's per-row arithmetic (described at the
// top of kv_attn_mma_cuda.cu) bitwise. Its ROPE variant first turns the token's q and k and
// writes the token's K / V rows itself (RopeIn; kv_attention_rope): one launch instead of
// rope_kv's and this one per attention layer of a decode step. attn_dec_rows_kernel runs that
// variant for the tokens of up to kDecRowsPerLaunch sessions of a batched decode step, one row
// per blockIdx.x, each with its own cache and position (kv_attention_rope_rows): one launch per
// attention layer of the step instead of one per session, every row through the same body.
//
// A tile's K and V rows are copied to shared memory as they are in the cache (cp.async, key-major
// for both): the value fragments of the P . V step read a channel's keys from their rows, so no
// transpose is stored (attn_mma_kernel's transposed store put a warp's lanes on one bank). H200,
// per call (ncu, 512-token context): llama-1b 34.4 -> 18.8 us, qwen35-0.8b 107 -> 42 us.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "backends/cuda/cp_async_cuda.cuh"
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
constexpr size_t kMaxStagedBytes = 200 * 1024;  // under the H100 / H200 opt-in limit, 227 KB

template <int HD, bool F16>
struct DecLay {
  static constexpr int kLq = HD / 2 + 4;
  static constexpr int kLk = HD + 8;     // elements of a K or V row in shared memory
  static constexpr int kLp = kKeys + 4;  // floats of a p row
  // One stage: a tile's K and V rows, both key-major as in the cache.
  static constexpr size_t kStageBytes = 2 * (F16 ? 2 : 4) * static_cast<size_t>(kKeys) * kLk;
  static constexpr size_t kRestBytes = 2 * sizeof(uint32_t) * kDecRows * kLq +
                                       sizeof(float) * (kDecRows * kLp + kDecWarps * kDecRows);
  // Two stages (the next tile's copies in flight while a tile is computed) for heads of 256
  // where they fit, else one. H200, geist bench --parallel 1 decode with a 512-token prompt:
  // qwen35-0.8b (hd 256) 825 -> 865 tok/s with two; llama-1b (hd 64) 893 -> 660 with two.
  static constexpr int kStages =
      HD >= 256 && 2 * kStageBytes + kRestBytes <= kMaxStagedBytes ? 2 : 1;
  static constexpr size_t kBytes = kStages * kStageBytes + kRestBytes;
};

// The K and V rows of keys [j0, j0 + kKeys) (HD elements from byte off of each row) into sK / sV
// [kKeys][LK] as asynchronous copies (zeros past last_pos), by the block's threads; one group.
template <class E, int HD, int LK>
__device__ __forceinline__ void copy_tile(const Rows& k, const Rows& v, int32_t j0,
                                          int32_t last_pos, int64_t off, E* sK, E* sV, int tid) {
  constexpr int kEpc = 16 / sizeof(E);  // elements per 16-byte copy
  for (int e = tid; e < kKeys * (HD / kEpc); e += kDecThreads) {
    const int j = e / (HD / kEpc), c = e % (HD / kEpc);
    const bool ok = j0 + j <= last_pos;
    const int32_t p = ok ? j0 + j : 0;
    cp_async<16>(sK + j * LK + c * kEpc, row_at(k, p) + off + 16 * c, ok);
    cp_async<16>(sV + j * LK + c * kEpc, row_at(v, p) + off + 16 * c, ok);
  }
  cp_async_commit();
}

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
  using L = DecLay<HD, F16>;
  constexpr int kNvW = HD / 8 / kDecWarps;  // output n-tiles per warp
  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint32_t* sQh = reinterpret_cast<uint32_t*>(smem_raw);  // [16][kLq]
  uint32_t* sQl = sQh + kDecRows * L::kLq;                // [16][kLq]
  constexpr int kStages = L::kStages;
  E* sKV = reinterpret_cast<E*>(sQl + kDecRows * L::kLq);  // [stage][K, V][kKeys][kLk]
  float* sP = reinterpret_cast<float*>(sKV + kStages * 2 * kKeys * L::kLk);  // [16][kLp]
  float* sMax = sP + kDecRows * L::kLp;    // [warp][16] the warps' row maxima
  __shared__ float cs[2][ROPE ? 128 : 1];  // ROPE: the token's [cos / sin][pair]
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
  const auto stage_k = [&](int32_t j0) {
    return sKV + (j0 / kKeys % kStages) * 2 * kKeys * L::kLk;
  };
  if constexpr (kStages == 2)
    copy_tile<E, HD, L::kLk>(a.k, a.v, 0, last_pos, k_off, sKV, sKV + kKeys * L::kLk, tid);
  for (int32_t j0 = 0; j0 <= last_pos; j0 += kKeys) {
    __syncthreads();  // the previous tile fully used: its stage may be refilled
    E* sK = stage_k(j0);
    E* sV = sK + kKeys * L::kLk;
    if constexpr (kStages == 2) {
      if (j0 + kKeys <= last_pos) {
        E* nK = stage_k(j0 + kKeys);
        copy_tile<E, HD, L::kLk>(a.k, a.v, j0 + kKeys, last_pos, k_off, nK, nK + kKeys * L::kLk,
                                 tid);
        cp_async_wait<1>();  // this tile's group is done, the next one's may still be in flight
      } else {
        cp_async_wait<0>();
      }
    } else {
      copy_tile<E, HD, L::kLk>(a.k, a.v, j0, last_pos, k_off, sK, sV, tid);
      cp_async_wait<0>();
    }
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
      for (int i = 0; i < kNvW; ++i) {  // B: keys 16 ks + 2 qd (+1, +8, +9) of channel c
        const E* vc = sV + (16 * ks + 2 * qd) * L::kLk + 8 * (warp * kNvW + i) + gq;
        uint32_t bh[2], bl[2];
        split_vals<F16>(vc[0], vc[L::kLk], &bh[0], &bl[0]);
        split_vals<F16>(vc[8 * L::kLk], vc[9 * L::kLk], &bh[1], &bl[1]);
        mma3(acc[i], ph, pl, bh, bl);
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
  const int bytes = static_cast<int>(DecLay<HD, F16>::kBytes);
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
  const size_t smem = DecLay<HD, F16>::kBytes;
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
  return launch_pdl(attn_dec_rows_kernel<F16, HD>, grid, dim3(kDecThreads), DecLay<HD, F16>::kBytes,
                    s, p);
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
