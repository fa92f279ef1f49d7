// Buffers for snapshot images and tier objects. They are fresh allocations of tens to hundreds
// of MiB, and on a VM their first touch is what a copy into them costs (a page fault per 4 KiB
// page, as slow as the copy itself or slower: docs/BENCHMARKS.md "Tiers"). Where the kernel
// grants transparent huge pages on request (`madvise` mode, Debian's default), asking for them
// makes it one fault per 2 MiB.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cache/tier.h"

namespace geist_cache {

// Replaces *v's contents with n zero bytes in a buffer of exactly its own (its old one is
// freed), faulted in as transparent huge pages where the kernel allows them. Throws
// std::bad_alloc like vector::resize.
void fresh_buffer(std::vector<uint8_t>* v, size_t n);
// The same with a capacity of at least `capacity` (>= n): the bytes past n are allocated but
// not touched.
void fresh_buffer(std::vector<uint8_t>* v, size_t n, size_t capacity);

// Asks for transparent huge pages over the whole 2 MiB pages inside [p, p + n) (best effort;
// nothing for less than 4 MiB). Call before the memory is first touched.
void advise_huge_pages(void* p, size_t n);

// Warm buffers for snapshot images and what the tiers read: a checkpoint's image, a tier
// hit's object and the image decoded from it are tens to hundreds of MiB, and a fresh
// buffer's first touch costs more than the snapshot or the read into it. Buffers handed out
// through share() come back when their last holder lets go (an image the RAM cache did not
// keep: at once; one it kept: when it is evicted), and the next image of as many bytes reuses
// one whose pages are resident. A fresh buffer of 4 MiB or more gets a capacity rounded up to
// a multiple of 2 MiB (at most 2 MiB past its size, never touched: the huge page its end falls
// in), so that the images of one model, which grow by a few KiB per token, fit in one another's
// buffers. At most max_buffers of at most max_bytes in all are kept: the memory a pool holds
// beyond what the cache accounts for. Thread-safe; made by create() (buffers it handed out may
// outlive it: they are freed then).
//
// keep_warm(n) makes the first touch happen off the caller's path: the pool's own thread
// (started by the first call) faults in a spare buffer that holds n bytes and a few MiB more
// (the next image of a growing conversation), unless a spare holds n already or the limits
// leave no room; the caller's next take() of up to that size then finds resident pages.
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static std::shared_ptr<BufferPool> create(size_t max_buffers, size_t max_bytes);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  // A buffer of n bytes, its contents unspecified: the smallest spare one that holds n, else a
  // fresh_buffer (its capacity rounded up as above). Throws std::bad_alloc like vector::resize.
  std::vector<uint8_t> take(size_t n);
  // An Image of v whose buffer comes back here when the Image's last copy is dropped.
  Image share(std::vector<uint8_t> v);
  // Keeps v for a later take() (when there is room), else frees it.
  void recycle(std::vector<uint8_t> v);
  // Asks the pool's thread for a resident spare of at least n bytes (see the class comment).
  // Returns at once; a later call while one is being made replaces its size.
  void keep_warm(size_t n);
  // Waits until no keep_warm() is pending (tests; a benchmark's setup).
  void wait_warm();
  size_t spare_bytes() const;
  size_t spare_count() const;
  // The capacity keep_warm(n) gives its buffer: n plus headroom, in whole 2 MiB pages.
  static size_t warm_capacity(size_t n);

 private:
  BufferPool(size_t max_buffers, size_t max_bytes)
      : max_buffers_(max_buffers), max_bytes_(max_bytes) {}
  bool holds_locked(size_t n) const;  // a spare of capacity >= n exists
  void warm_worker();
  const size_t max_buffers_, max_bytes_;
  mutable std::mutex mu_;
  std::vector<std::vector<uint8_t>> spare_;  // guarded by mu_
  size_t spare_bytes_ = 0;                   // capacity of spare_, guarded by mu_
  // keep_warm's thread, guarded by mu_: the size asked for (0: none), whether one is being
  // faulted in now, and stop.
  std::condition_variable warm_cv_;
  size_t warm_want_ = 0;
  bool warm_busy_ = false, stop_ = false;
  std::thread warm_thread_;
};

}  // namespace geist_cache
