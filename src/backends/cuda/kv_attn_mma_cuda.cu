// Attention on the tensor cores for F16 / F32 KV rows (no key reference, unrotated) with
// head_dim_k == head_dim_v in {64, 128, 256}. Every kv_attention call for such a cache goes
// through this kernel (eligible() is a function of the cache's encoding and shape only), or,
// for one token whose query heads of a kv head fit one 16-row tile, through attn_dec_kernel
// (kv_attn_mma_dec_cuda.cu), which computes every row with the same arithmetic; so a row's bits
// never depend on which kernel computed it, nor on how the tokens were split into calls.
//
// Per-row arithmetic (mma = mma.sync m16n8k16, bf16 inputs, f32 accumulator; k-slot i of a
// step holds channel / key 16 * step + i; hi(x) = bf16(x), lo(x) = bf16(x - hi(x)), so an f16
// value is exactly hi + lo and an f32 value keeps ~16 significant bits):
//   for each key tile [j0, j0 + kKeys), j0 = 0, kKeys, ... (absolute positions):
//     S_j  = from +0, for each 16-channel step of the head in order: mma(hi q, hi k),
//            mma(hi q, lo k), mma(lo q, hi k);  s_j = S_j * scale, -inf past the row's
//            position
//     m'   = max(m, max_j s_j);  alpha = exp(m - m');  p_j = exp(s_j - m')
//     sum  = the 64 p_j split by j % 8 / 2 into four lane sums u_0..u_3 (u_q: keys
//            8i + 2q then 8i + 2q + 1 for i = 0..7, from 0), then (u_0 + u_1) + (u_2 + u_3)
//     l    = l * alpha + sum (one FMA)
//     acc  = acc * alpha, then for each 16-key step in order: mma(hi p, hi v),
//            mma(hi p, lo v), mma(lo p, hi v)
//   out = acc / l.
// An mma output element depends only on its A row, its B column and its accumulator, so the
// other rows of a block (other tokens, other heads, padding) never change a row's value. A
// tile wholly past a row's position leaves it unchanged (alpha = 1, p = 0), and a warp skips
// the tiles past all its rows; the keys and values past the block's last position are read
// as zeros (never uninitialized memory, whose NaN would survive a zero weight).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/kv_attn_mma_cuda.cuh"
#include "backends/cuda/kv_attn_mma_cuda.h"
#include "backends/cuda/kv_rows_cuda.cuh"
#include "backends/cuda/launch_cuda.cuh"
#include "backends/cuda/matmul_common.cuh"

