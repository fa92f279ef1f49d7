// Int16 unpackers of the weight types added after the first four (see matmul_simd.h, "integer
// path"): Q4_1, Q5_0, Q5_1, Q5_K, Q3_K, IQ4_NL, IQ4_XS. Each writes, per 32-element block, int16
// values w16, a float step dw and a float offset mw with W ~= dw * w16 + mw, sub-block scales
// folded into w16 (|w16| <= 4064, within the dot kernels' 4096). Integer work only, so every
// target writes the same values; foreach_target.h re-includes this file once per SIMD target
// (the loops are plain so that each target's compiler flags vectorise them).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/unpack_i16_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target must come first.
#include "hwy/highway.h"

#ifndef GEIST_KERNELS_SIMD_UNPACK_I16_SIMD_ONCE
#define GEIST_KERNELS_SIMD_UNPACK_I16_SIMD_ONCE
#include <cstring>

#include "base/status.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd/f16.h"
#include "kernels/simd/matmul_simd.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace geist::simd {
namespace HWY_NAMESPACE {

namespace qd = quant_detail;

namespace hn = hwy::HWY_NAMESPACE;
using D16 = hn::CappedTag<int16_t, 16>;  // at most half a block per vector, as matmul_simd.cpp
using DU8 = hn::Rebind<uint8_t, D16>;

// The 5th bits of 8 consecutive elements (one byte of a 5-bit format's qh) as int16 0 / 16.
struct HighBits {
  HWY_ALIGN int16_t v[256][8];
  HighBits() {
    for (int b = 0; b < 256; ++b) {
      for (int k = 0; k < 8; ++k) v[b][k] = static_cast<int16_t>(((b >> k) & 1) << 4);
    }
  }
};

// Q4_1 / Q5_1 (offset formats, value = q * d + m) and Q5_0 (value = (q - 16) * d): the 4 low
// bits of element j < 16 in the low nibble of qs[j], of element 16 + j in its high nibble; the
// 5-bit formats' 5th bit of element j at bit j of qh.
template <int kBytes, int kQs, int kQh, bool kMin, int kOff>
void UnpackLegacy(const uint8_t* row, int64_t n_in, int16_t* w, float* dw, float* mw) {
  static const HighBits high;
  const D16 d16;
  const DU8 du8;
  const size_t N = hn::Lanes(d16);
  const auto mask = hn::Set(d16, 15);
  const auto off = hn::Set(d16, kOff);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const uint8_t* blk = row + b * kBytes;
    int16_t* wb = w + b * 32;
    for (size_t j = 0; j < 16; j += N) {
      const auto v = hn::PromoteTo(d16, hn::LoadU(du8, blk + kQs + j));
      hn::StoreU(hn::Sub(hn::And(v, mask), off), d16, wb + j);
      hn::StoreU(hn::Sub(hn::ShiftRight<4>(v), off), d16, wb + 16 + j);
    }
    if constexpr (kQh > 0) {  // the 5th bits, 8 elements per qh byte
      const hn::CappedTag<int16_t, 8> d8;
      for (int k = 0; k < 4; ++k) {
        for (size_t e = 0; e < 8; e += hn::Lanes(d8)) {
          const auto sum =
              hn::Add(hn::LoadU(d8, wb + 8 * k + e), hn::Load(d8, high.v[blk[kQh + k]] + e));
          hn::StoreU(sum, d8, wb + 8 * k + e);
        }
      }
    }
    dw[b] = f16_to_f32(qd::load_u16(blk));
    mw[b] = kMin ? f16_to_f32(qd::load_u16(blk + 2)) : 0.0f;
  }
}

// Q5_K: the 6-bit sub-block scale folded into the values (|q * sc| <= 1953), d into dw, the
// min (-dmin * m) into mw, as UnpackQ4_K does.
void UnpackQ5_K(const uint8_t* row, int64_t n_in, int16_t* w, float* dw, float* mw) {
  for (int64_t sb = 0; sb < n_in / 256; ++sb) {
    const uint8_t* blk = row + sb * qd::kQ5_KBytes;
    const float d = f16_to_f32(qd::load_u16(blk));
    const float dmin = f16_to_f32(qd::load_u16(blk + 2));
    const uint8_t* qh = blk + 16;
    const uint8_t* qs = blk + 48;
    for (int c = 0; c < 4; ++c) {
      uint8_t sc[2], m[2];
      qd::k_scale_min(blk + 4, 2 * c, &sc[0], &m[0]);
      qd::k_scale_min(blk + 4, 2 * c + 1, &sc[1], &m[1]);
      int16_t* wb = w + sb * 256 + 64 * c;
      for (int l = 0; l < 32; ++l) {
        const int q0 = (qs[32 * c + l] & 0xF) | (((qh[l] >> (2 * c)) & 1) << 4);
        const int q1 = (qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
        wb[l] = static_cast<int16_t>(q0 * sc[0]);
        wb[32 + l] = static_cast<int16_t>(q1 * sc[1]);
      }
      for (int h = 0; h < 2; ++h) {
        dw[sb * 8 + 2 * c + h] = d;
        mw[sb * 8 + 2 * c + h] = -dmin * static_cast<float>(m[h]);
      }
    }
  }
}

// Q3_K: each 16-element sub-block's signed scale (s - 32) folded into the signed 3-bit codes
// (|code * (s - 32)| <= 128), d into dw. Element 128h + 32j + l: low bits (qs[32h + l] >> 2j) & 3,
// high bit (hmask[l] >> (4h + j)) & 1, code = low - 4 + 4 * high.
void UnpackQ3_K(const uint8_t* row, int64_t n_in, int16_t* w, float* dw, float* mw) {
  for (int64_t sb = 0; sb < n_in / 256; ++sb) {
    const uint8_t* blk = row + sb * qd::kQ3_KBytes;
    const float d = f16_to_f32(qd::load_u16(blk + 108));
    for (int h = 0; h < 2; ++h) {
      const uint8_t* qs = blk + 32 + 32 * h;
      for (int j = 0; j < 4; ++j) {
        int16_t* wb = w + sb * 256 + 128 * h + 32 * j;
        for (int half = 0; half < 2; ++half) {
          const int sc = qd::q3_k_scale(blk + 96, 8 * h + 2 * j + half) - 32;
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int code = ((qs[l] >> (2 * j)) & 3) - 4 + 4 * ((blk[l] >> (4 * h + j)) & 1);
            wb[l] = static_cast<int16_t>(code * sc);
          }
        }
        dw[sb * 8 + 4 * h + j] = d;
        mw[sb * 8 + 4 * h + j] = 0.0f;
      }
    }
  }
}

