// The disk tier on a temporary directory: round trip, a restart finds what was written, LRU by
// bytes, torn / truncated / corrupted / misplaced files are counted misses and deleted, a failed
// write pauses writes and reads go on, a full queue drops.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cache/cache_test_util.h"
#include "cache/disk_tier.h"

namespace {

using namespace geist_cache;
namespace fs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/geist-disk-tier-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

Image obj(size_t n, uint8_t fill) { return std::make_shared<const std::vector<uint8_t>>(n, fill); }
using geist_test::later;

std::unique_ptr<DiskTier> open_tier(const std::string& dir, size_t budget, int retry_ms = 5000) {
  DiskTierConfig c;
  c.dir = dir;
  c.budget_bytes = budget;
  c.retry_after_ms = retry_ms;
  std::string err;
  auto t = DiskTier::open(c, &err);
  EXPECT_TRUE(t) << err;
  return t;
}

std::vector<uint8_t> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
}
void spit(const std::string& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

TEST(DiskTier, FileNamesRoundTrip) {
  for (const std::string k : {"0123abcd/ff00", "a%b c/d", "sess.1_x-y"}) {
    std::string back;
    ASSERT_TRUE(decode_file_name(encode_file_name(k), &back)) << k;
    EXPECT_EQ(back, k);
  }
  std::string k;
  EXPECT_FALSE(decode_file_name("x.txt", &k));
  EXPECT_FALSE(decode_file_name("a%2.gobj", &k));
  EXPECT_FALSE(decode_file_name("%61.gobj", &k));  // 'a' is never escaped
}

TEST(DiskTier, RoundTripAndWarmAfterRestart) {
  TempDir d;
  {
    auto t = open_tier(d.path, 1 << 20);
    EXPECT_TRUE(t->put("aa/01", obj(1000, 1)));
    EXPECT_TRUE(t->put("aa/02", obj(2000, 2)));
    EXPECT_EQ(t->contains({"aa/01", "aa/02", "aa/03"}, later()), std::vector<bool>({1, 1, 0}));
    t->flush();
    Image g = t->get("aa/02", later());
    ASSERT_TRUE(g);
    EXPECT_EQ(*g, *obj(2000, 2));
    EXPECT_EQ(t->stats().objects, 2);
  }
  // A crash mid-write leaves a temporary file: the next start deletes it.
  spit(d.path + "/aa%2F09.gobj.tmp", {1, 2, 3});
  auto t = open_tier(d.path, 1 << 20);
  EXPECT_FALSE(fs::exists(d.path + "/aa%2F09.gobj.tmp"));
  const TierStats s = t->stats();
  EXPECT_EQ(s.objects, 2);
  EXPECT_EQ(s.bytes, static_cast<int64_t>(fs::file_size(d.path + "/aa%2F01.gobj") +
                                          fs::file_size(d.path + "/aa%2F02.gobj")));
  Image g = t->get("aa/01", later());
  ASSERT_TRUE(g);
  EXPECT_EQ(*g, *obj(1000, 1));
  EXPECT_EQ(t->stats().hits, 1);
  t->erase("aa/01");
  EXPECT_FALSE(fs::exists(d.path + "/aa%2F01.gobj"));
  EXPECT_FALSE(t->get("aa/01", later()));
}

TEST(DiskTier, LruByBytes) {
  TempDir d;
  const size_t file = 1000 + 24 + 5 + 16;  // payload + header + key + checksum
  auto t = open_tier(d.path, 2 * file + 10);
  t->put("k/001", obj(1000, 1));
  t->flush();
  t->put("k/002", obj(1000, 2));
  t->flush();
  ASSERT_TRUE(t->get("k/001", later()));  // 002 is now the least recent
  t->put("k/003", obj(1000, 3));
  t->flush();
  EXPECT_EQ(t->contains({"k/001", "k/002", "k/003"}, later()), std::vector<bool>({1, 0, 1}));
  EXPECT_FALSE(fs::exists(d.path + "/k%2F002.gobj"));
  EXPECT_LE(t->stats().bytes, static_cast<int64_t>(2 * file + 10));
  EXPECT_FALSE(t->put("k/big", obj(4000, 9)));  // larger than the budget: dropped
  EXPECT_EQ(t->stats().dropped, 1);
  // A restart with a smaller budget evicts the least recent (by mtime) down to it.
  t.reset();
  auto small = open_tier(d.path, file + 10);
  EXPECT_EQ(small->stats().objects, 1);
}

TEST(DiskTier, DamagedFilesAreCountedMissesAndDeleted) {
  TempDir d;
  {
    auto t = open_tier(d.path, 1 << 20);
    for (const char* k : {"d/1", "d/2", "d/3", "d/4"}) t->put(k, obj(500, 7));
    t->flush();
  }
  const std::string p1 = d.path + "/d%2F1.gobj", p2 = d.path + "/d%2F2.gobj",
                    p3 = d.path + "/d%2F3.gobj", p4 = d.path + "/d%2F4.gobj";
  auto b = slurp(p1);
  b[b.size() / 2] ^= 1;  // corrupted
  spit(p1, b);
  b = slurp(p2);
  b.resize(b.size() / 2);  // truncated (torn)
  spit(p2, b);
  fs::copy_file(p4, p3, fs::copy_options::overwrite_existing);  // another key's file
  auto t = open_tier(d.path, 1 << 20);
  EXPECT_FALSE(t->get("d/1", later()));
  EXPECT_FALSE(t->get("d/2", later()));
  EXPECT_FALSE(t->get("d/3", later()));
  Image ok = t->get("d/4", later());
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, *obj(500, 7));
  const TierStats s = t->stats();
  EXPECT_EQ(s.corrupt, 3);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.objects, 1);
  EXPECT_FALSE(fs::exists(p1));
  EXPECT_FALSE(fs::exists(p2));
  EXPECT_FALSE(fs::exists(p3));
}

