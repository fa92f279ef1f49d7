#include <gtest/gtest.h>

#include <cstring>

#include "formats/ggml_type.h"

namespace geist {
namespace {

constexpr uint32_t kQK = 32;     // elements per legacy block
constexpr uint32_t kQK_K = 256;  // elements per k-quant super-block
constexpr uint32_t kHalf = 2;    // bytes of an fp16 scale

struct Expected {
  GgmlType type;
  const char* name;
  uint32_t block;
  uint32_t bytes;
};

// Sizes derived from ggml's block layouts (scale fields + packed quants), not copied numbers.
const Expected kExpected[] = {
    {GgmlType::F32, "f32", 1, 4},
    {GgmlType::F16, "f16", 1, 2},
    {GgmlType::Q4_0, "q4_0", kQK, kHalf + kQK / 2},          // d, 4-bit quants
    {GgmlType::Q4_1, "q4_1", kQK, 2 * kHalf + kQK / 2},      // d, m, 4-bit quants
    {GgmlType::Q5_0, "q5_0", kQK, kHalf + 4 + kQK / 2},      // d, qh[4], 4-bit low
    {GgmlType::Q5_1, "q5_1", kQK, 2 * kHalf + 4 + kQK / 2},  // d, m, qh[4], 4-bit low
    {GgmlType::Q8_0, "q8_0", kQK, kHalf + kQK},              // d, int8 quants
    {GgmlType::Q8_1, "q8_1", kQK, 2 * kHalf + kQK},          // d, s, int8 quants
    {GgmlType::Q2_K, "q2_K", kQK_K, kQK_K / 16 + kQK_K / 4 + 2 * kHalf},
    {GgmlType::Q3_K, "q3_K", kQK_K, kQK_K / 8 + kQK_K / 4 + 12 + kHalf},
    {GgmlType::Q4_K, "q4_K", kQK_K, 2 * kHalf + 12 + kQK_K / 2},
    {GgmlType::Q5_K, "q5_K", kQK_K, 2 * kHalf + 12 + kQK_K / 8 + kQK_K / 2},
    {GgmlType::Q6_K, "q6_K", kQK_K, kQK_K / 2 + kQK_K / 4 + kQK_K / 16 + kHalf},
    {GgmlType::Q8_K, "q8_K", kQK_K, 4 + kQK_K + kQK_K / 16 * 2},  // float d, int8, int16 sums
    {GgmlType::IQ2_XXS, "iq2_xxs", kQK_K, kHalf + kQK_K / 8 * 2},
    {GgmlType::IQ2_XS, "iq2_xs", kQK_K, kHalf + kQK_K / 8 * 2 + kQK_K / 32},
    {GgmlType::IQ3_XXS, "iq3_xxs", kQK_K, kHalf + 3 * kQK_K / 8},
    {GgmlType::IQ1_S, "iq1_s", kQK_K, kHalf + kQK_K / 8 + kQK_K / 32 * 2},
    {GgmlType::IQ4_NL, "iq4_nl", kQK, kHalf + kQK / 2},
    {GgmlType::IQ3_S, "iq3_s", kQK_K, kHalf + kQK_K / 4 + kQK_K / 32 + kQK_K / 8 + kQK_K / 64},
    {GgmlType::IQ2_S, "iq2_s", kQK_K, kHalf + kQK_K / 4 + kQK_K / 32 + kQK_K / 32},
    {GgmlType::IQ4_XS, "iq4_xs", kQK_K, kHalf + 2 + kQK_K / 64 + kQK_K / 2},
    {GgmlType::I8, "i8", 1, 1},
    {GgmlType::I16, "i16", 1, 2},
    {GgmlType::I32, "i32", 1, 4},
    {GgmlType::I64, "i64", 1, 8},
    {GgmlType::F64, "f64", 1, 8},
    {GgmlType::IQ1_M, "iq1_m", kQK_K, kQK_K / 8 + kQK_K / 16 + kQK_K / 32},  // scale in scales
    {GgmlType::BF16, "bf16", 1, 2},
    {GgmlType::TQ1_0, "tq1_0", kQK_K, (kQK_K - 4 * kQK_K / 64) / 5 + kQK_K / 64 + kHalf},
    {GgmlType::TQ2_0, "tq2_0", kQK_K, kQK_K / 4 + kHalf},
    {GgmlType::MXFP4, "mxfp4", kQK, 1 + kQK / 2},  // e8m0 exponent, 4-bit quants
};

TEST(GgmlType, TraitsMatchBlockLayouts) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    const GgmlTypeTraits t = ggml_type_traits(e.type);
    ASSERT_NE(t.name, nullptr);
    EXPECT_STREQ(t.name, e.name);
    EXPECT_STREQ(ggml_type_name(e.type), e.name);
    EXPECT_EQ(t.block_size, e.block);
    EXPECT_EQ(t.type_size, e.bytes);
  }
}

TEST(GgmlType, RemovedAndUnknownIdsHaveNoName) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u, 0xffffffffu}) {
    SCOPED_TRACE(id);
    EXPECT_EQ(ggml_type_traits(id).name, nullptr);
  }
  EXPECT_STREQ(ggml_type_name(static_cast<GgmlType>(5)), "type#5");
  EXPECT_STREQ(ggml_type_name(static_cast<GgmlType>(137)), "type#137");
  EXPECT_NE(std::strstr(ggml_type_name(static_cast<GgmlType>(100000)), "type#"), nullptr);
}

TEST(GgmlType, RowSize) {
  EXPECT_EQ(ggml_row_size(GgmlType::F32, 7), 28u);
  EXPECT_EQ(ggml_row_size(GgmlType::Q8_0, 64), 2u * 34u);
  EXPECT_EQ(ggml_row_size(GgmlType::Q4_K, 512), 2u * 144u);
  EXPECT_EQ(ggml_row_size(GgmlType::Q8_0, 33), 0u);  // not a whole number of blocks
  EXPECT_EQ(ggml_row_size(GgmlType::F16, -2), 0u);
  EXPECT_EQ(ggml_row_size(static_cast<GgmlType>(4), 32), 0u);
  EXPECT_EQ(ggml_row_size(GgmlType::F32, 0), 0u);
}

}  // namespace
}  // namespace geist
