// The bytes a prefix-cache entry (namespace, token prefix, snapshot image) becomes when it
// leaves RAM for a tier, and the content-addressed key it is stored under. Self-verifying:
// magic, version, lengths, the namespace and the tokens in full, and an XXH3-128 over all of
// it. Byte layout: docs/SERVER.md "Tiers".
//
// Pure functions, thread-safe. decode_entry() takes bytes from outside (a file, Redis) and
// refuses anything malformed with a message; it never reads past `size`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "geist/geist.h"

namespace geist_cache {

constexpr uint32_t kEntryVersion = 1;
constexpr size_t kEntryHeaderBytes = 32;    // magic, version, flags, ns_len, n_tokens, image_len
constexpr size_t kEntryChecksumBytes = 16;  // XXH3-128, low half first, little-endian
constexpr size_t kMaxNamespaceBytes = 4096;
constexpr size_t kMaxEntryTokens = size_t{1} << 24;

// The object for (ns, tokens[0, n), image).
std::vector<uint8_t> encode_entry(const std::string& ns, const geist_token* tokens, size_t n,
                                  const uint8_t* image, size_t image_size);

// A verified object, viewed in place: the pointers point into the bytes given to decode_entry.
struct EntryView {
  std::string_view ns;
  const uint8_t* tokens = nullptr;  // [n_tokens] little-endian uint32
  size_t n_tokens = 0;
  const uint8_t* image = nullptr;  // [image_size]
  size_t image_size = 0;
  geist_token token(size_t i) const;
};

// Verifies magic, version, flags, every length against `size` (exactly: no trailing bytes),
// the limits above and the checksum. False with *err saying which check failed.
bool decode_entry(const uint8_t* data, size_t size, EntryView* out, std::string* err);

// decode_entry that also copies the image out, in the same pass over the object as the
// checksum (each piece hashed, then copied while it is still in the CPU's cache): once every
// length checks, image_dst(n) is called with the image's size and returns where its n bytes go
// (nullptr: refused). out->image then points there. False with *err as decode_entry, or when
// image_dst refused; the destination then holds no verified bytes.
bool decode_entry_copy(const uint8_t* data, size_t size, EntryView* out, std::string* err,
                       const std::function<uint8_t*(size_t)>& image_dst);

// True when `v` holds exactly namespace `ns` and tokens[0, n).
bool entry_matches(const EntryView& v, const std::string& ns, const geist_token* tokens, size_t n);

// The key of (ns, tokens[0, n)) in every tier: "<XXH3-64 of ns, 16 hex>/<XXH3-128 of the ns
// hash and the tokens, 32 hex>". Only [0-9a-f/] characters.
std::string entry_key(const std::string& ns, const geist_token* tokens, size_t n);
// entry_key(ns, tokens, lens[i]) for every i, in one pass over the tokens (the prefixes share
// the hash's state): O(max(lens)) rather than O(sum(lens)), for the lookups of a fine grid.
// lens in any order, each <= the tokens' length.
std::vector<std::string> entry_keys(const std::string& ns, const geist_token* tokens,
                                    const std::vector<size_t>& lens);

}  // namespace geist_cache
