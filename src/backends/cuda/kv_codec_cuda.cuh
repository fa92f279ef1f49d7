// Device-side KV encodings: the byte layouts of kernels/attention_kv.h (KvEnc), encoded and
// decoded inside CUDA kernels.
//
// The encoders are bitwise the CPU quantizers (kv_quantize_row / kv_quantize_group): the same
// sequential min / max / largest-magnitude scans, the same f16 rounding of scales and mins
// before coding, the same Walsh-Hadamard butterflies, and every multiply / add / divide an
// explicit round-to-nearest intrinsic so that nvcc cannot contract them into FMAs; rintf is
// the CPU's nearbyint in the default rounding mode. So a KV image written on the device is
// byte for byte the CPU's for the same input rows.
//
// The element decoder returns Q8 / Q8A / Q4 values in the rotated domain (the block's codes
// times its scale, not rotated back): attention rotates the query instead (q . H y = H q . y)
// and the accumulated values once at the end, as the CPU's SIMD kernel does.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/cuda_kernels.h"

namespace geist::cuda::kvdev {

constexpr int kG = kKvBlock;  // KIVI group / maximum block length

__device__ __forceinline__ float half_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short*>(p)));
}
__device__ __forceinline__ float half_round(float x) { return __half2float(__float2half_rn(x)); }
// p is 2-byte aligned: every f16 field of the layouts sits at an even offset of an even-sized
// block. (Two byte stores here came out with the low byte zeroed on sm_90, nvcc 12: one u16
// store it is.)
__device__ __forceinline__ void put_half(uint8_t* p, float x) {
  *reinterpret_cast<unsigned short*>(p) = __half_as_ushort(__float2half_rn(x));
}

// Element c of a plain (F16 / F32) row: F16 rounded to nearest even, or the float itself
// (kv_encode_rows, and the rope kernels that write a step's rows themselves).
__device__ __forceinline__ void kv_put(bool f16, uint8_t* row, int64_t c, float x) {
  if (f16) {
    reinterpret_cast<__half*>(row)[c] = __float2half_rn(x);
  } else {
    reinterpret_cast<float*>(row)[c] = x;
  }
}

__device__ __forceinline__ int enc_bits(KvEnc e) {
  return (e == KvEnc::A4 || e == KvEnc::CH4) ? 4 : (e == KvEnc::A2 || e == KvEnc::CH2) ? 2 : 0;
}

__host__ __device__ __forceinline__ bool is_rotated(KvEnc e) {
  return e == KvEnc::Q8 || e == KvEnc::Q8A || e == KvEnc::Q4;
}

// Bytes of one block of `block` values (attention_kv.cpp block_bytes).
__device__ __forceinline__ int block_bytes(KvEnc e, int block) {
  switch (e) {
    case KvEnc::Q8:
      return 2 + block;
    case KvEnc::Q8A:
      return 4 + block;
    case KvEnc::Q4:
      return 2 + block / 2;
    default:
      return 4 + block * enc_bits(e) / 8;
  }
}

// In place x = H x / sqrt(n), n = 8, 16 or 32 (attention_kv.cpp fwht, same butterflies).
__device__ __forceinline__ void fwht(float* x, int n) {
  for (int len = 1; len < n; len *= 2) {
    for (int i = 0; i < n; i += 2 * len) {
      for (int j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        x[j] = __fadd_rn(a, b);
        x[j + len] = __fsub_rn(a, b);
      }
    }
  }
  const float norm = n == 32 ? 0.17677669529663687f : n == 16 ? 0.25f : 0.35355339059327373f;
  for (int i = 0; i < n; ++i) x[i] = __fmul_rn(x[i], norm);
}

// std::min / std::max exactly (which operand wins for -0 vs +0 decides the stored f16 bits).
__device__ __forceinline__ float smin(float a, float b) { return b < a ? b : a; }
__device__ __forceinline__ float smax(float a, float b) { return a < b ? b : a; }

__device__ __forceinline__ float clampf(float x, float lo, float hi) {
  return x < lo ? lo : (hi < x ? hi : x);
}

// x[i * stride], i < n (n <= 32) -> {f16 scale; f16 min; packed bits}, bytes of a block of
// `block` values (codes past n stay 0). attention_kv.cpp quantize_asym.
__device__ inline void quantize_asym(const float* x, int stride, int n, int bits, int block,
                                     uint8_t* dst) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < n; ++i) {
    mn = smin(mn, x[i * stride]);
    mx = smax(mx, x[i * stride]);
  }
  const int qmax = (1 << bits) - 1;
  const float min16 = half_round(mn);
  const float scale16 = half_round(__fdiv_rn(__fsub_rn(mx, min16), static_cast<float>(qmax)));
  put_half(dst, scale16);
  put_half(dst + 2, min16);
  const float inv = scale16 > 0 ? __fdiv_rn(1.0f, scale16) : 0.0f;
  uint8_t packed[kG / 2] = {};  // [block * bits / 8] bytes, at most 16
  for (int i = 0; i < n; ++i) {
    const float qf = rintf(__fmul_rn(__fsub_rn(x[i * stride], min16), inv));
    int q = static_cast<int>(qf);
    q = q < 0 ? 0 : (q > qmax ? qmax : q);
    const int bit = i * bits;
    packed[bit / 8] = static_cast<uint8_t>(packed[bit / 8] | (q << (bit % 8)));
  }
  for (int i = 0; i < block * bits / 8; ++i) dst[4 + i] = packed[i];
}

