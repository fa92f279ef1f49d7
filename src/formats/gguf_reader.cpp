// GGUF parsing. Every read goes through Cursor, which refuses to step past the end, and every
// size derived from the file is computed with overflow checks before it is used to allocate
// or to index: a hostile file can only produce GEIST_E_FORMAT.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "formats/gguf.h"

namespace geist {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF values are little-endian and are read by memcpy");

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kNumValueTypes = 13;
// Smallest possible encodings, used to reject counts that cannot fit before allocating:
// kv = key length (8) + type (4) + 1-byte value; tensor info = name length (8) + n_dims (4)
// + one dimension (8) + type (4) + offset (8).
constexpr uint64_t kMinKvBytes = 13;
constexpr uint64_t kMinTensorInfoBytes = 32;
constexpr uint32_t kMaxDims = 4;
// Upper bound on up-front reservations; beyond it containers grow with the parsed content.
constexpr uint64_t kMaxReserve = 1 << 16;

class Cursor {
 public:
  Cursor(const uint8_t* base, size_t size) : base_(base), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return base_ + pos_; }

  Status skip(uint64_t n, const char* what) {
    if (n > remaining()) {
      return Status::error(GEIST_E_FORMAT,
                           "truncated: %s needs %" PRIu64 " bytes at offset %zu, file has %zu",
                           what, n, pos_, size_);
    }
    pos_ += static_cast<size_t>(n);
    return Status::ok();
  }

  template <class T>
  Status read(T* out, const char* what) {
    const size_t at = pos_;
    GEIST_RETURN_IF_ERROR(skip(sizeof(T), what));
    std::memcpy(out, base_ + at, sizeof(T));
    return Status::ok();
  }

  Status read_string(std::string_view* out, const char* what) {
    uint64_t len = 0;
    GEIST_RETURN_IF_ERROR(read(&len, what));
    const size_t at = pos_;
    if (len > remaining()) {
      return Status::error(GEIST_E_FORMAT,
                           "%s: string length %" PRIu64 " at offset %zu exceeds the %zu bytes left",
                           what, len, at - sizeof(len), remaining());
    }
    pos_ += static_cast<size_t>(len);
    *out = std::string_view(reinterpret_cast<const char*>(base_ + at), static_cast<size_t>(len));
    return Status::ok();
  }

 private:
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
};

// Keys and tensor names are used as C strings by other tools, so an embedded NUL would make
// two different names compare equal there.
Status check_name(std::string_view s, const char* what, size_t offset) {
  if (s.empty()) return Status::error(GEIST_E_FORMAT, "empty %s at offset %zu", what, offset);
  if (s.find('\0') != std::string_view::npos) {
    return Status::error(GEIST_E_FORMAT, "%s at offset %zu contains a NUL byte", what, offset);
  }
  return Status::ok();
}

Status read_value_type(Cursor& c, GgufValueType* out, const char* what) {
  const size_t at = c.pos();
  uint32_t raw = 0;
  GEIST_RETURN_IF_ERROR(c.read(&raw, what));
  if (raw >= kNumValueTypes) {
    return Status::error(GEIST_E_FORMAT, "invalid value type %" PRIu32 " at offset %zu", raw, at);
  }
  *out = static_cast<GgufValueType>(raw);
  return Status::ok();
}

Status read_scalar(Cursor& c, GgufValueType t, GgufKv* kv) {
  const size_t at = c.pos();
  switch (t) {
#define GEIST_SCALAR(TYPE, CTYPE, FIELD)        \
  case GgufValueType::TYPE: {                   \
    CTYPE v{};                                  \
    GEIST_RETURN_IF_ERROR(c.read(&v, "value")); \
    kv->FIELD = v;                              \
    return Status::ok();                        \
  }
    GEIST_SCALAR(UINT8, uint8_t, u64)
    GEIST_SCALAR(INT8, int8_t, i64)
    GEIST_SCALAR(UINT16, uint16_t, u64)
    GEIST_SCALAR(INT16, int16_t, i64)
    GEIST_SCALAR(UINT32, uint32_t, u64)
    GEIST_SCALAR(INT32, int32_t, i64)
    GEIST_SCALAR(UINT64, uint64_t, u64)
    GEIST_SCALAR(INT64, int64_t, i64)
    GEIST_SCALAR(FLOAT32, float, f64)
    GEIST_SCALAR(FLOAT64, double, f64)
#undef GEIST_SCALAR
    case GgufValueType::BOOL: {
      uint8_t v = 0;
      GEIST_RETURN_IF_ERROR(c.read(&v, "value"));
      if (v > 1)
        return Status::error(GEIST_E_FORMAT, "bool value %u at offset %zu is neither 0 nor 1", v,
                             at);
      kv->u64 = v;
      return Status::ok();
    }
    case GgufValueType::STRING:
    case GgufValueType::ARRAY:
      break;
  }
  GEIST_CHECK(false, "read_scalar called with a non-scalar type");
}