namespace geist::cuda {

namespace {

using namespace attn;  // NOLINT(build/namespaces): the pieces shared with attn_dec_kernel
using kvrows::rows_of;

// Warps of a block (16 query rows each). A block stages (and PRE splits) each key / value tile
// once for all its rows, so more rows a block means fewer stagings per row. Heads of 64: 8
// warps (two resident blocks of 128 registers a thread); H200, llama-1b pp2048 46.9k -> 47.5k
// against 4 warps (same build, one lease). Larger heads keep 4 (their registers and shared
// memory would cost resident blocks).
template <int HD>
constexpr int kWarpsOf = HD == 64 ? 8 : 4;
constexpr int kSlices = 4;  // output-channel slices of a launch with few blocks
constexpr unsigned kFewBlocks = 100;

// Whether a block splits its key and value tiles into bf16 hi / lo words once, as it stages
// them (PRE), instead of every warp splitting each pair it multiplies (split_mma3): the same
// words reach the same mma, so the bits are the same. PRE splits a tile once for all the warps
// that read it but doubles an F16 tile's shared memory. Heads of 64 only: with 4 warps a block
// stayed at 51 KB and 128 registers (four resident per multiprocessor), and the H200's llama-1b
// pp2048 attention went 597 -> 546 us per layer (ncu); heads of 128 would lose a resident
// block, and heads of 256 (qwen35-0.8b) measured slower overall (pp2048 39.8k -> 39.2k).
template <int HD>
constexpr bool kPreSplit = HD == 64;

// Shared-memory strides, chosen so that a warp's fragment loads hit distinct banks.
// HD: head size; NS: blocks that share a row's output channels (each slice HD / NS).
template <int HD, int NS>
struct Lay {
  static constexpr int kThreads = 32 * kWarpsOf<HD>;
  static constexpr int kRows = 16 * kWarpsOf<HD>;  // query rows of a block
  static constexpr int kLq = HD / 2 + 4;           // words of a query row (hi or lo bf16 pairs)
  static constexpr int kLk = HD + 8;               // elements of a key row
  static constexpr int kLv = kKeys + 8;  // elements of a transposed value row (one channel)
  static constexpr int kDv = HD / NS;    // output channels of a block
  static constexpr int kKw = HD / 2;     // PRE: words of a key row (hi or lo; pair_slot order)
  static constexpr int kVw = kKeys / 2;  // PRE: words of a value channel row
  template <bool F16>
  static constexpr size_t bytes() {
    const size_t es = F16 ? 2 : 4;
    const size_t q = 2 * sizeof(uint32_t) * kRows * kLq;
    return kPreSplit<HD> ? q + 2 * sizeof(uint32_t) * (kKeys * kKw + kDv * kVw)
                         : q + es * kKeys * kLk + es * kDv * kLv;
  }
};

// PRE: the slot of pair w (channels 2w, 2w + 1 of a key; keys 2w, 2w + 1 of a value channel) in
// row r: the two words a lane (g, qd) of an mma step ks takes (pairs 8 ks + qd and 8 ks + qd + 4)
// are adjacent, and the rows' 8-word groups are turned by r & 3, so that the 16 lanes of a
// half warp (rows g = 0..3) read 32 distinct banks.
__device__ __forceinline__ int pair_slot(int w, int r) {
  return ((w >> 3) ^ (r & 3)) * 8 + (w & 3) * 2 + ((w >> 2) & 1);
}

// PRE: load_k_tile's keys, split into hi / lo words (split_pair's values) at their slots.
template <class E, int HD, int kThreads>
__device__ __forceinline__ void load_k_split(const Rows& k, int32_t j0, int32_t last_pos,
                                             int64_t k_off, uint32_t* sKh, uint32_t* sKl, int tid) {
  constexpr int kEpc = 16 / sizeof(E);  // elements per 16-byte load
  for (int e = tid; e < kKeys * (HD / kEpc); e += kThreads) {
    const int j = e / (HD / kEpc), c = e % (HD / kEpc);
    uint4 x = make_uint4(0, 0, 0, 0);
    if (j0 + j <= last_pos) x = *reinterpret_cast<const uint4*>(row_at(k, j0 + j) + k_off + 16 * c);
    const E* xe = reinterpret_cast<const E*>(&x);
#pragma unroll
    for (int u = 0; u < kEpc / 2; ++u) {
      uint32_t hi, lo;
      split_pair<sizeof(E) == 2>(xe + 2 * u, &hi, &lo);
      const int slot = j * (HD / 2) + pair_slot(c * (kEpc / 2) + u, j);
      sKh[slot] = hi;
      sKl[slot] = lo;
    }
  }
}

// PRE: load_v_tile's values (DV channels), split per channel into hi / lo words of key pairs.
template <class E, int DV, int kThreads>
__device__ __forceinline__ void load_v_split(const Rows& v, int32_t j0, int32_t last_pos,
                                             int64_t v_off, uint32_t* sVh, uint32_t* sVl, int tid) {
  for_value_pairs<E, DV>(v, j0, last_pos, v_off, tid, kThreads, [&](int kp, int ch, E a, E b) {
    const E pr[2] = {a, b};
    uint32_t hi, lo;
    split_pair<sizeof(E) == 2>(pr, &hi, &lo);
    const int slot = ch * (kKeys / 2) + pair_slot(kp, ch);
    sVh[slot] = hi;
    sVl[slot] = lo;
  });
}

// PRE: split_mma3 with B's words from their slots in row r (rw words a row) for step ks.
__device__ __forceinline__ void pre_mma3(float (&d)[4], const uint32_t (&ah)[4],
                                         const uint32_t (&al)[4], const uint32_t* bh,
                                         const uint32_t* bl, int r, int rw, int ks, int qd) {
  const int off = r * rw + pair_slot(8 * ks + qd, r);
  const uint2 h = *reinterpret_cast<const uint2*>(bh + off);
  const uint2 l = *reinterpret_cast<const uint2*>(bl + off);
  mma_bf16(d, ah[0], ah[1], ah[2], ah[3], h.x, h.y);
  mma_bf16(d, ah[0], ah[1], ah[2], ah[3], l.x, l.y);
  mma_bf16(d, al[0], al[1], al[2], al[3], h.x, h.y);
}

// NS > 1 (few blocks, e.g. a short call): NS blocks compute the same scores and each accumulates
// its slice of the output channels; the arithmetic of every element is the same as with NS 1.
template <bool F16, int HD, int NS>
__global__ void __launch_bounds__(32 * kWarpsOf<HD>, kWarpsOf<HD> == 8 ? 2 : 0)
    attn_mma_kernel(const MmaArgs a) {
  using E = typename std::conditional<F16, __half, float>::type;
  using L = Lay<HD, NS>;
  constexpr int kThreads = L::kThreads, kRows = L::kRows;
  constexpr bool PRE = kPreSplit<HD>;
  constexpr int kDv = L::kDv;
  constexpr int kNv = kDv / 8;  // output n-tiles
  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint32_t* sQh = reinterpret_cast<uint32_t*>(smem_raw);  // [kRows][kLq] hi(q) pairs
  uint32_t* sQl = sQh + kRows * L::kLq;                   // [kRows][kLq] lo(q) pairs
  E* sK = reinterpret_cast<E*>(sQl + kRows * L::kLq);     // [kKeys][kLk] key tile
  E* sV = sK + kKeys * L::kLk;                            // [kDv][kLv] value slice, transposed
  uint32_t* sKh = sQl + kRows * L::kLq;                   // PRE: [kKeys][kKw] hi(k) words
  uint32_t* sKl = sKh + kKeys * L::kKw;                   // PRE: lo(k)
  uint32_t* sVh = sKl + kKeys * L::kKw;                   // PRE: [kDv][kVw] hi(v) words
  uint32_t* sVl = sVh + kDv * L::kVw;                     // PRE: lo(v)
  pdl_begin();  // launched with launch_pdl: the launch overlaps the tail of the kernel ahead
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int gq = lane >> 2, qd = lane & 3;  // mma group (row / column) and thread in group
  const int32_t g = static_cast<int32_t>(blockIdx.y);
  const int32_t h0 = static_cast<int32_t>(blockIdx.z) / NS * a.nq;
  const int32_t slice = static_cast<int32_t>(blockIdx.z) % NS;  // output channels slice * kDv..
  const int32_t h_first = g * a.group + h0;
  const int32_t t0 = static_cast<int32_t>(blockIdx.x) * a.qt;
  const int32_t n_tok_blk = a.n_tok - t0 < a.qt ? a.n_tok - t0 : a.qt;
  const int32_t nq_blk = a.group - h0 < a.nq ? a.group - h0 : a.nq;
  const int32_t pos0 = a.pos_dev != nullptr ? a.pos0 + *a.pos_dev : a.pos0;
  const int32_t last_pos = pos0 + t0 + n_tok_blk - 1;
  const auto row_ok = [&](int r) { return r / a.nq < n_tok_blk && r % a.nq < nq_blk; };
  // Padding rows see every key up to the block's last position: finite scores, no NaN.
  const auto row_pos = [&](int r) { return row_ok(r) ? pos0 + t0 + r / a.nq : last_pos; };
  const int64_t k_off = static_cast<int64_t>(sizeof(E)) * g * HD;  // head slice in a row
  const int64_t v_off = k_off + static_cast<int64_t>(sizeof(E)) * slice * kDv;

  for (int e = tid; e < kRows * (HD / 2); e += kThreads) {
    const int r = e / (HD / 2), w = e % (HD / 2);
    float x0 = 0.0f, x1 = 0.0f;
    if (row_ok(r)) {
      const float* qr = a.q + static_cast<int64_t>(t0 + r / a.nq) * a.q_stride +
                        static_cast<int64_t>(h_first + r % a.nq) * HD + 2 * w;
      x0 = qr[0];
      x1 = qr[1];
    }
    split2(x0, x1, &sQh[r * L::kLq + w], &sQl[r * L::kLq + w]);
  }

  const int r0 = 16 * warp + gq, r1 = r0 + 8;  // this thread's rows (C fragment rows)
  const int32_t p0 = row_pos(r0), p1 = row_pos(r1);
  // The warp's last live position (-1: no live row); tiles past it change none of its rows.
  const int32_t wmax =
      __reduce_max_sync(0xffffffffu, max(row_ok(r0) ? p0 : -1, row_ok(r1) ? p1 : -1));
  const bool live = wmax >= 0;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  float acc[kNv][4];
#pragma unroll
  for (int i = 0; i < kNv; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = 0.0f;
  }

  for (int32_t j0 = 0; j0 <= last_pos; j0 += kKeys) {
    __syncthreads();  // the previous tile fully used
    if constexpr (PRE) {
      load_k_split<E, HD, kThreads>(a.k, j0, last_pos, k_off, sKh, sKl, tid);
      load_v_split<E, kDv, kThreads>(a.v, j0, last_pos, v_off, sVh, sVl, tid);
    } else {
      load_k_tile<E, HD, L::kLk>(a.k, j0, last_pos, k_off, sK, tid, kThreads);
      load_v_tile<E, kDv, L::kLv>(a.v, j0, last_pos, v_off, sV, tid, kThreads);
    }
    __syncthreads();
    if (!live || j0 > wmax) continue;

    float s[kNt][4];
#pragma unroll
    for (int i = 0; i < kNt; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[i][e] = 0.0f;
    }
#pragma unroll 2
    for (int ks = 0; ks < HD / 16; ++ks) {
      uint32_t ah[4], al[4];
      q_frags<L::kLq>(sQh, sQl, r0, r1, ks, qd, ah, al);
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
        if constexpr (PRE) {
          pre_mma3(s[nt], ah, al, sKh, sKl, 8 * nt + gq, L::kKw, ks, qd);
        } else {
          split_mma3<F16>(s[nt], ah, al, sK + (8 * nt + gq) * L::kLk + 16 * ks + 2 * qd);
        }
      }
    }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
      scale_mask(s[nt], j0 + 8 * nt + 2 * qd, p0, p1, a.scale, &mx0, &mx1);
    }
    quad_max(&mx0, &mx1);
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    const float al0 = expf(__fsub_rn(m0, mn0)), al1 = expf(__fsub_rn(m1, mn1));
    m0 = mn0;
    m1 = mn1;
    float u0 = 0.0f, u1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = expf(__fsub_rn(s[nt][e], e < 2 ? mn0 : mn1));
        if (e < 2) {
          u0 = __fadd_rn(u0, s[nt][e]);
        } else {
          u1 = __fadd_rn(u1, s[nt][e]);
        }
      }
    }
    quad_sum(&u0, &u1);
    rescale(u0, u1, al0, al1, &l0, &l1, acc);
