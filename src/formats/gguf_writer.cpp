// GGUF v3 writer. Metadata and tensor infos are serialised up front (they are small); tensor
// data is written one tensor at a time so that deferred tensors never sit in memory together.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "formats/gguf.h"

namespace geist {
namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr char kAlignmentKey[] = "general.alignment";

void put_bytes(std::vector<uint8_t>* out, const void* p, size_t n) {
  // resize + memcpy rather than insert(): GCC 12 misreports insert() of a few bytes as an
  // overflow (-Wstringop-overflow).
  if (n == 0) return;
  const size_t at = out->size();
  out->resize(at + n);
  std::memcpy(out->data() + at, p, n);
}
template <class T>
void put(std::vector<uint8_t>* out, T v) {
  put_bytes(out, &v, sizeof v);
}
void put_str(std::vector<uint8_t>* out, std::string_view s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

Status io_error(const std::string& path, const char* what, int err) {
  return Status::error(GEIST_E_IO, "%s: %s: %s", path.c_str(), what, std::strerror(err));
}

Status write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error(path, "write failed", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::ok();
}

}  // namespace

struct GgufWriter::Impl {
  struct Kv {
    std::string key;
    std::vector<uint8_t> value;  // value type id (u32) followed by the encoded value
  };
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;    // [n_dims], ne[0] contiguous
    std::vector<uint8_t> data;  // [nbytes]; empty when deferred
    bool deferred;
    uint64_t nbytes;
    uint64_t offset = 0;  // relative to the data section, filled by layout()
  };

  uint32_t alignment = kDefaultAlignment;
  std::vector<Kv> kvs;
  std::vector<Tensor> tensors;

  void add_kv(std::string key, GgufValueType type, const void* v, size_t n) {
    GEIST_CHECK(!key.empty() && key.find('\0') == std::string::npos, "invalid GGUF key");
    GEIST_CHECK(key != kAlignmentKey, "use set_alignment() for general.alignment");
    for (const Kv& kv : kvs) GEIST_CHECK(kv.key != key, "duplicate GGUF key");
    Kv kv{std::move(key), {}};
    put<uint32_t>(&kv.value, static_cast<uint32_t>(type));
    put_bytes(&kv.value, v, n);
    kvs.push_back(std::move(kv));
  }

  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne,
                  std::vector<uint8_t> data, bool deferred) {
    GEIST_CHECK(!name.empty() && name.find('\0') == std::string::npos, "invalid tensor name");
    GEIST_CHECK(!ne.empty() && ne.size() <= 4, "tensor must have 1..4 dimensions");
    for (const Tensor& t : tensors) GEIST_CHECK(t.name != name, "duplicate tensor name");
    uint64_t nbytes = ggml_row_size(type, ne[0]);
    GEIST_CHECK(nbytes > 0 || ne[0] == 0, "ne[0] must be a multiple of the block size");
    for (size_t d = 1; d < ne.size(); ++d) {
      GEIST_CHECK(ne[d] >= 0, "negative dimension");
      GEIST_CHECK(!__builtin_mul_overflow(nbytes, static_cast<uint64_t>(ne[d]), &nbytes),
                  "tensor size overflows");
    }
    GEIST_CHECK(deferred || data.size() == nbytes, "tensor data size does not match its shape");
    tensors.push_back({std::move(name), type, std::move(ne), std::move(data), deferred, nbytes});
  }

  // Assigns data offsets and returns the header (everything before the data section),
  // padded to the alignment, and the size of the data section.
  std::vector<uint8_t> layout(uint64_t* data_size) {
    const bool write_alignment = alignment != kDefaultAlignment;
    std::vector<uint8_t> h;
    put<uint32_t>(&h, 0x46554747);  // "GGUF"
    put<uint32_t>(&h, 3);
    put<uint64_t>(&h, tensors.size());
    put<uint64_t>(&h, kvs.size() + (write_alignment ? 1 : 0));
    if (write_alignment) {
      put_str(&h, kAlignmentKey);
      put<uint32_t>(&h, static_cast<uint32_t>(GgufValueType::UINT32));
      put<uint32_t>(&h, alignment);
    }
    for (const Kv& kv : kvs) {
      put_str(&h, kv.key);
      put_bytes(&h, kv.value.data(), kv.value.size());
    }
    uint64_t offset = 0;
    for (Tensor& t : tensors) {
      offset = align_up(offset, alignment);
      t.offset = offset;
      offset += t.nbytes;
      put_str(&h, t.name);
      put<uint32_t>(&h, static_cast<uint32_t>(t.ne.size()));
      for (int64_t n : t.ne) put<int64_t>(&h, n);
      put<uint32_t>(&h, static_cast<uint32_t>(t.type));
      put<uint64_t>(&h, t.offset);
    }
    // A file without tensors ends right after its metadata, as llama.cpp writes vocab files.
    if (!tensors.empty()) h.resize(align_up(h.size(), alignment), 0);
    *data_size = offset;
    return h;
  }
};

