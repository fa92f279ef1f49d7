// The decode step's fused launches against the separate launches they replace, bitwise (the
// fused kernels promise the same operations in the same order, so any difference is a bug):
// cuda::deltanet_prep (gates + conv1d + state advance + q / k l2 norms in one launch).
// The decode attention path is checked against prefill rows by
// CudaKv.AttentionIsBitwiseIndependentOfCallSplit; the whole fused decode step against
// plain launches by CudaGraphs.*GraphStepsBitwiseEqualPlainLaunches.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/deltanet_cuda.h"
#include "cuda/cuda_test_util.h"

namespace geist {
namespace {

using test::DeviceVec;

std::vector<float> randn(size_t n, uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Qwen3.5-like shapes: n_l2 runs of `heads` heads of d (q, k) then the value channels.
void check_prep(int32_t heads, int32_t d, int64_t v_ch, int32_t kernel, int n_l2, bool gates,
                uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "heads " << heads << " d " << d << " kernel " << kernel
                                    << " n_l2 " << n_l2 << " gates " << gates);
  const int64_t n_ch = 2 * int64_t{heads} * d + v_ch;
  const int32_t gh = 16;
  const std::vector<float> x = randn(static_cast<size_t>(n_ch), seed, 1.0f);
  const std::vector<float> w = randn(static_cast<size_t>(n_ch * kernel), seed + 1, 0.5f);
  const std::vector<float> st =
      randn(static_cast<size_t>(n_ch * (kernel - 1) + 1), seed + 2, 1.0f);  // +1: kernel 1
  const std::vector<float> beta = randn(gh, seed + 3, 3.0f), g = randn(gh, seed + 4, 8.0f);
  const std::vector<float> a = randn(gh, seed + 5, 1.0f), dt = randn(gh, seed + 6, 1.0f);
  const float eps = 1e-6f, scale_q = 0.0883883f;
  DeviceVec<float> dx(x), dw(w), da(a), ddt(dt);
  // [0]: separate launches, [1]: the fused one.
  DeviceVec<float> dst0(st), dst1(st), dout0(static_cast<size_t>(n_ch)),
      dout1(static_cast<size_t>(n_ch)), db0(beta), db1(beta), dg0(g), dg1(g);
  if (gates) cuda::deltanet_gates(nullptr, db0.ptr(), dg0.ptr(), 1, gh, da.ptr(), ddt.ptr());
  cuda::conv1d_silu(nullptr, dx.ptr(), n_ch, 1, n_ch, dw.ptr(), kernel, dst0.ptr(), dout0.ptr(),
                    n_ch);
  if (n_l2 >= 1) cuda::l2_norm_heads(nullptr, dout0.ptr(), n_ch, 1, heads, d, eps, scale_q);
  if (n_l2 >= 2) {
    cuda::l2_norm_heads(nullptr, dout0.ptr() + int64_t{heads} * d, n_ch, 1, heads, d, eps, 1.0f);
  }
  cuda::DeltaPrep p;
  if (gates) {
    p.beta = db1.ptr();
    p.g = dg1.ptr();
    p.a = da.ptr();
    p.dt_bias = ddt.ptr();
    p.gate_heads = gh;
  }
  p.x = dx.ptr();
  p.n_ch = n_ch;
  p.w = dw.ptr();
  p.kernel = kernel;
  p.state = dst1.ptr();
  p.out = dout1.ptr();
  p.n_l2 = n_l2;
  p.l2_heads = heads;
  p.d = d;
  p.eps = eps;
  p.scale_q = scale_q;
  p.scale_k = 1.0f;
  cuda::deltanet_prep(nullptr, p);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const auto bits_equal = [](const std::vector<float>& u, const std::vector<float>& v,
                             const char* what) {
    ASSERT_EQ(u.size(), v.size());
    for (size_t i = 0; i < u.size(); ++i) {
      ASSERT_EQ(std::memcmp(&u[i], &v[i], sizeof(float)), 0)
          << what << " element " << i << ": " << u[i] << " vs " << v[i];
    }
  };
  bits_equal(dout0.download(), dout1.download(), "out");
  bits_equal(dst0.download(), dst1.download(), "state");
  bits_equal(db0.download(), db1.download(), "beta");
  bits_equal(dg0.download(), dg1.download(), "g");
  // The outputs really are normed (the comparison above is not between two no-ops).
  if (n_l2 >= 2) {
    const std::vector<float> o = dout1.download();
    double ss = 0;
    for (int32_t i = 0; i < d; ++i)
      ss += double{o[static_cast<size_t>(heads) * d + i]} * o[static_cast<size_t>(heads) * d + i];
    EXPECT_NEAR(ss, 1.0, 1e-4);
  }
}

TEST(CudaDecodeFusion, DeltaNetPrepBitwiseEqualsSeparateLaunches) {
  GEIST_REQUIRE_CUDA();
  check_prep(16, 128, 2048, 4, 2, true, 1);  // Qwen3.5-0.8B
  check_prep(2, 48, 192, 4, 2, true, 2);     // stories-qwen35
  check_prep(3, 40, 77, 4, 1, false, 3);     // q only, no gates, odd sizes
  check_prep(2, 32, 64, 1, 0, true, 4);      // kernel 1: no state; no norms
  check_prep(4, 64, 0, 2, 2, false, 5);      // no value channels
}

}  // namespace
}  // namespace geist
