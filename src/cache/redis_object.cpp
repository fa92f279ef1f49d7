#include "cache/redis_object.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "cache/le_bytes.h"

namespace geist_cache::redis_object {
namespace {

// Manifest: magic, version, n_parts, key_hash, write_id, total_size, total_checksum,
// part_bytes, reserved, then n_parts x {size, checksum}, then the XXH3-64 of all before it.
constexpr char kManifestMagic[8] = {'G', 'E', 'I', 'S', 'T', 'R', 'M', '1'};
constexpr char kPartMagic[8] = {'G', 'E', 'I', 'S', 'T', 'R', 'P', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kManifestHead = 56;
constexpr size_t kManifestEntry = 16;

bool fail(std::string* why, const char* msg) {
  if (why) *why = msg;
  return false;
}

uint64_t payload_cap(size_t part_bytes) { return part_bytes - kPartHeaderBytes; }

}  // namespace

uint64_t key_hash(std::string_view key) { return XXH3_64bits(key.data(), key.size()); }

std::string manifest_key(std::string_view prefix, std::string_view key) {
  std::string k(prefix);
  k += "m:";
  k += key;
  return k;
}

std::string part_key(std::string_view prefix, std::string_view key, uint64_t write_id,
                     uint32_t index) {
  char tail[40];
  std::snprintf(tail, sizeof tail, ":%016llx:%u", static_cast<unsigned long long>(write_id), index);
  std::string k(prefix);
  k += "p:";
  k += key;
  k += tail;
  return k;
}

uint64_t part_count(size_t n, size_t part_bytes) {
  const uint64_t cap = payload_cap(part_bytes);
  return (static_cast<uint64_t>(n) + cap - 1) / cap;
}

Manifest plan(std::string_view key, const uint8_t* data, size_t n, uint64_t write_id,
              size_t part_bytes) {
  Manifest m;
  m.key_hash = key_hash(key);
  m.write_id = write_id;
  m.total_size = n;
  m.total_checksum = XXH3_64bits(data, n);
  m.part_bytes = static_cast<uint32_t>(part_bytes);
  const uint64_t cap = payload_cap(part_bytes);
  for (uint64_t off = 0; off < n; off += cap) {
    const uint64_t len = std::min<uint64_t>(cap, n - off);
    m.parts.push_back({len, XXH3_64bits(data + off, len)});
  }
  return m;
}

std::vector<uint8_t> encode_manifest(const Manifest& m) {
  std::vector<uint8_t> b(kManifestHead + kManifestEntry * m.parts.size() + 8);
  std::memcpy(b.data(), kManifestMagic, 8);
  put_u32(&b[8], kVersion);
  put_u32(&b[12], static_cast<uint32_t>(m.parts.size()));
  put_u64(&b[16], m.key_hash);
  put_u64(&b[24], m.write_id);
  put_u64(&b[32], m.total_size);
  put_u64(&b[40], m.total_checksum);
  put_u32(&b[48], m.part_bytes);
  put_u32(&b[52], 0);
  for (size_t i = 0; i < m.parts.size(); ++i) {
    put_u64(&b[kManifestHead + kManifestEntry * i], m.parts[i].size);
    put_u64(&b[kManifestHead + kManifestEntry * i + 8], m.parts[i].checksum);
  }
  const size_t body = b.size() - 8;
  put_u64(&b[body], XXH3_64bits(b.data(), body));
  return b;
}

std::vector<uint8_t> encode_part(const Manifest& m, uint32_t index, const uint8_t* data) {
  const PartInfo& pi = m.parts[index];
  std::vector<uint8_t> b(kPartHeaderBytes + pi.size);
  std::memcpy(b.data(), kPartMagic, 8);
  put_u64(&b[8], m.key_hash);
  put_u64(&b[16], m.write_id);
  put_u32(&b[24], index);
  put_u32(&b[28], static_cast<uint32_t>(m.parts.size()));
  put_u64(&b[32], pi.size);
  put_u64(&b[40], pi.checksum);
  put_u64(&b[48], XXH3_64bits(b.data(), 48));
  std::memcpy(b.data() + kPartHeaderBytes, data + payload_cap(m.part_bytes) * index, pi.size);
  return b;
}

bool decode_manifest(const uint8_t* p, size_t n, std::string_view key, uint64_t max_object_bytes,
                     Manifest* out, std::string* why) {
  if (n < kManifestHead + 8) return fail(why, "manifest truncated");
  if (std::memcmp(p, kManifestMagic, 8) != 0) return fail(why, "not a manifest (magic)");
  if (get_u32(p + 8) != kVersion) return fail(why, "manifest version unknown");
  const uint32_t n_parts = get_u32(p + 12);
  if (n_parts > kMaxParts) return fail(why, "manifest part count out of range");
  if (n != kManifestHead + kManifestEntry * n_parts + 8) return fail(why, "manifest length");
  if (get_u64(p + n - 8) != XXH3_64bits(p, n - 8)) return fail(why, "manifest checksum");
  Manifest m;
  m.key_hash = get_u64(p + 16);
  if (m.key_hash != key_hash(key)) return fail(why, "manifest of another key (foreign)");
  m.write_id = get_u64(p + 24);
  m.total_size = get_u64(p + 32);
  m.total_checksum = get_u64(p + 40);
  m.part_bytes = get_u32(p + 48);
  if (get_u32(p + 52) != 0) return fail(why, "manifest reserved field set");
  if (m.part_bytes < kMinPartBytes || m.part_bytes > kMaxPartBytes) {
    return fail(why, "manifest part size out of range");
  }
  if (m.total_size > max_object_bytes) return fail(why, "object larger than the limit");
  const uint64_t cap = payload_cap(m.part_bytes);
  if (part_count(m.total_size, m.part_bytes) != n_parts) return fail(why, "manifest part count");
  m.parts.resize(n_parts);
  for (uint32_t i = 0; i < n_parts; ++i) {
    m.parts[i].size = get_u64(p + kManifestHead + kManifestEntry * i);
    m.parts[i].checksum = get_u64(p + kManifestHead + kManifestEntry * i + 8);
    const uint64_t want = i + 1 < n_parts ? cap : m.total_size - cap * (n_parts - 1);
    if (m.parts[i].size != want) return fail(why, "manifest part size");
  }
  *out = std::move(m);
  return true;
}

bool check_part(const Manifest& m, uint32_t index, const uint8_t* p, size_t n,
                const uint8_t** payload, std::string* why) {
  if (index >= m.parts.size()) return fail(why, "part index beyond the manifest");
  if (n < kPartHeaderBytes) return fail(why, "part truncated (header)");
  if (std::memcmp(p, kPartMagic, 8) != 0) return fail(why, "not a part (magic)");
  if (get_u64(p + 48) != XXH3_64bits(p, 48)) return fail(why, "part header checksum");
  if (get_u64(p + 8) != m.key_hash) return fail(why, "part of another key (misplaced)");
  if (get_u64(p + 16) != m.write_id) return fail(why, "part of another write (mixed or stale)");
  if (get_u32(p + 24) != index) return fail(why, "part index (misplaced)");
  if (get_u32(p + 28) != m.parts.size()) return fail(why, "part count differs from manifest");
  const PartInfo& want = m.parts[index];
  if (get_u64(p + 32) != want.size) return fail(why, "part size differs from manifest");
  if (n - kPartHeaderBytes != want.size) return fail(why, "part truncated or extended");
  if (get_u64(p + 40) != want.checksum) return fail(why, "part checksum differs from manifest");
  if (XXH3_64bits(p + kPartHeaderBytes, want.size) != want.checksum) {
    return fail(why, "part payload checksum");
  }
  *payload = p + kPartHeaderBytes;
  return true;
}

bool assemble(const Manifest& m, const std::vector<std::string_view>& part_values,
              std::vector<uint8_t>* out, std::string* why) {
  out->clear();
  if (part_values.size() != m.parts.size()) return fail(why, "part count");
  // Every part is checked before the object's buffer is allocated, so a manifest claiming a
  // huge object with short parts costs nothing.
  std::vector<const uint8_t*> payloads(part_values.size());
  for (uint32_t i = 0; i < part_values.size(); ++i) {
    const auto& v = part_values[i];
    if (!check_part(m, i, reinterpret_cast<const uint8_t*>(v.data()), v.size(), &payloads[i],
                    why)) {
      return false;
    }
  }
  out->reserve(m.total_size);
  for (uint32_t i = 0; i < payloads.size(); ++i) {
    out->insert(out->end(), payloads[i], payloads[i] + m.parts[i].size);
  }
  if (XXH3_64bits(out->data(), out->size()) != m.total_checksum) {
    out->clear();
    return fail(why, "object checksum");
  }
  return true;
}

}  // namespace geist_cache::redis_object
