// The K-quant super-block formats Q4_K, Q5_K, Q6_K (256 elements per block).
//
// Dequantization uses ggml's arithmetic order (d*sc, dmin*m, then d1*q - m1; for Q6_K
// d*sc*q) so values are bit-identical to llama.cpp's. Quantization (Q4_K, Q6_K) is our own:
// a sound search, not ggml's make_qkx2_quants/make_qx_quants, so bytes differ from
// llama-quantize's while the error is of the same order. See quantize_q4_k / quantize_q6_k.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace geist::quant_detail {
namespace {

constexpr int kSubK4 = 32;  // Q4_K/Q5_K sub-block length
constexpr int kSubK6 = 16;  // Q6_K sub-block length

// Round to nearest (halves away from zero), clamped; NaN maps to lo.
inline int round_clamped(float v, int lo, int hi) {
  if (!(v > static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(std::lround(v));
}

// Sub-block j's effective scale and min for Q4_K/Q5_K: value = d1 * q - m1.
inline void k4_sub_scales(const uint8_t* block, int j, float* d1, float* m1) {
  uint8_t sc, m;
  k_scale_min(block + 4, j, &sc, &m);
  *d1 = fp16_to_fp32(load_u16(block)) * sc;
  *m1 = fp16_to_fp32(load_u16(block + 2)) * m;
}

}  // namespace

void dequantize_q4_k(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQ4_KBytes) {
    const uint8_t* qs = src + 16;
    for (int c = 0; c < 4; ++c, qs += 32) {
      float d1, m1, d2, m2;
      k4_sub_scales(src, 2 * c, &d1, &m1);
      k4_sub_scales(src, 2 * c + 1, &d2, &m2);
      for (int l = 0; l < 32; ++l) *dst++ = d1 * (qs[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * (qs[l] >> 4) - m2;
    }
  }
}

void dequantize_q5_k(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQ5_KBytes) {
    const uint8_t* qh = src + 16;
    const uint8_t* qs = src + 48;
    for (int c = 0; c < 4; ++c, qs += 32) {
      float d1, m1, d2, m2;
      k4_sub_scales(src, 2 * c, &d1, &m1);
      k4_sub_scales(src, 2 * c + 1, &d2, &m2);
      const uint8_t bit_lo = static_cast<uint8_t>(1u << (2 * c));
      const uint8_t bit_hi = static_cast<uint8_t>(2u << (2 * c));
      for (int l = 0; l < 32; ++l) *dst++ = d1 * ((qs[l] & 0xF) + (qh[l] & bit_lo ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * ((qs[l] >> 4) + (qh[l] & bit_hi ? 16 : 0)) - m2;
    }
  }
}

namespace {

// The four 6-bit codes of Q6_K elements 128h+l, +32, +64, +96 (h = half), minus 32.
inline void q6_codes(const uint8_t* ql, const uint8_t* qh, int l, int q[4]) {
  q[0] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32;
  q[1] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
  q[2] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
  q[3] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
}

}  // namespace

void dequantize_q6_k(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQ6_KBytes, dst += kQK_K) {
    const float d = fp16_to_fp32(load_u16(src + 208));
    const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = src + 64 * h;
      const uint8_t* qh = src + 128 + 32 * h;
      float* y = dst + 128 * h;
      for (int l = 0; l < 32; ++l) {
        int q[4];
        q6_codes(ql, qh, l, q);
        for (int k = 0; k < 4; ++k) {
          const int e = 128 * h + 32 * k + l;
          y[32 * k + l] = d * sc[e / kSubK6] * q[k];
        }
      }
    }
  }
}

// Dots: per sub-block, sum(w*x) = d1 * sum(q*x) - m1 * sum(x).

float dot_q4_k(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b, w += kQ4_KBytes) {
    const uint8_t* qs = w + 16;
    for (int c = 0; c < 4; ++c, qs += 32, x += 64) {
      float d1, m1, d2, m2;
      k4_sub_scales(w, 2 * c, &d1, &m1);
      k4_sub_scales(w, 2 * c + 1, &d2, &m2);
      float sq1 = 0.0f, sx1 = 0.0f, sq2 = 0.0f, sx2 = 0.0f;
      for (int l = 0; l < 32; ++l) {
        sq1 += static_cast<float>(qs[l] & 0xF) * x[l];
        sx1 += x[l];
        sq2 += static_cast<float>(qs[l] >> 4) * x[l + 32];
        sx2 += x[l + 32];
      }
      sum += (d1 * sq1 - m1 * sx1) + (d2 * sq2 - m2 * sx2);
    }
  }
  return sum;
}

float dot_q5_k(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b, w += kQ5_KBytes) {
    const uint8_t* qh = w + 16;
    const uint8_t* qs = w + 48;
    for (int c = 0; c < 4; ++c, qs += 32, x += 64) {
      float d1, m1, d2, m2;
      k4_sub_scales(w, 2 * c, &d1, &m1);
      k4_sub_scales(w, 2 * c + 1, &d2, &m2);
      const int shift = 2 * c;
      float sq1 = 0.0f, sx1 = 0.0f, sq2 = 0.0f, sx2 = 0.0f;
      for (int l = 0; l < 32; ++l) {
        const int q1 = (qs[l] & 0xF) | (((qh[l] >> shift) & 1) << 4);
        const int q2 = (qs[l] >> 4) | (((qh[l] >> (shift + 1)) & 1) << 4);
        sq1 += static_cast<float>(q1) * x[l];
        sx1 += x[l];
        sq2 += static_cast<float>(q2) * x[l + 32];
        sx2 += x[l + 32];
      }
      sum += (d1 * sq1 - m1 * sx1) + (d2 * sq2 - m2 * sx2);
    }
  }
  return sum;
}

