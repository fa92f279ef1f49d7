// The entry codec against its byte-level spec (docs/SERVER.md "Tiers"): the expected bytes
// are assembled here field by field from the spec, the checksum and the key hashes by the
// xxHash library itself; every truncation and every flipped byte is refused.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "cache/entry_codec.h"

namespace {

using namespace geist_cache;

void le32(std::vector<uint8_t>* v, uint32_t x) {
  for (int i = 0; i < 4; ++i) v->push_back(static_cast<uint8_t>(x >> (8 * i)));
}
void le64(std::vector<uint8_t>* v, uint64_t x) {
  for (int i = 0; i < 8; ++i) v->push_back(static_cast<uint8_t>(x >> (8 * i)));
}

// The object as the spec lays it out.
std::vector<uint8_t> spec_object(const std::string& ns, const std::vector<geist_token>& toks,
                                 const std::vector<uint8_t>& image) {
  std::vector<uint8_t> v;
  for (char c : std::string("GEISTCE1")) v.push_back(static_cast<uint8_t>(c));
  le32(&v, 1);  // version
  le32(&v, 0);  // flags
  le32(&v, static_cast<uint32_t>(ns.size()));
  le32(&v, static_cast<uint32_t>(toks.size()));
  le64(&v, image.size());
  v.insert(v.end(), ns.begin(), ns.end());
  for (geist_token t : toks) le32(&v, static_cast<uint32_t>(t));
  v.insert(v.end(), image.begin(), image.end());
  const XXH128_hash_t h = XXH3_128bits(v.data(), v.size());
  le64(&v, h.low64);
  le64(&v, h.high64);
  return v;
}

TEST(EntryCodec, MatchesTheSpecAndRoundTrips) {
  const std::string ns = "model:snapshot_id=00ff;backend=cpu/kv1/ctx512/grid64/salt:x";
  const std::vector<geist_token> toks = {1, 42, 70000, 3};
  std::vector<uint8_t> image(1000);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<uint8_t>(i * 7 + 1);
  const std::vector<uint8_t> obj =
      encode_entry(ns, toks.data(), toks.size(), image.data(), image.size());
  EXPECT_EQ(obj, spec_object(ns, toks, image));
  EntryView v;
  std::string err;
  ASSERT_TRUE(decode_entry(obj.data(), obj.size(), &v, &err)) << err;
  EXPECT_EQ(v.ns, ns);
  ASSERT_EQ(v.n_tokens, toks.size());
  for (size_t i = 0; i < toks.size(); ++i) EXPECT_EQ(v.token(i), toks[i]);
  ASSERT_EQ(v.image_size, image.size());
  EXPECT_EQ(std::memcmp(v.image, image.data(), image.size()), 0);
  EXPECT_TRUE(entry_matches(v, ns, toks.data(), toks.size()));
  EXPECT_FALSE(entry_matches(v, ns + "y", toks.data(), toks.size()));
  EXPECT_FALSE(entry_matches(v, ns, toks.data(), toks.size() - 1));
  std::vector<geist_token> other = toks;
  other[2] = 70001;
  EXPECT_FALSE(entry_matches(v, ns, other.data(), other.size()));
}

TEST(EntryCodec, RefusesEveryTruncationAndEveryFlippedByte) {
  const std::vector<geist_token> toks = {5, 6, 7};
  const std::vector<uint8_t> image(64, 0xab);
  const std::vector<uint8_t> obj =
      encode_entry("ns", toks.data(), toks.size(), image.data(), image.size());
  EntryView v;
  std::string err;
  for (size_t n = 0; n < obj.size(); ++n) {
    EXPECT_FALSE(decode_entry(obj.data(), n, &v, &err)) << "truncated to " << n;
  }
  std::vector<uint8_t> longer = obj;
  longer.push_back(0);
  EXPECT_FALSE(decode_entry(longer.data(), longer.size(), &v, &err));
  for (size_t i = 0; i < obj.size(); ++i) {
    std::vector<uint8_t> bad = obj;
    bad[i] ^= 0x10;
    EXPECT_FALSE(decode_entry(bad.data(), bad.size(), &v, &err)) << "byte " << i;
  }
  EXPECT_FALSE(decode_entry(nullptr, 0, &v, &err));
}

TEST(EntryCodec, RefusesLengthsThatDoNotAddUpEvenWithAValidChecksum) {
  // A well-formed checksum over a header that lies about its lengths.
  std::vector<uint8_t> v;
  for (char c : std::string("GEISTCE1")) v.push_back(static_cast<uint8_t>(c));
  le32(&v, 1);
  le32(&v, 0);
  le32(&v, 2);
  le32(&v, 1);
  le64(&v, ~uint64_t{0});  // image length near 2^64: must not wrap the size check
  v.push_back('n');
  v.push_back('s');
  le32(&v, 9);
  const XXH128_hash_t h = XXH3_128bits(v.data(), v.size());
  le64(&v, h.low64);
  le64(&v, h.high64);
  EntryView ev;
  std::string err;
  EXPECT_FALSE(decode_entry(v.data(), v.size(), &ev, &err));
  EXPECT_FALSE(err.empty());
}

// The tiers' read path: the image copied out in the checksum's pass. Images over several of
// its pieces (256 KiB) and of odd sizes; every truncation and flipped byte of a small object,
// and a flipped byte in each piece of a large one, refused.
TEST(EntryCodec, DecodeWithCopyAgreesAndRefusesTheSame) {
  const std::vector<geist_token> toks = {1, 2, 3, 4, 5};
  for (size_t n : {size_t{0}, size_t{1}, size_t{64}, (size_t{1} << 20) + 3, size_t{262144}}) {
    std::vector<uint8_t> image(n);
    for (size_t i = 0; i < n; ++i) image[i] = static_cast<uint8_t>(i * 13 + (i >> 9));
    const std::vector<uint8_t> obj = spec_object("ns", toks, image);
    std::vector<uint8_t> out;
    const auto dst = [&](size_t len) {
      out.assign(len, 0x5A);
      return out.data();
    };
    EntryView v;
    std::string err;
    ASSERT_TRUE(decode_entry_copy(obj.data(), obj.size(), &v, &err, dst)) << n << ": " << err;
    EXPECT_EQ(out, image) << n;
    EXPECT_EQ(v.image, out.data());
    EXPECT_EQ(v.image_size, n);
    EXPECT_TRUE(entry_matches(v, "ns", toks.data(), toks.size()));
    // A flipped byte in every piece of the image, in the header, and in the checksum.
    std::vector<size_t> at = {0, 20, obj.size() - 1};
    for (size_t p = 0; p < n; p += 262144 / 2) at.push_back(obj.size() - 16 - n + p);
    for (size_t i : at) {
      std::vector<uint8_t> bad = obj;
      bad[i] ^= 0x01;
      EXPECT_FALSE(decode_entry_copy(bad.data(), bad.size(), &v, &err, dst)) << n << " byte " << i;
    }
  }
  const std::vector<uint8_t> small = spec_object("ns", toks, std::vector<uint8_t>(40, 7));
  std::vector<uint8_t> out;
  const auto dst = [&](size_t len) {
    out.assign(len, 0);
    return out.data();
  };
  EntryView v;
  std::string err;
  for (size_t n = 0; n < small.size(); ++n) {
    EXPECT_FALSE(decode_entry_copy(small.data(), n, &v, &err, dst)) << "truncated to " << n;
  }
  for (size_t i = 0; i < small.size(); ++i) {
    std::vector<uint8_t> bad = small;
    bad[i] ^= 0x10;
    EXPECT_FALSE(decode_entry_copy(bad.data(), bad.size(), &v, &err, dst)) << "byte " << i;
  }
  EXPECT_FALSE(decode_entry_copy(small.data(), small.size(), &v, &err,
                                 [](size_t) -> uint8_t* { return nullptr; }));
  EXPECT_FALSE(err.empty());
}

TEST(EntryCodec, KeysAreContentAddressed) {
  const std::vector<geist_token> toks = {1, 2, 3, 4};
  const std::string k = entry_key("ns-a", toks.data(), 4);
  EXPECT_TRUE(std::regex_match(k, std::regex("[0-9a-f]{16}/[0-9a-f]{32}"))) << k;
  char nh[17];
  std::snprintf(nh, sizeof nh, "%016llx", static_cast<unsigned long long>(XXH3_64bits("ns-a", 4)));
  EXPECT_EQ(k.substr(0, 16), nh);
  EXPECT_EQ(k, entry_key("ns-a", toks.data(), 4));
  EXPECT_NE(k, entry_key("ns-a", toks.data(), 3));
  EXPECT_NE(k.substr(0, 16), entry_key("ns-b", toks.data(), 4).substr(0, 16));
  EXPECT_NE(k.substr(17), entry_key("ns-b", toks.data(), 4).substr(17));
}

// The keys of many prefixes in one pass are the spec's keys of each: the XXH3-128 of the
// namespace hash (le64) and the prefix's ids (le32 each), computed in one shot by the library.
TEST(EntryCodec, KeysOfManyPrefixesAreEachPrefixsKey) {
  std::vector<geist_token> toks(700);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<geist_token>((i * 7919) % 248320);
  const std::string ns = "model:x/kv1/ctx4096/grid1/salt:";
  const std::vector<size_t> lens = {700, 1, 0, 255, 256, 257, 64, 3, 699, 512, 64};  // any order
  const std::vector<std::string> keys = entry_keys(ns, toks.data(), lens);
  ASSERT_EQ(keys.size(), lens.size());
  const uint64_t nh = XXH3_64bits(ns.data(), ns.size());
  for (size_t i = 0; i < lens.size(); ++i) {
    std::vector<uint8_t> bytes;
    le64(&bytes, nh);
    for (size_t j = 0; j < lens[i]; ++j) le32(&bytes, static_cast<uint32_t>(toks[j]));
    const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
    char want[16 + 1 + 32 + 1];
    std::snprintf(want, sizeof want, "%016llx/%016llx%016llx", static_cast<unsigned long long>(nh),
                  static_cast<unsigned long long>(h.high64),
                  static_cast<unsigned long long>(h.low64));
    EXPECT_EQ(keys[i], want) << "length " << lens[i];
    EXPECT_EQ(keys[i], entry_key(ns, toks.data(), lens[i])) << "length " << lens[i];
  }
}

}  // namespace