GgufWriter::GgufWriter() : impl_(std::make_unique<Impl>()) {}
GgufWriter::~GgufWriter() = default;

void GgufWriter::set_alignment(uint32_t a) {
  GEIST_CHECK(a != 0 && std::has_single_bit(a), "alignment must be a non-zero power of two");
  impl_->alignment = a;
}

void GgufWriter::add_u8(std::string key, uint8_t v) {
  impl_->add_kv(std::move(key), GgufValueType::UINT8, &v, sizeof v);
}
void GgufWriter::add_i8(std::string key, int8_t v) {
  impl_->add_kv(std::move(key), GgufValueType::INT8, &v, sizeof v);
}
void GgufWriter::add_u16(std::string key, uint16_t v) {
  impl_->add_kv(std::move(key), GgufValueType::UINT16, &v, sizeof v);
}
void GgufWriter::add_i16(std::string key, int16_t v) {
  impl_->add_kv(std::move(key), GgufValueType::INT16, &v, sizeof v);
}
void GgufWriter::add_u32(std::string key, uint32_t v) {
  impl_->add_kv(std::move(key), GgufValueType::UINT32, &v, sizeof v);
}
void GgufWriter::add_i32(std::string key, int32_t v) {
  impl_->add_kv(std::move(key), GgufValueType::INT32, &v, sizeof v);
}
void GgufWriter::add_u64(std::string key, uint64_t v) {
  impl_->add_kv(std::move(key), GgufValueType::UINT64, &v, sizeof v);
}
void GgufWriter::add_i64(std::string key, int64_t v) {
  impl_->add_kv(std::move(key), GgufValueType::INT64, &v, sizeof v);
}
void GgufWriter::add_f32(std::string key, float v) {
  impl_->add_kv(std::move(key), GgufValueType::FLOAT32, &v, sizeof v);
}
void GgufWriter::add_f64(std::string key, double v) {
  impl_->add_kv(std::move(key), GgufValueType::FLOAT64, &v, sizeof v);
}
void GgufWriter::add_bool(std::string key, bool v) {
  const uint8_t b = v ? 1 : 0;
  impl_->add_kv(std::move(key), GgufValueType::BOOL, &b, sizeof b);
}
void GgufWriter::add_str(std::string key, std::string v) {
  std::vector<uint8_t> enc;
  put_str(&enc, v);
  impl_->add_kv(std::move(key), GgufValueType::STRING, enc.data(), enc.size());
}