float dot_q6_k(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b, w += kQ6_KBytes, x += kQK_K) {
    const float d = fp16_to_fp32(load_u16(w + 208));
    const int8_t* sc = reinterpret_cast<const int8_t*>(w + 192);
    float sub[kQK_K / kSubK6] = {};  // per-sub-block sum(q*x)
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w + 64 * h;
      const uint8_t* qh = w + 128 + 32 * h;
      for (int l = 0; l < 32; ++l) {
        int q[4];
        q6_codes(ql, qh, l, q);
        for (int k = 0; k < 4; ++k) {
          const int e = 128 * h + 32 * k + l;
          sub[e / kSubK6] += static_cast<float>(q[k]) * x[e];
        }
      }
    }
    for (int s = 0; s < kQK_K / kSubK6; ++s) sum += d * sc[s] * sub[s];
  }
  return sum;
}

// ---- Quantization ---------------------------------------------------------------------

namespace {

// Best affine fit x ~ a*L - m (a >= 0, m >= 0, L in [0, 15]) for one Q4_K sub-block.
// Grid search over 21 inverse steps around (max - min) / 15; for each candidate grid the
// codes L are fixed and (a, m) are refit by least squares (m pinned to 0 when the fitted
// offset would be positive, since the format only subtracts). Keeps the lowest squared error.
void fit_affine_sub(const float* x, int n, int nmax, float* a_out, float* m_out) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < n; ++i) {
    mn = std::fmin(mn, x[i]);
    mx = std::fmax(mx, x[i]);
  }
  mn = std::fmin(mn, 0.0f);  // the format's offset is -m with m >= 0
  *a_out = 0.0f;
  *m_out = -mn;
  if (!(mx > mn)) return;
  float best_err = INFINITY;
  for (int k = -10; k <= 10; ++k) {
    const float iscale = (static_cast<float>(nmax) + 0.1f * k) / (mx - mn);
    double sl = 0, sll = 0, sx = 0, slx = 0;
    int L[kQK];
    for (int i = 0; i < n; ++i) {
      L[i] = round_clamped((x[i] - mn) * iscale, 0, nmax);
      sl += L[i];
      sll += double(L[i]) * L[i];
      sx += x[i];
      slx += double(L[i]) * x[i];
    }
    const double det = n * sll - sl * sl;
    if (det <= 0) continue;
    double a = (n * slx - sl * sx) / det;
    double off = (sx - a * sl) / n;
    if (off > 0) {
      off = 0;
      a = slx / sll;
    }
    if (a < 0) continue;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = a * L[i] + off - x[i];
      err += e * e;
    }
    if (err < best_err) {
      best_err = static_cast<float>(err);
      *a_out = static_cast<float>(a);
      *m_out = static_cast<float>(-off);
    }
  }
}

// Least-squares symmetric scale a (x ~ a*L, L in [-32, 31]) for one Q6_K sub-block. Grid
// search over 19 inverse steps around -32 / (signed extreme); the extreme maps near the
// extra negative code like Q4_0/Q5_0's rule.
float fit_symmetric_sub(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  float best_a = max / -32;
  double best_err = INFINITY;
  for (int k = -9; k <= 9; ++k) {
    const float iscale = -(32.0f + 0.1f * k) / max;
    double slx = 0, sll = 0;
    int L[kSubK6];
    for (int i = 0; i < n; ++i) {
      L[i] = round_clamped(x[i] * iscale, -32, 31);
      slx += double(L[i]) * x[i];
      sll += double(L[i]) * L[i];
    }
    if (sll <= 0) continue;
    const double a = slx / sll;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = a * L[i] - x[i];
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      best_a = static_cast<float>(a);
    }
  }
  return best_a;
}

}  // namespace

