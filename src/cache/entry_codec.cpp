#include "cache/entry_codec.h"

#include "cache/le_bytes.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace geist_cache {

namespace {

constexpr char kMagic[8] = {'G', 'E', 'I', 'S', 'T', 'C', 'E', '1'};

void put_checksum(uint8_t* p, const uint8_t* data, size_t n) {
  const XXH128_hash_t h = XXH3_128bits(data, n);
  put_u64(p, h.low64);
  put_u64(p + 8, h.high64);
}

bool fail(std::string* err, const char* what) {
  *err = what;
  return false;
}

// Every check of decode_entry but the checksum; fills *out.
bool check_structure(const uint8_t* data, size_t size, EntryView* out, std::string* err) {
  if (data == nullptr || size < kEntryHeaderBytes + kEntryChecksumBytes) {
    return fail(err, "shorter than a header and a checksum");
  }
  if (std::memcmp(data, kMagic, 8) != 0) return fail(err, "bad magic");
  if (get_u32(data + 8) != kEntryVersion) return fail(err, "unknown version");
  if (get_u32(data + 12) != 0) return fail(err, "unknown flags");
  const uint64_t ns_len = get_u32(data + 16), n_tokens = get_u32(data + 20);
  const uint64_t image_size = get_u64(data + 24);
  if (ns_len > kMaxNamespaceBytes) return fail(err, "namespace too long");
  if (n_tokens == 0 || n_tokens > kMaxEntryTokens) return fail(err, "token count out of range");
  // Every length is bounded before the sum, so the sum cannot wrap.
  const uint64_t fixed = kEntryHeaderBytes + ns_len + 4 * n_tokens + kEntryChecksumBytes;
  if (image_size > size || fixed + image_size != size) {
    return fail(err, "lengths do not add up to the object's size");
  }
  const uint8_t* p = data + kEntryHeaderBytes;
  out->ns = std::string_view(reinterpret_cast<const char*>(p), ns_len);
  p += ns_len;
  out->tokens = p;
  out->n_tokens = n_tokens;
  p += 4 * n_tokens;
  out->image = p;
  out->image_size = image_size;
  return true;
}

bool checksum_matches(const uint8_t* data, size_t size, const XXH128_hash_t& h) {
  const uint8_t* sum = data + size - kEntryChecksumBytes;
  return get_u64(sum) == h.low64 && get_u64(sum + 8) == h.high64;
}

constexpr size_t kCopyPiece = size_t{256} << 10;  // hashed, then copied while in cache

}  // namespace

geist_token EntryView::token(size_t i) const {
  return static_cast<geist_token>(get_u32(tokens + 4 * i));
}

std::vector<uint8_t> encode_entry(const std::string& ns, const geist_token* tokens, size_t n,
                                  const uint8_t* image, size_t image_size) {
  const size_t total = kEntryHeaderBytes + ns.size() + 4 * n + image_size + kEntryChecksumBytes;
  std::vector<uint8_t> out(total);
  uint8_t* p = out.data();
  std::memcpy(p, kMagic, 8);
  put_u32(p + 8, kEntryVersion);
  put_u32(p + 12, 0);  // flags
  put_u32(p + 16, static_cast<uint32_t>(ns.size()));
  put_u32(p + 20, static_cast<uint32_t>(n));
  put_u64(p + 24, image_size);
  p += kEntryHeaderBytes;
  std::memcpy(p, ns.data(), ns.size());
  p += ns.size();
  for (size_t i = 0; i < n; ++i, p += 4) put_u32(p, static_cast<uint32_t>(tokens[i]));
  if (image_size > 0) std::memcpy(p, image, image_size);
  p += image_size;
  put_checksum(p, out.data(), total - kEntryChecksumBytes);
  return out;
}

bool decode_entry(const uint8_t* data, size_t size, EntryView* out, std::string* err) {
  EntryView v;
  if (!check_structure(data, size, &v, err)) return false;
  if (!checksum_matches(data, size, XXH3_128bits(data, size - kEntryChecksumBytes))) {
    return fail(err, "checksum mismatch");
  }
  *out = v;
  return true;
}

bool decode_entry_copy(const uint8_t* data, size_t size, EntryView* out, std::string* err,
                       const std::function<uint8_t*(size_t)>& image_dst) {
  EntryView v;
  if (!check_structure(data, size, &v, err)) return false;
  uint8_t* dst = image_dst(v.image_size);
  if (dst == nullptr && v.image_size > 0) return fail(err, "no buffer for the image");
  // The same XXH3-128 as decode_entry's one call: streaming gives the one-shot value.
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, data, static_cast<size_t>(v.image - data));
  for (size_t at = 0; at < v.image_size; at += kCopyPiece) {
    const size_t n = std::min(kCopyPiece, v.image_size - at);
    XXH3_128bits_update(&state, v.image + at, n);
    std::memcpy(dst + at, v.image + at, n);
  }
  if (!checksum_matches(data, size, XXH3_128bits_digest(&state))) {
    return fail(err, "checksum mismatch");
  }
  v.image = dst;
  *out = v;
  return true;
}

bool entry_matches(const EntryView& v, const std::string& ns, const geist_token* tokens, size_t n) {
  if (v.ns != ns || v.n_tokens != n) return false;
  for (size_t i = 0; i < n; ++i) {
    if (v.token(i) != tokens[i]) return false;
  }
  return true;
}

namespace {

// The key's hash state after the namespace hash (tokens follow).
uint64_t key_begin(const std::string& ns, XXH3_state_t* st) {
  const uint64_t nh = XXH3_64bits(ns.data(), ns.size());
  XXH3_128bits_reset(st);
  uint8_t buf[8];
  put_u64(buf, nh);
  XXH3_128bits_update(st, buf, 8);
  return nh;
}

// Feeds tokens[from, to) (little-endian u32 each; the streaming hash does not depend on how
// the bytes are split into updates).
void key_update(XXH3_state_t* st, const geist_token* tokens, size_t from, size_t to) {
  uint8_t tb[4 * 256];
  for (size_t i = from; i < to;) {
    size_t k = 0;
    for (; k < 256 && i < to; ++k, ++i) put_u32(tb + 4 * k, static_cast<uint32_t>(tokens[i]));
    XXH3_128bits_update(st, tb, 4 * k);
  }
}

std::string key_finish(uint64_t nh, const XXH3_state_t* st) {
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  char out[16 + 1 + 32 + 1];
  std::snprintf(out, sizeof out, "%016llx/%016llx%016llx", static_cast<unsigned long long>(nh),
                static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return out;
}

}  // namespace

std::string entry_key(const std::string& ns, const geist_token* tokens, size_t n) {
  XXH3_state_t state;
  const uint64_t nh = key_begin(ns, &state);
  key_update(&state, tokens, 0, n);
  return key_finish(nh, &state);
}

std::vector<std::string> entry_keys(const std::string& ns, const geist_token* tokens,
                                    const std::vector<size_t>& lens) {
  std::vector<size_t> order(lens.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lens[a] < lens[b]; });
  std::vector<std::string> out(lens.size());
  XXH3_state_t state;
  const uint64_t nh = key_begin(ns, &state);
  size_t at = 0;
  for (size_t i : order) {
    key_update(&state, tokens, at, lens[i]);
    at = lens[i];
    out[i] = key_finish(nh, &state);  // the digest leaves the state as it was
  }
  return out;
}

}  // namespace geist_cache
