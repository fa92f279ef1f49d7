// The prefix cache over lower tiers: write-through, a restart served from the disk tier, the
// deepest usable prefix found with one contains() batch per tier, promotion to RAM, objects of
// a foreign namespace refused and erased, refused restores dropped everywhere, parked sessions.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <numeric>

#include "cache/cache_test_util.h"
#include "cache/disk_tier.h"
#include "cache/entry_codec.h"
#include "cache/mem_tier.h"
#include "cache/prefix_cache.h"

namespace {

using namespace geist_cache;
using geist_test::MemTier;

using geist_test::img;
using geist_test::later;
using geist_test::one;
using geist_test::seq;

PrefixCache::Hit fetch_wait(PrefixCache& c, const std::string& ns,
                            const std::vector<geist_token>& t, int32_t deeper_than = 0) {
  auto f = c.fetch(ns, t, 64, deeper_than, later());
  while (!f->done.load()) std::this_thread::yield();
  return f->hit;
}

TEST(PrefixCacheTiers, WriteThroughAndDeepestPrefixInOneBatch) {
  auto mem = std::make_unique<MemTier>();
  MemTier* m = mem.get();
  const auto t = seq(300);
  std::map<std::string, Image> kept;
  {
    PrefixCache writer(1 << 20, one(std::move(mem)));
    writer.insert("ns", t.data(), 64, img(100, 1));
    writer.insert("ns", t.data(), 192, img(100, 2));
    writer.insert("ns", t.data(), 100, img(100, 3));  // off the grid: only the identical prompt
    writer.flush_to_tiers();
    EXPECT_EQ(m->objects.size(), 3u);
    // The tier's object for 192 is the codec's encoding of exactly that entry.
    const std::string k = entry_key("ns", t.data(), 192);
    ASSERT_EQ(m->objects.count(k), 1u);
    EntryView v;
    std::string err;
    ASSERT_TRUE(decode_entry(m->objects[k]->data(), m->objects[k]->size(), &v, &err)) << err;
    EXPECT_TRUE(entry_matches(v, "ns", t.data(), 192));
    kept = m->objects;
  }
  // A fresh RAM (a restart) over a tier holding the same objects.
  auto mem2 = std::make_unique<MemTier>();
  mem2->objects = kept;
  MemTier* m2 = mem2.get();
  PrefixCache c(1 << 20, one(std::move(mem2)));
  EXPECT_EQ(c.lookup("ns", t.data(), 300, 64).n_tokens, 0);
  PrefixCache::Hit h = fetch_wait(c, "ns", t);
  EXPECT_EQ(h.n_tokens, 192);
  ASSERT_TRUE(h.image);
  EXPECT_EQ(*h.image, img(100, 2));
  EXPECT_EQ(m2->contains_calls, 1);  // one batch for every candidate length
  EXPECT_EQ(m2->st.gets, 1);
  // Promoted: RAM has it now.
  EXPECT_EQ(c.lookup("ns", t.data(), 300, 64).n_tokens, 192);
  EXPECT_EQ(c.stats().tier_hits, 1);
  // Nothing deeper than what RAM has: no hit.
  EXPECT_EQ(fetch_wait(c, "ns", t, 192).n_tokens, 0);
  // The identical off-grid prompt.
  EXPECT_EQ(fetch_wait(c, "ns", std::vector<geist_token>(t.begin(), t.begin() + 100)).n_tokens,
            100);
}

TEST(PrefixCacheTiers, ForeignNamespaceObjectIsRefusedAndErased) {
  auto mem = std::make_unique<MemTier>();
  MemTier* m = mem.get();
  const auto t = seq(64);
  // An object of namespace "other" stored under the key of ("ns", t): what a misplaced or
  // colliding object looks like.
  const auto foreign = encode_entry("other", t.data(), 64, img(10, 5).data(), 10);
  const std::string k = entry_key("ns", t.data(), 64);
  m->objects[k] = std::make_shared<const std::vector<uint8_t>>(foreign);
  PrefixCache c(1 << 20, one(std::move(mem)));
  EXPECT_EQ(fetch_wait(c, "ns", t).n_tokens, 0);
  EXPECT_EQ(m->objects.count(k), 0u);
  const auto r = c.tier_stats();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].name, "mem");
  EXPECT_EQ(r[0].rejected, 1);
}

