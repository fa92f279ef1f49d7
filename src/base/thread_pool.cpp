#include "base/thread_pool.h"

namespace geist {

namespace {

// One step of a wait loop: a pause, and every kYieldEvery steps a yield, so that a waiter on
// an oversubscribed machine hands its core to the thread it waits for (or to another process)
// instead of burning its time slice; on an idle machine the yield returns at once.
constexpr int kYieldEvery = 128;

inline void cpu_relax(int spin) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
  if (spin % kYieldEvery == kYieldEvery - 1) std::this_thread::yield();
}

// Pause loops before sleeping (a pause is ~30 ns on the 2-core VM: ~600 / ~60 us). The caller
// waits for the workers' part of one op, which usually ends within microseconds of its own, and a
// futex wake costs tens of microseconds in a VM. A worker waits through the caller's serial work
// between ops and between steps; longer worker spins (~300 us) lost up to 2x at B = 8 decode on
// the loaded 2-core machine (docs/BENCHMARKS.md, branch b8), so it sleeps sooner.
constexpr int kCallerSpins = 20000;
constexpr int kWorkerSpins = 2000;

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (n_threads <= 0) n_threads = 1;
  n_threads_ = n_threads;
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_seq_cst);
    generation_.fetch_add(1, std::memory_order_seq_cst);
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_raw(RawFn fn, void* ctx) {
  if (n_threads_ == 1) {
    fn(ctx, 0, 1);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes fn_, ctx_ and pending_
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    // A sleeper checks generation_ under the lock before it waits: taking the lock orders this
    // notify after that check.
    { std::lock_guard<std::mutex> lock(mu_); }
    cv_start_.notify_all();
  }
  fn(ctx, 0, n_threads_);
  for (int spin = 0; spin < kCallerSpins; ++spin) {
    if (pending_.load(std::memory_order_acquire) == 0) return;
    cpu_relax(spin);
  }
  std::unique_lock<std::mutex> lock(mu_);
  caller_waits_.store(true, std::memory_order_seq_cst);
  cv_done_.wait(lock, [this] { return pending_.load(std::memory_order_seq_cst) == 0; });
  caller_waits_.store(false, std::memory_order_relaxed);
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kWorkerSpins; ++spin) {
      cpu_relax(spin);
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      cv_start_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    fn_(ctx_, index, n_threads_);
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        caller_waits_.load(std::memory_order_seq_cst)) {
      { std::lock_guard<std::mutex> lock(mu_); }
      cv_done_.notify_one();
    }
  }
}

}  // namespace geist
