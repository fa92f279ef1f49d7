// The decode step's fused launches against the separate launches they replace, bitwise (the
// fused kernels promise the same operations in the same order, so any difference is a bug):
// cuda::deltanet_prep (gates + conv1d + state advance + q / k l2 norms in one launch),
// cuda::rope with the heads' rms_norm in front (Qwen3.5's q / k norms), and
// cuda::gated_delta_rule_norm (one token's delta rule + rms_norm_gated), cuda::rope_kv (rope of
// q and k + the KV rows of a plain cache), cuda::matmul_swiglu (the gate / up matmuls + swiglu).
// The decode attention path is checked against prefill rows by
// CudaKv.AttentionIsBitwiseIndependentOfCallSplit; the whole fused decode step against
// plain launches by CudaGraphs.*GraphStepsBitwiseEqualPlainLaunches.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/deltanet_cuda.h"
#include "cuda/cuda_test_util.h"

namespace geist {
namespace {

using test::DeviceVec;
using test::expect_bits_equal;
using test::randn;

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

// rms_norm of q's heads (from a strided source, as Qwen3.5's query-gate rows) and of k's heads
// (in place), then rope of both: separate launches against one fused launch.
void check_norm_rope(int32_t n_tok, int32_t n_head, int32_t n_head_kv, int32_t hd, int32_t n_rot,
                     RopeStyle style, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "n_tok " << n_tok << " heads " << n_head << "/" << n_head_kv
                                    << " hd " << hd << " n_rot " << n_rot);
  const int64_t qd = int64_t{n_head} * hd, kd = int64_t{n_head_kv} * hd;
  const std::vector<float> qg = randn(static_cast<size_t>(n_tok * 2 * qd), seed, 2.0f);
  const std::vector<float> k = randn(static_cast<size_t>(n_tok * kd), seed + 1, 2.0f);
  const std::vector<float> wq = randn(static_cast<size_t>(hd), seed + 2, 1.0f);
  const std::vector<float> wk = randn(static_cast<size_t>(hd), seed + 3, 1.0f);
  const float eps = 1e-6f;
  RopeParams p;
  p.style = style;
  p.n_rot = n_rot;
  p.freq_base = 10000000.0f;
  p.freq_scale = 1.0f;
  const int32_t pos0 = 37;
  DeviceVec<float> dqg(qg), dwq(wq), dwk(wk);
  DeviceVec<float> dq0(static_cast<size_t>(n_tok * qd)), dq1(static_cast<size_t>(n_tok * qd));
  DeviceVec<float> dk0(k), dk1(k);
  // Separate: the norms, then q and k turned in one rope launch.
  ASSERT_EQ(
      cuda::rms_norm(nullptr, dqg.ptr(), 2 * hd, dwq.ptr(), dq0.ptr(), hd, n_tok * n_head, hd, eps),
      cudaSuccess);
  ASSERT_EQ(
      cuda::rms_norm(nullptr, dk0.ptr(), hd, dwk.ptr(), dk0.ptr(), hd, n_tok * n_head_kv, hd, eps),
      cudaSuccess);
  ASSERT_EQ(cuda::rope(nullptr, cuda::RopeTensor{dq0.ptr(), qd, n_head},
                       cuda::RopeTensor{dk0.ptr(), kd, n_head_kv}, n_tok, hd, pos0, nullptr, p),
            cudaSuccess);
  // Fused: both norms taken in by the rope launch.
  ASSERT_TRUE(cuda::rope_can_norm(hd));
  cuda::RopeTensor a{dq1.ptr(), qd, n_head, dqg.ptr(), 2 * hd, dwq.ptr(), eps};
  cuda::RopeTensor b{dk1.ptr(), kd, n_head_kv, dk1.ptr(), hd, dwk.ptr(), eps};
  ASSERT_EQ(cuda::rope(nullptr, a, b, n_tok, hd, pos0, nullptr, p), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> q1 = dq1.download();
  expect_bits_equal(dq0.download(), q1, "q");
  expect_bits_equal(dk0.download(), dk1.download(), "k");
  // Not a comparison of two no-ops: a head past the rotated dims is normed (mean square ~ w^2).
  double ss = 0;
  for (int32_t i = 0; i < hd; ++i)
    ss += double{q1[static_cast<size_t>(i)]} * q1[static_cast<size_t>(i)];
  EXPECT_GT(ss, 0.0);
  EXPECT_NE(q1[0], qg[0]);
}

TEST(CudaDecodeFusion, NormRopeBitwiseEqualsSeparateLaunches) {
  GEIST_REQUIRE_CUDA();
  check_norm_rope(1, 8, 2, 256, 64, RopeStyle::NEOX, 11);    // Qwen3.5-0.8B decode
  check_norm_rope(5, 8, 2, 256, 64, RopeStyle::NEOX, 12);    // a prefill of 5
  check_norm_rope(1, 4, 2, 64, 64, RopeStyle::NORMAL, 13);   // full rotation, 64
  check_norm_rope(3, 6, 3, 1024, 256, RopeStyle::NEOX, 14);  // the largest head, 128 threads
  check_norm_rope(2, 3, 1, 48, 16, RopeStyle::NORMAL, 15);   // stories-qwen35-like
}

// One token's delta rule and gated norm, separately and as gated_delta_rule_norm; twice in a
// row, so a counter left non-zero by the first fused launch would show in the second.
void check_delta_norm(int32_t n_k_heads, int32_t n_v_heads, int32_t d_k, int32_t d_v,
                      uint32_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "heads " << n_k_heads << "/" << n_v_heads << " d " << d_k << "x" << d_v);
  const size_t nq = static_cast<size_t>(n_k_heads) * d_k, nv = static_cast<size_t>(n_v_heads) * d_v;
  const size_t ns = static_cast<size_t>(n_v_heads) * d_k * d_v;
  std::vector<float> q = randn(nq, seed, 0.1f), k = randn(nq, seed + 1, 0.1f);
  const std::vector<float> v = randn(nv, seed + 2, 1.0f), z = randn(nv, seed + 3, 1.0f);
  const std::vector<float> w = randn(static_cast<size_t>(d_v), seed + 4, 1.0f);
  const std::vector<float> st = randn(ns, seed + 5, 0.5f);
  std::vector<float> g = randn(static_cast<size_t>(n_v_heads), seed + 6, 1.0f);
  std::vector<float> beta(static_cast<size_t>(n_v_heads));
  for (size_t i = 0; i < beta.size(); ++i) {
    g[i] = -std::fabs(g[i]);
    beta[i] = 0.2f + 0.05f * static_cast<float>(i % 10);
  }
  const float eps = 1e-6f;
  DeviceVec<float> dq(q), dk(k), dv(v), dz(z), dw(w), dg(g), db(beta);
  DeviceVec<float> ds0(st), ds1(st), do0(nv), do1(nv);
  DeviceVec<unsigned> cnt(std::vector<unsigned>(static_cast<size_t>(n_v_heads), 0u));
  GatedDeltaArgs a;
  a.n_tokens = 1;
  a.n_k_heads = n_k_heads;
  a.n_v_heads = n_v_heads;
  a.d_k = d_k;
  a.d_v = d_v;
  a.q = dq.ptr();
  a.q_stride = static_cast<int64_t>(nq);
  a.k = dk.ptr();
  a.k_stride = static_cast<int64_t>(nq);
  a.v = dv.ptr();
  a.v_stride = static_cast<int64_t>(nv);
  a.g = dg.ptr();
  a.beta = db.ptr();
  a.out_stride = static_cast<int64_t>(nv);
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    a.state = ds0.ptr();
    a.out = do0.ptr();
    cuda::gated_delta_rule(nullptr, a, 64, nullptr);
    cuda::rms_norm_gated(nullptr, do0.ptr(), dz.ptr(), dw.ptr(), n_v_heads, d_v, eps, do0.ptr());
    a.state = ds1.ptr();
    a.out = do1.ptr();
    cuda::gated_delta_rule_norm(nullptr, a, dz.ptr(), dw.ptr(), eps, cnt.ptr());
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_bits_equal(do0.download(), do1.download(), "out");
    expect_bits_equal(ds0.download(), ds1.download(), "state");
    for (unsigned c : cnt.download()) ASSERT_EQ(c, 0u);
  }
  const std::vector<float> o = do1.download();
  EXPECT_NE(o[0], 0.0f);
}

