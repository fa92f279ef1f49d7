// Byte images of typed arrays, for the tests that build tensors and files in memory.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace geist::test {

// The little-endian (host) bytes of a float32 array.
inline std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace geist::test
