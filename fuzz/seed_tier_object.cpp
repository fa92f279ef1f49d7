// Writes valid tier objects (entries of several shapes, and disk-tier files of them) as
// fuzz_tier_object's seed corpus. Usage: fuzz_tier_object_seed OUT_DIR
#include <cstdio>
#include <string>
#include <vector>

#include "cache/entry_codec.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  int n = 0;
  for (size_t tokens : {1, 3, 64}) {
    for (size_t image : {0, 17, 300}) {
      std::vector<geist_token> t(tokens);
      for (size_t i = 0; i < tokens; ++i) t[i] = static_cast<geist_token>(i * 31 + 2);
      std::vector<uint8_t> img(image, 0x5c);
      const auto obj = geist_cache::encode_entry("model:x/kv1/ctx512/grid64/salt:", t.data(),
                                                 t.size(), img.data(), img.size());
      const std::string path = std::string(argv[1]) + "/entry" + std::to_string(n++);
      FILE* f = std::fopen(path.c_str(), "wb");
      if (f == nullptr || std::fwrite(obj.data(), 1, obj.size(), f) != obj.size()) return 1;
      std::fclose(f);
    }
  }
  return 0;
}
