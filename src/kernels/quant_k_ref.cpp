// Quantizers for Q2_K, Q3_K and Q5_K that follow ggml's reference quantizers
// (quantize_row_q{2,3,5}_K_ref), which llama-quantize runs when no importance matrix is given: the
// same searches, the same f32 operations in the same order, ggml's round-half-to-even
// (nearest_int), so that a round trip through geist and through llama.cpp writes the same codes
// for the same input (up to the compilers' contraction of multiply-adds).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace geist::quant_detail {
namespace {

constexpr float kGroupEps = 1e-15f;  // ggml's GROUP_MAX_EPS: below it a group counts as zero

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

// Weighted affine fit x ~ scale * L + min (L in [0, nmax], min <= 0) of n values: a first
// rounding on (max - min) / nmax, then nstep + 1 trial inverse steps (rmin + rdelta * is + nmax)
// / (max - min), each refit by weighted least squares (min pinned to 0 when it would be
// positive); keeps the fit of lowest weighted error (absolute error with use_mad). Returns the
// scale, *neg_min = -min. ggml's make_qkx2_quants.
float fit_affine_weighted(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                          float* neg_min, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::memset(L, 0, static_cast<size_t>(n));
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  uint8_t aux[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * aux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        std::memcpy(L, aux, static_cast<size_t>(n));
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// Symmetric fit x ~ scale * l (l in [-nmax, nmax - 1]) of n values, refined by up to 5 passes of
// coordinate moves that raise the x^2-weighted fit; L receives l + nmax. ggml's make_q3_quants
// with do_rmse.
float fit_symmetric_q3(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        const int new_l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Q2_K / Q3_K: codes of 256 elements into qs[64], element 128h + 32j + l at bits 2j of
// qs[32h + l].
void pack_low2(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t* q = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>(q[0] | (q[32] << 2) | (q[64] << 4) | (q[96] << 6));
    }
  }
}

}  // namespace

// Q2_K: per 16 elements an |x|-weighted affine fit with absolute error; the scales and mins
// coded in 4 bits against their maxima / 15, then every code re-rounded against the coded pair.
void quantize_q2_k(const float* src, uint8_t* dst, int64_t n) {
  constexpr float kQ4Scale = 15.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K, dst += kQ2_KBytes) {
    uint8_t L[kQK_K];
    float weights[16], mins[16], scales[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(src[16 * j + l]);
      scales[j] = fit_affine_weighted(16, 3, src + 16 * j, weights, L + 16 * j, &mins[j], -0.5f,
                                      0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    uint8_t* sc = dst;
    if (max_scale > 0) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < 16; ++j) sc[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      store_u16(dst + 80, fp32_to_fp16(max_scale / kQ4Scale));
    } else {
      std::memset(sc, 0, 16);
      store_u16(dst + 80, fp32_to_fp16(0.0f));
    }
    if (max_min > 0) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < 16; ++j) {
        sc[j] = static_cast<uint8_t>(sc[j] | (nearest_int(iscale * mins[j]) << 4));
      }
      store_u16(dst + 82, fp32_to_fp16(max_min / kQ4Scale));
    } else {
      store_u16(dst + 82, fp32_to_fp16(0.0f));
    }
    const float d_all = fp16_to_fp32(load_u16(dst + 80));
    const float dmin_all = fp16_to_fp32(load_u16(dst + 82));
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * (sc[j] & 0xF);
      if (!d) continue;
      const float dm = dmin_all * (sc[j] >> 4);
      for (int i = 0; i < 16; ++i) {
        L[16 * j + i] =
            static_cast<uint8_t>(clamp_int(nearest_int((src[16 * j + i] + dm) / d), 0, 3));
      }
    }
    pack_low2(L, dst + 16);
  }
}

