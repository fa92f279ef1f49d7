// The KV byte encodings of kernels/attention_kv.h: quantizers (row blocks, KIVI channel
// groups), decoders and the RoPE-aware key reference. The attention kernels that read these
// bytes are in attention_kv.cpp.
#include "kernels/kv_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/status.h"
#include "kernels/quant.h"

namespace geist {
namespace kv_codec {

float half_round(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

// In place x = H x / sqrt(n) for the n-point Walsh-Hadamard matrix H (n = 8, 16, 32):
// orthonormal and its own inverse. Spreads an outlier channel over the whole block, so one
// shared scale fits the block.
void fwht(float* x, int32_t n) {
  for (int32_t len = 1; len < n; len *= 2) {
    for (int32_t i = 0; i < n; i += 2 * len) {
      for (int32_t j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
    }
  }
  const float norm = n == 32 ? 0.17677669529663687f : n == 16 ? 0.25f : 0.35355339059327373f;
  for (int32_t i = 0; i < n; ++i) x[i] *= norm;
}

// Value i of a block.
float block_value(KvEnc e, const uint8_t* blk, int32_t i) {
  switch (e) {
    case KvEnc::Q8:
      return fp16_to_fp32(load_u16(blk)) * static_cast<float>(static_cast<int8_t>(blk[2 + i]));
    case KvEnc::Q8A:
      return fp16_to_fp32(load_u16(blk + 2)) +
             fp16_to_fp32(load_u16(blk)) * static_cast<float>(blk[4 + i]);
    case KvEnc::Q4: {
      const int32_t q = (blk[2 + i / 2] >> ((i % 2) * 4)) & 0xF;
      return fp16_to_fp32(load_u16(blk)) * static_cast<float>(q - 8);
    }
    default: {
      const int32_t bits = enc_bits(e);
      const int32_t bit = i * bits;
      const int32_t q = (blk[4 + bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
      return fp16_to_fp32(load_u16(blk + 2)) + fp16_to_fp32(load_u16(blk)) * static_cast<float>(q);
    }
  }
}

void dequant_segment(const KvSegment& s, int32_t r, int32_t off, int32_t n, float* dst) {
  switch (s.enc) {
    case KvEnc::F32:
      std::memcpy(dst, s.data + r * s.row_bytes + off * 4, static_cast<size_t>(n) * 4);
      return;
    case KvEnc::F16: {
      const uint8_t* row = s.data + r * s.row_bytes;
      for (int32_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(row + (off + i) * 2));
      return;
    }
    case KvEnc::CH4:
    case KvEnc::CH2: {
      const int64_t bb = block_bytes(s.enc, kKvBlock);
      const uint8_t* group = s.data + (r / kKvBlock) * (bb * s.n_chan);
      for (int32_t i = 0; i < n; ++i) {
        dst[i] = block_value(s.enc, group + (off + i) * bb, r % kKvBlock);
      }
      return;
    }
    case KvEnc::Q8:
    case KvEnc::Q8A:
    case KvEnc::Q4: {
      const int32_t B = s.block;
      const int64_t bb = block_bytes(s.enc, B);
      const uint8_t* row = s.data + r * s.row_bytes;
      float blk[kKvBlock];
      for (int32_t b0 = off / B * B; b0 < off + n; b0 += B) {
        for (int32_t i = 0; i < B; ++i) blk[i] = block_value(s.enc, row + (b0 / B) * bb, i);
        fwht(blk, B);
        const int32_t lo = std::max(off, b0), hi = std::min(off + n, b0 + B);
        for (int32_t c = lo; c < hi; ++c) dst[c - off] = blk[c - b0];
      }
      return;
    }
    default: {
      const int32_t B = s.block;
      const int64_t bb = block_bytes(s.enc, B);
      const uint8_t* row = s.data + r * s.row_bytes;
      for (int32_t i = 0; i < n; ++i) {
        const int32_t c = off + i;
        dst[i] = block_value(s.enc, row + (c / B) * bb, c % B);
      }
      return;
    }
  }
}

}  // namespace kv_codec

namespace {

using namespace kv_codec;

// x[i * stride] for i < n (n <= kKvBlock) into an asymmetric b-bit block. The scale and min
// are rounded to f16 before the values are coded against them, so decoding uses exactly the
// numbers the codes were chosen for.
void quantize_asym(const float* x, int64_t stride, int32_t n, int32_t bits, uint8_t* dst) {
  float mn = x[0], mx = x[0];
  for (int32_t i = 1; i < n; ++i) {
    mn = std::min(mn, x[i * stride]);
    mx = std::max(mx, x[i * stride]);
  }
  const int32_t qmax = (1 << bits) - 1;
  const float min16 = half_round(mn);
  const float scale16 = half_round((mx - min16) / static_cast<float>(qmax));
  store_u16(dst, fp32_to_fp16(scale16));
  store_u16(dst + 2, fp32_to_fp16(min16));
  uint8_t* packed = dst + 4;
  std::memset(packed, 0, static_cast<size_t>((n * bits + 7) / 8));
  const float inv = scale16 > 0 ? 1.0f / scale16 : 0.0f;
  for (int32_t i = 0; i < n; ++i) {
    const float qf = std::nearbyint((x[i * stride] - min16) * inv);
    const int32_t q = std::clamp(static_cast<int32_t>(qf), 0, qmax);
    const int32_t bit = i * bits;
    packed[bit / 8] = static_cast<uint8_t>(packed[bit / 8] | (q << (bit % 8)));
  }
}

void quantize_q8(const float* x, int32_t n, uint8_t* dst) {
  float amax = 0;
  for (int32_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = half_round(amax / 127.0f);
  store_u16(dst, fp32_to_fp16(d));
  const float inv = d > 0 ? 1.0f / d : 0.0f;
  auto* q = reinterpret_cast<int8_t*>(dst + 2);
  std::memset(q, 0, static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inv), -127.0f, 127.0f));
  }
}

// Asymmetric 8-bit, like quantize_asym with byte codes (scale and min rounded to f16 first).
void quantize_q8a(const float* x, int32_t n, uint8_t* dst) {
  std::memset(dst + 4, 0, static_cast<size_t>(n));
  float mn = x[0], mx = x[0];
  for (int32_t i = 1; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  const float min16 = half_round(mn);
  const float scale16 = half_round((mx - min16) / 255.0f);
  store_u16(dst, fp32_to_fp16(scale16));
  store_u16(dst + 2, fp32_to_fp16(min16));
  const float inv = scale16 > 0 ? 1.0f / scale16 : 0.0f;
  for (int32_t i = 0; i < n; ++i) {
    dst[4 + i] =
        static_cast<uint8_t>(std::clamp(std::nearbyint((x[i] - min16) * inv), 0.0f, 255.0f));
  }
}

// Symmetric 4-bit: the value of largest magnitude maps to -8 (its sign chosen so), which uses
// the asymmetric code range [-8, 7] fully for the extreme value.
void quantize_q4(const float* x, int32_t n, uint8_t* dst) {
  float m = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
  }
  const float d = half_round(m / -8.0f);
  store_u16(dst, fp32_to_fp16(d));
  const float inv = d != 0 ? 1.0f / d : 0.0f;
  uint8_t* q = dst + 2;
  std::memset(q, 0x88, static_cast<size_t>(n / 2));  // padding decodes to 0
  for (int32_t i = 0; i < n; ++i) {
    const int32_t v = std::clamp(static_cast<int32_t>(std::nearbyint(x[i] * inv)) + 8, 0, 15);
    const int32_t sh = (i % 2) * 4;
    q[i / 2] = static_cast<uint8_t>((q[i / 2] & ~(0xF << sh)) | (v << sh));
  }
}

}  // namespace

using namespace kv_codec;

int32_t kv_block_for_head_dim(int32_t head_dim) {
  if (head_dim <= 0 || head_dim >= kKvBlock) return kKvBlock;
  const int32_t low = head_dim & -head_dim;  // largest power of two dividing head_dim
  return std::max(low, 8);
}

int64_t kv_row_bytes(KvEnc e, int32_t n, int32_t block) {
  GEIST_CHECK(valid_block(block), "kv_row_bytes: block must be 8, 16 or 32");
  const int64_t blocks = (n + block - 1) / block;
  switch (e) {
    case KvEnc::F32:
      return int64_t{n} * 4;
    case KvEnc::F16:
      return int64_t{n} * 2;
    case KvEnc::Q8:
    case KvEnc::Q8A:
    case KvEnc::Q4:
    case KvEnc::A4:
    case KvEnc::A2:
      return blocks * block_bytes(e, block);
    default:
      GEIST_CHECK(false, "kv_row_bytes: not a row encoding");
      return 0;
  }
}

int64_t kv_group_bytes(KvEnc e, int32_t n_chan) {
  GEIST_CHECK(e == KvEnc::CH4 || e == KvEnc::CH2, "kv_group_bytes: not a channel encoding");
  return block_bytes(e, kKvBlock) * n_chan;
}

void kv_quantize_row(KvEnc e, const float* x, int32_t n, uint8_t* dst, int32_t block) {
  GEIST_CHECK(valid_block(block), "kv_quantize_row: block must be 8, 16 or 32");
  switch (e) {
    case KvEnc::F32:
      std::memcpy(dst, x, static_cast<size_t>(n) * 4);
      return;
    case KvEnc::F16:
      for (int32_t i = 0; i < n; ++i) store_u16(dst + 2 * i, fp32_to_fp16(x[i]));
      return;
    case KvEnc::Q8:
    case KvEnc::Q8A:
    case KvEnc::Q4:
    case KvEnc::A4:
    case KvEnc::A2: {
      const int64_t bb = block_bytes(e, block);
      for (int32_t b0 = 0; b0 < n; b0 += block) {
        const int32_t m = std::min(block, n - b0);
        uint8_t* blk = dst + (b0 / block) * bb;
        if (is_rotated(e)) {
          float rot[kKvBlock] = {};  // a short last block is padded with zeros
          std::memcpy(rot, x + b0, static_cast<size_t>(m) * sizeof(float));
          fwht(rot, block);
          if (e == KvEnc::Q8) {
            quantize_q8(rot, block, blk);
          } else if (e == KvEnc::Q8A) {
            quantize_q8a(rot, block, blk);
          } else {
            quantize_q4(rot, block, blk);
          }
        } else {
          std::memset(blk + 4, 0, static_cast<size_t>(block * enc_bits(e) / 8));
          quantize_asym(x + b0, 1, m, enc_bits(e), blk);
        }
      }
      return;
    }
    default:
      GEIST_CHECK(false, "kv_quantize_row: not a row encoding");
  }
}

void kv_quantize_group(KvEnc e, const float* x, int64_t x_stride, int32_t n_chan, uint8_t* dst) {
  GEIST_CHECK(e == KvEnc::CH4 || e == KvEnc::CH2, "kv_quantize_group: not a channel encoding");
  const int64_t bb = block_bytes(e, kKvBlock);
  for (int32_t c = 0; c < n_chan; ++c) {
    quantize_asym(x + c, x_stride, kKvBlock, enc_bits(e), dst + c * bb);
  }
}

void kv_dequantize(const KvSource& src, int32_t p, int32_t off, int32_t n, float* dst) {
  const KvSegment& s = segment_of(src, p);
  dequant_segment(s, static_cast<int32_t>(seg_row(s, p)), off, n, dst);
  if (src.ref.c == nullptr || p >= src.split) return;
  float rc[2 * kKvBlock];
  for (int32_t i = 0; i < n; i += 2 * kKvBlock) {
    const int32_t m = std::min(n - i, 2 * kKvBlock);
    kv_ref_row(src.ref, p, off + i, m, rc);
    for (int32_t j = 0; j < m; ++j) dst[i + j] += rc[j];
  }
}

void kv_rope_table(const RopeParams& p, int32_t n_pos, float* out) {
  const int32_t half = p.n_rot / 2;
  for (int32_t pos = 0; pos < n_pos; ++pos) {
    for (int32_t i = 0; i < half; ++i) {
      // rope()'s expression, term for term, so the floats are its own.
      double theta = static_cast<double>(pos) * p.freq_scale *
                     std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
      if (p.freq_factors) theta /= p.freq_factors[i];
      out[(int64_t{pos} * half + i) * 2] = static_cast<float>(std::cos(theta)) * p.mscale;
      out[(int64_t{pos} * half + i) * 2 + 1] = static_cast<float>(std::sin(theta)) * p.mscale;
    }
  }
}

void kv_ref_row(const KvKeyRef& ref, int32_t p, int32_t off, int32_t n, float* dst) {
  const int32_t half = ref.n_rot / 2;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t ch = off + i;
    const float x = fp16_to_fp32(load_u16(ref.c + ch * 2));
    const int32_t d = ref.n_rot > 0 ? ch % ref.head_dim : ch;
    if (d >= ref.n_rot) {
      dst[i] = x;
      continue;
    }
    // d's pair: NORMAL (2j, 2j + 1), NEOX (j, j + half); partner at ch + dp.
    const bool first = ref.neox ? d < half : d % 2 == 0;
    const int32_t j = ref.neox ? (first ? d : d - half) : d / 2;
    const int32_t dp = ref.neox ? (first ? half : -half) : (first ? 1 : -1);
    const float y = fp16_to_fp32(load_u16(ref.c + (ch + dp) * 2));
    const float co = ref.cs[(int64_t{p} * half + j) * 2];
    const float si = ref.cs[(int64_t{p} * half + j) * 2 + 1];
    dst[i] = first ? x * co - y * si : y * si + x * co;
  }
}

}  // namespace geist