void GgufWriter::add_arr_raw(std::string key, GgufValueType elem_type, uint64_t n,
                             std::vector<uint8_t> raw) {
  GEIST_CHECK(elem_type != GgufValueType::STRING && elem_type != GgufValueType::ARRAY,
              "add_arr_raw takes numeric element types only");
  uint64_t elem = 0;
  switch (elem_type) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::BOOL:
      elem = 1;
      break;
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
      elem = 2;
      break;
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::FLOAT32:
      elem = 4;
      break;
    default:
      elem = 8;
  }
  GEIST_CHECK(raw.size() == n * elem, "array data size does not match its length");
  std::vector<uint8_t> enc;
  put<uint32_t>(&enc, static_cast<uint32_t>(elem_type));
  put<uint64_t>(&enc, n);
  put_bytes(&enc, raw.data(), raw.size());
  impl_->add_kv(std::move(key), GgufValueType::ARRAY, enc.data(), enc.size());
}
void GgufWriter::add_arr_i32(std::string key, std::vector<int32_t> v) {
  std::vector<uint8_t> raw(v.size() * sizeof(int32_t));
  if (!v.empty()) std::memcpy(raw.data(), v.data(), raw.size());
  add_arr_raw(std::move(key), GgufValueType::INT32, v.size(), std::move(raw));
}
void GgufWriter::add_arr_f32(std::string key, std::vector<float> v) {
  std::vector<uint8_t> raw(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(raw.data(), v.data(), raw.size());
  add_arr_raw(std::move(key), GgufValueType::FLOAT32, v.size(), std::move(raw));
}
void GgufWriter::add_arr_str(std::string key, std::vector<std::string> v) {
  std::vector<uint8_t> enc;
  put<uint32_t>(&enc, static_cast<uint32_t>(GgufValueType::STRING));
  put<uint64_t>(&enc, v.size());
  for (const std::string& s : v) put_str(&enc, s);
  impl_->add_kv(std::move(key), GgufValueType::ARRAY, enc.data(), enc.size());
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne,
                            std::vector<uint8_t> data) {
  impl_->add_tensor(std::move(name), type, std::move(ne), std::move(data), false);
}
void GgufWriter::add_tensor_deferred(std::string name, GgmlType type, std::vector<int64_t> ne) {
  impl_->add_tensor(std::move(name), type, std::move(ne), {}, true);
}

Status GgufWriter::to_bytes(std::vector<uint8_t>* out, const TensorFill& fill) const {
  uint64_t data_size = 0;
  *out = impl_->layout(&data_size);
  const size_t data_start = out->size();
  out->resize(data_start + data_size, 0);
  for (size_t i = 0; i < impl_->tensors.size(); ++i) {
    const Impl::Tensor& t = impl_->tensors[i];
    uint8_t* dst = out->data() + data_start + t.offset;
    if (!t.deferred) {
      if (t.nbytes) std::memcpy(dst, t.data.data(), t.nbytes);
      continue;
    }
    GEIST_CHECK(static_cast<bool>(fill), "deferred tensor without a fill callback");
    GEIST_RETURN_IF_ERROR(fill(i, dst, t.nbytes).with_prefix("tensor '" + t.name + "'"));
  }
  return Status::ok();
}

Status GgufWriter::write_file(const std::string& path, const TensorFill& fill,
                              const std::function<void(float)>& progress) const {
  uint64_t data_size = 0;
  const std::vector<uint8_t> header = impl_->layout(&data_size);

  std::string tmp = path + ".XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return io_error(path, "cannot create temporary file", errno);
  // mkstemp creates 0600 files; a model file should be as readable as any other.
  (void)fchmod(fd, 0644);

  auto body = [&]() -> Status {
    GEIST_RETURN_IF_ERROR(write_all(fd, header.data(), header.size(), tmp));
    uint64_t written = 0;  // bytes of the data section written so far
    std::vector<uint8_t> buf;
    for (size_t i = 0; i < impl_->tensors.size(); ++i) {
      const Impl::Tensor& t = impl_->tensors[i];
      const std::vector<uint8_t> pad(t.offset - written, 0);
      GEIST_RETURN_IF_ERROR(write_all(fd, pad.data(), pad.size(), tmp));
      const uint8_t* src = t.data.data();
      if (t.deferred) {
        GEIST_CHECK(static_cast<bool>(fill), "deferred tensor without a fill callback");
        buf.assign(t.nbytes, 0);
        GEIST_RETURN_IF_ERROR(fill(i, buf.data(), t.nbytes).with_prefix("tensor '" + t.name + "'"));
        src = buf.data();
      }
      GEIST_RETURN_IF_ERROR(write_all(fd, src, t.nbytes, tmp));
      written = t.offset + t.nbytes;
      if (progress && data_size) progress(static_cast<float>(written) / data_size);
    }
    if (fsync(fd) != 0) return io_error(tmp, "fsync failed", errno);
    return Status::ok();
  };
  Status st = body();
  if (::close(fd) != 0 && st.is_ok()) st = io_error(tmp, "close failed", errno);
  if (st.is_ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    st = io_error(path, "cannot rename temporary file", errno);
  }
  if (!st.is_ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  // Make the rename itself durable.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd);
    ::close(dfd);
  }
  if (progress) progress(1.0f);
  return Status::ok();
}

}  // namespace geist

