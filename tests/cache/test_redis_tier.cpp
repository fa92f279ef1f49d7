// The Redis tier against a real redis-server started here: round trips, the split into parts of
// at most part_bytes (8 MiB by default) as Redis itself reports them (KEYS, STRLEN), every kind
// of bad object (corrupt, truncated, missing, mixed, foreign) a counted miss that Redis no
// longer holds afterwards, TTLs as Redis reports them (PTTL), and faults: Redis killed, hung
// (SIGSTOP) and full (maxmemory) never make a get wait past its deadline, the breaker opens,
// and hits come back with Redis.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "cache/redis_object.h"
#include "cache/redis_server.h"
#include "cache/redis_tier.h"

namespace {

using geist::test::RedisServer;
using geist_cache::Image;
using geist_cache::RedisTier;
using geist_cache::RedisTierConfig;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
namespace ro = geist_cache::redis_object;

Image random_object(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  auto v = std::make_shared<std::vector<uint8_t>>(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t r = rng();
    std::memcpy(v->data() + i, &r, std::min<size_t>(8, n - i));
  }
  return v;
}

RedisTierConfig config_for(const RedisServer& srv, size_t part_bytes = 4096) {
  RedisTierConfig cfg;
  std::string err;
  EXPECT_TRUE(geist_cache::parse_redis_url(srv.unix_url(), &cfg.endpoint, &err)) << err;
  cfg.prefix = "geist:test:";
  cfg.part_bytes = part_bytes;
  cfg.breaker.failures = 3;
  cfg.breaker.backoff = milliseconds(200);
  cfg.breaker.backoff_max = milliseconds(400);
  cfg.write_timeout = milliseconds(5000);  // generous: an 8 MiB SET on a loaded CI machine
  return cfg;
}

Clock::time_point in_ms(int ms) { return Clock::now() + milliseconds(ms); }

bool same(const Image& a, const Image& b) { return a && b && *a == *b; }

// Key names in Redis (string appends: GCC 12 warns falsely on literal + std::string here).
std::string cat(std::string a, const std::string& b, const std::string& c = "") {
  return a.append(b).append(c);
}
std::string mkey(const std::string& key) { return cat("geist:test:m:", key); }

class RedisTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GEIST_REQUIRE_REDIS();
    std::string err;
    ASSERT_TRUE(srv_.start(&err)) << err;
  }
  // Puts and waits until the writer has stored it.
  void store(RedisTier& t, const std::string& key, const Image& obj) {
    ASSERT_TRUE(t.put(key, obj));
    ASSERT_TRUE(t.drain(milliseconds(10000)));
  }
  std::vector<std::string> parts_of(const std::string& key) {
    return srv_.keys(cat("geist:test:p:", key, ":*"));
  }
  RedisServer srv_;
};

TEST_F(RedisTierTest, RoundTripAndLayoutInRedis) {
  RedisTier t(config_for(srv_));
  const Image small = random_object(1000, 1), big = random_object(100000, 2);
  const Image empty = std::make_shared<std::vector<uint8_t>>();
  store(t, "small", small);
  store(t, "big", big);
  store(t, "empty", empty);
  EXPECT_TRUE(same(t.get("small", in_ms(2000)), small));
  EXPECT_TRUE(same(t.get("big", in_ms(2000)), big));
  const Image e = t.get("empty", in_ms(2000));
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->empty());
  EXPECT_FALSE(t.get("absent", in_ms(2000)));
  // What Redis holds: one manifest per object, ceil(100000 / (4096 - 56)) = 25 parts for big,
  // every stored value at most 4096 bytes, each with a TTL.
  EXPECT_EQ(srv_.keys("geist:test:m:*").size(), 3u);
  const auto parts = parts_of("big");
  EXPECT_EQ(parts.size(), 25u);
  for (const auto& p : parts) {
    EXPECT_LE(srv_.cmd({"STRLEN", p}).integer, 4096);
    EXPECT_GT(srv_.cmd({"PTTL", p}).integer, 0);
  }
  EXPECT_EQ(parts_of("small").size(), 1u);
  EXPECT_TRUE(parts_of("empty").empty());
  const auto s = t.stats();
  EXPECT_EQ(s.gets, 4);
  EXPECT_EQ(s.hits, 3);
  EXPECT_EQ(s.puts, 3);
  EXPECT_EQ(s.corrupt, 0);
  EXPECT_TRUE(s.available);
  EXPECT_EQ(t.contains({"small", "absent", "big"}, in_ms(2000)),
            (std::vector<bool>{true, false, true}));
}

