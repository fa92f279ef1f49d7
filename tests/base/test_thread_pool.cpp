#include <gtest/gtest.h>

#include <atomic>
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