#pragma unroll
    for (int ks = 0; ks < kKeys / 16; ++ks) {
      uint32_t ph[4], pl[4];  // A fragment of P: keys 16ks + 2qd (+8), rows r0 / r1
      split2(s[2 * ks][0], s[2 * ks][1], &ph[0], &pl[0]);
      split2(s[2 * ks][2], s[2 * ks][3], &ph[1], &pl[1]);
      split2(s[2 * ks + 1][0], s[2 * ks + 1][1], &ph[2], &pl[2]);
      split2(s[2 * ks + 1][2], s[2 * ks + 1][3], &ph[3], &pl[3]);
#pragma unroll
      for (int nv = 0; nv < kNv; ++nv) {
        if constexpr (PRE) {
          pre_mma3(acc[nv], ph, pl, sVh, sVl, 8 * nv + gq, L::kVw, ks, qd);
        } else {
          split_mma3<F16>(acc[nv], ph, pl, sV + (8 * nv + gq) * L::kLv + 16 * ks + 2 * qd);
        }
      }
    }
  }
  if (!live) return;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = half == 0 ? r0 : r1;
    if (!row_ok(r)) continue;
    const float l = half == 0 ? l0 : l1;
    float* orow = a.out + static_cast<int64_t>(t0 + r / a.nq) * a.out_stride +
                  static_cast<int64_t>(h_first + r % a.nq) * HD + slice * kDv + 2 * qd;
