// Tensor element types as numbered in GGUF files (ggml's enum), with their block geometry.
#pragma once

#include <cstddef>
#include <cstdint>

namespace geist {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  // 4 and 5 were Q4_2 / Q4_3, removed from the format.
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  // 31-33 were Q4_0_4_4 / Q4_0_4_8 / Q4_0_8_8, removed.
  TQ1_0 = 34,
  TQ2_0 = 35,
  // 36-38 were IQ4_NL_4_4 / _4_8 / _8_8, removed.
  MXFP4 = 39,
};

struct GgmlTypeTraits {
  const char* name;     // "q8_0"; nullptr for ids that are not a type
  uint32_t block_size;  // elements per block
  uint32_t type_size;   // bytes per block
};

// Traits for a raw type id from a file; name == nullptr when the id is not a known type.
GgmlTypeTraits ggml_type_traits(uint32_t type_id);
inline GgmlTypeTraits ggml_type_traits(GgmlType t) {
  return ggml_type_traits(static_cast<uint32_t>(t));
}
// "q8_0", or "type#<id>" for unknown ids (static storage for known ones only).
const char* ggml_type_name(GgmlType t);

// Bytes of a row of n elements; 0 if n is not a multiple of the block size.
size_t ggml_row_size(GgmlType t, int64_t n);

}  // namespace geist
