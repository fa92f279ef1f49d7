// A persistent fork-join pool. The calling thread takes part as thread 0, so a pool of one
// thread runs everything inline. run() does not allocate.
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
  std::mutex mu_;
  std::condition_variable cv_start_;
  std::condition_variable cv_done_;
  RawFn fn_ = nullptr;
  void* ctx_ = nullptr;
  uint64_t generation_ = 0;  // guarded by mu_
  // Workers still running the current generation. Decremented without the lock so the caller
  // can spin on it; the last worker then notifies under mu_ (no lost wake-up).
  std::atomic<int> pending_{0};
  bool stop_ = false;                   // guarded by mu_
  std::atomic<uint64_t> published_{0};  // lock-free copy of generation_ for spinning workers
};

}  // namespace geist