// IQ4_NL / IQ4_XS: the table values (times IQ4_XS's signed 32-block scale, <= 4064); a byte
// shuffle looks the 16 values up where the target has one.
inline void Iq4Block(const uint8_t* qs, int scale, int16_t* wb) {
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
  for (int j = 0; j < 16; ++j) {
    wb[j] = static_cast<int16_t>(qd::kIq4Values[qs[j] & 0xF] * scale);
    wb[j + 16] = static_cast<int16_t>(qd::kIq4Values[qs[j] >> 4] * scale);
  }
#else
  const hn::Full128<uint8_t> du8;
  const hn::Full128<int8_t> di8;
  const hn::Rebind<int16_t, hn::Full64<int8_t> > d16;  // 8 int16 lanes
  const auto table = hn::LoadU(di8, qd::kIq4Values);
  const auto q = hn::LoadU(du8, qs);
  const auto lo = hn::TableLookupBytes(table, hn::BitCast(di8, hn::And(q, hn::Set(du8, 15))));
  const auto hi = hn::TableLookupBytes(table, hn::BitCast(di8, hn::ShiftRight<4>(q)));
  const auto vs = hn::Set(d16, static_cast<int16_t>(scale));
  HWY_ALIGN int8_t v[32];
  hn::Store(lo, di8, v);
  hn::Store(hi, di8, v + 16);
  for (int k = 0; k < 32; k += 8) {
    hn::StoreU(hn::Mul(hn::PromoteTo(d16, hn::LoadU(hn::Full64<int8_t>(), v + k)), vs), d16,
               wb + k);
  }
#endif
}

void UnpackIQ4_NL(const uint8_t* row, int64_t n_in, int16_t* w, float* dw, float* mw) {
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const uint8_t* blk = row + b * qd::kIq4NlBytes;
    Iq4Block(blk + 2, 1, w + b * 32);
    dw[b] = f16_to_f32(qd::load_u16(blk));
    mw[b] = 0.0f;
  }
}

void UnpackIQ4_XS(const uint8_t* row, int64_t n_in, int16_t* w, float* dw, float* mw) {
  for (int64_t sb = 0; sb < n_in / 256; ++sb) {
    const uint8_t* blk = row + sb * qd::kIq4XsBytes;
    const float d = f16_to_f32(qd::load_u16(blk));
    for (int j = 0; j < 8; ++j) {
      Iq4Block(blk + 8 + 16 * j, qd::iq4_xs_scale(blk, j) - 32, w + sb * 256 + 32 * j);
      dw[sb * 8 + j] = d;
      mw[sb * 8 + j] = 0.0f;
    }
  }
}

void UnpackRowsI16More(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                       int16_t* w16, float* dw, float* mw) {
  const int64_t nb = n_in / 32;
  for (int r = 0; r < count; ++r) {
    const uint8_t* row = src + static_cast<size_t>(r) * row_bytes;
    int16_t* w = w16 + r * n_in;
    float* d = dw + r * nb;
    float* m = mw + r * nb;
    switch (t) {
      case GgmlType::Q4_1:
        UnpackLegacy<qd::kQ4_1Bytes, 4, 0, true, 0>(row, n_in, w, d, m);
        break;
      case GgmlType::Q5_0:
        UnpackLegacy<qd::kQ5_0Bytes, 6, 2, false, 16>(row, n_in, w, d, m);
        break;
      case GgmlType::Q5_1:
        UnpackLegacy<qd::kQ5_1Bytes, 8, 4, true, 0>(row, n_in, w, d, m);
        break;
      case GgmlType::Q5_K:
        UnpackQ5_K(row, n_in, w, d, m);
        break;
      case GgmlType::Q3_K:
        UnpackQ3_K(row, n_in, w, d, m);
        break;
      case GgmlType::IQ4_NL:
        UnpackIQ4_NL(row, n_in, w, d, m);
        break;
      case GgmlType::IQ4_XS:
        UnpackIQ4_XS(row, n_in, w, d, m);
        break;
      default:
        GEIST_CHECK(false, "unpack_rows_i16: type without an int16 unpacker");
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace geist::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace geist::simd {

HWY_EXPORT(UnpackRowsI16More);

void unpack_rows_i16_more(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                          int16_t* w16, float* dw, float* mw) {
  HWY_DYNAMIC_DISPATCH(UnpackRowsI16More)(t, src, row_bytes, count, n_in, w16, dw, mw);
}

}  // namespace geist::simd
#endif  // HWY_ONCE
