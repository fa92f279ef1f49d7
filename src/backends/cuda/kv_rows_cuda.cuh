// F16 / F32 KV rows as the fast attention kernels read them (kv_attn_decode_cuda.cu,
// kv_attn_mma_cuda.cu): a position's row address in the lo / hi segments, and whether a
// KvDevSrc can be read this way at all.
#pragma once

#include <cstdint>

#include "backends/cuda/cuda_kernels.h"

namespace geist::cuda::kvrows {

// A row segment pair of one element type (F16 or F32).
struct Rows {
  const uint8_t* lo;
  const uint8_t* hi;
  int64_t lo_bytes, hi_bytes;  // row bytes
  int32_t lo_first, hi_first;
  int32_t lo_ring, hi_ring;
  int32_t split;
};

__device__ __forceinline__ const uint8_t* row_at(const Rows& r, int32_t p) {
  const bool lo = p < r.split;
  int64_t i = p - (lo ? r.lo_first : r.hi_first);
  const int32_t ring = lo ? r.lo_ring : r.hi_ring;
  if (ring > 0) i %= ring;
  return (lo ? r.lo : r.hi) + i * (lo ? r.lo_bytes : r.hi_bytes);
}

// The segments' rows as the fast kernels read them; false when they cannot (another
// encoding, a key reference, or rows not 16-byte aligned for the vector loads). A function
// of the cache's mode and shape only, never of the call's tokens.
inline bool rows_of(const KvDevSrc& s, int32_t hd, int32_t n_head_kv, bool* f16, Rows* r) {
  const KvDevSeg* segs[2] = {&s.lo, &s.hi};
  const int n = s.split < INT32_MAX ? 2 : 1;
  const KvEnc enc = s.lo.enc;
  if (enc != KvEnc::F16 && enc != KvEnc::F32) return false;
  const int64_t es = enc == KvEnc::F16 ? 2 : 4;
  for (int i = 0; i < n; ++i) {
    const KvDevSeg& g = *segs[i];
    if (g.enc != enc || g.data == nullptr || reinterpret_cast<uintptr_t>(g.data) % 16 != 0 ||
        g.row_bytes % 16 != 0 || g.row_bytes < es * hd * n_head_kv) {
      return false;
    }
  }
  if ((es * hd) % 16 != 0) return false;
  *f16 = enc == KvEnc::F16;
  r->lo = s.lo.data;
  r->lo_bytes = s.lo.row_bytes;
  r->lo_first = s.lo.first;
  r->lo_ring = s.lo.ring;
  r->hi = n == 2 ? s.hi.data : s.lo.data;
  r->hi_bytes = n == 2 ? s.hi.row_bytes : s.lo.row_bytes;
  r->hi_first = n == 2 ? s.hi.first : s.lo.first;
  r->hi_ring = n == 2 ? s.hi.ring : s.lo.ring;
  r->split = s.split;
  return true;
}

}  // namespace geist::cuda::kvrows