// One rotated block (already through fwht) of `block` values. attention_kv.cpp quantize_q8 /
// quantize_q8a / quantize_q4.
__device__ inline void quantize_rotated(KvEnc e, const float* x, int block, uint8_t* dst) {
  if (e == KvEnc::Q8) {
    float amax = 0;
    for (int i = 0; i < block; ++i) amax = smax(amax, fabsf(x[i]));
    const float d = half_round(__fdiv_rn(amax, 127.0f));
    put_half(dst, d);
    const float inv = d > 0 ? __fdiv_rn(1.0f, d) : 0.0f;
    for (int i = 0; i < block; ++i) {
      const float q = clampf(rintf(__fmul_rn(x[i], inv)), -127.0f, 127.0f);
      dst[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  } else if (e == KvEnc::Q8A) {
    float mn = x[0], mx = x[0];
    for (int i = 1; i < block; ++i) {
      mn = smin(mn, x[i]);
      mx = smax(mx, x[i]);
    }
    const float min16 = half_round(mn);
    const float scale16 = half_round(__fdiv_rn(__fsub_rn(mx, min16), 255.0f));
    put_half(dst, scale16);
    put_half(dst + 2, min16);
    const float inv = scale16 > 0 ? __fdiv_rn(1.0f, scale16) : 0.0f;
    for (int i = 0; i < block; ++i) {
      const float q = clampf(rintf(__fmul_rn(__fsub_rn(x[i], min16), inv)), 0.0f, 255.0f);
      dst[4 + i] = static_cast<uint8_t>(q);
    }
  } else {  // Q4: the value of largest magnitude (the first such) maps to -8
    float m = 0;
    for (int i = 0; i < block; ++i) {
      if (fabsf(x[i]) > fabsf(m)) m = x[i];
    }
    const float d = half_round(__fdiv_rn(m, -8.0f));
    put_half(dst, d);
    const float inv = d != 0 ? __fdiv_rn(1.0f, d) : 0.0f;
    for (int i = 0; i < block; i += 2) {
      int lo = static_cast<int>(rintf(__fmul_rn(x[i], inv))) + 8;
      int hi = static_cast<int>(rintf(__fmul_rn(x[i + 1], inv))) + 8;
      lo = lo < 0 ? 0 : (lo > 15 ? 15 : lo);
      hi = hi < 0 ? 0 : (hi > 15 ? 15 : hi);
      dst[2 + i / 2] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// Channel ch of R_p c (KvKeyRef; n_rot 0: c itself), kv_ref_row's arithmetic: each product
// and sum rounded on its own, as the CPU's (no FMA).
__device__ __forceinline__ float ref_elem(const KvKeyRef& r, int32_t p, int32_t ch) {
  const float x = half_at(r.c + 2 * ch);
  if (r.n_rot == 0) return x;
  const int32_t d = ch % r.head_dim;
  if (d >= r.n_rot) return x;
  const int32_t half = r.n_rot / 2;
  const bool first = r.neox ? d < half : d % 2 == 0;
  const int32_t j = r.neox ? (first ? d : d - half) : d / 2;
  const int32_t dp = r.neox ? (first ? half : -half) : (first ? 1 : -1);
  const float y = half_at(r.c + 2 * (ch + dp));
  const float co = r.cs[(static_cast<int64_t>(p) * half + j) * 2];
  const float si = r.cs[(static_cast<int64_t>(p) * half + j) * 2 + 1];
  return first ? __fsub_rn(__fmul_rn(x, co), __fmul_rn(y, si))
               : __fadd_rn(__fmul_rn(y, si), __fmul_rn(x, co));
}

// Value c of the row / group entry r of a segment (rotated domain for Q8 / Q8A / Q4; see top).
__device__ __forceinline__ float seg_elem(const KvDevSeg& s, int64_t r, int c) {
  switch (s.enc) {
    case KvEnc::F32:
      return reinterpret_cast<const float*>(s.data + r * s.row_bytes)[c];
    case KvEnc::F16:
      return half_at(s.data + r * s.row_bytes + 2 * c);
    case KvEnc::CH4:
    case KvEnc::CH2: {
      const int bits = enc_bits(s.enc);
      const uint8_t* blk = s.data + (r / kG) * s.row_bytes + c * (4 + kG * bits / 8);
      const int bit = static_cast<int>(r % kG) * bits;
      const int q = (blk[4 + bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
      return __fadd_rn(half_at(blk + 2), __fmul_rn(half_at(blk), static_cast<float>(q)));
    }
    default:
      break;
  }
  const int B = s.block;
  const uint8_t* blk = s.data + r * s.row_bytes + (c / B) * block_bytes(s.enc, B);
  const int i = c % B;
  switch (s.enc) {
    case KvEnc::Q8:
      return __fmul_rn(half_at(blk), static_cast<float>(static_cast<int8_t>(blk[2 + i])));
    case KvEnc::Q8A:
      return __fadd_rn(half_at(blk + 2), __fmul_rn(half_at(blk), static_cast<float>(blk[4 + i])));
    case KvEnc::Q4: {
      const int q = (blk[2 + i / 2] >> ((i % 2) * 4)) & 0xF;
      return __fmul_rn(half_at(blk), static_cast<float>(q - 8));
    }
    default: {  // A4 / A2
      const int bits = enc_bits(s.enc);
      const int bit = i * bits;
      const int q = (blk[4 + bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
      return __fadd_rn(half_at(blk + 2), __fmul_rn(half_at(blk), static_cast<float>(q)));
    }
  }
}

// Value c of position p of a source (positions below split from lo, the rest from hi).
__device__ __forceinline__ float src_elem(const KvDevSrc& s, int p, int c) {
  const KvDevSeg& seg = p < s.split ? s.lo : s.hi;
  const int64_t r = p - seg.first;
  return seg_elem(seg, seg.ring > 0 ? r % seg.ring : r, c);
}

}  // namespace geist::cuda::kvdev
