// Host memory copies spread over a thread pool: a restore's state regions (tens to hundreds of
// MiB in a few dozen pieces) move at the machine's memory bandwidth instead of one core's
// (a single-threaded memcpy moves about 5 GB/s on a 16-core Xeon; docs/BENCHMARKS.md "Tiers").
// The bytes of all copies, in order, are cut into one contiguous range per thread, so every
// destination byte is written once, from its own source byte: the result is the serial loop's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/thread_pool.h"

namespace geist {

struct CopyRange {
  uint8_t* dst = nullptr;        // [n]
  const uint8_t* src = nullptr;  // [n]; no range overlaps another's destination
  size_t n = 0;
};

// Below this many bytes per thread, waking a thread costs more than its share of the copy.
constexpr size_t kParallelCopyMinBytes = size_t{1} << 20;

// How many threads copy `total` bytes on a pool of n_threads: 1 .. n_threads, at least
// kParallelCopyMinBytes each.
int parallel_copy_threads(size_t total, int n_threads);
// Where the range of thread ti of nt starts in the concatenated bytes (ti == nt: total):
// total * ti / nt rounded down to a 4 KiB multiple, so threads meet on page boundaries of
// page-aligned buffers and never share a cache line.
size_t parallel_copy_split(size_t total, int ti, int nt);
// Copies bytes [lo, hi) of the concatenation of c[0, n).
void copy_piece(const CopyRange* c, size_t n, size_t lo, size_t hi);
// Copies every range, on `pool` (its calling thread included) when there are enough bytes,
// else on the calling thread; pool nullptr: on the calling thread. Not reentrant on the pool
// (ThreadPool::run).
void parallel_copy(const CopyRange* c, size_t n, ThreadPool* pool);

}  // namespace geist
