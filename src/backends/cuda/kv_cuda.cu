// KV writes on the device: rows quantized into KvCache's encodings (one thread per block of a
// row, the CPU quantizer's arithmetic, kv_codec_cuda.cuh), and KIVI's group quantization from
// the f16 residual rows when a group fills. Bitwise the CPU's bytes for the same input rows.
// Launched with launch_pdl (launch_cuda.cuh): every kernel starts with pdl_begin().
#include <cuda_fp16.h>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/kv_codec_cuda.cuh"
#include "backends/cuda/launch_cuda.cuh"

namespace geist::cuda {

namespace {

using namespace kvdev;

constexpr int kThreads = 128;

// F32 / F16 rows, one thread per element (F16: round to nearest even, as fp32_to_fp16).
__global__ void encode_plain_kernel(bool f16, const float* __restrict__ src, int64_t src_stride,
                                    int32_t n, int32_t n_embd, uint8_t* __restrict__ dst,
                                    int64_t dst_row_bytes, const int32_t* __restrict__ row_dev) {
  pdl_begin();
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(n) * n_embd) return;
  const int64_t r = idx / n_embd;
  if (row_dev != nullptr) dst += static_cast<int64_t>(*row_dev) * dst_row_bytes;
  const int32_t c = static_cast<int32_t>(idx % n_embd);
  kv_put(f16, dst + r * dst_row_bytes, c, src[r * src_stride + c]);
}

// One thread per (row, block): the block's values (minus R_p c when ref.c is set; Q8's plain
// reference is n_rot 0), zero-padded to `block` for the rotated encodings, then the CPU
// quantizer's steps.
__global__ void encode_blocks_kernel(KvEnc enc, int32_t block, const float* __restrict__ src,
                                     int64_t src_stride, int32_t n, int32_t n_embd,
                                     const KvKeyRef ref, int32_t pos0, uint8_t* __restrict__ dst,
                                     int64_t dst_row_bytes, const int32_t* __restrict__ row_dev) {
  pdl_begin();
  const int32_t nb = (n_embd + block - 1) / block;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(n) * nb) return;
  if (row_dev != nullptr) dst += static_cast<int64_t>(*row_dev) * dst_row_bytes;
  const int64_t r = idx / nb;
  const int32_t b0 = static_cast<int32_t>(idx % nb) * block;
  const int32_t m = n_embd - b0 < block ? n_embd - b0 : block;
  float x[kG];  // [block]
  for (int i = 0; i < block; ++i) {
    float v = 0.0f;
    if (i < m) {
      v = src[r * src_stride + b0 + i];
      if (ref.c != nullptr) {
        v = __fsub_rn(v, ref_elem(ref, pos0 + static_cast<int32_t>(r), b0 + i));
      }
    }
    x[i] = v;
  }
  uint8_t* blk = dst + r * dst_row_bytes + (b0 / block) * block_bytes(enc, block);
  if (is_rotated(enc)) {
    fwht(x, block);
    quantize_rotated(enc, x, block, blk);
  } else {
    quantize_asym(x, 1, m, enc_bits(enc), block, blk);
  }
}

// Threads [0, nk): key channel c over the group's kG positions; then one per (row, block) of
// the values.
__global__ void quantize_group_kernel(KvEnc k_enc, KvEnc v_enc, int32_t v_block,
                                      const uint16_t* __restrict__ k_resid, int32_t nk,
                                      const uint16_t* __restrict__ v_resid, int32_t nv,
                                      uint8_t* __restrict__ k_dst, uint8_t* __restrict__ v_dst,
                                      int64_t v_row_bytes) {
  pdl_begin();
  const int32_t nbv = (nv + v_block - 1) / v_block;
  const int32_t idx = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  float x[kG];
  if (idx < nk) {
    for (int t = 0; t < kG; ++t) x[t] = __half2float(__ushort_as_half(k_resid[t * nk + idx]));
    const int bits = enc_bits(k_enc);
    quantize_asym(x, 1, kG, bits, kG, k_dst + idx * (4 + kG * bits / 8));
    return;
  }
  const int32_t j = idx - nk;
  if (j >= kG * nbv) return;
  const int32_t t = j / nbv;
  const int32_t b0 = (j % nbv) * v_block;
  const int32_t m = nv - b0 < v_block ? nv - b0 : v_block;
  for (int i = 0; i < m; ++i) x[i] = __half2float(__ushort_as_half(v_resid[t * nv + b0 + i]));
  uint8_t* blk = v_dst + t * v_row_bytes + (b0 / v_block) * block_bytes(v_enc, v_block);
  quantize_asym(x, 1, m, enc_bits(v_enc), v_block, blk);
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

bool valid_block(int32_t b) { return b == 8 || b == 16 || b == 32; }

}  // namespace

