// Split GGUF sets (llama-gguf-split's layout, described in gguf.h): opening the first shard
// maps the others and presents the set as one file.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "formats/gguf.h"

namespace geist {
namespace {

// The file-name suffix of shard split_no (0-based) of split_count.
std::string split_suffix(uint32_t split_no, uint32_t split_count) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "-%05" PRIu32 "-of-%05" PRIu32 ".gguf", split_no + 1, split_count);
  return buf;
}

bool is_split_key(std::string_view key) {
  return key == kSplitNoKey || key == kSplitCountKey || key == kSplitTensorsCountKey;
}

}  // namespace

std::string gguf_split_path(const std::string& prefix, uint32_t split_no, uint32_t split_count) {
  return prefix + split_suffix(split_no, split_count);
}

Status GgufFile::open_shards(const std::string& path) {
  if (!find(kSplitCountKey)) return Status::ok();
  uint32_t n_split = 0, split_no = 0;
  Status st = get_u32(kSplitCountKey, &n_split);
  if (st) st = get_u32(kSplitNoKey, &split_no);
  if (!st) return Status(GEIST_E_FORMAT, path + ": " + st.message());
  if (n_split == 0 || n_split > UINT16_MAX || split_no >= n_split) {
    return Status::error(GEIST_E_FORMAT, "%s: split.no %" PRIu32 " of split.count %" PRIu32,
                         path.c_str(), split_no, n_split);
  }
  if (split_no != 0) {
    return Status::error(GEIST_E_INVALID_ARG,
                         "%s is shard %" PRIu32 " of a %" PRIu32
                         "-file split model: open the first shard (...%s)",
                         path.c_str(), split_no + 1, n_split, split_suffix(0, n_split).c_str());
  }
  if (n_split > 1) {
    const std::string suffix = split_suffix(0, n_split);
    if (path.size() <= suffix.size() ||
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) {
      return Status::error(GEIST_E_FORMAT,
                           "%s is the first of %" PRIu32
                           " split files but its name does not end in %s, so the others "
                           "cannot be found",
                           path.c_str(), n_split, suffix.c_str());
    }
    const std::string prefix = path.substr(0, path.size() - suffix.size());
    for (uint32_t i = 1; i < n_split; ++i) {
      const std::string shard_path = gguf_split_path(prefix, i, n_split);
      std::unique_ptr<GgufFile> shard;
      st = open_one(shard_path, &shard);
      if (!st) {
        return Status(st.code(), "shard " + std::to_string(i + 1) + " of " +
                                     std::to_string(n_split) + " of " + path + ": " + st.message());
      }
      uint32_t no = 0, count = 0;
      st = shard->get_u32(kSplitNoKey, &no);
      if (st) st = shard->get_u32(kSplitCountKey, &count);
      if (!st) return Status(GEIST_E_FORMAT, shard_path + ": " + st.message());
      if (no != i || count != n_split) {
        return Status::error(GEIST_E_FORMAT,
                             "%s: split.no %" PRIu32 " and split.count %" PRIu32
                             " do not match its name (shard %" PRIu32 " of %" PRIu32 ")",
                             shard_path.c_str(), no, count, i, n_split);
      }
      for (const GgufTensorInfo& t : shard->tensors_) {
        if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
          return Status::error(GEIST_E_FORMAT, "%s: tensor '%.*s' is also in an earlier shard",
                               shard_path.c_str(), static_cast<int>(t.name.size()), t.name.data());
        }
        tensors_.push_back(t);
      }
      shards_.push_back(std::move(shard));
    }
  }
  int32_t n_tensors = 0;
  st = get_i32(kSplitTensorsCountKey, &n_tensors);
  if (!st) return Status(GEIST_E_FORMAT, path + ": " + st.message());
  if (n_tensors < 0 || static_cast<size_t>(n_tensors) != tensors_.size()) {
    return Status::error(GEIST_E_FORMAT,
                         "%s: split.tensors.count is %" PRId32 " but the %" PRIu32
                         " shards hold %zu tensors",
                         path.c_str(), n_tensors, n_split, tensors_.size());
  }
  // The set is one model now: its layout keys would only mislead readers of the metadata (a
  // copy written as one file, the model's identity).
  kvs_.erase(std::remove_if(kvs_.begin(), kvs_.end(),
                            [](const GgufKv& kv) { return is_split_key(kv.key); }),
             kvs_.end());
  kv_index_.clear();
  for (size_t i = 0; i < kvs_.size(); ++i) kv_index_.emplace(kvs_[i].key, i);
  return Status::ok();
}

Status gguf_write_split(const GgufFile& in, const std::string& prefix, size_t max_tensors,
                        std::vector<std::string>* paths) {
  GgufWriter w;
  GEIST_CHECK(in.alignment() <= UINT32_MAX, "gguf_write_split: alignment beyond u32");
  w.set_alignment(static_cast<uint32_t>(in.alignment()));
  for (const GgufKv& kv : in.kvs()) {
    if (kv.key != "general.alignment" && !is_split_key(kv.key)) w.add_kv(kv);
  }
  const std::vector<GgufTensorInfo>& tensors = in.tensors();
  for (const GgufTensorInfo& t : tensors) {
    w.add_tensor_deferred(std::string(t.name), t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims));
  }
  return w.write_split(
      prefix, max_tensors,
      [&tensors](size_t i, uint8_t* dst, size_t n) {
        GEIST_CHECK(n == tensors[i].nbytes, "gguf_write_split: tensor size changed");
        if (n > 0) std::memcpy(dst, tensors[i].data, n);
        return Status::ok();
      },
      paths);
}

}  // namespace geist
