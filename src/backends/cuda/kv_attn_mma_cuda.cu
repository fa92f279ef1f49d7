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

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // query rows per block: 16 per warp
constexpr int kSlices = 4;          // output-channel slices of a launch with few blocks
constexpr unsigned kFewBlocks = 100;

// Shared-memory strides, chosen so that a warp's fragment loads hit distinct banks.
// HD: head size; NS: blocks that share a row's output channels (each slice HD / NS).
template <int HD, int NS>
struct Lay {
  static constexpr int kLq = HD / 2 + 4;  // words of a query row (hi or lo bf16 pairs)
  static constexpr int kLk = HD + 8;      // elements of a key row
  static constexpr int kLv = kKeys + 8;   // elements of a transposed value row (one channel)
  static constexpr int kDv = HD / NS;     // output channels of a block
  template <bool F16>
  static constexpr size_t bytes() {
    const size_t es = F16 ? 2 : 4;
    return 2 * sizeof(uint32_t) * kRows * kLq + es * kKeys * kLk + es * kDv * kLv;
  }
};

// NS > 1 (few blocks, e.g. a short call): NS blocks compute the same scores and each accumulates
// its slice of the output channels; the arithmetic of every element is the same as with NS 1.
template <bool F16, int HD, int NS>
__global__ void __launch_bounds__(kThreads) attn_mma_kernel(const MmaArgs a) {
  using E = typename std::conditional<F16, __half, float>::type;
  using L = Lay<HD, NS>;
  constexpr int kDv = L::kDv;
  constexpr int kNv = kDv / 8;  // output n-tiles
  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint32_t* sQh = reinterpret_cast<uint32_t*>(smem_raw);  // [kRows][kLq] hi(q) pairs
  uint32_t* sQl = sQh + kRows * L::kLq;                   // [kRows][kLq] lo(q) pairs
  E* sK = reinterpret_cast<E*>(sQl + kRows * L::kLq);     // [kKeys][kLk] key tile
  E* sV = sK + kKeys * L::kLk;                            // [kDv][kLv] value slice, transposed
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
    load_k_tile<E, HD, L::kLk>(a.k, j0, last_pos, k_off, sK, tid, kThreads);
    load_v_tile<E, kDv, L::kLv>(a.v, j0, last_pos, v_off, sV, tid, kThreads);
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
        split_mma3<F16>(s[nt], ah, al, sK + (8 * nt + gq) * L::kLk + 16 * ks + 2 * qd);
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
        split_mma3<F16>(acc[nv], ph, pl, sV + (8 * nv + gq) * L::kLv + 16 * ks + 2 * qd);
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
  // Fewer blocks than about the SMs: split the output channels over more blocks.
  if (grid.x * grid.y * grid.z < kFewBlocks) {
    grid.z *= kSlices;
    return launch_pdl(attn_mma_kernel<F16, HD, kSlices>, grid, dim3(kThreads),
                      Lay<HD, kSlices>::template bytes<F16>(), s, a);
  }
  return launch_pdl(attn_mma_kernel<F16, HD, 1>, grid, dim3(kThreads),
                    Lay<HD, 1>::template bytes<F16>(), s, a);
}

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

bool kv_attention_mma(cudaStream_t s, const AttentionShape& sh, const float* q, int64_t q_stride,
                      int32_t n_tok, int32_t pos0, const KvDevSrc& k, const KvDevSrc& v, float* out,
                      int64_t out_stride, const int32_t* pos_dev, cudaError_t* err) {
  const int32_t hd = sh.head_dim_k;
  if (k.ref.c != nullptr || sh.head_dim_v != hd || (hd != 64 && hd != 128 && hd != 256) ||
      sh.n_head_kv <= 0 || sh.n_head % sh.n_head_kv != 0) {
    return false;
  }
  MmaArgs a;
  bool kf16 = false, vf16 = false;
  if (!rows_of(k, hd, sh.n_head_kv, &kf16, &a.k) || !rows_of(v, hd, sh.n_head_kv, &vf16, &a.v) ||
      kf16 != vf16) {
    return false;
  }
  *err = cudaSuccess;
  if (n_tok <= 0) return true;
  a.group = sh.n_head / sh.n_head_kv;
  a.scale = sh.scale;
  a.q = q;
  a.q_stride = q_stride;
  a.n_tok = n_tok;
  a.pos0 = pos0;
  a.pos_dev = pos_dev;
  a.nq = a.group < kRows ? a.group : kRows;
  a.qt = kRows / a.nq;
  a.out = out;
  a.out_stride = out_stride;
  a.out_vec = reinterpret_cast<uintptr_t>(out) % 8 == 0 && out_stride % 2 == 0;
  const int32_t n_chunks = (a.group + a.nq - 1) / a.nq;
  const dim3 grid(static_cast<unsigned>((n_tok + a.qt - 1) / a.qt),
                  static_cast<unsigned>(sh.n_head_kv), static_cast<unsigned>(n_chunks));
  if (kf16) {
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
