// Software prefetch for a decode kernel's one pass over a weight matrix (GROUPS16 and the other
// repacked decode layouts): each weight byte is read once per call, so without help the core
// waits on DRAM at every 4 KiB page, where the hardware prefetchers stop and ramp up again.
// Two distances: far ahead into L2 (enough lines in flight to cover DRAM latency; L2 tracks
// far more misses than L1), and a little ahead from L2 into L1. Measured on the 2-core AVX-512
// VM with bench/matmul_speed over a ring of matrices larger than L3 (RING_MB,
// docs/BENCHMARKS.md "Session 24"): against one L1 prefetch 16 blocks ahead, Q8_0 at 4 tokens
// 1.05 -> 0.50-0.74 ms, 8 tokens 1.38-1.55 -> 0.74-1.0 ms for 8192 x 2048; 1 token no worse.
// Prefetches never fault, so reading past the matrix's end is harmless.
#pragma once

#include <cstdint>

namespace geist::simd {

constexpr int64_t kPrefetchFarBytes = 16384;  // into L2
constexpr int64_t kPrefetchNearBytes = 2048;  // into L1

// Prefetches the `bytes` (a multiple of 64) that lie kPrefetchFarBytes and kPrefetchNearBytes
// past p: call once per step of `bytes` through a stream.
inline void prefetch_stream(const uint8_t* p, int64_t bytes) {
  for (int64_t l = 0; l < bytes; l += 64) {
    __builtin_prefetch(p + kPrefetchFarBytes + l, 0, 2);
    __builtin_prefetch(p + kPrefetchNearBytes + l, 0, 3);
  }
}

}  // namespace geist::simd
