// BufferPool (cache/image_buffer.h): the tiers' reads land in buffers that come back when the
// images made of them are dropped; what it keeps is bounded by count and bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cache/image_buffer.h"

namespace {

using namespace geist_cache;

TEST(BufferPool, SharedBuffersComeBackAndAreReused) {
  auto pool = BufferPool::create(1, size_t{64} << 20);
  std::vector<uint8_t> a = pool->take(size_t{5} << 20);
  ASSERT_EQ(a.size(), size_t{5} << 20);
  std::memset(a.data(), 0x11, a.size());
  const uint8_t* where = a.data();
  Image img = pool->share(std::move(a));
  ASSERT_EQ(img->size(), size_t{5} << 20);
  EXPECT_EQ(img->data(), where);  // shared without a copy
  EXPECT_EQ(pool->spare_bytes(), 0u);
  Image copy = img;
  img.reset();
  EXPECT_EQ(pool->spare_bytes(), 0u);  // still held
  copy.reset();
  EXPECT_GE(pool->spare_bytes(), size_t{5} << 20);
  // A smaller request reuses it (no fresh allocation), a larger one cannot.
  std::vector<uint8_t> b = pool->take(size_t{3} << 20);
  EXPECT_EQ(b.data(), where);
  EXPECT_EQ(b.size(), size_t{3} << 20);
  EXPECT_EQ(pool->spare_bytes(), 0u);
  pool->recycle(std::move(b));
  std::vector<uint8_t> c = pool->take(size_t{7} << 20);
  EXPECT_EQ(c.size(), size_t{7} << 20);
  EXPECT_NE(c.data(), where);
  EXPECT_TRUE(pool->take(0).empty());
}

// A fresh buffer of 4 MiB or more has room up to the next 2 MiB, so the next image of the
// same model (a few tokens longer) fits in it; a small one is exact.
TEST(BufferPool, FreshBuffersRoundUpToHugePages) {
  const size_t mib = size_t{1} << 20;
  auto pool = BufferPool::create(1, 64 * mib);
  std::vector<uint8_t> a = pool->take(5 * mib + 1);
  EXPECT_EQ(a.size(), 5 * mib + 1);
  EXPECT_GE(a.capacity(), 6 * mib);
  EXPECT_LT(a.capacity(), 8 * mib);
  const uint8_t* where = a.data();
  pool->recycle(std::move(a));
  std::vector<uint8_t> b = pool->take(6 * mib);
  EXPECT_EQ(b.data(), where);
  EXPECT_EQ(b.size(), 6 * mib);
  EXPECT_EQ(pool->take(1000).capacity(), 1000u);
}

TEST(BufferPool, KeepsAtMostItsCountAndBytes) {
  auto pool = BufferPool::create(2, size_t{10} << 20);
  pool->recycle(std::vector<uint8_t>(size_t{4} << 20));
  pool->recycle(std::vector<uint8_t>(size_t{4} << 20));
  const size_t two = pool->spare_bytes();
  EXPECT_GE(two, size_t{8} << 20);
  pool->recycle(std::vector<uint8_t>(size_t{1} << 20));  // a third: over the count
  EXPECT_EQ(pool->spare_bytes(), two);
  auto small = BufferPool::create(4, size_t{3} << 20);
  small->recycle(std::vector<uint8_t>(size_t{4} << 20));  // over the bytes
  EXPECT_EQ(small->spare_bytes(), 0u);
}

// keep_warm: the next take() of up to the asked size (plus headroom for a grown image) finds a
// spare faulted in by the pool's thread; none is made when one holds it already or the
// limits leave no room.
TEST(BufferPool, KeepWarmLeavesOneResidentSpareForTheNextTake) {
  const size_t mib = size_t{1} << 20;
  auto pool = BufferPool::create(2, 64 * mib);
  pool->keep_warm(5 * mib);
  pool->wait_warm();
  ASSERT_EQ(pool->spare_count(), 1u);
  const size_t cap = pool->spare_bytes();
  EXPECT_GE(cap, 7 * mib);  // 5 MiB and at least 2 MiB of headroom, whole 2 MiB pages
  EXPECT_EQ(cap % (2 * mib), 0u);
  pool->keep_warm(5 * mib);  // one holds it: nothing more
  pool->keep_warm(cap);
  pool->wait_warm();
  EXPECT_EQ(pool->spare_count(), 1u);
  std::vector<uint8_t> a = pool->take(6 * mib);  // a grown image still fits
  EXPECT_EQ(a.capacity(), cap);
  EXPECT_EQ(a.size(), 6 * mib);
  EXPECT_EQ(pool->spare_count(), 0u);
  pool->keep_warm(40 * mib);  // 40 MiB and its headroom fit in the 64: one is made
  pool->wait_warm();
  EXPECT_EQ(pool->spare_count(), 1u);
  auto full = BufferPool::create(1, 8 * mib);
  full->keep_warm(7 * mib);  // its headroom goes past the pool's bytes: none
  full->wait_warm();
  EXPECT_EQ(full->spare_count(), 0u);
  full->keep_warm(1);  // a small one fits
  full->wait_warm();
  EXPECT_EQ(full->spare_count(), 1u);
  pool->keep_warm(2 * mib);
  pool.reset();  // the pool's thread ends with it, a request pending or not
}

TEST(BufferPool, ImagesOutliveTheirPool) {
  auto pool = BufferPool::create(1, size_t{64} << 20);
  std::vector<uint8_t> v = pool->take(1000);
  std::memset(v.data(), 7, v.size());
  Image img = pool->share(std::move(v));
  pool.reset();
  ASSERT_EQ(img->size(), 1000u);
  EXPECT_EQ((*img)[999], 7);
  img.reset();  // freed, no pool to go back to
}

}  // namespace