// Objects over many of the reader's pieces (256 KiB), of odd sizes, read in turn into the
// tier's reused buffer (a larger one, then a smaller one, then the larger again): each comes
// back byte for byte whatever the buffer held before; a byte flipped in the last piece of a
// large file, or a file cut short, is a counted miss.
TEST(DiskTier, LargeObjectsThroughTheReusedReadBuffer) {
  TempDir d;
  auto pattern = [](size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 2654435761u + seed) >> 13);
    return std::make_shared<const std::vector<uint8_t>>(std::move(v));
  };
  const Image big = pattern((size_t{3} << 20) + 7, 1), small = pattern(300000, 2),
              bad = pattern((size_t{2} << 20) + 1, 3), cut = pattern((size_t{1} << 20) + 5, 4);
  auto t = open_tier(d.path, size_t{64} << 20);
  ASSERT_TRUE(t->put("b/big", big));
  ASSERT_TRUE(t->put("b/small", small));
  ASSERT_TRUE(t->put("b/bad", bad));
  ASSERT_TRUE(t->put("b/cut", cut));
  t->flush();
  for (const auto& [k, want] : std::vector<std::pair<std::string, Image>>{
           {"b/big", big}, {"b/small", small}, {"b/big", big}, {"b/small", small}}) {
    Image g = t->get(k, later());
    ASSERT_TRUE(g) << k;
    EXPECT_EQ(*g, *want) << k;
  }
  auto b = slurp(t->path_of("b/bad"));
  b[b.size() - 100000] ^= 0x40;  // in the last piece
  spit(t->path_of("b/bad"), b);
  b = slurp(t->path_of("b/cut"));
  b.resize(b.size() - 3000);
  spit(t->path_of("b/cut"), b);
  EXPECT_FALSE(t->get("b/bad", later()));
  EXPECT_FALSE(t->get("b/cut", later()));
  EXPECT_EQ(t->stats().corrupt, 2);
  Image g = t->get("b/big", later());  // the buffer those reads filled, reused once more
  ASSERT_TRUE(g);
  EXPECT_EQ(*g, *big);
}

TEST(DiskTier, AFailedWritePausesWritesAndReadsGoOn) {
  TempDir d;
  auto t = open_tier(d.path, 1 << 20, /*retry_ms=*/300);
  t->put("w/1", obj(100, 1));
  t->flush();
  // The directory replaced by a file: every write fails (even for root), as on a dead disk.
  const std::string moved = d.path + ".moved";
  fs::rename(d.path, moved);
  spit(d.path, {0});
  EXPECT_TRUE(t->put("w/2", obj(100, 2)));  // queued
  t->flush();
  TierStats s = t->stats();
  EXPECT_EQ(s.put_errors, 1);
  EXPECT_FALSE(s.available);
  EXPECT_FALSE(t->put("w/3", obj(100, 3)));  // paused: dropped
  EXPECT_EQ(t->stats().dropped, 1);
  EXPECT_FALSE(t->get("w/2", later()));  // never written
  // The disk comes back: after the pause, writes go through again.
  fs::remove(d.path);
  fs::rename(moved, d.path);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_TRUE(t->stats().available);
  EXPECT_TRUE(t->put("w/4", obj(100, 4)));
  t->flush();
  Image g = t->get("w/4", later());
  ASSERT_TRUE(g);
  EXPECT_EQ(*g, *obj(100, 4));
  ASSERT_TRUE(t->get("w/1", later()));
}

TEST(DiskTier, AFullQueueDrops) {
  TempDir d;
  DiskTierConfig c;
  c.dir = d.path;
  c.budget_bytes = 1 << 20;
  c.queue_bytes = 1000;
  std::string err;
  auto t = DiskTier::open(c, &err);
  ASSERT_TRUE(t) << err;
  int accepted = 0;
  for (int i = 0; i < 50; ++i) accepted += t->put("q/" + std::to_string(i), obj(600, 1)) ? 1 : 0;
  t->flush();
  const TierStats s = t->stats();
  EXPECT_EQ(s.dropped, 50 - accepted);
  EXPECT_EQ(s.objects, accepted);
  EXPECT_GT(s.dropped, 0);
}

TEST(DiskTier, RefusesADirectoryItCannotUse) {
  TempDir d;
  spit(d.path + "/file", {1});
  DiskTierConfig c;
  c.dir = d.path + "/file/sub";
  c.budget_bytes = 1 << 20;
  std::string err;
  EXPECT_FALSE(DiskTier::open(c, &err));
  EXPECT_NE(err.find("file"), std::string::npos) << err;
}

TEST(DiskTier, InMemoryCheckAgreesWithTheFileReader) {
  TempDir d;
  auto t = open_tier(d.path, 1 << 20);
  t->put("m/1", obj(300, 3));
  t->flush();
  const auto bytes = slurp(d.path + "/m%2F1.gobj");
  size_t off = 0, len = 0;
  ASSERT_TRUE(disk_file_payload(bytes.data(), bytes.size(), "m/1", &off, &len));
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin() + off, bytes.begin() + off + len), *obj(300, 3));
  EXPECT_FALSE(disk_file_payload(bytes.data(), bytes.size(), "m/2", &off, &len));
  for (size_t i = 0; i < bytes.size(); i += 7) {
    auto bad = bytes;
    bad[i] ^= 0x40;
    EXPECT_FALSE(disk_file_payload(bad.data(), bad.size(), "m/1", &off, &len)) << i;
  }
}

}  // namespace