TEST(CudaDecodeFusion, DeltaRuleNormBitwiseEqualsSeparateLaunches) {
  GEIST_REQUIRE_CUDA();
  check_delta_norm(16, 16, 128, 128, 21);  // Qwen3.5-0.8B
  check_delta_norm(2, 4, 48, 40, 22);      // grouped v heads, d_v not a multiple of 8
  check_delta_norm(1, 3, 200, 96, 23);     // rows per lane 8
}

// q and k turned and the step's K / V rows written to a plain (F32 / F16) cache: the norms (if
// any), rope() of both, then kv_encode_rows() of k and v, against one rope_kv launch. The
// caches start as random bytes and the rows land past row_off (+ *row_dev), so a row written to
// the wrong place, or a neighbour's bytes touched, differ too.
struct RopeKvCase {
  int32_t n_tok, n_head, n_head_kv, hd, n_rot, nv;
  RopeStyle style;
  bool f16, norm, shift;
};

void check_rope_kv(const RopeKvCase& c, uint32_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "n_tok " << c.n_tok << " heads " << c.n_head << "/" << c.n_head_kv << " hd "
               << c.hd << " n_rot " << c.n_rot << " nv " << c.nv << " f16 " << c.f16 << " norm "
               << c.norm << " shift " << c.shift);
  const int64_t qd = int64_t{c.n_head} * c.hd, kd = int64_t{c.n_head_kv} * c.hd;
  const size_t nt = static_cast<size_t>(c.n_tok);
  const std::vector<float> qg = randn(nt * static_cast<size_t>(2 * qd + 1), seed, 2.0f);
  const std::vector<float> k = randn(nt * static_cast<size_t>(kd), seed + 1, 2.0f);
  const std::vector<float> v = randn(nt * static_cast<size_t>(c.nv + 3), seed + 2, 2.0f);
  const std::vector<float> wq = randn(static_cast<size_t>(c.hd), seed + 3, 1.0f);
  const std::vector<float> wk = randn(static_cast<size_t>(c.hd), seed + 4, 1.0f);
  const int64_t esz = c.f16 ? 2 : 4;
  const int64_t k_row = kd * esz, v_row = int64_t{c.nv} * esz;
  const int32_t rows = c.n_tok + 6, row_off = 2;
  std::vector<uint8_t> junk(static_cast<size_t>(rows * (k_row > v_row ? k_row : v_row)));
  std::mt19937 rng(seed + 5);
  for (uint8_t& b : junk) b = static_cast<uint8_t>(rng() & 0xFF);
  const float eps = 1e-6f;
  RopeParams p;
  p.style = c.style;
  p.n_rot = c.n_rot;
  p.freq_base = 500000.0f;
  p.freq_scale = 1.0f;
  const int32_t pos0 = 41;
  DeviceVec<float> dqg(qg), dwq(wq), dwk(wk), dv(v);
  DeviceVec<int32_t> dshift(std::vector<int32_t>{3});
  const int32_t* row_dev = c.shift ? dshift.ptr() : nullptr;
  const int32_t* pos_dev = c.shift ? dshift.ptr() : nullptr;
  // [0]: separate launches, [1]: rope_kv. Without norms q is turned in place in a copy of qg's
  // first rows (stride qd); with them it is normed from qg's strided rows.
  DeviceVec<float> dq0(nt * static_cast<size_t>(qd)), dq1(nt * static_cast<size_t>(qd));
  if (!c.norm) {
    const std::vector<float> q(qg.begin(), qg.begin() + static_cast<int64_t>(nt) * qd);
    dq0.upload(q);
    dq1.upload(q);
  }
  DeviceVec<float> dk0(k), dk1(k);
  DeviceVec<uint8_t> kc0(junk), kc1(junk), vc0(junk), vc1(junk);
  cuda::RopeTensor a0{dq0.ptr(), qd, c.n_head}, b0{dk0.ptr(), kd, c.n_head_kv};
  cuda::RopeTensor a1{dq1.ptr(), qd, c.n_head}, b1{dk1.ptr(), kd, c.n_head_kv};
  if (c.norm) {
    GEIST_CUDA_OK(cuda::rms_norm(nullptr, dqg.ptr(), 2 * c.hd, dwq.ptr(), dq0.ptr(), c.hd,
                                 c.n_tok * c.n_head, c.hd, eps));
    GEIST_CUDA_OK(cuda::rms_norm(nullptr, dk0.ptr(), c.hd, dwk.ptr(), dk0.ptr(), c.hd,
                                 c.n_tok * c.n_head_kv, c.hd, eps));
    a1 = cuda::RopeTensor{dq1.ptr(), qd, c.n_head, dqg.ptr(), 2 * c.hd, dwq.ptr(), eps};
    b1 = cuda::RopeTensor{dk1.ptr(), kd, c.n_head_kv, dk1.ptr(), c.hd, dwk.ptr(), eps};
  }
  const KvEnc enc = c.f16 ? KvEnc::F16 : KvEnc::F32;
  GEIST_CUDA_OK(cuda::rope(nullptr, a0, b0, c.n_tok, c.hd, pos0, pos_dev, p));
  GEIST_CUDA_OK(cuda::kv_encode_rows(nullptr, enc, kKvBlock, dk0.ptr(), kd, c.n_tok,
                                     static_cast<int32_t>(kd), nullptr, kc0.ptr() + row_off * k_row,
                                     k_row, row_dev));
  GEIST_CUDA_OK(cuda::kv_encode_rows(nullptr, enc, kKvBlock, dv.ptr(), c.nv + 3, c.n_tok, c.nv,
                                     nullptr, vc0.ptr() + row_off * v_row, v_row, row_dev));
  cuda::KvRowsOut o;
  o.f16 = c.f16;
  o.v = dv.ptr();
  o.v_stride = c.nv + 3;
  o.nv = c.nv;
  o.k_dst = kc1.ptr() + row_off * k_row;
  o.k_row_bytes = k_row;
  o.v_dst = vc1.ptr() + row_off * v_row;
  o.v_row_bytes = v_row;
  o.row_dev = row_dev;
  GEIST_CUDA_OK(cuda::rope_kv(nullptr, a1, b1, c.n_tok, c.hd, pos0, pos_dev, p, o));
  GEIST_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> q1 = dq1.download(), k1 = dk1.download();
  expect_bits_equal(dq0.download(), q1, "q");
  expect_bits_equal(dk0.download(), k1, "k");
  const std::vector<uint8_t> kb0 = kc0.download(), kb1 = kc1.download();
  const std::vector<uint8_t> vb0 = vc0.download(), vb1 = vc1.download();
  EXPECT_TRUE(kb0 == kb1) << "K rows differ";
  EXPECT_TRUE(vb0 == vb1) << "V rows differ";
  // Not a comparison of two no-ops: k was turned, and its first row reached the cache.
  EXPECT_NE(std::memcmp(k1.data(), k.data(), sizeof(float) * static_cast<size_t>(kd)), 0);
  const size_t first = static_cast<size_t>((row_off + (c.shift ? 3 : 0)) * k_row);
  EXPECT_NE(std::memcmp(kb1.data() + first, junk.data() + first, static_cast<size_t>(k_row)), 0);
  if (c.n_head > 0 && !c.norm) {
    EXPECT_NE(std::memcmp(q1.data(), qg.data(), sizeof(float) * static_cast<size_t>(qd)), 0);
  }
}