TEST_F(RedisTierTest, PartsSplitAtTheEightMiBBoundary) {
  RedisTier t(config_for(srv_, ro::kDefaultPartBytes));
  const size_t cap = (size_t{8} << 20) - ro::kPartHeaderBytes;  // payload of one 8 MiB value
  const Image one = random_object(cap, 3), two = random_object(cap + 1, 4);
  store(t, "one", one);
  store(t, "two", two);
  const auto p1 = parts_of("one"), p2 = parts_of("two");
  ASSERT_EQ(p1.size(), 1u);
  ASSERT_EQ(p2.size(), 2u);
  EXPECT_EQ(srv_.cmd({"STRLEN", p1[0]}).integer, 8 << 20);
  long long total = 0;
  for (const auto& p : p2) {
    const long long len = srv_.cmd({"STRLEN", p}).integer;
    EXPECT_LE(len, 8 << 20);
    total += len;
  }
  EXPECT_EQ(total, static_cast<long long>(cap + 1 + 2 * ro::kPartHeaderBytes));
  EXPECT_TRUE(same(t.get("one", in_ms(5000)), one));
  EXPECT_TRUE(same(t.get("two", in_ms(5000)), two));
}

// Each tampering leaves a bad object in Redis; get() must miss, count it and delete it, and
// leave the good objects alone.
TEST_F(RedisTierTest, BadObjectsAreCountedMissesAndDeleted) {
  RedisTier t(config_for(srv_));
  const Image good = random_object(20000, 5);
  store(t, "good", good);
  const auto good_parts = parts_of("good");
  ASSERT_EQ(good_parts.size(), 5u);
  int64_t corrupt = 0;
  auto expect_bad = [&](const std::string& key, const char* what) {
    EXPECT_FALSE(t.get(key, in_ms(2000))) << what;
    EXPECT_EQ(t.stats().corrupt, ++corrupt) << what;
    ASSERT_TRUE(t.drain(milliseconds(5000)));
    EXPECT_EQ(srv_.cmd({"EXISTS", mkey(key)}).integer, 0) << what;
    EXPECT_FALSE(t.get(key, in_ms(2000))) << what << " (second read)";
    EXPECT_EQ(t.stats().corrupt, corrupt) << what << ": a deleted object is a plain miss";
    EXPECT_TRUE(same(t.get("good", in_ms(2000)), good)) << what;
  };
  auto fresh = [&](const std::string& key) {
    store(t, key, random_object(20000, 6));
    return parts_of(key);
  };

  auto p = fresh("flip");  // one payload byte changed in Redis
  srv_.cmd({"SETRANGE", p[2], "100", "X"});
  expect_bad("flip", "corrupt part");
  EXPECT_TRUE(parts_of("flip").empty());

  p = fresh("trunc");  // a part cut short
  const std::string v = srv_.cmd({"GET", p[1]}).str;
  srv_.cmd({"SET", p[1], v.substr(0, v.size() - 1)});
  expect_bad("trunc", "truncated part");
  EXPECT_TRUE(parts_of("trunc").empty());

  p = fresh("missing");  // a part evicted or lost
  srv_.cmd({"DEL", p[3]});
  expect_bad("missing", "missing part");
  EXPECT_TRUE(parts_of("missing").empty());

  p = fresh("misplaced");  // a part of another key copied in
  srv_.cmd({"COPY", good_parts[1], p[1], "REPLACE"});
  expect_bad("misplaced", "misplaced part");

  // Mixed writes: the object rewritten (a new write id) and a part of the old write copied
  // over the new one's.
  const auto old_parts = fresh("mixed");
  srv_.cmd({"DEL", "geist:test:m:mixed"});
  store(t, "mixed", random_object(20000, 7));
  std::vector<std::string> new_parts;
  for (const auto& k : parts_of("mixed")) {
    if (std::find(old_parts.begin(), old_parts.end(), k) == old_parts.end()) new_parts.push_back(k);
  }
  ASSERT_EQ(new_parts.size(), 5u);
  std::string old0 = cat(old_parts[0].substr(0, old_parts[0].rfind(':')), ":0");
  std::string new0 = cat(new_parts[0].substr(0, new_parts[0].rfind(':')), ":0");
  srv_.cmd({"COPY", old0, new0, "REPLACE"});
  expect_bad("mixed", "mixed part");

  // A foreign manifest: the good object's manifest copied under another key.
  srv_.cmd({"COPY", "geist:test:m:good", "geist:test:m:foreign"});
  expect_bad("foreign", "foreign manifest");

  srv_.cmd({"SET", "geist:test:m:junk", "not a manifest"});
  expect_bad("junk", "garbage manifest");
  srv_.cmd({"RPUSH", "geist:test:m:list", "x"});
  expect_bad("list", "manifest key of the wrong type");
}