#pragma unroll
    for (int nv = 0; nv < kNv; ++nv) {
      float2 o;
      o.x = __fdiv_rn(acc[nv][2 * half], l);
      o.y = __fdiv_rn(acc[nv][2 * half + 1], l);
      if (a.out_vec) {
        *reinterpret_cast<float2*>(orow + 8 * nv) = o;
      } else {
        orow[8 * nv] = o.x;
        orow[8 * nv + 1] = o.y;
      }
    }
  }
}

template <bool F16, int HD, int NS>
cudaError_t set_smem() {
  return cudaFuncSetAttribute(attn_mma_kernel<F16, HD, NS>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(Lay<HD, NS>::template bytes<F16>()));
}

template <bool F16, int HD>
cudaError_t set_smem_all() {
  cudaError_t e = set_smem<F16, HD, 1>();
  if (e == cudaSuccess) e = set_smem<F16, HD, kSlices>();
  return e;
}

template <bool F16, int HD>
cudaError_t launch(cudaStream_t s, const MmaArgs& a, dim3 grid) {
  // One token (a decode step) of a group that fits a 16-row tile: the warps share each tile.
  if (a.n_tok == 1 && a.group <= kDecRows) return attn_dec_launch(s, a, F16, HD, grid.y);
  constexpr unsigned kThreads = 32 * kWarpsOf<HD>;
  // Fewer blocks than about the SMs: split the output channels over more blocks.
  if (grid.x * grid.y * grid.z < kFewBlocks) {
    grid.z *= kSlices;
    return launch_pdl(attn_mma_kernel<F16, HD, kSlices>, grid, dim3(kThreads),
                      Lay<HD, kSlices>::template bytes<F16>(), s, a);
  }
  return launch_pdl(attn_mma_kernel<F16, HD, 1>, grid, dim3(kThreads),
                    Lay<HD, 1>::template bytes<F16>(), s, a);
}