Status read_array(Cursor& c, GgufKv* kv) {
  GEIST_RETURN_IF_ERROR(read_value_type(c, &kv->arr_type, "array element type"));
  const size_t len_at = c.pos();
  GEIST_RETURN_IF_ERROR(c.read(&kv->arr_len, "array length"));
  kv->arr_data = c.here();
  if (kv->arr_type == GgufValueType::ARRAY) {
    return Status::error(GEIST_E_FORMAT, "nested arrays are not supported (offset %zu)",
                         len_at - 4);
  }
  if (kv->arr_type == GgufValueType::STRING) {
    // Each string takes at least its 8-byte length, which bounds the reservation below.
    if (kv->arr_len > c.remaining() / 8) {
      return Status::error(GEIST_E_FORMAT,
                           "string array length %" PRIu64 " at offset %zu cannot fit in %zu bytes",
                           kv->arr_len, len_at, c.remaining());
    }
    kv->arr_strs.reserve(static_cast<size_t>(std::min(kv->arr_len, kMaxReserve)));
    for (uint64_t i = 0; i < kv->arr_len; ++i) {
      std::string_view s;
      GEIST_RETURN_IF_ERROR(c.read_string(&s, "array string"));
      kv->arr_strs.push_back(s);
    }
    return Status::ok();
  }
  const uint64_t elem = gguf_value_size(kv->arr_type);
  if (kv->arr_len > c.remaining() / elem) {
    return Status::error(GEIST_E_FORMAT,
                         "%s array length %" PRIu64 " at offset %zu cannot fit in %zu bytes",
                         gguf_value_type_name(kv->arr_type), kv->arr_len, len_at, c.remaining());
  }
  if (kv->arr_type == GgufValueType::BOOL) {
    for (uint64_t i = 0; i < kv->arr_len; ++i) {
      if (kv->arr_data[i] > 1) {
        return Status::error(GEIST_E_FORMAT, "bool array element %" PRIu64 " is neither 0 nor 1",
                             i);
      }
    }
  }
  return c.skip(kv->arr_len * elem, "array data");
}

Status read_kv(Cursor& c, GgufKv* kv) {
  const size_t at = c.pos();
  GEIST_RETURN_IF_ERROR(c.read_string(&kv->key, "key"));
  GEIST_RETURN_IF_ERROR(check_name(kv->key, "key", at));
  Status st = read_value_type(c, &kv->type, "value type");
  if (st.is_ok()) {
    if (kv->type == GgufValueType::STRING) {
      st = c.read_string(&kv->str, "value");
    } else if (kv->type == GgufValueType::ARRAY) {
      st = read_array(c, kv);
    } else {
      st = read_scalar(c, kv->type, kv);
    }
  }
  return st.with_prefix("key '" + std::string(kv->key) + "'");
}