TEST(PrefixCacheTiers, RejectDropsFromRamAndTiers) {
  auto mem = std::make_unique<MemTier>();
  MemTier* m = mem.get();
  const auto t = seq(128);
  PrefixCache c(1 << 20, one(std::move(mem)));
  c.insert("ns", t.data(), 128, img(50, 1));
  c.flush_to_tiers();
  ASSERT_EQ(m->objects.size(), 1u);
  c.reject("ns", t.data(), 128);
  EXPECT_FALSE(c.contains("ns", t.data(), 128));
  EXPECT_TRUE(m->objects.empty());
  EXPECT_EQ(c.stats().restore_rejected, 1);
  EXPECT_EQ(c.stats().bytes, 0);
}

TEST(PrefixCacheTiers, RestartFromTheDiskTierAndParkedStates) {
  char tmpl[] = "/tmp/geist-pc-tiers-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const auto t = seq(200);
  const std::vector<geist_token> sess(t.begin(), t.begin() + 77);
  auto disk = [&] {
    DiskTierConfig dc;
    dc.dir = dir;
    dc.budget_bytes = 1 << 20;
    std::string err;
    auto d = DiskTier::open(dc, &err);
    EXPECT_TRUE(d) << err;
    return d;
  };
  {
    PrefixCache c(1 << 20, one(disk()));
    c.insert("ns", t.data(), 128, img(3000, 9));
    c.store_in_tiers("ns", sess, std::make_shared<const std::vector<uint8_t>>(img(700, 4)));
    c.flush_to_tiers();
    EXPECT_FALSE(c.contains("ns", sess.data(), sess.size()));  // parked states skip RAM
  }  // the disk tier writes what is queued before it goes
  PrefixCache c(1 << 20, one(disk()));
  EXPECT_TRUE(c.in_tiers("ns", sess));
  Image s = c.load_from_tiers("ns", sess, later());
  ASSERT_TRUE(s);
  EXPECT_EQ(*s, img(700, 4));
  EXPECT_FALSE(c.load_from_tiers("other-ns", sess, later()));
  PrefixCache::Hit h = fetch_wait(c, "ns", t);
  EXPECT_EQ(h.n_tokens, 128);
  ASSERT_TRUE(h.image);
  EXPECT_EQ(*h.image, img(3000, 9));
  std::filesystem::remove_all(dir);
}

TEST(PrefixCacheTiers, RecordsAreFoundByNameAndReplaced) {
  auto mem = std::make_unique<MemTier>();
  MemTier* m = mem.get();
  PrefixCache c(1 << 20, one(std::move(mem)));
  const auto t1 = seq(10), t2 = seq(20);
  c.put_record("ns/session:a", t1, {1, 2, 3});
  c.flush_to_tiers();
  std::vector<geist_token> toks;
  std::vector<uint8_t> payload;
  ASSERT_TRUE(c.get_record("ns/session:a", later(), &toks, &payload));
  EXPECT_EQ(toks, t1);
  EXPECT_EQ(payload, std::vector<uint8_t>({1, 2, 3}));
  c.put_record("ns/session:a", t2, {9});  // replaces
  c.flush_to_tiers();
  ASSERT_TRUE(c.get_record("ns/session:a", later(), &toks, &payload));
  EXPECT_EQ(toks, t2);
  EXPECT_EQ(payload, std::vector<uint8_t>({9}));
  EXPECT_FALSE(c.get_record("ns/session:b", later(), &toks, &payload));
  // Another name's record under this name's key: refused, erased, counted.
  {
    std::lock_guard<std::mutex> l(m->mu);
    m->objects[entry_key("ns/session:c", nullptr, 0)] =
        std::make_shared<const std::vector<uint8_t>>(
            encode_entry("ns/session:a", t1.data(), t1.size(), nullptr, 0));
  }
  EXPECT_FALSE(c.get_record("ns/session:c", later(), &toks, &payload));
  EXPECT_EQ(c.tier_stats()[0].rejected, 1);
  c.erase_record("ns/session:a");
  EXPECT_FALSE(c.get_record("ns/session:a", later(), &toks, &payload));
}

}  // namespace