// Q3_K: per 16 elements a symmetric fit; the 16 scales coded in 6 bits against
// d = -(signed largest) / 32, then every code re-rounded against d * (s - 32).
void quantize_q3_k(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K, dst += kQ3_KBytes) {
    int8_t L[kQK_K];
    float scales[16];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_symmetric_q3(16, 4, src + 16 * j, L + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    uint8_t* sc = dst + 96;
    std::memset(sc, 0, 12);
    if (max_scale) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < 16; ++j) {
        const int l = clamp_int(static_cast<int8_t>(nearest_int(iscale * scales[j])), -32, 31) + 32;
        if (j < 8) {
          sc[j] = static_cast<uint8_t>(l & 0xF);
        } else {
          sc[j - 8] = static_cast<uint8_t>(sc[j - 8] | ((l & 0xF) << 4));
        }
        sc[j % 4 + 8] = static_cast<uint8_t>(sc[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
      }
      store_u16(dst + 108, fp32_to_fp16(1 / iscale));
    } else {
      store_u16(dst + 108, fp32_to_fp16(0.0f));
    }
    const float d_all = fp16_to_fp32(load_u16(dst + 108));
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * static_cast<float>(q3_k_scale(sc, j) - 32);
      if (!d) continue;
      for (int i = 0; i < 16; ++i) {
        L[16 * j + i] = static_cast<int8_t>(clamp_int(nearest_int(src[16 * j + i] / d), -4, 3) + 4);
      }
    }
    uint8_t* hmask = dst;
    std::memset(hmask, 0, 32);
    uint8_t low[kQK_K];
    for (int e = 0; e < kQK_K; ++e) {
      int l = L[e];
      if (l > 3) {
        hmask[e % 32] = static_cast<uint8_t>(hmask[e % 32] | (1 << (e / 32)));
        l -= 4;
      }
      low[e] = static_cast<uint8_t>(l);
    }
    pack_low2(low, dst + 32);
  }
}

// Q5_K: per 32 elements a weighted affine fit (weights rms(x) + |x|, squared error); scales and
// mins coded in 6 bits against their maxima / 63, then every code re-rounded.
void quantize_q5_k(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K, dst += kQ5_KBytes) {
    uint8_t L[kQK_K];
    float mins[8], scales[8], weights[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      const float* x = src + 32 * j;
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += x[l] * x[l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[l]);
      scales[j] =
          fit_affine_weighted(32, 31, x, weights, L + 32 * j, &mins[j], -0.5f, 0.1f, 15, false);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t* sc = dst + 4;
    for (int j = 0; j < 8; ++j) {
      uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
      uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
      ls = ls < 63 ? ls : 63;
      lm = lm < 63 ? lm : 63;
      if (j < 4) {
        sc[j] = ls;
        sc[j + 4] = lm;
      } else {
        sc[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        sc[j - 4] = static_cast<uint8_t>(sc[j - 4] | ((ls >> 4) << 6));
        sc[j] = static_cast<uint8_t>(sc[j] | ((lm >> 4) << 6));
      }
    }
    store_u16(dst, fp32_to_fp16(max_scale / 63.0f));
    store_u16(dst + 2, fp32_to_fp16(max_min / 63.0f));
    for (int j = 0; j < 8; ++j) {
      uint8_t s, m;
      k_scale_min(sc, j, &s, &m);
      const float d = fp16_to_fp32(load_u16(dst)) * s;
      if (!d) continue;
      const float dm = fp16_to_fp32(load_u16(dst + 2)) * m;
      for (int i = 0; i < 32; ++i) {
        L[32 * j + i] =
            static_cast<uint8_t>(clamp_int(nearest_int((src[32 * j + i] + dm) / d), 0, 31));
      }
    }
    uint8_t* qh = dst + 16;
    uint8_t* ql = dst + 48;
    std::memset(qh, 0, 32);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        int l1 = L[64 * c + l], l2 = L[64 * c + 32 + l];
        if (l1 > 15) {
          l1 -= 16;
          qh[l] = static_cast<uint8_t>(qh[l] | (1 << (2 * c)));
        }
        if (l2 > 15) {
          l2 -= 16;
          qh[l] = static_cast<uint8_t>(qh[l] | (2 << (2 * c)));
        }
        ql[32 * c + l] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
    }
  }
}

}  // namespace geist::quant_detail
