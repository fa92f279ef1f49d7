// Writes valid inputs for fuzz_redis_object into the directory given as argv[1]: objects of
// zero, one and several parts (small part sizes, so the seeds stay small), framed as the
// fuzzer reads them, plus a manifest alone.
#include <cstdio>
#include <string>
#include <vector>

#include "cache/redis_object.h"
#include "redis_object_frames.h"

namespace ro = geist_cache::redis_object;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  int written = 0;
  for (size_t n : {size_t{0}, size_t{1}, size_t{100}, size_t{1000}, size_t{5000}}) {
    for (size_t part_bytes : {ro::kMinPartBytes, size_t{300}, size_t{4096}}) {
      std::vector<uint8_t> data(n);
      for (size_t i = 0; i < n; ++i) data[i] = static_cast<uint8_t>(i * 131 + part_bytes);
      if (ro::part_count(n, part_bytes) > 64) continue;
      const ro::Manifest m = ro::plan("k", data.data(), n, 0x1234 + n, part_bytes);
      std::vector<uint8_t> out;
      const auto mv = ro::encode_manifest(m);
      geist_fuzz::append_frame(&out, mv.data(), mv.size());
      for (uint32_t i = 0; i < m.parts.size(); ++i) {
        const auto pv = ro::encode_part(m, i, data.data());
        geist_fuzz::append_frame(&out, pv.data(), pv.size());
      }
      const std::string path = std::string(argv[1]) + "/object_" + std::to_string(n) + "_" +
                               std::to_string(part_bytes) + ".bin";
      FILE* f = std::fopen(path.c_str(), "wb");
      if (f == nullptr || std::fwrite(out.data(), 1, out.size(), f) != out.size()) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        return 1;
      }
      std::fclose(f);
      ++written;
    }
  }
  std::printf("%d seeds\n", written);
  return 0;
}
