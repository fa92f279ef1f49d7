// The scalar definition of the 8-bit activation codes (matmul_simd.h, "Q8 path") and the panel
// layout writer. The AVX-512 quantizer in matmul_q8_simd.cpp must give the same bits.
#include <cmath>
#include <cstring>

#include "base/status.h"
#include "kernels/simd/matmul_simd.h"

namespace geist::simd {
namespace {

// One 32-block in two int8 planes: q1 = round(x / d) with d = max|x| / 127 (llama.cpp's q8_0
// codes), q2 = round((x - d * q1) / dx) with dx = d / kQ8Fine, so x ~= dx * (kQ8Fine * q1 + q2)
// to within half of dx: about 16-bit activations from two 8-bit multiply-adds. This scalar
// form is the definition; the AVX-512 quantizer (matmul_q8_simd.cpp) must give the same bits.
// The comparisons are written as fmax / fmin would order them (NaN picks the other operand),
// but without the library calls, which cost as much as the rest of the block. This file is
// baseline code (no FMA target), so d * v is never fused into the subtraction.
// planes == 1 (q8_planes): q1 alone, *dx_out = d and the sum of q1: llama.cpp's q8_0 codes.
inline int32_t quantize_block_q8(const float* x, int planes, int8_t* q1, int8_t* q2,
                                 float* dx_out) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) {
    const float a = std::fabs(x[i]);
    amax = a > amax ? a : amax;
  }
  const float d = amax / 127.0f;
  const float dx = d / static_cast<float>(kQ8Fine);
  const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
  const float idx = amax > 0.0f ? 1.0f / dx : 0.0f;
  int32_t sum = 0;
  if (planes == 1) {
    for (int i = 0; i < 32; ++i) {
      float v = std::nearbyint(x[i] * id);
      v = v > -127.0f ? v : -127.0f;
      v = v < 127.0f ? v : 127.0f;
      q1[i] = static_cast<int8_t>(v);
      sum += q1[i];
    }
    *dx_out = d;
    return sum;
  }
  for (int i = 0; i < 32; ++i) {
    float v = std::nearbyint(x[i] * id);
    v = v > -127.0f ? v : -127.0f;  // NaN-free input assumed upstream
    v = v < 127.0f ? v : 127.0f;
    float f = std::nearbyint((x[i] - d * v) * idx);
    f = f > -127.0f ? f : -127.0f;
    f = f < 127.0f ? f : 127.0f;
    q1[i] = static_cast<int8_t>(v);
    q2[i] = static_cast<int8_t>(f);
    sum += kQ8Fine * q1[i] + q2[i];
  }
  *dx_out = dx;
  return sum;
}

}  // namespace

void quantize_row_q8_reference(const float* x, int64_t n_in, int planes, int8_t* q, float* dx,
                               int32_t* sx) {
  GEIST_CHECK(n_in % 32 == 0 && (planes == 1 || planes == 2),
              "quantize_row_q8_reference: n_in must be a multiple of 32, planes 1 or 2");
  for (int64_t b = 0; b < n_in / 32; ++b) {
    sx[b] = quantize_block_q8(x + b * 32, planes, q + b * 32, q + n_in + b * 32, dx + b);
  }
}

void quantize_row_q8_panel(const float* x, int64_t n_in, int planes, int64_t lane, int8_t* pq,
                           float* pdx, int32_t* psx) {
  GEIST_CHECK(n_in % 32 == 0 && lane >= 0 && lane < kQ8Panel, "quantize_row_q8_panel: bad shape");
  const int64_t nb = n_in / 32;
  constexpr int64_t kPiece = 32;  // blocks quantized into the row layout at a time
  int8_t q[2 * kPiece * 32];      // [2][kPiece * 32] row layout of one piece
  float d[kPiece];
  int32_t s[kPiece];
  for (int64_t b0 = 0; b0 < nb; b0 += kPiece) {
    const int64_t n = nb - b0 < kPiece ? nb - b0 : kPiece;
    if (x) {
      quantize_row_q8(x + b0 * 32, n * 32, planes, q, d, s);
    } else {
      std::memset(q, 0, sizeof(q));
      std::memset(d, 0, sizeof(d));
      std::memset(s, 0, sizeof(s));
    }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t b = b0 + k;
      for (int plane = 0; plane < planes; ++plane) {
        const int8_t* src = q + plane * n * 32 + k * 32;
        for (int g = 0; g < 8; ++g) {
          std::memcpy(pq + plane * nb * 512 + ((b * 8 + g) * 16 + lane) * 4, src + 4 * g, 4);
        }
      }
      pdx[b * 16 + lane] = d[k];
      psx[b * 16 + lane] = s[k];
    }
  }
}

}  // namespace geist::simd