TEST_F(RedisTierTest, TtlRefreshedOnHit) {
  auto cfg = config_for(srv_);
  cfg.ttl_seconds = 1000;
  RedisTier t(cfg);
  store(t, "k", random_object(10000, 8));
  const long long first = srv_.cmd({"PTTL", "geist:test:m:k"}).integer;
  EXPECT_GT(first, 990000);
  EXPECT_LE(first, 1000000);
  for (const auto& k : srv_.keys("geist:test:*")) srv_.cmd({"PEXPIRE", k, "5000"});
  ASSERT_TRUE(t.get("k", in_ms(2000)));
  ASSERT_TRUE(t.drain(milliseconds(5000)));
  for (const auto& k : srv_.keys("geist:test:*")) {
    EXPECT_GT(srv_.cmd({"PTTL", k}).integer, 990000) << k;
  }
}

TEST_F(RedisTierTest, EraseRemovesEverything) {
  RedisTier t(config_for(srv_));
  store(t, "k", random_object(10000, 9));
  t.erase("k");
  ASSERT_TRUE(t.drain(milliseconds(5000)));
  EXPECT_TRUE(srv_.keys("geist:test:*").empty());
  EXPECT_FALSE(t.get("k", in_ms(2000)));
}

// Redis killed mid-run: every get returns by its deadline, the breaker opens after three
// failures and then gets do not even try; a restarted Redis serves hits again.
TEST_F(RedisTierTest, KilledRedisMissesWithinDeadlineThenRecovers) {
  RedisTier t(config_for(srv_));
  const Image obj = random_object(30000, 10);
  store(t, "k", obj);
  ASSERT_TRUE(same(t.get("k", in_ms(2000)), obj));
  srv_.kill();
  for (int i = 0; i < 5; ++i) {
    const auto deadline = in_ms(300);
    EXPECT_FALSE(t.get("k", deadline));
    EXPECT_LE(Clock::now(), deadline + milliseconds(50)) << "get " << i << " ran past its deadline";
  }
  EXPECT_FALSE(t.stats().available);
  EXPECT_GE(t.breaker_opens(), 1);
  EXPECT_FALSE(t.put("k2", obj)) << "an open circuit takes no writes";
  std::string err;
  ASSERT_TRUE(srv_.start(&err)) << err;  // same socket, empty data set
  // Writes resume once the backoff has passed; the object is stored again and hits.
  const auto until = in_ms(10000);
  Image back;
  while (!back && Clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(100));
    if (t.put("k", obj)) t.drain(milliseconds(2000));
    back = t.get("k", in_ms(1000));
  }
  EXPECT_TRUE(same(back, obj));
  EXPECT_TRUE(t.stats().available);
}

// A hung Redis (SIGSTOP: connections open, no answer): reads time out at their deadline, are
// counted, the breaker opens; resumed, the same data is a hit again.
TEST_F(RedisTierTest, HungRedisTimesOutThenRecovers) {
  RedisTier t(config_for(srv_));
  const Image obj = random_object(30000, 11);
  store(t, "k", obj);
  ASSERT_TRUE(same(t.get("k", in_ms(2000)), obj));
  srv_.pause();
  for (int i = 0; i < 4; ++i) {
    const auto start = Clock::now();
    const auto deadline = in_ms(200);
    EXPECT_FALSE(t.get("k", deadline));
    EXPECT_LE(Clock::now(), deadline + milliseconds(50)) << "get " << i << " ran past its deadline";
    if (i == 3) {
      EXPECT_LT(Clock::now() - start, milliseconds(50)) << "the open circuit waits";
    }
  }
  EXPECT_GE(t.stats().timeouts, 3);
  EXPECT_FALSE(t.stats().available);
  // Writes while hung: put() returns at once and drops (circuit open), never blocks.
  const auto start = Clock::now();
  for (int i = 0; i < 50; ++i) t.put(cat("w", std::to_string(i)), obj);
  EXPECT_LT(Clock::now() - start, milliseconds(200));
  srv_.resume();
  const auto until = in_ms(10000);
  Image back;
  while (!back && Clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(100));
    back = t.get("k", in_ms(1000));
  }
  EXPECT_TRUE(same(back, obj));
  EXPECT_TRUE(t.stats().available);
}

