// The int16 unpackers are integer work plus copies of the file's f16 steps: every SIMD target
// must write the same w16, dw and mw bits, for every type the int16 path takes.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/quant.h"
#include "kernels/simd/matmul_simd.h"

namespace geist {
namespace {

TEST(UnpackI16, SameBitsOnEveryTarget) {
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                        GgmlType::Q5_1, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                        GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    SCOPED_TRACE(ggml_type_name(type));
    std::mt19937 rng(5);
    const int64_t n_in = 512, count = 3, nb = n_in / 32;
    std::vector<float> deq;
    const std::vector<uint8_t> bytes = test::random_rows(type, n_in, count, &rng, &deq, true);
    std::vector<int16_t> w0, w16(static_cast<size_t>(count * n_in));
    std::vector<float> d0, m0, dw(static_cast<size_t>(count * nb)), mw(dw.size());
    bool first = true;
    test::for_each_target([&] {
      simd::unpack_rows_i16(type, bytes.data(), ggml_row_size(type, n_in), count, n_in, w16.data(),
                            dw.data(), mw.data());
      if (first) {
        w0 = w16, d0 = dw, m0 = mw, first = false;
        return;
      }
      EXPECT_EQ(std::memcmp(w0.data(), w16.data(), w16.size() * sizeof(int16_t)), 0);
      EXPECT_EQ(std::memcmp(d0.data(), dw.data(), dw.size() * sizeof(float)), 0);
      EXPECT_EQ(std::memcmp(m0.data(), mw.data(), mw.size() * sizeof(float)), 0);
    });
  }
}

}  // namespace
}  // namespace geist
