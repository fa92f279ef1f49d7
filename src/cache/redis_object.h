// How the Redis tier lays one object out in Redis: a manifest and parts, each self-verifying.
// Pure functions, no I/O (the tier does the I/O; fuzz/fuzz_redis_object.cpp fuzzes the reader).
// Byte layout and rules: docs/SERVER.md "Tiers" / "Redis".
//
// An object of N bytes is cut into parts whose stored values (a 56-byte part header + payload)
// are at most `part_bytes` long (8 MiB by default). Keys, under the caller's prefix:
//   <prefix>m:<key>                       the manifest, written last
//   <prefix>p:<key>:<write id, 16 hex>:<i> part i of one write
// Parts carry the key's hash, the write id, their index and count, their length and the XXH3
// of their payload; the manifest lists every part's length and checksum and the whole object's.
// A write id is random per write, so parts of two writes of one key never mix: a reader follows
// one manifest to the parts of its own write, and anything that does not match is a miss.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace geist_cache::redis_object {

constexpr size_t kPartHeaderBytes = 56;
constexpr size_t kDefaultPartBytes = size_t{8} << 20;  // largest stored value: 8 MiB
constexpr size_t kMinPartBytes = kPartHeaderBytes + 1;
constexpr size_t kMaxPartBytes = kDefaultPartBytes;
constexpr uint32_t kMaxParts = 1u << 16;

struct PartInfo {
  uint64_t size = 0;      // payload bytes
  uint64_t checksum = 0;  // XXH3-64 of the payload
};

struct Manifest {
  uint64_t key_hash = 0;  // XXH3-64 of the caller's key: a manifest under another key is foreign
  uint64_t write_id = 0;
  uint64_t total_size = 0;
  uint64_t total_checksum = 0;  // XXH3-64 of the whole object
  uint32_t part_bytes = 0;      // the stored-value limit the object was cut with
  std::vector<PartInfo> parts;
};

uint64_t key_hash(std::string_view key);
std::string manifest_key(std::string_view prefix, std::string_view key);
std::string part_key(std::string_view prefix, std::string_view key, uint64_t write_id,
                     uint32_t index);

// Plans the parts of `data` (checksums computed here). part_bytes must lie in
// [kMinPartBytes, kMaxPartBytes] and n must need at most kMaxParts parts (the caller checks
// with part_count()); 0 bytes make an object of no parts.
Manifest plan(std::string_view key, const uint8_t* data, size_t n, uint64_t write_id,
              size_t part_bytes);
uint64_t part_count(size_t n, size_t part_bytes);
std::vector<uint8_t> encode_manifest(const Manifest& m);
// The stored value of part `index`: its header followed by its payload, taken from `data` (the
// whole object that plan() was given).
std::vector<uint8_t> encode_part(const Manifest& m, uint32_t index, const uint8_t* data);

// Reads a manifest stored under `key`. False with `why` set if it is malformed, fails its
// checksum, belongs to another key, or describes parts inconsistent with its sizes, or an
// object larger than max_object_bytes.
bool decode_manifest(const uint8_t* p, size_t n, std::string_view key, uint64_t max_object_bytes,
                     Manifest* out, std::string* why);
// Checks the stored value of part `index` against the manifest (its key, write, index, count,
// length, header and payload checksums). On success *payload points into p.
bool check_part(const Manifest& m, uint32_t index, const uint8_t* p, size_t n,
                const uint8_t** payload, std::string* why);

// Appends part payloads in order and checks the whole: what a reader does once every part
// value is in hand. False (and *out cleared) on any mismatch, a missing part included.
bool assemble(const Manifest& m, const std::vector<std::string_view>& part_values,
              std::vector<uint8_t>* out, std::string* why);

}  // namespace geist_cache::redis_object