namespace geist {

void GgufWriter::add_kv(const GgufKv& kv) {
  std::string key(kv.key);
  switch (kv.type) {
    case GgufValueType::UINT8:
      return add_u8(std::move(key), static_cast<uint8_t>(kv.u64));
    case GgufValueType::INT8:
      return add_i8(std::move(key), static_cast<int8_t>(kv.i64));
    case GgufValueType::UINT16:
      return add_u16(std::move(key), static_cast<uint16_t>(kv.u64));
    case GgufValueType::INT16:
      return add_i16(std::move(key), static_cast<int16_t>(kv.i64));
    case GgufValueType::UINT32:
      return add_u32(std::move(key), static_cast<uint32_t>(kv.u64));
    case GgufValueType::INT32:
      return add_i32(std::move(key), static_cast<int32_t>(kv.i64));
    case GgufValueType::UINT64:
      return add_u64(std::move(key), kv.u64);
    case GgufValueType::INT64:
      return add_i64(std::move(key), kv.i64);
    case GgufValueType::FLOAT32:
      // f64 holds the float widened, so narrowing gives back the same bits.
      return add_f32(std::move(key), static_cast<float>(kv.f64));
    case GgufValueType::FLOAT64:
      return add_f64(std::move(key), kv.f64);
    case GgufValueType::BOOL:
      return add_bool(std::move(key), kv.u64 != 0);
    case GgufValueType::STRING:
      return add_str(std::move(key), std::string(kv.str));
    case GgufValueType::ARRAY:
      break;
  }
  GEIST_CHECK(kv.type == GgufValueType::ARRAY, "add_kv: unknown value type from the reader");
  if (kv.arr_type == GgufValueType::STRING) {
    GEIST_CHECK(!kv.arr_strs_released, "add_kv: the string array was released");
    return add_arr_str(std::move(key),
                       std::vector<std::string>(kv.arr_strs.begin(), kv.arr_strs.end()));
  }
  const uint64_t elem = gguf_value_size(kv.arr_type);
  GEIST_CHECK(elem > 0, "add_kv: an array of non-scalar elements");
  // The reader bounds-checked arr_len * elem against the file.
  std::vector<uint8_t> raw(kv.arr_len * elem);  // [arr_len * elem] little-endian elements
  if (!raw.empty()) std::memcpy(raw.data(), kv.arr_data, raw.size());
  add_arr_raw(std::move(key), kv.arr_type, kv.arr_len, std::move(raw));
}

Status GgufWriter::write_split(const std::string& prefix, size_t max_tensors,
                               const TensorFill& fill, std::vector<std::string>* paths) const {
  GEIST_CHECK(max_tensors > 0, "write_split: max_tensors must be positive");
  for (const Impl::Kv& kv : impl_->kvs) {
    GEIST_CHECK(
        kv.key != kSplitNoKey && kv.key != kSplitCountKey && kv.key != kSplitTensorsCountKey,
        "write_split: the split.* keys are written by write_split");
  }
  const size_t n_tensors = impl_->tensors.size();
  GEIST_CHECK(n_tensors <= static_cast<size_t>(INT32_MAX), "write_split: too many tensors");
  const size_t n_split = std::max<size_t>(1, (n_tensors + max_tensors - 1) / max_tensors);
  GEIST_CHECK(n_split <= UINT16_MAX, "write_split: more than 65535 shards");
  paths->clear();
  for (size_t s = 0; s < n_split; ++s) {
    GgufWriter shard;
    Impl& si = *shard.impl_;
    // As llama-gguf-split: the metadata (and its alignment) in the first shard only.
    if (s == 0) {
      si.alignment = impl_->alignment;
      si.kvs = impl_->kvs;
    }
    shard.add_u16(kSplitNoKey, static_cast<uint16_t>(s));
    shard.add_u16(kSplitCountKey, static_cast<uint16_t>(n_split));
    shard.add_i32(kSplitTensorsCountKey, static_cast<int32_t>(n_tensors));
    const size_t first = s * max_tensors;
    const size_t end = std::min(n_tensors, first + max_tensors);
    si.tensors.assign(impl_->tensors.begin() + static_cast<std::ptrdiff_t>(first),
                      impl_->tensors.begin() + static_cast<std::ptrdiff_t>(end));
    TensorFill shard_fill;
    if (fill) {
      shard_fill = [&fill, first](size_t i, uint8_t* dst, size_t n) {
        return fill(first + i, dst, n);
      };
    }
    paths->push_back(
        gguf_split_path(prefix, static_cast<uint32_t>(s), static_cast<uint32_t>(n_split)));
    GEIST_RETURN_IF_ERROR(shard.write_file(paths->back(), shard_fill));
  }
  return Status::ok();
}

}  // namespace geist
