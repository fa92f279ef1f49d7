// Named records (parked sessions' conversations) across replicas: the newest generation wins
// whichever tier it is in, so a replica's stale disk shadow of a record never wins over what
// another replica has since written to the shared tier; the stale copy is replaced. First with
// in-memory tiers (a shared one standing for Redis), then with real DiskTiers and a real
// redis-server started here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "cache/cache_test_util.h"
#include "cache/disk_tier.h"
#include "cache/entry_codec.h"
#include "cache/le_bytes.h"
#include "cache/mem_tier.h"
#include "cache/prefix_cache.h"
#include "cache/redis_server.h"
#include "cache/redis_tier.h"

namespace {

using namespace geist_cache;
using geist::test::RedisServer;
using geist_test::MemTier;

using geist_test::later;
using geist_test::seq;
std::vector<uint8_t> text_bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// A tier owned elsewhere (one MemTier shared by two caches, as one Redis is by two replicas).
class SharedTier : public Tier {
 public:
  explicit SharedTier(MemTier* t) : t_(t) {}
  const char* name() const override { return "shared"; }
  bool put(const std::string& k, Image o) override { return t_->put(k, std::move(o)); }
  Image get(const std::string& k, Deadline d) override { return t_->get(k, d); }
  std::vector<bool> contains(const std::vector<std::string>& k, Deadline d) override {
    return t_->contains(k, d);
  }
  void erase(const std::string& k) override { t_->erase(k); }
  TierStats stats() const override { return t_->stats(); }

