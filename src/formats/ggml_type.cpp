#include "formats/ggml_type.h"

namespace geist {
namespace {

// Geometry of each type id as ggml defines it; ids that were removed from the format (4, 5,
// 31-33, 36-38) have no name so that files using them are rejected.
constexpr GgmlTypeTraits kTraits[] = {
    {"f32", 1, 4},         // 0
    {"f16", 1, 2},         // 1
    {"q4_0", 32, 18},      // 2
    {"q4_1", 32, 20},      // 3
    {nullptr, 0, 0},       // 4
    {nullptr, 0, 0},       // 5
    {"q5_0", 32, 22},      // 6
    {"q5_1", 32, 24},      // 7
    {"q8_0", 32, 34},      // 8
    {"q8_1", 32, 36},      // 9
    {"q2_K", 256, 84},     // 10
    {"q3_K", 256, 110},    // 11
    {"q4_K", 256, 144},    // 12
    {"q5_K", 256, 176},    // 13
    {"q6_K", 256, 210},    // 14
    {"q8_K", 256, 292},    // 15
    {"iq2_xxs", 256, 66},  // 16
    {"iq2_xs", 256, 74},   // 17
    {"iq3_xxs", 256, 98},  // 18
    {"iq1_s", 256, 50},    // 19
    {"iq4_nl", 32, 18},    // 20
    {"iq3_s", 256, 110},   // 21
    {"iq2_s", 256, 82},    // 22
    {"iq4_xs", 256, 136},  // 23
    {"i8", 1, 1},          // 24
    {"i16", 1, 2},         // 25
    {"i32", 1, 4},         // 26
    {"i64", 1, 8},         // 27
    {"f64", 1, 8},         // 28
    {"iq1_m", 256, 56},    // 29
    {"bf16", 1, 2},        // 30
    {nullptr, 0, 0},       // 31
    {nullptr, 0, 0},       // 32
    {nullptr, 0, 0},       // 33
    {"tq1_0", 256, 54},    // 34
    {"tq2_0", 256, 66},    // 35
    {nullptr, 0, 0},       // 36
    {nullptr, 0, 0},       // 37
    {nullptr, 0, 0},       // 38
    {"mxfp4", 32, 17},     // 39
};
constexpr uint32_t kNumTypeIds = sizeof(kTraits) / sizeof(kTraits[0]);
static_assert(kNumTypeIds == static_cast<uint32_t>(GgmlType::MXFP4) + 1);

// "type#<id>" for the ids below 256, built at compile time so that names of unknown ids need
// no runtime storage; larger ids share one placeholder.
constexpr uint32_t kNumPlaceholders = 256;
struct Placeholders {
  char s[kNumPlaceholders][9];
  constexpr Placeholders() : s{} {
    for (uint32_t id = 0; id < kNumPlaceholders; ++id) {
      const char prefix[] = "type#";
      uint32_t n = 0;
      for (; prefix[n]; ++n) s[id][n] = prefix[n];
      if (id >= 100) s[id][n++] = static_cast<char>('0' + id / 100);
      if (id >= 10) s[id][n++] = static_cast<char>('0' + id / 10 % 10);
      s[id][n++] = static_cast<char>('0' + id % 10);
      s[id][n] = 0;
    }
  }
};
constexpr Placeholders kPlaceholders;

}  // namespace

GgmlTypeTraits ggml_type_traits(uint32_t type_id) {
  if (type_id >= kNumTypeIds) return {nullptr, 0, 0};
  return kTraits[type_id];
}

const char* ggml_type_name(GgmlType t) {
  const GgmlTypeTraits tr = ggml_type_traits(t);
  if (tr.name) return tr.name;
  const uint32_t id = static_cast<uint32_t>(t);
  return id < kNumPlaceholders ? kPlaceholders.s[id] : "type#>255";
}

size_t ggml_row_size(GgmlType t, int64_t n) {
  const GgmlTypeTraits tr = ggml_type_traits(t);
  if (!tr.name || n < 0 || n % tr.block_size != 0) return 0;
  const uint64_t blocks = static_cast<uint64_t>(n) / tr.block_size;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(tr.type_size), &bytes)) return 0;
  if (bytes > SIZE_MAX) return 0;
  return static_cast<size_t>(bytes);
}

}  // namespace geist