// Writes never wait for Redis: a hung writer fills the bounded queue, and further puts drop.
TEST_F(RedisTierTest, FullQueueDrops) {
  auto cfg = config_for(srv_);
  cfg.queue_items = 2;
  cfg.breaker.failures = 1000;  // keep the circuit closed: the queue is what is tested
  cfg.write_timeout = milliseconds(3000);
  RedisTier t(cfg);
  const Image obj = random_object(5000, 12);
  srv_.pause();
  int accepted = 0;
  const auto start = Clock::now();
  for (int i = 0; i < 20; ++i) accepted += t.put(cat("q", std::to_string(i)), obj);
  EXPECT_LT(Clock::now() - start, milliseconds(200));
  EXPECT_LE(accepted, 3);  // two queued, one possibly taken by the writer
  EXPECT_GE(t.stats().dropped, 17);
  srv_.resume();
}

// Redis full (maxmemory, noeviction): writes are refused, counted, and leave no parts behind;
// reads go on, the circuit stays closed.
TEST(RedisTierFull, RefusedWritesLeaveNothing) {
  GEIST_REQUIRE_REDIS();
  RedisServer::Options opt;
  opt.maxmemory = "3mb";
  RedisServer srv(opt);
  std::string err;
  ASSERT_TRUE(srv.start(&err)) << err;
  RedisTier t(config_for(srv, 64 << 10));
  const Image big = random_object(8 << 20, 13);
  ASSERT_TRUE(t.put("big", big));
  ASSERT_TRUE(t.drain(milliseconds(10000)));
  EXPECT_EQ(t.stats().put_errors, 1);
  EXPECT_EQ(t.stats().puts, 0);
  EXPECT_TRUE(srv.keys("geist:test:*").empty());
  const auto deadline = in_ms(500);
  EXPECT_FALSE(t.get("big", deadline));
  EXPECT_LE(Clock::now(), deadline);
  const Image small = random_object(1000, 14);
  ASSERT_TRUE(t.put("small", small));
  ASSERT_TRUE(t.drain(milliseconds(5000)));
  EXPECT_TRUE(same(t.get("small", in_ms(2000)), small));
  EXPECT_TRUE(t.stats().available);
}

// TCP, a database number and a password from the URL; a wrong password is a miss, never an
// error.
TEST(RedisTierTcp, UrlWithDatabaseAndPassword) {
  GEIST_REQUIRE_REDIS();
  RedisServer::Options opt;
  opt.tcp_port = -1;
  opt.password = "s3cr@t";
  RedisServer srv(opt);
  std::string err;
  ASSERT_TRUE(srv.start(&err)) << err;
  RedisTierConfig cfg = config_for(srv);
  const std::string url = cat("redis://:s3cr%40t@127.0.0.1:", std::to_string(srv.tcp_port()), "/3");
  ASSERT_TRUE(geist_cache::parse_redis_url(url, &cfg.endpoint, &err)) << err;
  {
    RedisTier t(cfg);
    const Image obj = random_object(9000, 15);
    ASSERT_TRUE(t.put("k", obj));
    ASSERT_TRUE(t.drain(milliseconds(5000)));
    EXPECT_TRUE(same(t.get("k", in_ms(2000)), obj));
  }
  EXPECT_EQ(srv.cmd({"EXISTS", "geist:test:m:k"}).integer, 0) << "not in database 0";
  EXPECT_EQ(srv.cmd({"DBSIZE"}).integer, 0);
  cfg.endpoint.password = "wrong";
  RedisTier bad(cfg);
  const auto deadline = in_ms(500);
  EXPECT_FALSE(bad.get("k", deadline));
  EXPECT_LE(Clock::now(), deadline + milliseconds(50));
}

}  // namespace