TEST(CudaDecodeFusion, RopeKvWriteBitwiseEqualsSeparateLaunches) {
  GEIST_REQUIRE_CUDA();
  // n_tok, n_head, n_head_kv, hd, n_rot, nv, style, f16, norm, shift
  check_rope_kv({1, 32, 8, 64, 64, 512, RopeStyle::NORMAL, true, false, true}, 31);  // llama-1b
  check_rope_kv({1, 32, 8, 64, 64, 512, RopeStyle::NORMAL, false, false, false}, 32);
  check_rope_kv({1, 4, 2, 128, 32, 200, RopeStyle::NEOX, false, false, true}, 33);   // partial
  check_rope_kv({5, 6, 3, 48, 16, 150, RopeStyle::NORMAL, true, false, false}, 34);  // prefill
  check_rope_kv({1, 0, 2, 64, 64, 128, RopeStyle::NEOX, true, false, false}, 35);    // keys only
  check_rope_kv({1, 8, 2, 256, 64, 512, RopeStyle::NEOX, true, true, true}, 36);     // qwen35-0.8b
  check_rope_kv({2, 3, 1, 48, 16, 48, RopeStyle::NORMAL, false, true, false}, 37);   // stories
  check_rope_kv({3, 2, 2, 64, 64, 130, RopeStyle::NEOX, false, true, true}, 38);     // v chunks
}