Status read_tensor_info(Cursor& c, GgufTensorInfo* t) {
  const size_t at = c.pos();
  GEIST_RETURN_IF_ERROR(c.read_string(&t->name, "tensor name"));
  GEIST_RETURN_IF_ERROR(check_name(t->name, "tensor name", at));
  const std::string who = "tensor '" + std::string(t->name) + "'";
  Status st = c.read(&t->n_dims, "n_dims");
  if (st.is_ok() && (t->n_dims == 0 || t->n_dims > kMaxDims)) {
    st = Status::error(GEIST_E_FORMAT, "n_dims %" PRIu32 " is outside 1..%" PRIu32, t->n_dims,
                       kMaxDims);
  }
  for (uint32_t d = 0; st.is_ok() && d < t->n_dims; ++d) {
    uint64_t ne = 0;
    st = c.read(&ne, "dimension");
    if (st.is_ok() && ne > static_cast<uint64_t>(INT64_MAX)) {
      st = Status::error(GEIST_E_FORMAT, "dimension %" PRIu32 " is negative", d);
    }
    t->ne[d] = static_cast<int64_t>(ne);
  }
  uint32_t type_id = 0;
  if (st.is_ok()) st = c.read(&type_id, "tensor type");
  GgmlTypeTraits tr{};
  if (st.is_ok()) {
    tr = ggml_type_traits(type_id);
    if (!tr.name) st = Status::error(GEIST_E_FORMAT, "unknown tensor type id %" PRIu32, type_id);
    t->type = static_cast<GgmlType>(type_id);
  }
  if (st.is_ok()) st = c.read(&t->offset, "tensor offset");
  if (st.is_ok() && t->ne[0] % tr.block_size != 0) {
    st = Status::error(GEIST_E_FORMAT,
                       "ne[0] = %" PRId64 " is not a multiple of the %s block size %" PRIu32,
                       t->ne[0], tr.name, tr.block_size);
  }
  if (st.is_ok()) {
    int64_t n = 1;
    for (int64_t ne : t->ne) {
      if (__builtin_mul_overflow(n, ne, &n)) {
        st = Status::error(GEIST_E_FORMAT, "element count overflows");
        break;
      }
    }
    const uint64_t blocks = static_cast<uint64_t>(n) / tr.block_size;
    if (st.is_ok() && __builtin_mul_overflow(blocks, uint64_t{tr.type_size}, &t->nbytes)) {
      st = Status::error(GEIST_E_FORMAT, "byte size overflows");
    }
  }
  return st.with_prefix(who);
}

}  // namespace

uint64_t gguf_value_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::BOOL:
      return 1;
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
      return 2;
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::FLOAT32:
      return 4;
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
    case GgufValueType::FLOAT64:
      return 8;
    case GgufValueType::STRING:
    case GgufValueType::ARRAY:
      return 0;
  }
  return 0;
}

const char* gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8:
      return "u8";
    case GgufValueType::INT8:
      return "i8";
    case GgufValueType::UINT16:
      return "u16";
    case GgufValueType::INT16:
      return "i16";
    case GgufValueType::UINT32:
      return "u32";
    case GgufValueType::INT32:
      return "i32";
    case GgufValueType::FLOAT32:
      return "f32";
    case GgufValueType::BOOL:
      return "bool";
    case GgufValueType::STRING:
      return "string";
    case GgufValueType::ARRAY:
      return "array";
    case GgufValueType::UINT64:
      return "u64";
    case GgufValueType::INT64:
      return "i64";
    case GgufValueType::FLOAT64:
      return "f64";
  }
  return "invalid";
}

GgufFile::~GgufFile() {
  if (mapped_) munmap(const_cast<uint8_t*>(base_), size_);
}

size_t GgufFile::file_size() const {
  size_t n = size_;
  for (const auto& s : shards_) n += s->size_;
  return n;
}

