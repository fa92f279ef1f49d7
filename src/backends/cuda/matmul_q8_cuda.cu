// The 8-bit path of Q8_0 and Q4_0 weights: activations quantized to int8 per 32-block, exact
// int8 dots (tensor cores, mma.sync m16n8k32 s8.s8.s32, or dp4a), one f32 FMA per block.
//
// The arithmetic is the CPU backend's "Q8 path" (kernels/simd/matmul_simd.h), bitwise:
//   - each activation row is quantized per 32-block as simd::quantize_row_q8_reference does
//     (quant_group / quant_quad in matmul_common.cuh: d = max|x| / 127, q1 = round(x / d); Q8_0 add
//     the plane q2 = round((x - d q1) / dx) with dx = d / kQ8Fine; Q4_0 takes q1 alone, dx = d);
//   - isum_b = kQ8Fine * dot(w, q1) + dot(w, q2) (Q8_0) or dot(w, q1) (Q4_0), exact in int32,
//     w the block's signed weight codes (Q8_0: q; Q4_0: u - 8); float(isum_b) is rounded once
//     from the exact integer (decode kernels: __int2float_rn; prefill: block_fma's fma of the
//     two planes' exact floats, the same value);
//   - every output element is, from acc = +0, for the blocks b in order:
//       acc = fma(float(isum_b), dw_b * dx_b, acc)
//     dw_b the block's f16 scale. No split of the k range, no other rounding.
// Prefill (matmul_prefill_cuda.cu), this decode kernel, CUDA graphs and any batch split therefore
// give the same bits, and the same bits as the CPU's scalar definition of the formula
// (CudaMatmulQ8.*). An odd last block pair is padded with a zero block, which adds
// fma(0, 0, acc) = acc exactly (acc is never -0: it starts at +0 and a round-to-nearest sum is
// -0 only when both terms are).
//
// Decode, one or two tokens (gemv_q8_cuda.cu: gemv_kernel; the steps of generation, and the
// fused q / k / v or gate / up launches of matmul_batch): a GEMV made to stream the weights at
// memory speed. A block owns 16 rows, a warp two of them; in pass s lane l takes block pair
// 32 s + l of both rows (one 64-byte load per row from the repacked rows: the warp reads 2 KB
// of a row at a time), so the isums are exact dp4a sums held per lane, with no tensor cores and
// no padding tokens. The block quantizes the activations once into shared memory (quant_quad,
// while the first pass's weight loads are in flight), each pass's (float(isum_b), dw_b * dx_b)
// go to the warp's shared slice, and one lane per (row, token) folds them into its acc in block
// order (the next pass's loads are issued before the fold). H200, geist bench tg128 q8_0:
// llama-1b 498 -> 734 tok/s, qwen35-0.8b 406 -> 512 (HEAD's bf16 path: 590, 433).
// Both decode kernels are launched with launch_pdl: a block issues its first weight loads (and
// gemv_kernel asks L2 for the rest of its rows) before griddepcontrol.wait, so the weights
// stream in while the kernel ahead (a norm, a rope, swiglu) finishes; the activations are read
// and the outputs written only after the wait.
//
// Decode, 3 to 16 tokens (gemv_rows_q8_cuda.cu: gemv_rows_kernel; the steps of a batched decode
// of 3-16 sessions): the int8 mma over 8-row groups with the tokens as its rows, the blocks
// walking the row groups, the activations quantized once per call into a device scratch.
//
// decode_kernel below takes what neither GEMV can (the one- and two-token GEMV's shared memory
// past 48 KB: Q8_0 n_in > 18432 for one token; 3-16 tokens without a scratch, 8 a launch): a
// block owns 16 rows, walks the row in segments of dec_seg 32-blocks. Per segment it quantizes
// the activations of the segment into shared memory (8 lanes per token and block: no extra
// launch, and no scratch), the 8 warps share the segment's block pairs through the mma and write
// each block's (float(isum_b), dw_b * dx_b) to shared memory, and then one thread per (row,
// token) folds the segment's blocks into its acc in order. The weight loads of the next segment
// are issued before the fold, so they are in flight while it runs. H200 (session 21, ncu): 5-20x
// the weights' read time at 3-8 tokens, which is why the GEMV above replaced it there.
#include <algorithm>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/launch_cuda.cuh"
#include "backends/cuda/matmul_common.cuh"
#include "backends/cuda/matmul_q8_cuda.cuh"