// The one-token gate / up matmuls (matmul_batch) then swiglu() against one matmul_swiglu
// launch: gate, up and out bitwise, with out the gate rows (llama's swiglu(gate, up, gate)), the
// up rows, and a third buffer; Q8_0 and Q4_0; the llama-1b and qwen35-0.8b shapes and an odd
// one (rows not a multiple of the block's 8, 3 blocks per row). llama-1b's 8192 rows take the
// streaming kernel (gemv_stream_kernel, from kGsMinSwgGroups row groups on), the others
// gemv_kernel.
class CudaSwigluFfn : public test::CudaStreamTest {};

TEST_F(CudaSwigluFfn, MatmulSwigluBitwiseEqualsSeparateLaunches) {
  GEIST_REQUIRE_CUDA();
  struct Case {
    int64_t n_in, n_ff;
  };
  for (const GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    for (const Case c : {Case{2048, 8192}, Case{1024, 3584}, Case{96, 101}}) {
      std::vector<uint8_t> bg, bu;
      const WeightMatrix wg = upload_quantized(
          t, randn(static_cast<size_t>(c.n_in * c.n_ff), 51u, 0.05f), c.n_in, c.n_ff, &bg);
      const WeightMatrix wu = upload_quantized(
          t, randn(static_cast<size_t>(c.n_in * c.n_ff), 52u, 0.05f), c.n_in, c.n_ff, &bu);
      ASSERT_TRUE(cuda::matmul_swiglu_ok(wg, wu));
      const DeviceVec<float> x(randn(static_cast<size_t>(c.n_in), 53u, 1.0f));
      const size_t n = static_cast<size_t>(c.n_ff);
      // Separate launches: gate, up, then swiglu into gate (the values of every variant).
      DeviceVec<float> g0(n), u0(n), o0(n);
      cuda::MatmulOut outs[2] = {{wg, g0.ptr(), c.n_ff}, {wu, u0.ptr(), c.n_ff}};
      GEIST_CUDA_OK(cuda::matmul_batch(nullptr, outs, 2, x.ptr(), c.n_in, 1));
      GEIST_CUDA_OK(cuda::swiglu(nullptr, g0.ptr(), u0.ptr(), o0.ptr(), c.n_ff));
      const std::vector<float> gw = g0.download(), uw = u0.download(), ow = o0.download();
      for (int variant = 0; variant < 3; ++variant) {  // out: gate, up, apart
        SCOPED_TRACE(::testing::Message() << ggml_type_name(t) << " " << c.n_in << "->" << c.n_ff
                                          << " out variant " << variant);
        DeviceVec<float> g1(n), u1(n), o1(n);
        float* out = variant == 0 ? g1.ptr() : (variant == 1 ? u1.ptr() : o1.ptr());
        GEIST_CUDA_OK(cuda::matmul_swiglu(nullptr, {wg, g1.ptr(), c.n_ff}, {wu, u1.ptr(), c.n_ff},
                                          x.ptr(), out));
        GEIST_CUDA_OK(cudaDeviceSynchronize());
        const std::vector<float> g = g1.download(), u = u1.download(), o = o1.download();
        const std::vector<float>& got_out = variant == 0 ? g : (variant == 1 ? u : o);
        EXPECT_EQ(std::memcmp(got_out.data(), ow.data(), n * sizeof(float)), 0);
        if (variant != 0) {
          EXPECT_EQ(std::memcmp(g.data(), gw.data(), n * sizeof(float)), 0);
        }
        if (variant != 1) {
          EXPECT_EQ(std::memcmp(u.data(), uw.data(), n * sizeof(float)), 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace geist
