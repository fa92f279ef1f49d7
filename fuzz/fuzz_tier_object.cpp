// libFuzzer entry point for the readers of tier objects (docs/SERVER.md "Tiers"): the entry
// codec's decode_entry and the disk tier's file check, on any bytes. Both must refuse or
// accept without reading out of bounds; an accepted entry must re-encode to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "cache/disk_tier.h"
#include "cache/entry_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Exact-size copies: ASan catches a read one byte past the object.
  std::vector<uint8_t> buf(data, data + size);
  geist_cache::EntryView v;
  std::string err;
  if (geist_cache::decode_entry(buf.data(), buf.size(), &v, &err)) {
    std::vector<geist_token> toks(v.n_tokens);
    for (size_t i = 0; i < v.n_tokens; ++i) toks[i] = v.token(i);
    const std::string ns(v.ns);
    if (!geist_cache::entry_matches(v, ns, toks.data(), toks.size())) std::abort();
    if (geist_cache::encode_entry(ns, toks.data(), toks.size(), v.image, v.image_size) != buf) {
      std::abort();
    }
    (void)geist_cache::entry_key(ns, toks.data(), toks.size());
  }
  // The same bytes as a disk-tier file of key "k/1".
  size_t off = 0, len = 0;
  if (geist_cache::disk_file_payload(buf.data(), buf.size(), "k/1", &off, &len) &&
      (off + len > size || off < 3)) {
    std::abort();
  }
  std::string key;
  (void)geist_cache::decode_file_name(std::string(buf.begin(), buf.end()), &key);
  return 0;
}
