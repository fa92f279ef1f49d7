#include "cache/image_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>
#include <system_error>
#include <utility>

namespace geist_cache {

namespace {
constexpr uintptr_t kHugePage = uintptr_t{2} << 20;  // x86-64 / arm64 with 4 KiB pages
}  // namespace

void advise_huge_pages(void* p, size_t n) {
#ifdef MADV_HUGEPAGE
  if (p == nullptr || n < 2 * kHugePage) return;
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (b + kHugePage - 1) & ~(kHugePage - 1), hi = (b + n) & ~(kHugePage - 1);
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)p;
  (void)n;
#endif
}

void fresh_buffer(std::vector<uint8_t>* v, size_t n) { fresh_buffer(v, n, n); }

void fresh_buffer(std::vector<uint8_t>* v, size_t n, size_t capacity) {
  std::vector<uint8_t> fresh;
  fresh.reserve(std::max(n, capacity));  // allocated, not yet touched (a fresh mapping)
  advise_huge_pages(fresh.data(), fresh.capacity());
  fresh.resize(n);  // the first touch: 2 MiB at a time where granted
  v->swap(fresh);
}

std::shared_ptr<BufferPool> BufferPool::create(size_t max_buffers, size_t max_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_buffers, max_bytes));
}

BufferPool::~BufferPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  warm_cv_.notify_all();
  if (warm_thread_.joinable()) warm_thread_.join();
}

size_t BufferPool::warm_capacity(size_t n) {
  // Headroom for the next image of a conversation that grew by a turn: 1/16 of it, 2-16 MiB.
  const size_t head = std::clamp(n / 16, 2 * kHugePage, 8 * kHugePage);
  return (n + head + kHugePage - 1) / kHugePage * kHugePage;
}

bool BufferPool::holds_locked(size_t n) const {
  for (const auto& v : spare_) {
    if (v.capacity() >= n) return true;
  }
  return false;
}

void BufferPool::keep_warm(size_t n) {
  if (n == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_ || holds_locked(n)) return;
  warm_want_ = n;
  if (!warm_thread_.joinable()) {
    try {
      warm_thread_ = std::thread([this] { warm_worker(); });
    } catch (const std::system_error&) {
      warm_want_ = 0;  // no thread: buffers stay faulted in on the caller's path
      return;
    }
  }
  warm_cv_.notify_all();
}

void BufferPool::wait_warm() {
  std::unique_lock<std::mutex> lock(mu_);
  warm_cv_.wait(lock, [&] { return stop_ || (warm_want_ == 0 && !warm_busy_); });
}

void BufferPool::warm_worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    warm_cv_.wait(lock, [&] { return stop_ || warm_want_ != 0; });
    if (stop_) break;
    const size_t n = warm_want_;
    warm_want_ = 0;
    const size_t cap = warm_capacity(n);
    if (holds_locked(n) || spare_.size() >= max_buffers_ || spare_bytes_ + cap > max_bytes_) {
      warm_cv_.notify_all();
      continue;
    }
    warm_busy_ = true;
    lock.unlock();
    std::vector<uint8_t> v;
    try {
      fresh_buffer(&v, cap, cap);  // every page touched: take() resizes within it
    } catch (const std::bad_alloc&) {
      v = {};
    }
    recycle(std::move(v));
    lock.lock();
    warm_busy_ = false;
    warm_cv_.notify_all();
  }
}

std::vector<uint8_t> BufferPool::take(size_t n) {
  std::vector<uint8_t> v;
  if (n == 0) return v;
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = spare_.size();
    for (size_t i = 0; i < spare_.size(); ++i) {
      if (spare_[i].capacity() >= n &&
          (best == spare_.size() || spare_[i].capacity() < spare_[best].capacity())) {
        best = i;
      }
    }
    if (best < spare_.size()) {
      v = std::move(spare_[best]);
      spare_.erase(spare_.begin() + static_cast<std::ptrdiff_t>(best));
      spare_bytes_ -= v.capacity();
    }
  }
  if (v.capacity() >= n) {
    v.resize(n);  // within its capacity: no allocation, the pages are resident
  } else {
    const size_t cap = n >= 2 * kHugePage ? (n + kHugePage - 1) / kHugePage * kHugePage : n;
    fresh_buffer(&v, n, cap);
  }
  return v;
}

void BufferPool::recycle(std::vector<uint8_t> v) {
  if (v.capacity() == 0) return;
  std::vector<uint8_t> drop;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  if (spare_.size() < max_buffers_ && spare_bytes_ + v.capacity() <= max_bytes_) {
    try {
      spare_.reserve(max_buffers_);
    } catch (const std::bad_alloc&) {
      return;  // v is freed
    }
    spare_bytes_ += v.capacity();
    spare_.push_back(std::move(v));
  } else {
    drop = std::move(v);
  }
}

Image BufferPool::share(std::vector<uint8_t> v) {
  std::weak_ptr<BufferPool> pool = weak_from_this();
  // If make-ing the control block throws, shared_ptr calls the deleter itself.
  auto* p = new std::vector<uint8_t>(std::move(v));
  return Image(p, [pool](const std::vector<uint8_t>* q) {
    auto* m = const_cast<std::vector<uint8_t>*>(q);
    if (auto alive = pool.lock()) alive->recycle(std::move(*m));
    delete m;
  });
}

size_t BufferPool::spare_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spare_bytes_;
}

size_t BufferPool::spare_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spare_.size();
}

}  // namespace geist_cache
