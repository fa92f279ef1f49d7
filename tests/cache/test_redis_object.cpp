// The Redis tier's pure parts, no server: the URL forms (the redis:// and unix:// schemes as
// redis-cli and the Redis URI registration define them) and the object codec's refusals.
#include <gtest/gtest.h>

#include <string_view>

#include "cache/redis_conn.h"
#include "cache/redis_object.h"

namespace {

using geist_cache::parse_redis_url;
using geist_cache::RedisEndpoint;
namespace ro = geist_cache::redis_object;

TEST(RedisUrl, Forms) {
  RedisEndpoint ep;
  std::string err;
  ASSERT_TRUE(parse_redis_url("redis://cache.local", &ep, &err)) << err;
  EXPECT_EQ(ep.host, "cache.local");
  EXPECT_EQ(ep.port, 6379);
  EXPECT_EQ(ep.db, 0);
  EXPECT_TRUE(ep.password.empty());
  ASSERT_TRUE(parse_redis_url("redis://10.0.0.5:7000/4", &ep, &err)) << err;
  EXPECT_EQ(ep.host, "10.0.0.5");
  EXPECT_EQ(ep.port, 7000);
  EXPECT_EQ(ep.db, 4);
  ASSERT_TRUE(parse_redis_url("redis://:p%40ss@h:1/", &ep, &err)) << err;
  EXPECT_EQ(ep.password, "p@ss");
  EXPECT_TRUE(ep.user.empty());
  EXPECT_EQ(ep.db, 0);
  ASSERT_TRUE(parse_redis_url("redis://alice:pw@[::1]:6380/2", &ep, &err)) << err;
  EXPECT_EQ(ep.user, "alice");
  EXPECT_EQ(ep.password, "pw");
  EXPECT_EQ(ep.host, "::1");
  EXPECT_EQ(ep.port, 6380);
  EXPECT_EQ(ep.db, 2);
  ASSERT_TRUE(parse_redis_url("unix:///run/redis/redis.sock?db=5", &ep, &err)) << err;
  EXPECT_TRUE(ep.host.empty());
  EXPECT_EQ(ep.unix_path, "/run/redis/redis.sock");
  EXPECT_EQ(ep.db, 5);
  EXPECT_EQ(geist_cache::describe(ep), "unix:///run/redis/redis.sock?db=5");
}

TEST(RedisUrl, Refusals) {
  RedisEndpoint ep;
  for (const char* bad :
       {"rediss://h", "http://h", "redis://", "redis://h:0", "redis://h:70000", "redis://h:x",
        "redis://h/db", "unix://relative.sock", "unix:///s?x=1", "redis://[::1", "redis://:%4@h"}) {
    std::string err;
    EXPECT_FALSE(parse_redis_url(bad, &ep, &err)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
  }
}

std::vector<uint8_t> pattern_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + 7);
  return v;
}

TEST(RedisObject, ManifestRefusesEveryFlippedByteAndOtherKeys) {
  const auto data = pattern_bytes(1000);
  const ro::Manifest m = ro::plan("k", data.data(), data.size(), 42, 300);
  ASSERT_EQ(m.parts.size(), 5u);  // 244 payload bytes per 300-byte value
  const auto enc = ro::encode_manifest(m);
  ro::Manifest back;
  std::string why;
  ASSERT_TRUE(ro::decode_manifest(enc.data(), enc.size(), "k", 1 << 20, &back, &why)) << why;
  EXPECT_FALSE(ro::decode_manifest(enc.data(), enc.size(), "k2", 1 << 20, &back, &why));
  EXPECT_FALSE(ro::decode_manifest(enc.data(), enc.size(), "k", 999, &back, &why));
  for (size_t i = 0; i < enc.size(); ++i) {
    auto bad = enc;
    bad[i] ^= 0x10;
    EXPECT_FALSE(ro::decode_manifest(bad.data(), bad.size(), "k", 1 << 20, &back, &why)) << i;
  }
  EXPECT_FALSE(ro::decode_manifest(enc.data(), enc.size() - 1, "k", 1 << 20, &back, &why));
}

TEST(RedisObject, PartsAssembleOnlyInTheirPlace) {
  const auto data = pattern_bytes(1000);
  const ro::Manifest m = ro::plan("k", data.data(), data.size(), 42, 300);
  std::vector<std::vector<uint8_t>> parts;
  for (uint32_t i = 0; i < m.parts.size(); ++i) parts.push_back(ro::encode_part(m, i, data.data()));
  auto views = [](const std::vector<std::vector<uint8_t>>& ps) {
    std::vector<std::string_view> v;
    for (const auto& p : ps) v.emplace_back(reinterpret_cast<const char*>(p.data()), p.size());
    return v;
  };
  std::vector<uint8_t> out;
  std::string why;
  ASSERT_TRUE(ro::assemble(m, views(parts), &out, &why)) << why;
  EXPECT_EQ(out, data);
  auto swapped = parts;
  std::swap(swapped[1], swapped[2]);
  EXPECT_FALSE(ro::assemble(m, views(swapped), &out, &why));
  EXPECT_TRUE(out.empty());
  auto short_list = parts;
  short_list.pop_back();
  EXPECT_FALSE(ro::assemble(m, views(short_list), &out, &why));
  // The same bytes written again under another write id: parts do not mix across writes.
  const ro::Manifest m2 = ro::plan("k", data.data(), data.size(), 43, 300);
  auto mixed = parts;
  mixed[3] = ro::encode_part(m2, 3, data.data());
  EXPECT_FALSE(ro::assemble(m, views(mixed), &out, &why));
  EXPECT_NE(why.find("write"), std::string::npos) << why;
  for (size_t i = 0; i < parts[4].size(); ++i) {
    auto bad = parts;
    bad[4][i] ^= 1;
    EXPECT_FALSE(ro::assemble(m, views(bad), &out, &why)) << i;
  }
}

}  // namespace
