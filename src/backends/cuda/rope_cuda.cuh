// The rope arithmetic shared by the rope kernels (rope_cuda.cu) and the decode attention that
// turns its token's q and k itself (kv_attn_mma_dec_cuda.cu): the CPU rope()'s double angles,
// rounded cos / sin, explicit round-to-nearest f32 products.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace geist::cuda::ropek {

// The cos and sin of rope pair i at position pos: the CPU rope()'s double angle, rounded.
__device__ __forceinline__ void angle(int32_t pos, int32_t i, int32_t n_rot, float freq_base,
                                      float freq_scale, const float* freq_factors, float* c,
                                      float* sn) {
  double theta = static_cast<double>(pos) * static_cast<double>(freq_scale) *
                 pow(static_cast<double>(freq_base), -2.0 * i / n_rot);
  if (freq_factors != nullptr) theta /= static_cast<double>(freq_factors[i]);
  *c = static_cast<float>(cos(theta));
  *sn = static_cast<float>(sin(theta));
}

// The cos / sin of pairs [0, n_rot / 2) at position pos into cs, by the block's threads.
__device__ __forceinline__ void block_angles(float (&cs)[2][128], int32_t pos, int32_t n_rot,
                                             float freq_base, float freq_scale,
                                             const float* freq_factors) {
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < n_rot / 2;
       i += static_cast<int32_t>(blockDim.x)) {
    angle(pos, i, n_rot, freq_base, freq_scale, freq_factors, &cs[0][i], &cs[1][i]);
  }
}

// Channel offsets of pair i in a head: (2i, 2i + 1), or NEOX's (i, i + n_rot / 2).
__device__ __forceinline__ void pair_at(int32_t i, int32_t half, bool neox, int32_t* i0,
                                        int32_t* i1) {
  *i0 = neox ? i : 2 * i;
  *i1 = neox ? i + half : 2 * i + 1;
}

// One pair turned by (c, sn), as the CPU's rope().
__device__ __forceinline__ void turn(float x0, float x1, float c, float sn, float* y0, float* y1) {
  *y0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn));
  *y1 = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, c));
}

}  // namespace geist::cuda::ropek
