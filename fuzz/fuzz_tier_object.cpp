// libFuzzer entry point for the readers of tier objects (docs/SERVER.md "Tiers"): the entry
// codec's decode_entry and decode_entry_copy (the tiers' read path, the image copied out in
// the checksum's pass) and the disk tier's file check, on any bytes. They must refuse or
// accept without reading out of bounds; an accepted entry must re-encode to the same bytes,
// and both decoders must agree, the copy's image byte for byte.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cache/disk_tier.h"
#include "cache/entry_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Exact-size copies: ASan catches a read one byte past the object.
  std::vector<uint8_t> buf(data, data + size);
  geist_cache::EntryView v, c;
  std::string err, cerr;
  std::vector<uint8_t> image;
  const bool ok = geist_cache::decode_entry(buf.data(), buf.size(), &v, &err);
  const bool copied =
      geist_cache::decode_entry_copy(buf.data(), buf.size(), &c, &cerr, [&](size_t n) {
        image.assign(n, 0xA5);  // exact size
        return image.data();
      });
  if (ok != copied) std::abort();
  if (copied && (c.image_size != v.image_size || image.size() != v.image_size ||
                 (v.image_size > 0 && std::memcmp(image.data(), v.image, v.image_size) != 0))) {
    std::abort();
  }
  if (ok) {
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
