// Builds GGUF bytes by hand, straight from the format description, independently of
// GgufWriter: the reader's tests must not trust our own writer to define the format.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace geist::test {

// GGUF value type ids, spelled out here rather than taken from gguf.h.
enum : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kStr = 8,
  kArr = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
constexpr uint32_t kGgufMagic = 0x46554747;  // bytes 'G' 'G' 'U' 'F'

class Bytes {
 public:
  template <class T>
  Bytes& put(T v) {
    const size_t at = b_.size();
    b_.resize(at + sizeof v);
    std::memcpy(b_.data() + at, &v, sizeof v);
    return *this;
  }
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& i64(int64_t v) { return put(v); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::vector<uint8_t>& v) {
    b_.insert(b_.end(), v.begin(), v.end());
    return *this;
  }
  Bytes& zeros(size_t n) {
    b_.resize(b_.size() + n, 0);
    return *this;
  }
  Bytes& pad_to(size_t align) {
    b_.resize((b_.size() + align - 1) / align * align, 0);
    return *this;
  }
  size_t size() const { return b_.size(); }
  const std::vector<uint8_t>& vec() const { return b_; }

 private:
  std::vector<uint8_t> b_;
};

// One tensor info record as it appears in the file.
struct TensorRec {
  std::string name;
  std::vector<int64_t> ne;  // [n_dims]
  uint32_t type = 0;        // ggml type id
  uint64_t offset = 0;      // relative to the data section
};

// A whole file: header, encoded kv records, tensor infos, padding to `alignment`, then
// `data_bytes` bytes of tensor data (byte i holds i & 0xff). The counts written in the header
// can be overridden to make lying files.
struct FileSpec {
  uint32_t magic = kGgufMagic;
  uint32_t version = 3;
  std::vector<Bytes> kvs;  // each: key string, type id, value
  std::vector<TensorRec> tensors;
  uint64_t alignment = 32;
  uint64_t data_bytes = 0;
  bool pad_header = true;
  int64_t n_tensors_override = -1;
  int64_t n_kv_override = -1;

  std::vector<uint8_t> build() const {
    Bytes out;
    out.u32(magic).u32(version);
    out.u64(n_tensors_override >= 0 ? static_cast<uint64_t>(n_tensors_override) : tensors.size());
    out.u64(n_kv_override >= 0 ? static_cast<uint64_t>(n_kv_override) : kvs.size());
    for (const Bytes& kv : kvs) out.raw(kv.vec());
    for (const TensorRec& t : tensors) {
      out.str(t.name).u32(static_cast<uint32_t>(t.ne.size()));
      for (int64_t n : t.ne) out.i64(n);
      out.u32(t.type).u64(t.offset);
    }
    if (pad_header) out.pad_to(alignment);
    std::vector<uint8_t> v = out.vec();
    for (uint64_t i = 0; i < data_bytes; ++i) v.push_back(static_cast<uint8_t>(i));
    return v;
  }
};

template <class T>
Bytes kv_scalar(std::string_view key, uint32_t type, T v) {
  Bytes b;
  b.str(key).u32(type).put(v);
  return b;
}
inline Bytes kv_str(std::string_view key, std::string_view v) {
  Bytes b;
  b.str(key).u32(kStr).str(v);
  return b;
}

// A small valid file: two kvs and two f32 tensors [4] and [8 x 2], 96 bytes of data.
inline FileSpec small_valid_spec() {
  FileSpec f;
  f.kvs.push_back(kv_str("general.architecture", "llama"));
  f.kvs.push_back(kv_scalar<uint32_t>("llama.block_count", kU32, 5));
  f.tensors.push_back({"a", {4}, 0, 0});      // 16 bytes at 0
  f.tensors.push_back({"b", {8, 2}, 0, 32});  // 64 bytes at 32
  f.data_bytes = 96;
  return f;
}

}  // namespace geist::test