 private:
  MemTier* t_;
};

std::vector<std::unique_ptr<Tier>> chain(std::unique_ptr<Tier> a, std::unique_ptr<Tier> b) {
  std::vector<std::unique_ptr<Tier>> v;
  v.push_back(std::move(a));
  v.push_back(std::move(b));
  return v;
}

struct Got {
  bool found = false;
  std::vector<geist_token> tokens;
  std::string payload;
};
Got get(PrefixCache& c, const std::string& name) {
  Got g;
  std::vector<uint8_t> p;
  g.found = c.get_record(name, later(), &g.tokens, &p);
  g.payload.assign(p.begin(), p.end());
  return g;
}

// The payload a tier holds for a record (what a restarted replica would read from that tier
// alone): the entry decoded, then the body after its 16-byte generation header.
std::string payload_in(const Image& obj) {
  EntryView v;
  std::string why;
  if (!obj || !decode_entry(obj->data(), obj->size(), &v, &why)) return "<none>";
  if (v.image_size < 16) return "<short>";
  return std::string(reinterpret_cast<const char*>(v.image) + 16, v.image_size - 16);
}

const char* kName = "ns/session:s1";

TEST(RecordTiers, NewerRecordInTheSharedTierBeatsAStaleLocalShadow) {
  MemTier shared;
  auto disk_a = std::make_unique<MemTier>(), disk_b = std::make_unique<MemTier>();
  MemTier *da = disk_a.get(), *db = disk_b.get();
  PrefixCache a(1 << 20, chain(std::move(disk_a), std::make_unique<SharedTier>(&shared)));
  PrefixCache b(1 << 20, chain(std::move(disk_b), std::make_unique<SharedTier>(&shared)));
  const auto t1 = seq(10), t2 = seq(30);
  const std::string key = entry_key(kName, nullptr, 0);

  b.put_record(kName, t1, text_bytes("turn 1 on B"));  // B parks: its disk and the shared tier
  b.flush_to_tiers();
  Got g = get(a, kName);  // A takes the session over from the shared tier ...
  ASSERT_TRUE(g.found);
  EXPECT_EQ(g.payload, "turn 1 on B");
  a.put_record(kName, t2, text_bytes("turn 2 on A"));  // ... continues it and parks it again
  a.flush_to_tiers();
  EXPECT_EQ(payload_in(db->objects[key]), "turn 1 on B");  // B's disk: the stale shadow
  EXPECT_EQ(payload_in(shared.objects[key]), "turn 2 on A");

  g = get(b, kName);  // B asked again (the balancer moved the session back)
  ASSERT_TRUE(g.found);
  EXPECT_EQ(g.payload, "turn 2 on A");
  EXPECT_EQ(g.tokens, t2);
  b.flush_to_tiers();
  EXPECT_EQ(payload_in(db->objects[key]), "turn 2 on A") << "the stale shadow is replaced";
  EXPECT_EQ(payload_in(da->objects[key]), "turn 2 on A");
}

TEST(RecordTiers, NewerLocalCopyBeatsAnOlderSharedOneAndRepairsIt) {
  // The shared tier missed the newest write (its queue was full, Redis was down): the upper
  // tier's newer copy wins and the shared tier is given it.
  MemTier shared;
  auto disk = std::make_unique<MemTier>();
  MemTier* d = disk.get();
  PrefixCache c(1 << 20, chain(std::move(disk), std::make_unique<SharedTier>(&shared)));
  const std::string key = entry_key(kName, nullptr, 0);
  c.put_record(kName, seq(5), text_bytes("old"));
  c.flush_to_tiers();
  const Image old_shared = shared.objects[key];
  c.put_record(kName, seq(6), text_bytes("new"));
  c.flush_to_tiers();
  shared.objects[key] = old_shared;  // the second write never reached it
  EXPECT_EQ(payload_in(d->objects[key]), "new");
  const Got g = get(c, kName);
  ASSERT_TRUE(g.found);
  EXPECT_EQ(g.payload, "new");
  EXPECT_EQ(g.tokens, seq(6));
  c.flush_to_tiers();
  EXPECT_EQ(payload_in(shared.objects[key]), "new");
}

TEST(RecordTiers, AWriteAfterAReadOutranksTheReadCopyWhateverTheClock) {
  // A record from a replica whose clock runs far ahead: a replica that read it and writes
  // after still writes a newer generation (the last one seen + 1), not its own older clock.
  auto mem = std::make_unique<MemTier>();
  MemTier* m = mem.get();
  std::vector<std::unique_ptr<Tier>> v;
  v.push_back(std::move(mem));
  PrefixCache c(1 << 20, std::move(v));
  const std::string key = entry_key(kName, nullptr, 0);
  const auto toks = seq(4);
  std::vector<uint8_t> body(16 + 6);
  const char magic[8] = {'G', 'E', 'I', 'S', 'T', 'R', 'G', '1'};
  std::memcpy(body.data(), magic, 8);
  const uint64_t future = uint64_t{1} << 62;  // far past any wall clock in microseconds
  put_u64(body.data() + 8, future);
  std::memcpy(body.data() + 16, "future", 6);
  m->objects[key] = std::make_shared<const std::vector<uint8_t>>(
      encode_entry(kName, toks.data(), toks.size(), body.data(), body.size()));
  ASSERT_EQ(get(c, kName).payload, "future");
  c.put_record(kName, seq(8), text_bytes("after"));
  c.flush_to_tiers();
  EXPECT_EQ(get(c, kName).payload, "after");
}

TEST(RecordTiers, ARecordWithoutAGenerationReadsAsGenerationZero) {
  // Written before records carried generations: its whole body is the payload, and any
  // generation-carrying copy is newer.
  MemTier shared;
  auto disk = std::make_unique<MemTier>();
  MemTier* d = disk.get();
  PrefixCache c(1 << 20, chain(std::move(disk), std::make_unique<SharedTier>(&shared)));
  const std::string key = entry_key(kName, nullptr, 0);
  const auto toks = seq(3);
  const std::string legacy = "{\"messages\":[]}";
  d->objects[key] = std::make_shared<const std::vector<uint8_t>>(
      encode_entry(kName, toks.data(), toks.size(), reinterpret_cast<const uint8_t*>(legacy.data()),
                   legacy.size()));
  EXPECT_EQ(get(c, kName).payload, legacy);
  c.put_record(kName, seq(7), text_bytes("{\"messages\":[1]}"));
  c.flush_to_tiers();
  d->objects[key] = std::make_shared<const std::vector<uint8_t>>(
      encode_entry(kName, toks.data(), toks.size(), reinterpret_cast<const uint8_t*>(legacy.data()),
                   legacy.size()));  // the legacy copy back in the upper tier
  EXPECT_EQ(get(c, kName).payload, "{\"messages\":[1]}");
}

// Two replicas, each with its own disk tier, sharing one real redis-server.
struct Replica {
  DiskTier* disk = nullptr;
  RedisTier* redis = nullptr;
  std::unique_ptr<PrefixCache> cache;
  void flush() {
    cache->flush_to_tiers();
    disk->flush();
    ASSERT_TRUE(redis->drain(std::chrono::seconds(10)));
  }
};

Replica replica(const std::string& dir, const RedisServer& srv) {
  Replica r;
  DiskTierConfig dc;
  dc.dir = dir;
  dc.budget_bytes = 64 << 20;
  std::string err;
  auto disk = DiskTier::open(dc, &err);
  EXPECT_TRUE(disk) << err;
  RedisTierConfig rc;
  EXPECT_TRUE(parse_redis_url(srv.unix_url(), &rc.endpoint, &err)) << err;
  rc.prefix = "geist:test:";
  rc.write_timeout = std::chrono::milliseconds(5000);
  auto redis = std::make_unique<RedisTier>(rc);
  r.disk = disk.get();
  r.redis = redis.get();
  r.cache = std::make_unique<PrefixCache>(1 << 20, chain(std::move(disk), std::move(redis)));
  return r;
}

TEST(RecordTiers, TwoReplicasWithOwnDisksAndOneRedis) {
  GEIST_REQUIRE_REDIS();
  RedisServer srv;
  std::string err;
  ASSERT_TRUE(srv.start(&err)) << err;
  const std::string root = testing::TempDir() + "geist_record_tiers_" + std::to_string(::getpid());
  std::filesystem::remove_all(root);
  Replica a = replica(root + "/a", srv), b = replica(root + "/b", srv);
  const auto t1 = seq(12), t2 = seq(40);
  const std::string key = entry_key(kName, nullptr, 0);

  b.cache->put_record(kName, t1, text_bytes("parked on B"));
  b.flush();
  ASSERT_TRUE(std::filesystem::exists(b.disk->path_of(key))) << "B's disk shadow";
  Got g = get(*a.cache, kName);
  ASSERT_TRUE(g.found);
  EXPECT_EQ(g.payload, "parked on B");
  a.cache->put_record(kName, t2, text_bytes("continued on A"));
  a.flush();
  // B's own disk still holds the old record: B reading its disk first used to return it.
  EXPECT_EQ(payload_in(b.disk->get(key, later())), "parked on B");

  g = get(*b.cache, kName);
  ASSERT_TRUE(g.found);
  EXPECT_EQ(g.payload, "continued on A");
  EXPECT_EQ(g.tokens, t2);
  b.flush();
  EXPECT_EQ(payload_in(b.disk->get(key, later())), "continued on A") << "shadow replaced";

  // B restarted with only its disk (Redis gone): its disk now holds the newest record.
  srv.kill();
  b.cache.reset();
  DiskTierConfig dc;
  dc.dir = root + "/b";
  dc.budget_bytes = 64 << 20;
  auto disk = DiskTier::open(dc, &err);
  ASSERT_TRUE(disk) << err;
  std::vector<std::unique_ptr<Tier>> v;
  v.push_back(std::move(disk));
  PrefixCache b2(1 << 20, std::move(v));
  g = get(b2, kName);
  ASSERT_TRUE(g.found);
  EXPECT_EQ(g.payload, "continued on A");
  a.cache.reset();
  std::filesystem::remove_all(root);
}

}  // namespace
