// Lookups and typed getters over a parsed GgufFile.
#include <cmath>
#include <cstring>
#include <limits>

#include "formats/gguf.h"

namespace geist {
namespace {

bool is_unsigned_int(GgufValueType t) {
  return t == GgufValueType::UINT8 || t == GgufValueType::UINT16 || t == GgufValueType::UINT32 ||
         t == GgufValueType::UINT64;
}
bool is_signed_int(GgufValueType t) {
  return t == GgufValueType::INT8 || t == GgufValueType::INT16 || t == GgufValueType::INT32 ||
         t == GgufValueType::INT64;
}

Status wrong_type(std::string_view key, GgufValueType got, const char* want) {
  return Status::error(GEIST_E_FORMAT, "key '%.*s' has type %s, expected %s",
                       static_cast<int>(key.size()), key.data(), gguf_value_type_name(got), want);
}

Status out_of_range(std::string_view key, const char* want) {
  return Status::error(GEIST_E_FORMAT, "key '%.*s': value does not fit in %s",
                       static_cast<int>(key.size()), key.data(), want);
}

// An integer kv as a (negative?, magnitude) pair, so that range checks for any target type
// are exact.
bool int_value(const GgufKv& kv, bool* negative, uint64_t* magnitude) {
  if (is_unsigned_int(kv.type)) {
    *negative = false;
    *magnitude = kv.u64;
    return true;
  }
  if (is_signed_int(kv.type)) {
    *negative = kv.i64 < 0;
    *magnitude = *negative ? 0 - static_cast<uint64_t>(kv.i64) : static_cast<uint64_t>(kv.i64);
    return true;
  }
  return false;
}

template <class T>
Status get_int(const GgufFile& f, std::string_view key, const char* want, T* out) {
  const GgufKv* kv = f.find(key);
  if (!kv) {
    return Status::error(GEIST_E_NOT_FOUND, "key '%.*s' not found", static_cast<int>(key.size()),
                         key.data());
  }
  bool neg = false;
  uint64_t mag = 0;
  if (!int_value(*kv, &neg, &mag)) return wrong_type(key, kv->type, want);
  if (neg) {
    // |min| of a signed T is max + 1.
    const uint64_t limit = std::numeric_limits<T>::is_signed
                               ? static_cast<uint64_t>(std::numeric_limits<T>::max()) + 1
                               : 0;
    if (mag > limit) return out_of_range(key, want);
    *out = static_cast<T>(0 - mag);  // two's complement wrap gives the negative value
  } else {
    if (mag > static_cast<uint64_t>(std::numeric_limits<T>::max())) return out_of_range(key, want);
    *out = static_cast<T>(mag);
  }
  return Status::ok();
}

const GgufKv* find_array(const GgufFile& f, std::string_view key, Status* st) {
  const GgufKv* kv = f.find(key);
  if (!kv) {
    *st = Status::error(GEIST_E_NOT_FOUND, "key '%.*s' not found", static_cast<int>(key.size()),
                        key.data());
    return nullptr;
  }
  if (kv->type != GgufValueType::ARRAY) {
    *st = wrong_type(key, kv->type, "array");
    return nullptr;
  }
  return kv;
}

template <class T>
T load(const uint8_t* p, uint64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

const GgufKv* GgufFile::find(std::string_view key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Status GgufFile::get_u32(std::string_view key, uint32_t* out) const {
  return get_int(*this, key, "u32", out);
}
Status GgufFile::get_i32(std::string_view key, int32_t* out) const {
  return get_int(*this, key, "i32", out);
}
Status GgufFile::get_u64(std::string_view key, uint64_t* out) const {
  return get_int(*this, key, "u64", out);
}

Status GgufFile::get_f32(std::string_view key, float* out) const {
  const GgufKv* kv = find(key);
  if (!kv) {
    return Status::error(GEIST_E_NOT_FOUND, "key '%.*s' not found", static_cast<int>(key.size()),
                         key.data());
  }
  if (kv->type != GgufValueType::FLOAT32 && kv->type != GgufValueType::FLOAT64) {
    return wrong_type(key, kv->type, "f32");
  }
  if (kv->type == GgufValueType::FLOAT64 && std::isfinite(kv->f64) &&
      std::fabs(kv->f64) > std::numeric_limits<float>::max()) {
    return out_of_range(key, "f32");
  }
  *out = static_cast<float>(kv->f64);
  return Status::ok();
}

Status GgufFile::get_bool(std::string_view key, bool* out) const {
  const GgufKv* kv = find(key);
  if (!kv) {
    return Status::error(GEIST_E_NOT_FOUND, "key '%.*s' not found", static_cast<int>(key.size()),
                         key.data());
  }
  if (kv->type != GgufValueType::BOOL) return wrong_type(key, kv->type, "bool");
  *out = kv->u64 != 0;
  return Status::ok();
}

Status GgufFile::get_str(std::string_view key, std::string_view* out) const {
  const GgufKv* kv = find(key);
  if (!kv) {
    return Status::error(GEIST_E_NOT_FOUND, "key '%.*s' not found", static_cast<int>(key.size()),
                         key.data());
  }
  if (kv->type != GgufValueType::STRING) return wrong_type(key, kv->type, "string");
  *out = kv->str;
  return Status::ok();
}

Status GgufFile::get_arr_i32(std::string_view key, std::vector<int32_t>* out) const {
  Status st;
  const GgufKv* kv = find_array(*this, key, &st);
  if (!kv) return st;
  out->clear();
  out->reserve(static_cast<size_t>(kv->arr_len));
  for (uint64_t i = 0; i < kv->arr_len; ++i) {
    int64_t v = 0;
    switch (kv->arr_type) {
      case GgufValueType::UINT8:
        v = load<uint8_t>(kv->arr_data, i);
        break;
      case GgufValueType::INT8:
        v = load<int8_t>(kv->arr_data, i);
        break;
      case GgufValueType::UINT16:
        v = load<uint16_t>(kv->arr_data, i);
        break;
      case GgufValueType::INT16:
        v = load<int16_t>(kv->arr_data, i);
        break;
      case GgufValueType::UINT32:
        v = load<uint32_t>(kv->arr_data, i);
        break;
      case GgufValueType::INT32:
        v = load<int32_t>(kv->arr_data, i);
        break;
      case GgufValueType::INT64:
        v = load<int64_t>(kv->arr_data, i);
        break;
      case GgufValueType::UINT64: {
        const uint64_t u = load<uint64_t>(kv->arr_data, i);
        v = u > static_cast<uint64_t>(INT32_MAX) ? INT64_MAX : static_cast<int64_t>(u);
        break;
      }
      default:
        out->clear();
        return Status::error(GEIST_E_FORMAT, "key '%.*s' is an array of %s, expected integers",
                             static_cast<int>(key.size()), key.data(),
                             gguf_value_type_name(kv->arr_type));
    }
    if (v < INT32_MIN || v > INT32_MAX) {
      out->clear();
      return Status::error(GEIST_E_FORMAT, "key '%.*s': element %llu does not fit in i32",
                           static_cast<int>(key.size()), key.data(),
                           static_cast<unsigned long long>(i));
    }
    out->push_back(static_cast<int32_t>(v));
  }
  return Status::ok();
}

Status GgufFile::get_arr_f32(std::string_view key, std::vector<float>* out) const {
  Status st;
  const GgufKv* kv = find_array(*this, key, &st);
  if (!kv) return st;
  if (kv->arr_type != GgufValueType::FLOAT32 && kv->arr_type != GgufValueType::FLOAT64) {
    return Status::error(GEIST_E_FORMAT, "key '%.*s' is an array of %s, expected floats",
                         static_cast<int>(key.size()), key.data(),
                         gguf_value_type_name(kv->arr_type));
  }
  out->resize(static_cast<size_t>(kv->arr_len));
  for (uint64_t i = 0; i < kv->arr_len; ++i) {
    (*out)[i] = kv->arr_type == GgufValueType::FLOAT32
                    ? load<float>(kv->arr_data, i)
                    : static_cast<float>(load<double>(kv->arr_data, i));
  }
  return Status::ok();
}

Status GgufFile::get_arr_str(std::string_view key,
                             const std::vector<std::string_view>** out) const {
  Status st;
  const GgufKv* kv = find_array(*this, key, &st);
  if (!kv) return st;
  if (kv->arr_type != GgufValueType::STRING) {
    return Status::error(GEIST_E_FORMAT, "key '%.*s' is an array of %s, expected strings",
                         static_cast<int>(key.size()), key.data(),
                         gguf_value_type_name(kv->arr_type));
  }
  if (kv->arr_strs_released) {
    return Status::error(GEIST_E_INVALID_STATE,
                         "key '%.*s': the string array's views were released after loading",
                         static_cast<int>(key.size()), key.data());
  }
  *out = &kv->arr_strs;
  return Status::ok();
}

void GgufFile::release_string_arrays() {
  for (GgufKv& kv : kvs_) {
    if (kv.type != GgufValueType::ARRAY || kv.arr_type != GgufValueType::STRING) continue;
    std::vector<std::string_view>().swap(kv.arr_strs);  // clear() would keep the capacity
    kv.arr_strs_released = true;
  }
}

}  // namespace geist
