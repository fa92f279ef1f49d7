// The input format of fuzz_redis_object and its seeds: a sequence of frames, each a 32-bit
// little-endian length and that many bytes. Frame 0 is a manifest stored under the key "k",
// the rest are the part values a reader fetched for it, in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace geist_fuzz {

inline std::vector<std::string_view> split_frames(const uint8_t* data, size_t size) {
  std::vector<std::string_view> frames;
  size_t pos = 0;
  while (size - pos >= 4 && frames.size() < 4096) {
    const uint32_t len =
        static_cast<uint32_t>(data[pos]) | (static_cast<uint32_t>(data[pos + 1]) << 8) |
        (static_cast<uint32_t>(data[pos + 2]) << 16) | (static_cast<uint32_t>(data[pos + 3]) << 24);
    pos += 4;
    const size_t n = len < size - pos ? len : size - pos;  // a short last frame is cut
    frames.emplace_back(reinterpret_cast<const char*>(data + pos), n);
    pos += n;
  }
  return frames;
}

inline void append_frame(std::vector<uint8_t>* out, const uint8_t* p, size_t n) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(n >> (8 * i)));
  out->insert(out->end(), p, p + n);
}

}  // namespace geist_fuzz
