// snapshot_id: the model identity a snapshot image carries (SNAPSHOT_FORMAT.md §4).
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "engine/snapshot.h"

namespace geist {
namespace {

class Hasher {
 public:
  Hasher() : st_(XXH3_createState()) {
    GEIST_CHECK(st_ != nullptr, "xxhash: out of memory");
    XXH3_64bits_reset(st_);
  }
  ~Hasher() { XXH3_freeState(st_); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void bytes(const void* p, size_t n) {
    if (n > 0) XXH3_64bits_update(st_, p, n);
  }
  template <class T>
  void le(T v) {
    bytes(&v, sizeof v);  // the host is little-endian (checked in snapshot.cpp)
  }
  void str(std::string_view s) {
    le<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  uint64_t digest() const { return XXH3_64bits_digest(st_); }

 private:
  XXH3_state_t* st_;
};

// A scalar back in GGUF's own encoding: the reader widened it, so narrow it again.
void hash_scalar(Hasher& h, const GgufKv& kv) {
  switch (kv.type) {
    case GgufValueType::FLOAT32:
      h.le<float>(static_cast<float>(kv.f64));
      return;
    case GgufValueType::FLOAT64:
      h.le<double>(kv.f64);
      return;
    case GgufValueType::INT8:
    case GgufValueType::INT16:
    case GgufValueType::INT32:
    case GgufValueType::INT64: {
      const int64_t v = kv.i64;
      h.bytes(&v, gguf_value_size(kv.type));  // little-endian: the low bytes come first
      return;
    }
    default: {
      const uint64_t v = kv.u64;
      h.bytes(&v, gguf_value_size(kv.type));
      return;
    }
  }
}

// The weight sample (SNAPSHOT_FORMAT.md §4): a fine-tune or re-trained checkpoint changes
// every weight, so a few KiB per tensor tell it apart without reading gigabytes. The head and
// tail cover the first and last rows (embeddings, norms, biases are often wholly inside); the
// interior windows catch edits that leave both ends alone (a few rows of a large matrix).
constexpr uint64_t kWholeTensorBytes = 16384;  // at most this: every byte is hashed
constexpr uint64_t kEndBytes = 4096;           // head and tail of a larger tensor
constexpr uint64_t kWindowBytes = 256;         // each interior window
constexpr uint64_t kWindows = 8;               // evenly spaced interior windows

void hash_sample(Hasher& h, const GgufTensorInfo& t) {
  const uint64_t n = t.nbytes;
  h.le<uint64_t>(n);
  if (n <= kWholeTensorBytes) {
    h.bytes(t.data, n);
    return;
  }
  h.bytes(t.data, kEndBytes);
  // Window i (1..kWindows) starts at kEndBytes + floor(i * span / (kWindows + 1)), span being
  // the room the interior [kEndBytes, n - kEndBytes) leaves for one window; the
  // quotient/remainder split keeps the product exact without a wider type. With n > 16384,
  // span / 9 >= 881, so windows neither overlap each other nor reach into the head or tail.
  const uint64_t span = n - 2 * kEndBytes - kWindowBytes;
  const uint64_t q = span / (kWindows + 1);
  const uint64_t r = span % (kWindows + 1);
  for (uint64_t i = 1; i <= kWindows; ++i) {
    h.bytes(t.data + kEndBytes + i * q + (i * r) / (kWindows + 1), kWindowBytes);
  }
  h.bytes(t.data + n - kEndBytes, kEndBytes);
}

}  // namespace

uint64_t compute_snapshot_id(const GgufFile& file) {
  Hasher h;
  static constexpr char kTag[] = "geist-snapshot-id-v2";
  h.bytes(kTag, sizeof kTag - 1);
  std::vector<const GgufKv*> kvs;
  kvs.reserve(file.kvs().size());
  for (const GgufKv& kv : file.kvs()) kvs.push_back(&kv);
  std::sort(kvs.begin(), kvs.end(),
            [](const GgufKv* a, const GgufKv* b) { return a->key < b->key; });
  for (const GgufKv* kv : kvs) {
    h.str(kv->key);
    h.le<uint32_t>(static_cast<uint32_t>(kv->type));
    if (kv->type == GgufValueType::STRING) {
      h.str(kv->str);
    } else if (kv->type == GgufValueType::ARRAY) {
      h.le<uint32_t>(static_cast<uint32_t>(kv->arr_type));
      h.le<uint64_t>(kv->arr_len);
      if (kv->arr_type == GgufValueType::STRING) {
        for (std::string_view s : kv->arr_strs) h.str(s);
      } else if (kv->arr_data != nullptr) {
        h.bytes(kv->arr_data, gguf_value_size(kv->arr_type) * kv->arr_len);
      }
    } else {
      hash_scalar(h, *kv);
    }
  }
  for (const GgufTensorInfo& t : file.tensors()) {
    h.str(t.name);
    h.le<uint32_t>(static_cast<uint32_t>(t.type));
    h.le<uint32_t>(t.n_dims);
    for (uint32_t d = 0; d < t.n_dims && d < 4; ++d) h.le<int64_t>(t.ne[d]);
    hash_sample(h, t);
  }
  return h.digest();
}

}  // namespace geist