void GgufFile::release_own_pages(const void* p, size_t n) const {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  const uintptr_t base = reinterpret_cast<uintptr_t>(base_);
  if (!mapped_ || b < base || n > size_ || b - base > size_ - n) return;
  const long page_l = sysconf(_SC_PAGESIZE);
  const uintptr_t page = page_l > 0 ? static_cast<uintptr_t>(page_l) : 4096u;
  const uintptr_t lo = (b + page - 1) / page * page;
  const uintptr_t hi = (b + n) / page * page;
  // Private read-only file pages: dropping them loses nothing. A failure only keeps them.
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

void GgufFile::release_pages(const void* p, size_t n) const {
  release_own_pages(p, n);
  for (const auto& s : shards_) s->release_own_pages(p, n);
}

Status GgufFile::open(const std::string& path, std::unique_ptr<GgufFile>* out) {
  out->reset();
  std::unique_ptr<GgufFile> f;
  GEIST_RETURN_IF_ERROR(open_one(path, &f));
  GEIST_RETURN_IF_ERROR(f->open_shards(path));
  *out = std::move(f);
  return Status::ok();
}

Status GgufFile::open_one(const std::string& path, std::unique_ptr<GgufFile>* out) {
  out->reset();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const geist_status code =
        (err == ENOENT || err == ENOTDIR) ? GEIST_E_FILE_NOT_FOUND : GEIST_E_IO;
    return Status::error(code, "%s: cannot open: %s", path.c_str(), std::strerror(err));
  }
  struct stat sb {};
  if (fstat(fd, &sb) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::error(GEIST_E_IO, "%s: cannot stat: %s", path.c_str(), std::strerror(err));
  }
  if (!S_ISREG(sb.st_mode)) {
    ::close(fd);
    return Status::error(GEIST_E_IO, "%s: not a regular file", path.c_str());
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->size_ = static_cast<size_t>(sb.st_size);
  if (f->size_ > 0) {  // mmap refuses length 0; an empty file then fails parsing as truncated
    void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return Status::error(GEIST_E_IO, "%s: cannot map: %s", path.c_str(), std::strerror(err));
    }
    f->base_ = static_cast<const uint8_t*>(p);
    f->mapped_ = true;
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  GEIST_RETURN_IF_ERROR(f->parse().with_prefix(path));
  *out = std::move(f);
  return Status::ok();
}

Status GgufFile::open_memory(const uint8_t* data, size_t size, std::unique_ptr<GgufFile>* out) {
  out->reset();
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->base_ = data;
  f->size_ = data ? size : 0;
  GEIST_RETURN_IF_ERROR(f->parse());
  *out = std::move(f);
  return Status::ok();
}

Status GgufFile::parse() {
  Cursor c(base_, size_);
  uint32_t magic = 0;
  GEIST_RETURN_IF_ERROR(c.read(&magic, "magic"));
  if (magic != kMagic)
    return Status::error(GEIST_E_FORMAT, "bad magic 0x%08" PRIx32 " (not a GGUF file)", magic);
  GEIST_RETURN_IF_ERROR(c.read(&version_, "version"));
  if (version_ != 2 && version_ != 3) {
    return Status::error(GEIST_E_FORMAT, "unsupported version %" PRIu32 " (supported: 2, 3)",
                         version_);
  }
  uint64_t n_tensors = 0;
  uint64_t n_kv = 0;
  GEIST_RETURN_IF_ERROR(c.read(&n_tensors, "tensor count"));
  GEIST_RETURN_IF_ERROR(c.read(&n_kv, "kv count"));
  const uint64_t left = c.remaining();
  uint64_t min_bytes = 0;
  if (n_kv > left / kMinKvBytes || n_tensors > left / kMinTensorInfoBytes ||
      __builtin_add_overflow(n_kv * kMinKvBytes, n_tensors * kMinTensorInfoBytes, &min_bytes) ||
      min_bytes > left) {
    return Status::error(GEIST_E_FORMAT,
                         "n_kv %" PRIu64 " and n_tensors %" PRIu64 " cannot fit in the %" PRIu64
                         " bytes after the header",
                         n_kv, n_tensors, left);
  }

  // Containers grow as records actually parse: the counts were only checked against the file
  // size, which for a large file with a lying header could still mean gigabytes.
  kvs_.reserve(static_cast<size_t>(std::min(n_kv, kMaxReserve)));
  kv_index_.reserve(static_cast<size_t>(std::min(n_kv, kMaxReserve)));
  for (size_t i = 0; i < n_kv; ++i) {
    kvs_.emplace_back();
    GEIST_RETURN_IF_ERROR(read_kv(c, &kvs_[i]).with_prefix("kv " + std::to_string(i)));
    if (!kv_index_.emplace(kvs_[i].key, i).second) {
      return Status::error(GEIST_E_FORMAT, "duplicate key '%.*s'",
                           static_cast<int>(kvs_[i].key.size()), kvs_[i].key.data());
    }
  }

  if (const GgufKv* a = find("general.alignment")) {
    uint64_t v = 0;
    bool is_int = true;
    switch (a->type) {
      case GgufValueType::UINT8:
      case GgufValueType::UINT16:
      case GgufValueType::UINT32:
      case GgufValueType::UINT64:
        v = a->u64;
        break;
      case GgufValueType::INT8:
      case GgufValueType::INT16:
      case GgufValueType::INT32:
      case GgufValueType::INT64:
        v = a->i64 > 0 ? static_cast<uint64_t>(a->i64) : 0;
        break;
      default:
        is_int = false;
    }
    if (!is_int) {
      return Status::error(GEIST_E_FORMAT, "general.alignment has type %s, expected an integer",
                           gguf_value_type_name(a->type));
    }
    if (v == 0 || !std::has_single_bit(v)) {
      return Status::error(GEIST_E_FORMAT, "general.alignment must be a non-zero power of two");
    }
    alignment_ = v;
  }

  tensors_.reserve(static_cast<size_t>(std::min(n_tensors, kMaxReserve)));
  tensor_index_.reserve(static_cast<size_t>(std::min(n_tensors, kMaxReserve)));
  for (size_t i = 0; i < n_tensors; ++i) {
    tensors_.emplace_back();
    GEIST_RETURN_IF_ERROR(
        read_tensor_info(c, &tensors_[i]).with_prefix("tensor info " + std::to_string(i)));
    if (!tensor_index_.emplace(tensors_[i].name, i).second) {
      return Status::error(GEIST_E_FORMAT, "duplicate tensor name '%.*s'",
                           static_cast<int>(tensors_[i].name.size()), tensors_[i].name.data());
    }
  }

  // The data section starts at the aligned end of the header. Files without tensors are often
  // not padded, so that position may lie beyond the end of the file.
  const uint64_t header_end = c.pos();
  uint64_t data_start = 0;
  if (__builtin_add_overflow(header_end, alignment_ - 1, &data_start)) {
    return Status::error(GEIST_E_FORMAT, "alignment %" PRIu64 " overflows the data offset",
                         alignment_);
  }
  data_start &= ~(alignment_ - 1);
  if (tensors_.empty()) return Status::ok();
  if (data_start > size_) {
    return Status::error(GEIST_E_FORMAT,
                         "data section at offset %" PRIu64
                         " starts beyond the end of the file (%zu)",
                         data_start, size_);
  }
  const uint64_t data_size = size_ - data_start;
  for (GgufTensorInfo& t : tensors_) {
    const int name_len = static_cast<int>(t.name.size());
    if (t.offset % alignment_ != 0) {
      return Status::error(GEIST_E_FORMAT,
                           "tensor '%.*s': offset %" PRIu64
                           " is not a multiple of alignment %" PRIu64,
                           name_len, t.name.data(), t.offset, alignment_);
    }
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      return Status::error(GEIST_E_FORMAT,
                           "tensor '%.*s': bytes [%" PRIu64 ", +%" PRIu64
                           ") lie outside the data section of %" PRIu64 " bytes",
                           name_len, t.name.data(), t.offset, t.nbytes, data_size);
    }
    t.data = base_ + data_start + t.offset;
  }

  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const GgufTensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  // Zero-byte tensors occupy nothing, so only non-empty ones are compared, against the one
  // reaching furthest so far (an empty tensor between two overlapping ones must not hide them).
  const GgufTensorInfo* reach = nullptr;
  for (const GgufTensorInfo* t : by_offset) {
    if (t->nbytes == 0) continue;
    // Bounds were checked above, so offset + nbytes cannot overflow.
    if (reach && t->offset < reach->offset + reach->nbytes) {
      return Status::error(GEIST_E_FORMAT, "tensors '%.*s' and '%.*s' overlap",
                           static_cast<int>(reach->name.size()), reach->name.data(),
                           static_cast<int>(t->name.size()), t->name.data());
    }
    if (!reach || t->offset + t->nbytes > reach->offset + reach->nbytes) reach = t;
  }
  return Status::ok();
}

}  // namespace geist