// Q4_K: per 32-element sub-block an affine fit (fit_affine_sub); the 8 scales and 8 mins are
// then quantized to 6 bits against super-block factors d = max(scale)/63 and
// dmin = max(min)/63 (stored as f16; the 6-bit codes are rounded against the stored f16
// values), and finally every element is re-coded against the exact dequantized
// sub-block scale and min, so the stored codes are the nearest ones the block can express.
void quantize_q4_k(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K, dst += kQ4_KBytes) {
    float a[8], m[8];
    float amax = 0.0f, mmax = 0.0f;
    for (int j = 0; j < 8; ++j) {
      fit_affine_sub(src + kSubK4 * j, kSubK4, 15, &a[j], &m[j]);
      amax = std::fmax(amax, a[j]);
      mmax = std::fmax(mmax, m[j]);
    }
    const uint16_t d16 = fp32_to_fp16(amax / 63);
    const uint16_t dmin16 = fp32_to_fp16(mmax / 63);
    const float d = fp16_to_fp32(d16);
    const float dmin = fp16_to_fp32(dmin16);
    store_u16(dst, d16);
    store_u16(dst + 2, dmin16);
    uint8_t* scales = dst + 4;
    std::memset(scales, 0, 12);
    for (int j = 0; j < 8; ++j) {
      const int sc = d > 0.0f ? round_clamped(a[j] / d, 0, 63) : 0;
      const int mq = dmin > 0.0f ? round_clamped(m[j] / dmin, 0, 63) : 0;
      if (j < 4) {
        scales[j] |= static_cast<uint8_t>(sc);
        scales[j + 4] |= static_cast<uint8_t>(mq);
      } else {
        scales[j + 4] = static_cast<uint8_t>((sc & 0xF) | ((mq & 0xF) << 4));
        scales[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
        scales[j] |= static_cast<uint8_t>((mq >> 4) << 6);
      }
    }
    uint8_t* qs = dst + 16;
    for (int c = 0; c < 4; ++c) {
      int codes[2][32];
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * c + half;
        float d1, m1;
        k4_sub_scales(dst, j, &d1, &m1);
        for (int l = 0; l < 32; ++l) {
          const float v = src[kSubK4 * j + l];
          codes[half][l] = d1 > 0.0f ? round_clamped((v + m1) / d1, 0, 15) : 0;
        }
      }
      for (int l = 0; l < 32; ++l) {
        qs[32 * c + l] = static_cast<uint8_t>(codes[0][l] | (codes[1][l] << 4));
      }
    }
  }
}

// Q6_K: per 16-element sub-block a least-squares symmetric scale (fit_symmetric_sub); the
// 16 scales are quantized to int8 against d = -(signed largest scale)/128 (stored as f16,
// codes rounded against the stored value), then every element is re-coded against the
// exact dequantized sub-block scale d*sc.
void quantize_q6_k(const float* src, uint8_t* dst, int64_t n) {
  constexpr int kSubs = kQK_K / kSubK6;
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K, dst += kQ6_KBytes) {
    float a[kSubs];
    float amax = 0.0f, max = 0.0f;
    for (int s = 0; s < kSubs; ++s) {
      a[s] = fit_symmetric_sub(src + kSubK6 * s, kSubK6);
      if (amax < std::fabs(a[s])) {
        amax = std::fabs(a[s]);
        max = a[s];
      }
    }
    const uint16_t d16 = fp32_to_fp16(max / -128);
    const float d = fp16_to_fp32(d16);
    store_u16(dst + 208, d16);
    int8_t sc[kSubs];
    for (int s = 0; s < kSubs; ++s) {
      sc[s] = static_cast<int8_t>(d != 0.0f ? round_clamped(a[s] / d, -128, 127) : 0);
    }
    std::memcpy(dst + 192, sc, sizeof(sc));
    int L[kQK_K];  // codes + 32, in [0, 63]
    for (int e = 0; e < kQK_K; ++e) {
      const float step = d * sc[e / kSubK6];
      L[e] = (step != 0.0f ? round_clamped(src[e] / step, -32, 31) : 0) + 32;
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = dst + 64 * h;
      uint8_t* qh = dst + 128 + 32 * h;
      const int* q = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((q[l] & 0xF) | ((q[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q[l + 32] & 0xF) | ((q[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q[l] >> 4) | ((q[l + 32] >> 4) << 2) |
                                     ((q[l + 64] >> 4) << 4) | ((q[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace geist::quant_detail
