// The prefix cache on its own: deepest-prefix lookup at the prompt length or grid points,
// namespaces, byte-exact accounting, eviction by value, images held by a reader survive
// eviction, an evicted image's buffer serves the next checkpoint.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "cache/cache_test_util.h"
#include "cache/prefix_cache.h"

namespace {

using geist_cache::PrefixCache;

using geist_test::img;
using geist_test::seq;

TEST(PrefixCache, DeepestUsablePrefix) {
  PrefixCache c(1 << 20);
  const auto t = seq(300);
  c.insert("ns", t.data(), 64, img(100, 1));
  c.insert("ns", t.data(), 128, img(100, 2));
  c.insert("ns", t.data(), 100, img(100, 3));  // off the grid: only the identical prompt
  auto h = c.lookup("ns", t.data(), 300, 64);
  EXPECT_EQ(h.n_tokens, 128);
  EXPECT_EQ((*h.image)[0], 2);
  h = c.lookup("ns", t.data(), 100, 64);
  EXPECT_EQ(h.n_tokens, 100);
  h = c.lookup("ns", t.data(), 127, 64);
  EXPECT_EQ(h.n_tokens, 64);
  h = c.lookup("ns", t.data(), 63, 64);
  EXPECT_EQ(h.n_tokens, 0);
  auto other = t;
  other[10] = 999;  // differs before every entry's end
  EXPECT_EQ(c.lookup("ns", other.data(), 300, 64).n_tokens, 0);
  other = t;
  other[100] = 999;  // differs after 64, before 128
  EXPECT_EQ(c.lookup("ns", other.data(), 300, 64).n_tokens, 64);
}

// Grid 1 (an attention-only model): every stored length is usable, the deepest prefix wins,
// and what eviction or a refusal removed is no longer offered.
TEST(PrefixCache, GridOfOneFindsTheExactDeepestPrefix) {
  PrefixCache c(1000);
  const auto t = seq(300);
  c.insert("ns", t.data(), 37, img(100, 1));
  c.insert("ns", t.data(), 100, img(100, 2));
  c.insert("ns", t.data(), 101, img(100, 3));
  c.insert("other", t.data(), 200, img(100, 4));  // another namespace, deeper
  EXPECT_EQ(c.lookup("ns", t.data(), 300, 1).n_tokens, 101);
  EXPECT_EQ(c.lookup("ns", t.data(), 101, 1).n_tokens, 101);
  EXPECT_EQ(c.lookup("ns", t.data(), 100, 1).n_tokens, 100);
  EXPECT_EQ(c.lookup("ns", t.data(), 99, 1).n_tokens, 37);
  EXPECT_EQ(c.lookup("ns", t.data(), 36, 1).n_tokens, 0);
  EXPECT_EQ(c.lookup("other", t.data(), 300, 1).n_tokens, 200);
  auto other = t;
  other[100] = 999;  // shares 100 tokens
  EXPECT_EQ(c.lookup("ns", other.data(), 300, 1).n_tokens, 100);
  other[50] = 999;  // shares 50
  EXPECT_EQ(c.lookup("ns", other.data(), 300, 1).n_tokens, 37);
  // The same entries on a grid of 64 (the hybrid's): none is a grid point.
  EXPECT_EQ(c.lookup("ns", t.data(), 300, 64).n_tokens, 0);
  c.reject("ns", t.data(), 101);
  EXPECT_EQ(c.lookup("ns", t.data(), 300, 1).n_tokens, 100);
  c.insert("ns", t.data(), 250, img(1000, 5));  // the whole budget: evicts every other entry
  EXPECT_EQ(c.stats().entries, 1);
  EXPECT_EQ(c.stats().bytes, 1000);
  EXPECT_EQ(c.lookup("ns", t.data(), 249, 1).n_tokens, 0);
  EXPECT_EQ(c.lookup("ns", t.data(), 300, 1).n_tokens, 250);
  EXPECT_EQ(c.lookup("other", t.data(), 300, 1).n_tokens, 0);
}

TEST(PrefixCache, NamespacesAreSeparate) {
  PrefixCache c(1 << 20);
  const auto t = seq(64);
  c.insert("a", t.data(), 64, img(10, 1));
  EXPECT_EQ(c.lookup("b", t.data(), 64, 64).n_tokens, 0);
  EXPECT_EQ(c.lookup("a", t.data(), 64, 64).n_tokens, 64);
  EXPECT_TRUE(c.contains("a", t.data(), 64));
  EXPECT_FALSE(c.contains("b", t.data(), 64));
}

TEST(PrefixCache, ByteExactBudgetAndEvictionByValue) {
  PrefixCache c(1000);
  const auto t = seq(512);
  c.insert("ns", t.data(), 64, img(400, 1));
  c.insert("ns", t.data(), 128, img(400, 2));
  EXPECT_EQ(c.stats().bytes, 800);
  for (int i = 0; i < 5; ++i) c.lookup("ns", t.data(), 64, 64);  // 64 is valuable now
  c.insert("ns", t.data(), 192, img(400, 3));                    // must evict one: 128
  const auto s = c.stats();
  EXPECT_EQ(s.bytes, 800);
  EXPECT_EQ(s.entries, 2);
  EXPECT_EQ(s.evictions, 1);
  EXPECT_TRUE(c.contains("ns", t.data(), 64));
  EXPECT_FALSE(c.contains("ns", t.data(), 128));
  c.insert("ns", t.data(), 256, img(5000, 4));  // larger than the budget: not stored
  EXPECT_FALSE(c.contains("ns", t.data(), 256));
  EXPECT_LE(c.stats().bytes, 1000);
}

TEST(PrefixCache, AnImageInUseOutlivesItsEviction) {
  PrefixCache c(500);
  const auto t = seq(256);
  c.insert("ns", t.data(), 64, img(400, 7));
  auto held = c.lookup("ns", t.data(), 64, 64);
  ASSERT_EQ(held.n_tokens, 64);
  c.insert("ns", t.data(), 128, img(400, 8));  // evicts the held entry from the map
  EXPECT_FALSE(c.contains("ns", t.data(), 64));
  ASSERT_EQ(held.image->size(), 400u);
  EXPECT_EQ((*held.image)[399], 7);
}

// The scheduler snapshots into take_buffer(): once an image is evicted and nobody holds it,
// its (resident) buffer is what the next take_buffer() of as many bytes returns; one held by
// a reader comes back only when the reader lets go.
TEST(PrefixCache, AnEvictedImagesBufferServesTheNextCheckpoint) {
  const size_t mib = size_t{1} << 20, n = 6 * mib + 1;
  PrefixCache c(10 * mib);
  const auto t = seq(256);
  std::vector<uint8_t> a = c.take_buffer(n);
  ASSERT_EQ(a.size(), n);
  std::fill(a.begin(), a.end(), uint8_t{1});
  const uint8_t* where_a = a.data();
  c.insert("ns", t.data(), 64, std::move(a));
  EXPECT_EQ(c.stats().bytes, static_cast<int64_t>(n));
  std::vector<uint8_t> b = c.take_buffer(n);  // a is in the cache: a new buffer
  EXPECT_NE(b.data(), where_a);
  const uint8_t* where_b = b.data();
  auto held = c.lookup("ns", t.data(), 64, 64);
  c.insert("ns", t.data(), 128, std::move(b));  // evicts 64, which a reader still holds
  EXPECT_FALSE(c.contains("ns", t.data(), 64));
  EXPECT_NE(c.take_buffer(n).data(), where_a);
  EXPECT_EQ((*held.image)[n - 1], 1);
  held = {};  // now it comes back, and a slightly larger image fits in it too
  std::vector<uint8_t> d = c.take_buffer(n + 4096);
  EXPECT_EQ(d.data(), where_a);
  EXPECT_EQ(d.size(), n + 4096);
  // An insert of a prefix held already keeps the old image and gives the buffer back.
  std::fill(d.begin(), d.end(), uint8_t{3});
  c.insert("ns", t.data(), 128, std::move(d));
  EXPECT_EQ((*c.lookup("ns", t.data(), 128, 64).image)[0], 0);
  EXPECT_EQ(c.stats().bytes, static_cast<int64_t>(n));
  EXPECT_EQ(c.take_buffer(5 * mib).data(), where_a);
  EXPECT_NE(where_b, nullptr);
}

}  // namespace
