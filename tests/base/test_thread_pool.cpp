#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"

namespace geist {
namespace {

TEST(ThreadPool, RunsEveryThreadIndexExactlyOnce) {
  for (int n : {1, 2, 3, 8}) {
    ThreadPool pool(n);
    ASSERT_EQ(pool.n_threads(), n);
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.run([&](int i, int nt) {
        ASSERT_EQ(nt, n);
        hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1);
    }
  }
}

TEST(ThreadPool, ParallelForCoversRangeWithoutOverlap) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 5, 1000}) {
    std::vector<int> seen(static_cast<size_t>(n), 0);
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)] += 1;
    });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], 1) << "index " << i;
  }
}

// Runs back to back (workers spinning), after pauses long enough for the workers to sleep, and
// with a slow worker (the caller sleeping on its done condition): every run sees every index
// once and returns only after all of them.
TEST(ThreadPool, NoRunLostAcrossSpinningAndSleepingWorkers) {
  for (int n : {2, 3}) {
    ThreadPool pool(n);
    int64_t total = 0;
    for (int rep = 0; rep < 300; ++rep) {
      if (rep % 50 == 7) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.run([&](int i, int) {
        if (i == n - 1 && rep % 50 == 13)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "run " << rep << " thread " << i;
        total += hits[static_cast<size_t>(i)].load();
      }
    }
    EXPECT_EQ(total, 300 * n);
  }
}

TEST(Status, CarriesCodeAndFormattedMessage) {
  Status s = Status::error(GEIST_E_FORMAT, "tensor '%s' has type %d", "blk.0.attn_q", 99);
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), GEIST_E_FORMAT);
  EXPECT_EQ(s.message(), "tensor 'blk.0.attn_q' has type 99");
  EXPECT_EQ(s.with_prefix("model.gguf").message(), "model.gguf: tensor 'blk.0.attn_q' has type 99");
  EXPECT_TRUE(Status::ok().is_ok());
}

}  // namespace
}  // namespace geist
