// libFuzzer entry point for the GGUF reader: any input must parse or fail with
// GEIST_E_FORMAT, and everything a successful parse exposes must be readable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include "formats/gguf.h"

namespace {

void touch(std::string_view s, uint64_t* acc) {
  for (char c : s) *acc += static_cast<uint8_t>(c);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<geist::GgufFile> f;
  const geist::Status st = geist::GgufFile::open_memory(data, size, &f);
  if (!st.is_ok()) {
    if (st.code() != GEIST_E_FORMAT || st.message().empty()) std::abort();
    return 0;
  }
  uint64_t acc = 0;
  for (const geist::GgufKv& kv : f->kvs()) {
    touch(kv.key, &acc);
    touch(kv.str, &acc);
    for (std::string_view s : kv.arr_strs) touch(s, &acc);
    if (f->find(kv.key) != &kv) std::abort();
    // The typed getters must never fail with anything but FORMAT for a present key.
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    float f32;
    bool b;
    std::string_view sv;
    std::vector<int32_t> ai;
    std::vector<float> af;
    const std::vector<std::string_view>* as;
    const geist::Status sts[] = {
        f->get_u32(kv.key, &u32),    f->get_i32(kv.key, &i32),    f->get_u64(kv.key, &u64),
        f->get_f32(kv.key, &f32),    f->get_bool(kv.key, &b),     f->get_str(kv.key, &sv),
        f->get_arr_i32(kv.key, &ai), f->get_arr_f32(kv.key, &af), f->get_arr_str(kv.key, &as),
    };
    for (const geist::Status& s : sts) {
      if (!s.is_ok() && s.code() != GEIST_E_FORMAT) std::abort();
    }
    for (int32_t v : ai) acc += static_cast<uint32_t>(v);
  }
  for (const geist::GgufTensorInfo& t : f->tensors()) {
    touch(t.name, &acc);
    if (f->find_tensor(t.name) != &t) std::abort();
    if (t.nbytes > 0 && (t.data < data || t.data + t.nbytes > data + size)) std::abort();
    for (uint64_t i = 0; i < t.nbytes; ++i) acc += t.data[i];
    acc += static_cast<uint64_t>(t.n_elements());
  }
  volatile uint64_t sink = acc;  // keeps the reads above from being optimised away
  (void)sink;
  return 0;
}