namespace geist::cuda {

namespace {

using namespace mm;  // NOLINT(build/namespaces): the helpers shared with the prefill kernel
using namespace q8;  // NOLINT(build/namespaces): the batch shared with the GEMVs

constexpr int kDecWarps = 8;
constexpr int kDecThreads = 32 * kDecWarps;
constexpr int kMaxSlots = 4;       // block pairs per warp and segment
constexpr int32_t kDecMaxTok = 8;  // decode_kernel's tokens a launch (its mma's 8 columns)

// Blocks per segment: shared memory stays under the 48 KB that needs no opt-in (an opt-in is
// not a stream operation and could not happen while a step is captured).
int dec_seg(int32_t n_tok) { return n_tok <= 2 ? 64 : (n_tok <= 4 ? 32 : 16); }

size_t dec_smem(int planes, int32_t n_tok, int seg) {
  const size_t t = static_cast<size_t>(n_tok), sg = static_cast<size_t>(seg);
  return planes * t * (sg * 4 + 4) * 8  // codes
         + sg * kDecRows * t * 8        // (float(isum), dw * dx) pairs
         + t * sg * 4;                  // steps
}

template <GgmlType T>
__global__ void __launch_bounds__(kDecThreads)
    decode_kernel(const DecBatch bt, const float* __restrict__ x, int64_t x_stride, int32_t n_tok,
                  bool vec, int seg) {
  constexpr int P = T == GgmlType::Q8_0 ? 2 : 1;
  extern __shared__ uint2 dsm[];
  DevW w;
  float* y;
  int64_t y_stride, first;
  select_matrix(bt, &w, &y, &y_stride, &first);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, wp = tid >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t r0 = (static_cast<int64_t>(blockIdx.x) - first) * kDecRows;
  const int nb = static_cast<int>(w.n_in / 32);
  const int pairs = (nb + 1) / 2;
  // Token stride of the codes: 32 bytes past a multiple of 128, so that the 8 tokens of a
  // fragment load fall on different banks.
  const int tstride = seg * 4 + 4;
  uint2* codes = dsm;                                                   // [P][n_tok][tstride]
  float2* fs = reinterpret_cast<float2*>(codes + P * n_tok * tstride);  // [seg][16][n_tok]
  float* dxs = reinterpret_cast<float*>(fs + seg * kDecRows * n_tok);   // [n_tok][seg]
  const int slots = seg / (2 * kDecWarps);

  uint4 bw[kMaxSlots][2];  // [slot][row g / g + 8]: the pair's codes
  uint32_t bd[kMaxSlots][2];
  auto fetch = [&](int k0) {  // this warp's pairs of the segment that starts at pair k0
#pragma unroll
    for (int s = 0; s < kMaxSlots; ++s) {
      const int k = k0 + wp + kDecWarps * s;
      if (s < slots && k < pairs) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          bw[s][h] = PairLoader<T>::codes(w, r0 + g + 8 * h, k, q);
          bd[s][h] = PairLoader<T>::scales(w, r0 + g + 8 * h, k);
        }
      }
    }
  };
  fetch(0);  // weights only: before the wait (launch_pdl)
  pdl_wait();
  pdl_trigger();
  const int rr = tid & 15, tt = tid >> 4;  // the fold's row and token
  float acc = 0.0f;
  const int nseg = (nb + seg - 1) / seg;
  for (int sg = 0; sg < nseg; ++sg) {
    const int b0 = sg * seg;
    const int nbs = nb - b0 < seg ? nb - b0 : seg;
    if (sg > 0) __syncthreads();  // the previous fold is done with the steps and pairs
    // Whole warps stay in the loop (the quantizer's shuffles need all lanes).
    for (int base = wp * 32; base < n_tok * nbs * 8; base += kDecThreads) {
      const int it = base + lane;
      const bool live = it < n_tok * nbs * 8;
      const int t = live ? (it >> 3) / nbs : 0, bl = live ? (it >> 3) % nbs : 0, m = it & 7;
      float v[4];
      x_load4(x, x_stride, n_tok, vec, live, t, static_cast<int64_t>(b0 + bl) * 32 + 4 * m, v);
      uint32_t c[P];
      float dx;
      quant_group<P>(v, c, &dx);
      if (live) {
        uint32_t* dst = reinterpret_cast<uint32_t*>(codes + t * tstride + bl * 4) + quant_word(m);
#pragma unroll
        for (int p = 0; p < P; ++p) dst[2 * p * n_tok * tstride] = c[p];
        if (m == 0) dxs[t * seg + bl] = dx;
      }
    }
    __syncthreads();
#pragma unroll
    for (int s = 0; s < kMaxSlots; ++s) {
      const int kl = wp + kDecWarps * s;  // pair of the segment
      if (s < slots && 2 * kl < nbs) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int bl = 2 * kl + h;
          if (bl < nbs) {
            uint2 b[P];
#pragma unroll
            for (int p = 0; p < P; ++p) {
              b[p] = g < n_tok ? codes[(p * n_tok + g) * tstride + bl * 4 + q] : make_uint2(0u, 0u);
            }
            const uint4 a0 = bw[s][0], a1 = bw[s][1];
            const uint32_t lo0 = h == 0 ? a0.x : a0.z, lo1 = h == 0 ? a0.y : a0.w;
            const uint32_t hi0 = h == 0 ? a1.x : a1.z, hi1 = h == 0 ? a1.y : a1.w;
            int32_t c[4] = {0, 0, 0, 0};
            mma_s8(c, lo0, hi0, lo1, hi1, b[0].x, b[0].y);
            if constexpr (P == 2) {
#pragma unroll
              for (int e = 0; e < 4; ++e) c[e] *= kQ8Fine;
              mma_s8(c, lo0, hi0, lo1, hi1, b[1].x, b[1].y);
            }
            const float dw0 = f16_bits(h == 0 ? bd[s][0] & 0xFFFFu : bd[s][0] >> 16);
            const float dw1 = f16_bits(h == 0 ? bd[s][1] & 0xFFFFu : bd[s][1] >> 16);
            float2* f = fs + bl * kDecRows * n_tok;
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int t = 2 * q + e;
              if (t < n_tok) {
                const float dx = dxs[t * seg + bl];
                f[g * n_tok + t] = make_float2(__int2float_rn(c[e]), __fmul_rn(dw0, dx));
                f[(g + 8) * n_tok + t] = make_float2(__int2float_rn(c[2 + e]), __fmul_rn(dw1, dx));
              }
            }
          }
        }
      }
    }
    if (sg + 1 < nseg) fetch((sg + 1) * seg / 2);
    __syncthreads();
    if (tt < n_tok) {
      const float2* f = fs + rr * n_tok + tt;
#pragma unroll 8
      for (int bl = 0; bl < nbs; ++bl) {
        const float2 v = f[bl * kDecRows * n_tok];
        acc = __fmaf_rn(v.x, v.y, acc);
      }
    }
  }
  if (tt < n_tok && r0 + rr < w.n_out) y[tt * y_stride + r0 + rr] = acc;
}

