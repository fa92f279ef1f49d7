// Helpers of the kernel tests: running a body on every SIMD target, random quantized rows.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "kernels/quant.h"
#include "kernels/simd/matmul_simd.h"

namespace geist::test {

// Runs body once per SIMD target that is both compiled in and supported by this CPU (checking
// that the dispatcher really picked it), then restores the normal dispatch.
template <class F>
void for_each_target(F&& body) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    SCOPED_TRACE(hwy::TargetName(t));
    ASSERT_STREQ(simd::target_name(), hwy::TargetName(t));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
}

// n_out random rows of n_in weights quantized to `type`, each row with its own magnitude; deq
// gets what dequantize_row() makes of them ([n_out][n_in]). shifted: every third 32-block is
// offset by +1.5 so that K-quant sub-blocks have non-zero mins.
inline std::vector<uint8_t> random_rows(GgmlType type, int64_t n_in, int64_t n_out,
                                        std::mt19937* rng, std::vector<float>* deq,
                                        bool shifted = false) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t rb = ggml_row_size(type, n_in);
  std::vector<uint8_t> bytes(rb * static_cast<size_t>(n_out));
  deq->assign(static_cast<size_t>(n_in * n_out), 0.0f);
  std::vector<float> src(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    const float scale = std::exp(nd(*rng));
    for (size_t i = 0; i < src.size(); ++i) {
      const float shift = shifted && i / 32 % 3 == 1 ? 1.5f : 0.0f;
      src[i] = scale * (nd(*rng) + shift);
    }
    quantize_row(type, src.data(), bytes.data() + o * rb, n_in);
    dequantize_row(type, bytes.data() + o * rb, deq->data() + o * n_in, n_in);
  }
  return bytes;
}

// IQ4_NL's (and IQ4_XS's) 16 code values, from ggml's kvalues_iq4nl.
constexpr int8_t kIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                             1,    13,   25,  38,  53,  69,  89,  113};

// y = W x within the activations' 8-bit step of the double product: each 32-value block of x
// is quantized to amax / 127 steps, so each term may move by |w| * step / 2.
inline void expect_within_activation_step(const std::vector<float>& y, const std::vector<float>& x,
                                          const std::vector<float>& deq, int64_t n_tok,
                                          int64_t n_in, int64_t n_out) {
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t o = 0; o < n_out; ++o) {
      double ref = 0, qerr = 0;
      for (int64_t b = 0; b < n_in / 32; ++b) {
        double amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[t * n_in + b * 32 + i]));
        for (int i = 0; i < 32; ++i) {
          const double wv = deq[o * n_in + b * 32 + i];
          ref += wv * x[t * n_in + b * 32 + i];
          qerr += std::fabs(wv) * 0.5 * amax / 127.0;
        }
      }
      ASSERT_NEAR(y[t * n_out + o], ref, 1e-5 + 1.01 * qerr) << t << " " << o;
    }
  }
}

// The rows and the panels kernels' outputs (nt rows of ys floats each, filled with `fill`
// before the call) equal ref(t, r) bit for bit for r < n_out and keep `fill` past n_out.
template <class Ref>
void expect_rows_and_panels_equal(const std::vector<float>& y_rows, const std::vector<float>& y_pan,
                                  int64_t nt, int64_t n_out, int64_t ys, float fill, Ref ref) {
  for (int64_t t = 0; t < nt; ++t) {
    for (int64_t r = 0; r < n_out; ++r) {
      const float want = ref(t, r);
      const size_t k = static_cast<size_t>(t * ys + r);
      ASSERT_EQ(std::bit_cast<uint32_t>(y_rows[k]), std::bit_cast<uint32_t>(want))
          << "rows t=" << t << " r=" << r;
      ASSERT_EQ(std::bit_cast<uint32_t>(y_pan[k]), std::bit_cast<uint32_t>(want))
          << "panels t=" << t << " r=" << r;
    }
    for (int64_t r = n_out; r < ys; ++r) {
      ASSERT_EQ(y_rows[static_cast<size_t>(t * ys + r)], fill);
      ASSERT_EQ(y_pan[static_cast<size_t>(t * ys + r)], fill);
    }
  }
}

}  // namespace geist::test
