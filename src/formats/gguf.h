// GGUF reader (versions 2 and 3): memory-mapped, zero-copy, every count, offset, size and
// string bounds-checked. Malformed input yields GEIST_E_FORMAT with a message; never a crash.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "formats/ggml_type.h"

namespace geist {

enum class GgufValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

const char* gguf_value_type_name(GgufValueType t);
// Encoded size of a scalar value type; 0 for STRING/ARRAY (variable) and unknown ids.
uint64_t gguf_value_size(GgufValueType t);

// One metadata key/value. Views point into the mapped file and live as long as the GgufFile.
struct GgufKv {
  std::string_view key;
  GgufValueType type;
  // Scalars (type != STRING/ARRAY): the value widened; exactly one of these is meaningful
  // depending on signedness/float-ness of `type`. BOOL is stored in u64 (0 or 1).
  uint64_t u64 = 0;
  int64_t i64 = 0;
  double f64 = 0;
  std::string_view str;  // type == STRING
  // type == ARRAY:
  GgufValueType arr_type = GgufValueType::UINT8;
  uint64_t arr_len = 0;
  const uint8_t* arr_data = nullptr;       // numeric arrays: raw little-endian, maybe unaligned
  std::vector<std::string_view> arr_strs;  // string arrays ([arr_len], until released)
  bool arr_strs_released = false;          // release_string_arrays() dropped arr_strs
};

struct GgufTensorInfo {
  std::string_view name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension, as in ggml
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;            // relative to the start of the data section
  const uint8_t* data = nullptr;  // into the mapping
  uint64_t nbytes = 0;
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

// The split layout of llama-gguf-split (tools/gguf-split): shard i (0-based) of n is
// "<prefix>-<i+1, 5 digits>-of-<n, 5 digits>.gguf"; the first shard holds all metadata, every
// shard holds split.no (u16, 0-based), split.count (u16) and split.tensors.count (i32, the
// tensors of all shards), and each tensor lies whole in one shard.
inline constexpr char kSplitNoKey[] = "split.no";
inline constexpr char kSplitCountKey[] = "split.count";
inline constexpr char kSplitTensorsCountKey[] = "split.tensors.count";
// The path of shard split_no (0-based) of split_count.
std::string gguf_split_path(const std::string& prefix, uint32_t split_no, uint32_t split_count);

class GgufFile;
// Writes `in` (one file or a whole split set) again in the split layout, at most max_tensors
// tensors a shard (> 0): what `llama-gguf-split --split --split-max-tensors N` makes of it.
// Paths as GgufWriter::write_split. GEIST_E_IO.
Status gguf_write_split(const GgufFile& in, const std::string& prefix, size_t max_tensors,
                        std::vector<std::string>* paths);

class GgufFile {
 public:
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  // Maps and parses `path`. GEIST_E_FILE_NOT_FOUND, GEIST_E_IO, GEIST_E_FORMAT.
  // When `path` is the first shard of a split set (split.count > 1), every shard is mapped and
  // the GgufFile is the whole model: tensors() holds the tensors of all shards (in shard order),
  // kvs() the first shard's metadata without the split.* keys. A shard other than the first,
  // a missing shard (GEIST_E_FILE_NOT_FOUND naming it), a shard whose split.no / split.count
  // disagree, a tensor in two shards or a total that is not split.tensors.count is an error.
  static Status open(const std::string& path, std::unique_ptr<GgufFile>* out);
  // Parses a caller-owned buffer that must outlive the GgufFile (fuzzing, tests). One file
  // only: a shard's split.* keys are kept as they are.
  static Status open_memory(const uint8_t* data, size_t size, std::unique_ptr<GgufFile>* out);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t file_size() const;  // bytes of every file mapped (all shards of a split set)
  size_t n_files() const { return 1 + shards_.size(); }
  const std::vector<GgufKv>& kvs() const { return kvs_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  // Hints that [p, p + n) of a mapped file is not needed for now: whole pages inside it leave
  // resident memory and are read back from the file if touched again. For a backend that
  // keeps its own copy of the weights. A no-op for open_memory buffers and outside the file.
  void release_pages(const void* p, size_t n) const;

  // Frees the per-string views of every string array (a 248k-token vocabulary with as many
  // merges holds ~8 MiB of them) once their reader (the tokenizer, the model id) is done.
  // get_arr_str on such a key then fails with GEIST_E_INVALID_STATE; everything else, the
  // arrays' lengths included, stays.
  void release_string_arrays();

  const GgufKv* find(std::string_view key) const;                  // nullptr if absent
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr if absent

  // Typed getters. Absent key: GEIST_E_NOT_FOUND. Wrong type or out-of-range value:
  // GEIST_E_FORMAT naming the key. Integer getters accept any integer type whose value fits.
  Status get_u32(std::string_view key, uint32_t* out) const;
  Status get_i32(std::string_view key, int32_t* out) const;
  Status get_u64(std::string_view key, uint64_t* out) const;
  Status get_f32(std::string_view key, float* out) const;
  Status get_bool(std::string_view key, bool* out) const;
  Status get_str(std::string_view key, std::string_view* out) const;
  Status get_arr_i32(std::string_view key, std::vector<int32_t>* out) const;
  Status get_arr_f32(std::string_view key, std::vector<float>* out) const;
  Status get_arr_str(std::string_view key, const std::vector<std::string_view>** out) const;

 private:
  GgufFile() = default;
  static Status open_one(const std::string& path, std::unique_ptr<GgufFile>* out);
  void release_own_pages(const void* p, size_t n) const;
  Status parse();
  Status open_shards(const std::string& path);

  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<GgufKv> kvs_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> kv_index_;      // key -> index into kvs_
  std::unordered_map<std::string_view, size_t> tensor_index_;  // name -> index into tensors_
  // The other shards of a split set ([split.count - 1], shard order); tensors_ views into them.
  std::vector<std::unique_ptr<GgufFile>> shards_;
};

// Builds GGUF v3 files (mkmodel, tests). Values are copied in.
class GgufWriter {
 public:
  GgufWriter();
  ~GgufWriter();
  void set_alignment(uint32_t a);  // also writes general.alignment when != 32
  void add_u32(std::string key, uint32_t v);
  void add_i32(std::string key, int32_t v);
  void add_u64(std::string key, uint64_t v);
  void add_f32(std::string key, float v);
  void add_bool(std::string key, bool v);
  void add_str(std::string key, std::string v);
  void add_arr_i32(std::string key, std::vector<int32_t> v);
  void add_arr_f32(std::string key, std::vector<float> v);
  void add_arr_str(std::string key, std::vector<std::string> v);
  // The remaining value types (tests build files with every type through these). Keys must
  // be unique and not "general.alignment" (use set_alignment): violations are GEIST_CHECKs.
  void add_u8(std::string key, uint8_t v);
  void add_i8(std::string key, int8_t v);
  void add_u16(std::string key, uint16_t v);
  void add_i16(std::string key, int16_t v);
  void add_i64(std::string key, int64_t v);
  void add_f64(std::string key, double v);
  // Array of n numeric (or bool) elements given as raw little-endian bytes.
  void add_arr_raw(std::string key, GgufValueType elem_type, uint64_t n, std::vector<uint8_t> raw);
  // data must hold ggml_row_size(type, ne[0]) * ne[1] * ne[2] * ne[3] bytes.
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne,
                  std::vector<uint8_t> data);
  // A tensor whose bytes are produced at write time by the TensorFill callback (large files
  // are streamed, never held whole in memory).
  void add_tensor_deferred(std::string name, GgmlType type, std::vector<int64_t> ne);