// One launch for outs[0, n), all of type T.
template <GgmlType T>
cudaError_t launch_decode(cudaStream_t s, const MatmulOut* outs, int n, const float* x,
                          int64_t x_stride, int32_t n_tok, void* scratch, size_t scratch_bytes) {
  DecBatch b{};
  b.n = n;
  int64_t blocks = 0;
  for (int i = 0; i < n; ++i) {
    b.w[i] = dev_w(outs[i].w);
    b.y[i] = outs[i].y;
    b.y_stride[i] = outs[i].y_stride;
    b.first[i] = blocks;
    blocks += (outs[i].w.n_out + kDecRows - 1) / kDecRows;
  }
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const bool vec = x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  cudaError_t err = cudaSuccess;
  if (gemv_launch(s, T, b, blocks, x, x_stride, n_tok, vec, &err)) return err;
  if (rows_launch(s, T, b, blocks, x, x_stride, n_tok, vec, scratch, scratch_bytes, &err)) {
    return err;
  }
  // decode_kernel, 8 tokens a launch (each token's rows are their own: the same bits).
  for (int32_t t = 0; t < n_tok; t += kDecMaxTok) {
    const int32_t nt = std::min(kDecMaxTok, n_tok - t);
    DecBatch bt = b;
    for (int i = 0; i < n; ++i) bt.y[i] = b.y[i] + t * b.y_stride[i];
    const int seg = dec_seg(nt);
    err = launch_pdl(decode_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(kDecThreads),
                     dec_smem(q8_planes(T), nt, seg), s, bt, x + t * x_stride, x_stride, nt, vec,
                     seg);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace

bool matmul_batchable(const WeightMatrix& w, int32_t n_tok) {
  return (w.type == GgmlType::Q8_0 || w.type == GgmlType::Q4_0) && n_tok >= 1 &&
         n_tok <= kBatchMaxTok && w.n_out > 0 && w.n_in > 0 && w.n_in % 32 == 0;
}

size_t matmul_batch_scratch_bytes(const WeightMatrix& w, int32_t n_tok) {
  return matmul_batchable(w, n_tok) ? q8::rows_scratch_bytes(n_tok, w.n_in) : 0;
}

cudaError_t matmul_batch(cudaStream_t s, const MatmulOut* outs, int n, const float* x,
                         int64_t x_stride, int32_t n_tok, void* scratch, size_t scratch_bytes) {
  if (n < 1 || n > kMaxMatmulBatch) return cudaErrorInvalidValue;
  for (int i = 0; i < n; ++i) {
    if (!matmul_batchable(outs[i].w, n_tok) || outs[i].w.n_in != outs[0].w.n_in) {
      return cudaErrorInvalidValue;
    }
  }
  // Runs of one weight type share a launch (the kernel is compiled per type).
  for (int i = 0; i < n;) {
    int j = i + 1;
    while (j < n && outs[j].w.type == outs[i].w.type) ++j;
    const cudaError_t e = outs[i].w.type == GgmlType::Q8_0
                              ? launch_decode<GgmlType::Q8_0>(s, outs + i, j - i, x, x_stride,
                                                              n_tok, scratch, scratch_bytes)
                              : launch_decode<GgmlType::Q4_0>(s, outs + i, j - i, x, x_stride,
                                                              n_tok, scratch, scratch_bytes);
    if (e != cudaSuccess) return e;
    i = j;
  }
  return cudaSuccess;
}

}  // namespace geist::cuda
