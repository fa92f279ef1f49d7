// Shared internals of the KV byte encodings (kernels/attention_kv.h): block sizes, the
// Walsh-Hadamard rotation, element decoders and segment addressing. Used by the encoders in
// kv_codec.cpp and the attention kernels in attention_kv.cpp; not a public interface.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/attention_kv.h"

namespace geist::kv_codec {

inline int32_t enc_bits(KvEnc e) {
  switch (e) {
    case KvEnc::A4:
    case KvEnc::CH4:
      return 4;
    case KvEnc::A2:
    case KvEnc::CH2:
      return 2;
    default:
      return 0;
  }
}

// Bytes of one block of `block` values (row encodings: the row's block length; CH: kKvBlock).
inline int64_t block_bytes(KvEnc e, int32_t block) {
  switch (e) {
    case KvEnc::Q8:
      return 2 + block;
    case KvEnc::Q8A:
      return 4 + block;
    case KvEnc::Q4:
      return 2 + block / 2;
    case KvEnc::A4:
    case KvEnc::A2:
    case KvEnc::CH4:
    case KvEnc::CH2:
      return 4 + block * enc_bits(e) / 8;
    default:
      return 0;
  }
}

inline bool valid_block(int32_t block) { return block == 8 || block == 16 || block == 32; }

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof v); }

inline const KvSegment& segment_of(const KvSource& src, int32_t p) {
  return p < src.split ? src.lo : src.hi;
}

// Row of position p in a segment (ring buffers wrap).
inline int64_t seg_row(const KvSegment& s, int32_t p) {
  const int64_t r = p - s.first;
  return s.ring > 0 ? r % s.ring : r;
}

inline bool is_rotated(KvEnc e) { return e == KvEnc::Q8 || e == KvEnc::Q8A || e == KvEnc::Q4; }

// x rounded to the nearest f16 value (scales and mins are stored in f16).
float half_round(float x);

// In place x = H x / sqrt(n) for the n-point Walsh-Hadamard matrix H (n = 8, 16, 32):
// orthonormal and its own inverse. Spreads an outlier channel over the whole block, so one
// shared scale fits the block.
void fwht(float* x, int32_t n);

// Value i of a block (still rotated for Q8/Q8A/Q4).
float block_value(KvEnc e, const uint8_t* blk, int32_t i);

// Values [off, off + n) of row r of a segment, decoded and un-rotated, into dst[n].
void dequant_segment(const KvSegment& s, int32_t r, int32_t off, int32_t n, float* dst);

}  // namespace geist::kv_codec
