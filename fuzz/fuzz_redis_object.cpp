// libFuzzer entry point for the Redis tier's object reader (cache/redis_object.h): a manifest
// and the part values fetched for it (framed as in redis_object_frames.h). Any input must be
// refused with a reason or accepted; what is accepted must be canonical: the manifest and every
// part re-encode to the very bytes read, and the object has the size and checksum the manifest
// states.
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "cache/redis_object.h"
#include "redis_object_frames.h"

namespace ro = geist_cache::redis_object;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto frames = geist_fuzz::split_frames(data, size);
  if (frames.empty()) return 0;
  ro::Manifest m;
  std::string why;
  const auto* mp = reinterpret_cast<const uint8_t*>(frames[0].data());
  if (!ro::decode_manifest(mp, frames[0].size(), "k", uint64_t{1} << 32, &m, &why)) {
    if (why.empty()) std::abort();
    return 0;
  }
  const auto again = ro::encode_manifest(m);
  if (again.size() != frames[0].size() || std::memcmp(again.data(), mp, again.size()) != 0) {
    std::abort();  // two byte strings decode to one manifest
  }
  const std::vector<std::string_view> parts(frames.begin() + 1, frames.end());
  for (uint32_t i = 0; i < parts.size() && i < m.parts.size(); ++i) {
    const uint8_t* payload = nullptr;
    why.clear();
    if (!ro::check_part(m, i, reinterpret_cast<const uint8_t*>(parts[i].data()), parts[i].size(),
                        &payload, &why) &&
        why.empty()) {
      std::abort();
    }
  }
  std::vector<uint8_t> out;
  why.clear();
  if (!ro::assemble(m, parts, &out, &why)) {
    if (why.empty() || !out.empty()) std::abort();
    return 0;
  }
  if (out.size() != m.total_size || XXH3_64bits(out.data(), out.size()) != m.total_checksum) {
    std::abort();
  }
  for (uint32_t i = 0; i < parts.size(); ++i) {
    const auto p = ro::encode_part(m, i, out.data());
    if (p.size() != parts[i].size() || std::memcmp(p.data(), parts[i].data(), p.size()) != 0) {
      std::abort();
    }
  }
  return 0;
}
