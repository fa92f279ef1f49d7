// parallel_copy (base/parallel_copy.h): the bytes a restore moves with the session's threads
// are the bytes a plain memcpy of each range moves, however the ranges fall on the threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "base/parallel_copy.h"
#include "base/thread_pool.h"

namespace geist {
namespace {

struct Ranges {
  std::vector<std::vector<uint8_t>> src, dst;
  std::vector<CopyRange> c;
  size_t total = 0;
};

// Ranges of the given sizes, sources random, destinations filled with 0xEE.
Ranges make_ranges(const std::vector<size_t>& sizes, uint32_t seed) {
  std::mt19937 g(seed);
  Ranges r;
  for (size_t n : sizes) {
    std::vector<uint8_t> s(n);
    for (uint8_t& b : s) b = static_cast<uint8_t>(g());
    r.src.push_back(std::move(s));
    r.dst.emplace_back(n, 0xEE);
    r.total += n;
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    r.c.push_back({r.dst[i].data(), r.src[i].data(), sizes[i]});
  }
  return r;
}

::testing::AssertionResult copied(const Ranges& r) {
  for (size_t i = 0; i < r.src.size(); ++i) {
    if (r.src[i].size() != r.dst[i].size() ||
        (!r.src[i].empty() && std::memcmp(r.src[i].data(), r.dst[i].data(), r.src[i].size()))) {
      return ::testing::AssertionFailure() << "range " << i << " differs";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(ParallelCopy, ThreadsByBytes) {
  EXPECT_EQ(parallel_copy_threads(0, 8), 1);
  EXPECT_EQ(parallel_copy_threads(kParallelCopyMinBytes * 2 - 1, 8), 1);
  EXPECT_EQ(parallel_copy_threads(kParallelCopyMinBytes * 2, 8), 2);
  EXPECT_EQ(parallel_copy_threads(kParallelCopyMinBytes * 100, 8), 8);
  EXPECT_EQ(parallel_copy_threads(kParallelCopyMinBytes * 100, 1), 1);
  EXPECT_EQ(parallel_copy_threads(kParallelCopyMinBytes * 100, 0), 1);
}

TEST(ParallelCopy, SplitsArePageAlignedOrderedAndBalanced) {
  for (size_t total : {size_t{0}, size_t{4095}, size_t{1} << 20, (size_t{44} << 20) + 12345,
                       (size_t{256} << 20) + 7}) {
    for (int nt : {1, 2, 3, 7, 16}) {
      EXPECT_EQ(parallel_copy_split(total, 0, nt), 0u);
      EXPECT_EQ(parallel_copy_split(total, nt, nt), total);
      for (int ti = 1; ti < nt; ++ti) {
        const size_t a = parallel_copy_split(total, ti, nt);
        EXPECT_EQ(a % 4096, 0u) << total << " " << ti << "/" << nt;
        EXPECT_LE(parallel_copy_split(total, ti - 1, nt), a);
        // Within a page of the even split total * ti / nt (no overflow here).
        const size_t even = static_cast<size_t>(static_cast<unsigned __int128>(total) * ti / nt);
        EXPECT_LE(a, even);
        EXPECT_LT(even - a, 4096u);
      }
    }
  }
  // No overflow for the largest sizes.
  const size_t big = ~size_t{0};
  EXPECT_EQ(parallel_copy_split(big, 1, 2), (big / 2) / 4096 * 4096);
}

TEST(ParallelCopy, PiecesComposeToTheWholeCopy) {
  std::mt19937 g(3);
  for (int rep = 0; rep < 50; ++rep) {
    std::vector<size_t> sizes;
    const int n = 1 + static_cast<int>(g() % 6);
    for (int i = 0; i < n; ++i) sizes.push_back(g() % 3 == 0 ? 0 : 1 + g() % 5000);
    Ranges r = make_ranges(sizes, static_cast<uint32_t>(rep));
    // Random cut points over the concatenation, each piece copied on its own.
    std::vector<size_t> cuts{0, r.total};
    for (int k = 0; k < 4; ++k) cuts.push_back(r.total == 0 ? 0 : g() % (r.total + 1));
    std::sort(cuts.begin(), cuts.end());
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      copy_piece(r.c.data(), r.c.size(), cuts[k], cuts[k + 1]);
    }
    EXPECT_TRUE(copied(r)) << "rep " << rep;
  }
}

TEST(ParallelCopy, PoolCopyIsTheSerialCopy) {
  // Sizes like a restore's regions: large KV parts, odd small ones, empty ones; enough bytes
  // that every thread of the pool takes a range.
  const std::vector<size_t> sizes = {(size_t{3} << 20) + 17, 0, 4096, 123, size_t{5} << 20, 1,
                                     (size_t{2} << 20) - 5};
  for (int nt : {1, 2, 4}) {
    ThreadPool pool(nt);
    Ranges r = make_ranges(sizes, 9);
    ASSERT_EQ(parallel_copy_threads(r.total, nt), nt);
    parallel_copy(r.c.data(), r.c.size(), &pool);
    EXPECT_TRUE(copied(r)) << nt << " threads";
  }
  Ranges r = make_ranges(sizes, 10);
  parallel_copy(r.c.data(), r.c.size(), nullptr);
  EXPECT_TRUE(copied(r)) << "no pool";
  parallel_copy(nullptr, 0, nullptr);  // nothing to copy
}

}  // namespace
}  // namespace geist
