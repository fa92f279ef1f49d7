// Software prefetch for a decode kernel's one pass over a weight matrix (GROUPS16 and the other
// repacked decode layouts): each weight byte is read once per call, so without help the core
// waits on DRAM at every 4 KiB page, where the hardware prefetchers stop and ramp up again.
// The stream is fetched far ahead into L2 (enough lines in flight to cover DRAM latency; L2
// tracks far more misses than L1); a kernel that computes long on each block (Q8_0's two
// activation planes) also fetches a little ahead from L2 into L1. Measured on the 2-core
// AVX-512 VM with bench/matmul_speed over a ring of matrices larger than L3 (RING_MB,
// docs/BENCHMARKS.md "Session 24"): against the former single L1 prefetch a few KiB ahead,
// Q8_0 at 4 / 8 tokens 1.05 / 1.38-1.55 -> 0.51-0.74 / 0.74-1.07 ms for 8192 x 2048; the near
// prefetch helps only Q8_0 and slowed the small-block types at one token. Prefetches never
// fault, so reading past the matrix's end is harmless.
#pragma once

#include <cstdint>

namespace geist::simd {

constexpr int64_t kPrefetchFarBytes = 16384;  // into L2
constexpr int64_t kPrefetchNearBytes = 2048;  // into L1 (near = true)

// Prefetches the `bytes` (a multiple of 64) that lie kPrefetchFarBytes (and with near,
// kPrefetchNearBytes) past p: call once per step of `bytes` through a stream.
inline void prefetch_stream(const uint8_t* p, int64_t bytes, bool near = false) {
  for (int64_t l = 0; l < bytes; l += 64) {
    __builtin_prefetch(p + kPrefetchFarBytes + l, 0, 2);
    if (near) __builtin_prefetch(p + kPrefetchNearBytes + l, 0, 3);
  }
}

}  // namespace geist::simd