// Query rows of a block for heads of hd (64, 128 or 256).
int rows_of_block(int32_t hd) { return 16 * (hd == 64 ? kWarpsOf<64> : kWarpsOf<128>); }

}  // namespace

cudaError_t kv_attention_mma_setup() {
  cudaError_t e = set_smem_all<true, 64>();
  if (e == cudaSuccess) e = set_smem_all<true, 128>();
  if (e == cudaSuccess) e = set_smem_all<true, 256>();
  if (e == cudaSuccess) e = set_smem_all<false, 64>();
  if (e == cudaSuccess) e = set_smem_all<false, 128>();
  if (e == cudaSuccess) e = set_smem_all<false, 256>();
  if (e == cudaSuccess) e = attn_dec_setup();
  return e;
}

namespace attn {

bool mma_args(const AttentionShape& sh, const KvDevSrc& k, const KvDevSrc& v, MmaArgs* a,
              bool* f16) {
  const int32_t hd = sh.head_dim_k;
  if (k.ref.c != nullptr || sh.head_dim_v != hd || (hd != 64 && hd != 128 && hd != 256) ||
      sh.n_head_kv <= 0 || sh.n_head % sh.n_head_kv != 0) {
    return false;
  }
  bool vf16 = false;
  if (!rows_of(k, hd, sh.n_head_kv, f16, &a->k) || !rows_of(v, hd, sh.n_head_kv, &vf16, &a->v) ||
      *f16 != vf16) {
    return false;
  }
  a->group = sh.n_head / sh.n_head_kv;
  a->scale = sh.scale;
  const int rows = rows_of_block(hd);
  a->nq = a->group < rows ? a->group : rows;
  a->qt = rows / a->nq;
  return true;
}

}  // namespace attn

bool kv_attention_mma(cudaStream_t s, const AttentionShape& sh, const float* q, int64_t q_stride,
                      int32_t n_tok, int32_t pos0, const KvDevSrc& k, const KvDevSrc& v, float* out,
                      int64_t out_stride, const int32_t* pos_dev, cudaError_t* err) {
  MmaArgs a;
  bool f16 = false;
  if (!mma_args(sh, k, v, &a, &f16)) return false;
  *err = cudaSuccess;
  if (n_tok <= 0) return true;
  a.q = q;
  a.q_stride = q_stride;
  a.n_tok = n_tok;
  a.pos0 = pos0;
  a.pos_dev = pos_dev;
  set_out(out, out_stride, &a);
  const int32_t hd = sh.head_dim_k;
  const int32_t n_chunks = (a.group + a.nq - 1) / a.nq;
  const dim3 grid(static_cast<unsigned>((n_tok + a.qt - 1) / a.qt),
                  static_cast<unsigned>(sh.n_head_kv), static_cast<unsigned>(n_chunks));
  if (f16) {
    *err = hd == 64    ? launch<true, 64>(s, a, grid)
           : hd == 128 ? launch<true, 128>(s, a, grid)
                       : launch<true, 256>(s, a, grid);
  } else {
    *err = hd == 64    ? launch<false, 64>(s, a, grid)
           : hd == 128 ? launch<false, 128>(s, a, grid)
                       : launch<false, 256>(s, a, grid);
  }
  return true;
}

}  // namespace geist::cuda