  // Fills `dst` (nbytes) with the data of deferred tensor number `index` (order of
  // add_tensor* calls, counting all tensors).
  using TensorFill = std::function<Status(size_t index, uint8_t* dst, size_t nbytes)>;
  // Serialises the whole file into memory (small files; fill may be empty if no tensor is
  // deferred).
  Status to_bytes(std::vector<uint8_t>* out, const TensorFill& fill = {}) const;
  // Writes to `path` via a temp file + rename. progress(fraction) may be empty.
  // GEIST_E_IO on failure (the temp file is removed).
  Status write_file(const std::string& path, const TensorFill& fill = {},
                    const std::function<void(float)>& progress = {}) const;
  // Writes the split layout (kSplitNoKey above) as llama-gguf-split --split-max-tensors does:
  // gguf_split_path(prefix, i, n) for i < n, at most max_tensors tensors a shard (> 0), in
  // order; the first shard also holds every key added. The paths go to *paths. The keys
  // split.* must not have been added. GEIST_E_IO as write_file (shards written before a
  // failure stay).
  Status write_split(const std::string& prefix, size_t max_tensors, const TensorFill& fill,
                     std::vector<std::string>* paths) const;
  // Adds a key/value as GgufFile read it (copying a file's metadata).
  void add_kv(const GgufKv& kv);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace geist
