// A persistent fork-join pool. The calling thread takes part as thread 0, so a pool of one
// thread runs everything inline. run() does not allocate and, while the workers are awake
// (back-to-back ops of a forward), takes no lock and makes no system call.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace geist {

class ThreadPool {
 public:
  // n_threads <= 0 selects std::thread::hardware_concurrency().
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls f(thread_index, n_threads) once on every thread and returns when all are done.
  // Not reentrant: f must not call run() on the same pool.
  template <class F>
  void run(F&& f) {
    using Fn = std::remove_reference_t<F>;
    run_raw([](void* ctx, int i, int n) { (*static_cast<Fn*>(ctx))(i, n); }, &f);
  }

  // Splits [0, n) into n_threads contiguous ranges and calls f(begin, end) on each non-empty
  // one. The split depends only on n and n_threads.
  template <class F>
  void parallel_for(int64_t n, F&& f) {
    run([&](int i, int nt) {
      const int64_t begin = n * i / nt;
      const int64_t end = n * (i + 1) / nt;
      if (begin < end) f(begin, end);
    });
  }

 private:
  using RawFn = void (*)(void* ctx, int thread_index, int n_threads);
  void run_raw(RawFn fn, void* ctx);
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  // Dispatch is lock-free while the workers spin: run_raw() writes fn_ / ctx_, then bumps
  // generation_; a spinning worker sees the new generation and reads them (nobody writes them
  // again before every worker has finished the run, pending_). A worker that spun too long
  // sleeps on cv_start_ and counts itself in sleepers_; run_raw() takes the lock and notifies
  // only when someone sleeps. Both sides pair a seq_cst store with a seq_cst load of the
  // other's variable (generation_ / sleepers_, pending_ / caller_waits_), so a wake-up is
  // never lost.
  RawFn fn_ = nullptr;
  void* ctx_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};            // workers still running the current generation
  std::atomic<int> sleepers_{0};           // workers asleep on cv_start_ (or about to be)
  std::atomic<bool> caller_waits_{false};  // run_raw() asleep on cv_done_ (or about to be)
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_start_;
  std::condition_variable cv_done_;
};

}  // namespace geist