cudaError_t kv_encode_rows(cudaStream_t s, KvEnc enc, int32_t block, const float* src,
                           int64_t src_stride, int32_t n, int32_t n_embd, const uint16_t* ref,
                           uint8_t* dst, int64_t dst_row_bytes, const int32_t* row_dev) {
  if (n <= 0 || n_embd <= 0) return cudaSuccess;
  if (enc == KvEnc::F32 || enc == KvEnc::F16) {
    if (ref != nullptr) return cudaErrorInvalidValue;
    return launch_pdl(encode_plain_kernel, dim3(blocks_for(int64_t{n} * n_embd)), dim3(kThreads), 0,
                      s, enc == KvEnc::F16, src, src_stride, n, n_embd, dst, dst_row_bytes,
                      row_dev);
  }
  KvKeyRef kr;  // Q8: the plain reference row (R_p = identity)
  kr.c = reinterpret_cast<const uint8_t*>(ref);
  return kv_encode_rows_rel(s, enc, block, src, src_stride, n, n_embd, kr, 0, dst, dst_row_bytes,
                            row_dev);
}

cudaError_t kv_encode_rows_rel(cudaStream_t s, KvEnc enc, int32_t block, const float* src,
                               int64_t src_stride, int32_t n, int32_t n_embd, const KvKeyRef& ref,
                               int32_t pos0, uint8_t* dst, int64_t dst_row_bytes,
                               const int32_t* row_dev) {
  if (n <= 0 || n_embd <= 0) return cudaSuccess;
  // A rotated reference depends on the position, which row_dev does not shift.
  if (!valid_block(block) || enc == KvEnc::CH4 || enc == KvEnc::CH2 || enc == KvEnc::F32 ||
      enc == KvEnc::F16 || (ref.n_rot > 0 && (ref.cs == nullptr || ref.head_dim <= 0)) ||
      (ref.n_rot > 0 && row_dev != nullptr)) {
    return cudaErrorInvalidValue;
  }
  const int64_t nb = (n_embd + block - 1) / block;
  return launch_pdl(encode_blocks_kernel, dim3(blocks_for(n * nb)), dim3(kThreads), 0, s, enc,
                    block, src, src_stride, n, n_embd, ref, pos0, dst, dst_row_bytes, row_dev);
}

cudaError_t kv_quantize_group(cudaStream_t s, KvEnc k_enc, KvEnc v_enc, int32_t v_block,
                              const uint16_t* k_resid, int32_t nk, const uint16_t* v_resid,
                              int32_t nv, uint8_t* k_dst, uint8_t* v_dst, int64_t v_row_bytes) {
  if (!valid_block(v_block) || (k_enc != KvEnc::CH4 && k_enc != KvEnc::CH2) ||
      (v_enc != KvEnc::A4 && v_enc != KvEnc::A2)) {
    return cudaErrorInvalidValue;
  }
  const int64_t total = nk + int64_t{kG} * ((nv + v_block - 1) / v_block);
  return launch_pdl(quantize_group_kernel, dim3(blocks_for(total)), dim3(kThreads), 0, s, k_enc,
                    v_enc, v_block, k_resid, nk, v_resid, nv, k_dst, v_dst, v_row_bytes);
}

}  // namespace geist::cuda
