// The CUDA DeltaNet kernels (backends/cuda/deltanet_cuda.h) against the scalar CPU kernels of
// kernels/deltanet.h, which are the oracle, on random inputs with realistic strides.
//
// Tolerances (f32 epsilon u = 2^-23 ~ 1.19e-7):
//   gates          relative 1e-6 (~8 u): CUDA's expf is within 2 ulps and log1pf within 1 ulp
//                  (CUDA math API), glibc's within 1; softplus and sigmoid do not amplify a
//                  relative error of exp, so the two sides differ by a few ulps.
//   conv1d + SiLU  1e-6 * (|ref| + sum_j |w_j x_j|): the GPU adds the same products in the
//                  same order without FMAs (bitwise equal to a non-FMA CPU build; an FMA build
//                  differs by <= kernel ulps of sum |terms|), then SiLU differs by expf's ulps.
//                  The advanced conv state is a copy of inputs: compared bitwise.
//   L2 / RMS norms relative (d/2 + 8) u per element: the CPU sums d squares in f32 (relative
//                  error <= (d-1) u/2 on the sum, half that on 1/sqrt), the GPU in double; the
//                  remaining scalings are the same f32 roundings on both sides.
//   delta rule     1e-5 * max(1, max |reference|), the tolerance at which the CPU's own chunked
//                  and recurrent forms are required to agree with the exact recurrence
//                  (tests/kernels/test_deltanet.cpp): both sides accumulate in double and
//                  differ only in when the state is rounded to f32 (CPU per token or chunk, GPU
//                  once per call).
// Padding between strided rows must come back bitwise untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/deltanet_chunk_cuda.h"
#include "backends/cuda/deltanet_cuda.h"
#include "cuda/cuda_test_util.h"
#include "kernels/deltanet.h"

namespace geist {
namespace {

using test::DeviceVec;

constexpr float kSentinel = -7777.0f;  // fills padding that no kernel may write
constexpr double kU = FLT_EPSILON;

class StreamGuard {
 public:
  StreamGuard() { err_ = cudaStreamCreate(&s_); }
  ~StreamGuard() {
    if (s_ != nullptr) cudaStreamDestroy(s_);
  }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;
  cudaStream_t get() const { return s_; }
  cudaError_t error() const { return err_; }

 private:
  cudaStream_t s_ = nullptr;
  cudaError_t err_ = cudaSuccess;
};

// Launch and execution errors of everything enqueued on s so far.
::testing::AssertionResult stream_ok(cudaStream_t s) {
  const cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess) {
    return ::testing::AssertionFailure() << "launch: " << cudaGetErrorString(launch);
  }
  const cudaError_t run = cudaStreamSynchronize(s);
  if (run != cudaSuccess) {
    return ::testing::AssertionFailure() << "execution: " << cudaGetErrorString(run);
  }
  return ::testing::AssertionSuccess();
}

// Compares got with want element-wise. where(i) names element i, or returns "" for padding,
// which must match bitwise; elsewhere |got - want| <= tol(i). The message names the number of
// bad elements and the worst one (by |diff| / tol).
::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<float>& want,
                                     const std::function<double(size_t)>& tol,
                                     const std::function<std::string(size_t)>& where) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "size " << got.size() << " != reference size " << want.size();
  }
  size_t bad = 0, worst = 0;
  double worst_ratio = 0.0;
  bool worst_is_pad = false;
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string w = where(i);
    bool ok;
    double ratio;
    if (w.empty()) {
      ok = std::memcmp(&got[i], &want[i], sizeof(float)) == 0;
      ratio = ok ? 0.0 : INFINITY;
    } else {
      const double d = std::fabs(double{got[i]} - want[i]);
      const double t = tol(i);
      ok = d <= t;  // false for NaN
      ratio = ok ? d / t : (std::isnan(d) ? INFINITY : d / t);
    }
    if (!ok) {
      ++bad;
      if (bad == 1 || ratio > worst_ratio) {
        worst = i;
        worst_ratio = ratio;
        worst_is_pad = w.empty();
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream m;
  m.precision(9);
  m << bad << " of " << got.size() << " elements off; worst at "
    << (worst_is_pad ? std::string("padding (must be untouched)") : where(worst)) << " [" << worst
    << "]: got " << got[worst] << ", reference " << want[worst];
  if (!worst_is_pad)
    m << ", |diff| " << std::fabs(double{got[worst]} - want[worst]) << " > tol " << tol(worst);
  return ::testing::AssertionFailure() << m.str();
}

std::vector<float> random_vec(size_t n, std::mt19937& rng, float mean, float sd) {
  std::normal_distribution<float> nd(mean, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// ---- gates ----

TEST(DeltaNetCuda, GatesMatchCpu) {
  GEIST_REQUIRE_CUDA();
  StreamGuard s;
  GEIST_CUDA_OK(s.error());
  std::mt19937 rng(11);
  for (int32_t n_tok : {1, 7, 65}) {
    for (int32_t nh : {5, 16, 48}) {
      SCOPED_TRACE(::testing::Message() << "n_tok " << n_tok << " n_heads " << nh);
      const size_t n = static_cast<size_t>(n_tok) * nh;
      std::vector<float> beta = random_vec(n, rng, 0.0f, 3.0f);
      // Spread wide enough that some inputs take softplus's x > 20 branch.
      std::vector<float> g = random_vec(n, rng, 0.0f, 8.0f);
      std::vector<float> a = random_vec(static_cast<size_t>(nh), rng, 0.0f, 1.0f);
      for (auto& x : a) x = -std::exp(x);  // A = -exp(A_log) < 0
      std::vector<float> dt = random_vec(static_cast<size_t>(nh), rng, 0.0f, 1.0f);

      DeviceVec<float> d_beta(beta), d_g(g), d_a(a), d_dt(dt);
      cuda::deltanet_gates(s.get(), d_beta.ptr(), d_g.ptr(), n_tok, nh, d_a.ptr(), d_dt.ptr());
      ASSERT_TRUE(stream_ok(s.get()));

      for (size_t i = 0; i < n; ++i) {
        const size_t h = i % static_cast<size_t>(nh);
        beta[i] = sigmoid_f32(beta[i]);
        g[i] = a[h] * softplus_f32(g[i] + dt[h]);
      }
      auto rel = [](const std::vector<float>& ref) {
        return [&ref](size_t i) { return 1e-6 * std::fabs(ref[i]) + 1e-30; };
      };
      auto where = [nh](size_t i) {
        return "t " + std::to_string(i / static_cast<size_t>(nh)) + " head " +
               std::to_string(i % static_cast<size_t>(nh));
      };
      EXPECT_TRUE(all_close(d_beta.download(), beta, rel(beta), where)) << "beta";
      EXPECT_TRUE(all_close(d_g.download(), g, rel(g), where)) << "g";
    }
  }
}

// ---- conv1d + SiLU ----

// Runs a sequence split into calls of the given lengths on both sides, continuing the state,
// and compares every call's outputs and the state after it.
void check_conv(int64_t n_ch, int32_t kernel, const std::vector<int32_t>& calls, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "n_ch " << n_ch << " kernel " << kernel);
  StreamGuard s;
  GEIST_CUDA_OK(s.error());
  std::mt19937 rng(seed);
  const int64_t x_stride = n_ch + 3, out_stride = n_ch + 5;  // padded rows
  const int64_t hist = kernel - 1;
  const std::vector<float> w = random_vec(static_cast<size_t>(n_ch * kernel), rng, 0.0f, 0.5f);
  std::vector<float> state = random_vec(static_cast<size_t>(hist * n_ch), rng, 0.0f, 1.0f);
  DeviceVec<float> d_w(w), d_state(state);
  int64_t done = 0;
  for (int32_t n : calls) {
    SCOPED_TRACE(::testing::Message() << "call of " << n << " tokens after " << done);
    const std::vector<float> x = random_vec(static_cast<size_t>(n * x_stride), rng, 0.0f, 1.0f);
    std::vector<float> out(static_cast<size_t>(n * out_stride), kSentinel);
    DeviceVec<float> d_x(x), d_out(out);

    cuda::conv1d_silu(s.get(), d_x.ptr(), x_stride, n, n_ch, d_w.ptr(), kernel, d_state.ptr(),
                      d_out.ptr(), out_stride);
    ASSERT_TRUE(stream_ok(s.get()));

    // Per-output bound from the magnitudes of its terms, before the CPU advances the state.
    std::vector<double> mag(out.size(), 0.0);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t c = 0; c < n_ch; ++c) {
        double m = 0.0;
        for (int32_t j = 0; j < kernel; ++j) {
          const int64_t src = t - hist + j;
          const float r = src < 0 ? state[static_cast<size_t>((hist + src) * n_ch + c)]
                                  : x[static_cast<size_t>(src * x_stride + c)];
          m += std::fabs(double{w[static_cast<size_t>(c * kernel + j)]} * r);
        }
        mag[static_cast<size_t>(t * out_stride + c)] = m;
      }
    }
    conv1d_causal(x.data(), x_stride, n, n_ch, w.data(), kernel, state.data(), out.data(),
                  out_stride, 0, n_ch);
    for (int64_t t = 0; t < n; ++t) silu_inplace(out.data() + t * out_stride, n_ch);

    auto where = [&](size_t i) -> std::string {
      const int64_t t = static_cast<int64_t>(i) / out_stride,
                    c = static_cast<int64_t>(i) % out_stride;
      if (c >= n_ch) return "";
      return "t " + std::to_string(t) + " channel " + std::to_string(c);
    };
    auto tol = [&](size_t i) { return 1e-6 * (std::fabs(out[i]) + mag[i]); };
    EXPECT_TRUE(all_close(d_out.download(), out, tol, where)) << "outputs";
    auto where_state = [&](size_t i) {
      return "state row " + std::to_string(i / static_cast<size_t>(n_ch)) + " channel " +
             std::to_string(i % static_cast<size_t>(n_ch));
    };
    EXPECT_TRUE(all_close(
        d_state.download(), state, [](size_t) { return 0.0; }, where_state))
        << "conv state (a copy of inputs: must be bitwise equal)";
    done += n;
  }
}

TEST(DeltaNetCuda, Conv1dSiluMatchesCpu) {
  GEIST_REQUIRE_CUDA();
  // Single calls of the required lengths.
  for (int32_t n : {1, 7, 64, 65, 130}) check_conv(37, 4, {n}, 100u + static_cast<uint32_t>(n));
  // Split sequences: calls shorter than the history exercise the in-place state shift.
  check_conv(301, 4, {1, 2, 1, 7, 65, 1}, 7);
  check_conv(64, 2, {3, 1, 1}, 8);
  check_conv(19, 1, {5, 2}, 9);  // kernel 1: no state at all
  // A real width (Qwen3.5 0.8B conv_dim = 6144).
  check_conv(6144, 4, {7, 1}, 10);
}

// ---- L2 norm of heads ----

TEST(DeltaNetCuda, L2NormHeadsMatchesCpu) {
  GEIST_REQUIRE_CUDA();
  StreamGuard s;
  GEIST_CUDA_OK(s.error());
  std::mt19937 rng(21);
  const float eps = 1e-6f;
  for (int32_t d : {32, 48, 128}) {
    for (int32_t n_tok : {1, 7, 65}) {
      for (int32_t nh : {2, 16}) {
        for (bool scaled : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "d " << d << " n_tok " << n_tok << " n_heads " << nh
                                            << (scaled ? " scaled" : ""));
          const float scale = scaled ? 1.0f / std::sqrt(static_cast<float>(d)) : 1.0f;
          // The heads sit at offset 4 of wider rows, like q inside the conv output rows.
          const int64_t off = 4, stride = off + int64_t{nh} * d + 9;
          std::vector<float> x = random_vec(static_cast<size_t>(n_tok * stride), rng, 0.3f, 2.0f);
          DeviceVec<float> d_x(x);
          cuda::l2_norm_heads(s.get(), d_x.ptr() + off, stride, n_tok, nh, d, eps, scale);
          ASSERT_TRUE(stream_ok(s.get()));
          for (int64_t t = 0; t < n_tok; ++t) {
            for (int32_t h = 0; h < nh; ++h) {
              float* p = x.data() + t * stride + off + int64_t{h} * d;
              l2_norm_inplace(p, d, eps);
              if (scale != 1.0f) {
                for (int32_t i = 0; i < d; ++i) p[i] *= scale;
              }
            }
          }
          auto where = [&](size_t i) -> std::string {
            const int64_t t = static_cast<int64_t>(i) / stride;
            const int64_t c = static_cast<int64_t>(i) % stride - off;
            if (c < 0 || c >= int64_t{nh} * d) return "";
            return "t " + std::to_string(t) + " head " + std::to_string(c / d) + " elem " +
                   std::to_string(c % d);
          };
          const double rel = (0.5 * d + 8.0) * kU;
          auto tol = [&](size_t i) { return rel * std::fabs(x[i]) + 1e-30; };
          EXPECT_TRUE(all_close(d_x.download(), x, tol, where));
        }
      }
    }
  }
}

// ---- gated RMSNorm ----

TEST(DeltaNetCuda, RmsNormGatedMatchesCpu) {
  GEIST_REQUIRE_CUDA();
  StreamGuard s;
  GEIST_CUDA_OK(s.error());
  std::mt19937 rng(31);
  const float eps = 1e-6f;
  for (int32_t d : {32, 48, 128}) {
    for (int32_t n_rows : {1, 7 * 16, 65 * 16, 130 * 3}) {
      for (bool alias : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "d " << d << " n_rows " << n_rows << (alias ? " out aliases x" : ""));
        const size_t n = static_cast<size_t>(n_rows) * d;
        const std::vector<float> x = random_vec(n, rng, 0.0f, 1.5f);
        const std::vector<float> z = random_vec(n, rng, 0.0f, 2.0f);
        const std::vector<float> w = random_vec(static_cast<size_t>(d), rng, 1.0f, 0.2f);
        DeviceVec<float> d_x(x), d_z(z), d_w(w), d_out(n);
        float* dst = alias ? d_x.ptr() : d_out.ptr();
        cuda::rms_norm_gated(s.get(), d_x.ptr(), d_z.ptr(), d_w.ptr(), n_rows, d, eps, dst);
        ASSERT_TRUE(stream_ok(s.get()));
        std::vector<float> ref(n);
        for (int32_t r = 0; r < n_rows; ++r) {
          const size_t o = static_cast<size_t>(r) * d;
          rms_norm_gated(x.data() + o, z.data() + o, w.data(), d, eps, ref.data() + o);
        }
        const std::vector<float> got = alias ? d_x.download() : d_out.download();
        auto where = [d](size_t i) {
          return "row " + std::to_string(i / static_cast<size_t>(d)) + " elem " +
                 std::to_string(i % static_cast<size_t>(d));
        };
        const double rel = (0.5 * d + 8.0) * kU;
        EXPECT_TRUE(all_close(
            got, ref, [&](size_t i) { return rel * std::fabs(ref[i]) + 1e-30; }, where));
      }
    }
  }
}

// ---- gated delta rule ----

// One problem laid out as the Qwen3.5 forward lays it out: row t of the conv output holds
// q | k | v (then padding), the delta rule's output rows are padded too.
struct DeltaProblem {
  int64_t n;
  int32_t nk, nv, dk, dv;
  int64_t row;                 // floats per qkv row: 2 nk dk + nv dv + 3
  int64_t out_row;             // floats per output row: nv dv + 2
  std::vector<float> qkv;      // [n][row]
  std::vector<float> g, beta;  // [n][nv]
  std::vector<float> state0;   // [nv][dk][dv]
};

DeltaProblem make_delta_problem(int64_t n, int32_t nk, int32_t nv, int32_t dk, int32_t dv,
                                uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  DeltaProblem p{
      n,  nk, nv, dk, dv, 2 * int64_t{nk} * dk + int64_t{nv} * dv + 3, int64_t{nv} * dv + 2,
      {}, {}, {}, {}};
  p.qkv = random_vec(static_cast<size_t>(n * p.row), rng, 0.0f, 1.0f);
  p.g.resize(static_cast<size_t>(n * nv));
  p.beta.resize(p.g.size());
  // Decays from slow (near 0) to fast (e^-4), write strengths in (0, 1), as Qwen3.5 produces.
  for (auto& x : p.g) x = -4.0f * ud(rng) * ud(rng);
  for (auto& x : p.beta) x = ud(rng);
  p.state0 = random_vec(static_cast<size_t>(nv) * dk * dv, rng, 0.0f, 0.3f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int64_t t = 0; t < n; ++t) {
    for (int32_t h = 0; h < nk; ++h) {
      float* q = p.qkv.data() + t * p.row + int64_t{h} * dk;
      float* k = q + int64_t{nk} * dk;
      l2_norm_inplace(q, dk, 1e-6f);
      l2_norm_inplace(k, dk, 1e-6f);
      for (int32_t i = 0; i < dk; ++i) q[i] *= scale;
    }
  }
  return p;
}

// Arguments for tokens [t0, t1) over the given buffers (host or device alike).
GatedDeltaArgs delta_args(const DeltaProblem& p, const float* qkv, const float* g,
                          const float* beta, float* state, float* out, int64_t t0, int64_t t1) {
  GatedDeltaArgs a;
  a.n_tokens = t1 - t0;
  a.n_k_heads = p.nk;
  a.n_v_heads = p.nv;
  a.d_k = p.dk;
  a.d_v = p.dv;
  a.q = qkv + t0 * p.row;
  a.k = a.q + int64_t{p.nk} * p.dk;
  a.v = a.k + int64_t{p.nk} * p.dk;
  a.q_stride = a.k_stride = a.v_stride = p.row;
  a.g = g + t0 * p.nv;
  a.beta = beta + t0 * p.nv;
  a.state = state;
  a.out = out + t0 * p.out_row;
  a.out_stride = p.out_row;
  return a;
}

constexpr int32_t kChunk = 64;  // the forward's chunk (archs/qwen35.cpp)

// The CPU reference for one call, as the CPU backend runs it: recurrent for one token, chunked
// otherwise.
void cpu_delta_call(const DeltaProblem& p, std::vector<float>* state, std::vector<float>* out,
                    int64_t t0, int64_t t1) {
  const GatedDeltaArgs a =
      delta_args(p, p.qkv.data(), p.g.data(), p.beta.data(), state->data(), out->data(), t0, t1);
  std::vector<double> scratch(gated_delta_rule_scratch_doubles(kChunk, p.dk, p.dv));
  if (a.n_tokens == 1) {
    gated_delta_rule_recurrent(a, 0, p.nv, scratch.data());
  } else {
    gated_delta_rule_chunked(a, kChunk, 0, p.nv, scratch.data());
  }
}

// The problem's inputs on the device, with a state and an output buffer.
struct DeviceDelta {
  explicit DeviceDelta(const DeltaProblem& p)
      : qkv(p.qkv),
        g(p.g),
        beta(p.beta),
        state(p.state0),
        out(std::vector<float>(static_cast<size_t>(p.n * p.out_row), kSentinel)) {}
  // Enqueues the device call for tokens [t0, t1), with scratch as the launcher asks.
  void call(const DeltaProblem& p, cudaStream_t s, int64_t t0, int64_t t1) {
    const GatedDeltaArgs a =
        delta_args(p, qkv.ptr(), g.ptr(), beta.ptr(), state.ptr(), out.ptr(), t0, t1);
    const size_t bytes = cuda::gated_delta_rule_scratch_bytes(a, kChunk);
    if (bytes > scratch.size()) scratch.alloc(bytes);
    cuda::gated_delta_rule(s, a, kChunk, bytes > 0 ? scratch.ptr() : nullptr);
  }
  // Enqueues the chunked form itself (cuda::delta_chunked) for all tokens.
  void call_chunked(const DeltaProblem& p, cudaStream_t s) {
    const GatedDeltaArgs a =
        delta_args(p, qkv.ptr(), g.ptr(), beta.ptr(), state.ptr(), out.ptr(), 0, p.n);
    const size_t bytes = cuda::delta_chunked_scratch_bytes(a);
    if (bytes > scratch.size()) scratch.alloc(bytes);
    cuda::delta_chunked(s, a, scratch.ptr());
  }
  DeviceVec<float> qkv, g, beta, state, out;
  DeviceVec<uint8_t> scratch;
};

double max_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, std::fabs(double{x}));
  return m;
}

::testing::AssertionResult delta_out_close(const DeltaProblem& p, const std::vector<float>& got,
                                           const std::vector<float>& ref) {
  double m = 0.0;  // output scale, leaving out the sentinel padding
  for (size_t i = 0; i < ref.size(); ++i) {
    if (static_cast<int64_t>(i) % p.out_row < int64_t{p.nv} * p.dv) {
      m = std::max(m, std::fabs(double{ref[i]}));
    }
  }
  const double tol = 1e-5 * std::max(1.0, m);
  auto where = [&](size_t i) -> std::string {
    const int64_t t = static_cast<int64_t>(i) / p.out_row, c = static_cast<int64_t>(i) % p.out_row;
    if (c >= int64_t{p.nv} * p.dv) return "";
    return "t " + std::to_string(t) + " v-head " + std::to_string(c / p.dv) + " column " +
           std::to_string(c % p.dv);
  };
  return all_close(
      got, ref, [tol](size_t) { return tol; }, where);
}

::testing::AssertionResult delta_state_close(const DeltaProblem& p, const std::vector<float>& got,
                                             const std::vector<float>& ref) {
  const double tol = 1e-5 * std::max(1.0, max_abs(ref));
  auto where = [&](size_t i) {
    const size_t per_head = static_cast<size_t>(p.dk) * p.dv;
    return "state v-head " + std::to_string(i / per_head) + " row " +
           std::to_string(i % per_head / static_cast<size_t>(p.dv)) + " column " +
           std::to_string(i % static_cast<size_t>(p.dv));
  };
  return all_close(
      got, ref, [tol](size_t) { return tol; }, where);
}

struct DeltaShape {
  int64_t n;
  int32_t nk, nv, dk, dv;
};

std::string describe(const DeltaShape& c) {
  std::ostringstream m;
  m << "n " << c.n << " n_k_heads " << c.nk << " n_v_heads " << c.nv << " d_k " << c.dk << " d_v "
    << c.dv;
  return m.str();
}

const std::vector<DeltaShape>& delta_shapes() {
  static const std::vector<DeltaShape> shapes = {
      {1, 2, 4, 32, 32},
      {7, 1, 3, 48, 48},
      {64, 2, 4, 32, 32},
      {65, 2, 6, 48, 48},
      {130, 2, 4, 128, 128},
      {7, 2, 4, 48, 20},  // d_v not a tile multiple
      {65, 1, 2, 20, 48},
      {1, 16, 48, 128, 128},  // d_k < 32; decode, 48 heads
      {65, 16, 32, 128, 128},
      // d_k 6 (one row per thread, rows padded to 8) and 18 (padded to 32): not multiples
      // of 4, so the prefill walk stages them by 4-byte copies; 70 tokens are three chunks
      {37, 1, 2, 6, 40},
      {70, 2, 4, 18, 24},
  };
  return shapes;
}

TEST(DeltaNetCuda, GatedDeltaRuleMatchesCpu) {
  GEIST_REQUIRE_CUDA();
  StreamGuard s;
  GEIST_CUDA_OK(s.error());
  uint32_t seed = 40;
  for (const DeltaShape& c : delta_shapes()) {
    SCOPED_TRACE(describe(c));
    const DeltaProblem p = make_delta_problem(c.n, c.nk, c.nv, c.dk, c.dv, ++seed);
    DeviceDelta dev(p);
    dev.call(p, s.get(), 0, p.n);
    ASSERT_TRUE(stream_ok(s.get()));

    std::vector<float> state = p.state0;
    std::vector<float> out(static_cast<size_t>(p.n * p.out_row), kSentinel);
    cpu_delta_call(p, &state, &out, 0, p.n);
    EXPECT_TRUE(delta_out_close(p, dev.out.download(), out)) << "outputs";
    EXPECT_TRUE(delta_state_close(p, dev.state.download(), state)) << "state after the call";
  }
}

// Decode: one call per token on the device against the CPU's recurrent form token by token.
TEST(DeltaNetCuda, GatedDeltaRuleTokenByTokenMatchesCpu) {
  GEIST_REQUIRE_CUDA();
  StreamGuard s;
  GEIST_CUDA_OK(s.error());
  for (const DeltaShape& c : {DeltaShape{7, 2, 4, 48, 48}, DeltaShape{33, 16, 32, 128, 128}}) {
    SCOPED_TRACE(describe(c));
    const DeltaProblem p = make_delta_problem(c.n, c.nk, c.nv, c.dk, c.dv, 77);
    DeviceDelta dev(p);
    std::vector<float> state = p.state0;
    std::vector<float> out(static_cast<size_t>(p.n * p.out_row), kSentinel);
    for (int64_t t = 0; t < p.n; ++t) {
      dev.call(p, s.get(), t, t + 1);
      cpu_delta_call(p, &state, &out, t, t + 1);
    }
    ASSERT_TRUE(stream_ok(s.get()));
    EXPECT_TRUE(delta_out_close(p, dev.out.download(), out)) << "outputs";
    EXPECT_TRUE(delta_state_close(p, dev.state.download(), state)) << "state after the calls";
  }
}

// A sequence split into two device calls equals one device call, within the tolerance at which
// the CPU's chunked and recurrent forms agree; and a repeated call is bitwise deterministic.
TEST(DeltaNetCuda, GatedDeltaRuleSplitAndDeterministic) {
  GEIST_REQUIRE_CUDA();
  StreamGuard s;
  GEIST_CUDA_OK(s.error());
  for (const DeltaShape& c : {DeltaShape{130, 2, 4, 128, 128}, DeltaShape{65, 2, 6, 48, 48}}) {
    SCOPED_TRACE(describe(c));
    const DeltaProblem p = make_delta_problem(c.n, c.nk, c.nv, c.dk, c.dv, 99);
    DeviceDelta whole(p), split(p), again(p);
    whole.call(p, s.get(), 0, p.n);
    const int64_t cut = p.n / 2 + 3;
    split.call(p, s.get(), 0, cut);
    split.call(p, s.get(), cut, p.n);
    again.call(p, s.get(), 0, p.n);
    ASSERT_TRUE(stream_ok(s.get()));
    const std::vector<float> w_out = whole.out.download(), w_state = whole.state.download();
    EXPECT_TRUE(delta_out_close(p, split.out.download(), w_out)) << "split vs whole: outputs";
    EXPECT_TRUE(delta_state_close(p, split.state.download(), w_state)) << "split vs whole: state";
    EXPECT_TRUE(all_close(
        again.out.download(), w_out, [](size_t) { return 0.0; },
        [](size_t i) { return "out[" + std::to_string(i) + "]"; }))
        << "a repeated call must give bitwise the same outputs";
    EXPECT_TRUE(all_close(
        again.state.download(), w_state, [](size_t) { return 0.0; },
        [](size_t i) { return "state[" + std::to_string(i) + "]"; }))
        << "a repeated call must give bitwise the same state";
  }
}

// The chunked prefill form (deltanet_chunk_cuda.h, run directly; the d_k > 256 shape runs
// gated_delta_rule's token walk) over awkward token counts (chunk edges at
// 63 / 64 / 65, several chunks, a partial last one), d_k / d_v other than 128 and grouped
// heads, against both CPU forms:
//   - the CPU chunked form (same chunk of 64, same algebra, all in double): tolerance
//     32 u * max(1, max |reference|) (~3.8e-6). The forms differ only in double rounding
//     (~1e-16) and in when the state is rounded to f32: the CPU once per chunk, the GPU once
//     per call; an f32 rounding of the state (u/2 relative) moves an output, a q-weighted sum
//     of unit-norm decayed state columns, by a few u of the output scale.
//   - the CPU recurrent form: the CPU's own chunked-vs-recurrent spread, 1e-5 * max(1, max|ref|)
//     (see the file header).
TEST(DeltaNetCuda, GatedDeltaRuleChunkedMatchesCpuForms) {
  GEIST_REQUIRE_CUDA();
  StreamGuard s;
  GEIST_CUDA_OK(s.error());
  const std::vector<DeltaShape> shapes = {
      {2, 2, 4, 64, 64},     {63, 2, 4, 64, 64},    {64, 1, 3, 64, 64},
      {65, 2, 6, 64, 64},    {200, 2, 4, 128, 128}, {512, 16, 16, 128, 128},
      {130, 1, 2, 256, 256}, {200, 2, 4, 256, 64},  {77, 3, 6, 20, 40},
  };
  uint32_t seed = 500;
  for (const DeltaShape& c : shapes) {
    SCOPED_TRACE(describe(c));
    const DeltaProblem p = make_delta_problem(c.n, c.nk, c.nv, c.dk, c.dv, ++seed);
    DeviceDelta dev(p);
    GatedDeltaArgs probe;  // the shape only
    probe.n_tokens = p.n;
    probe.d_k = p.dk;
    probe.d_v = p.dv;
    if (cuda::delta_chunked_applies(probe)) {
      dev.call_chunked(p, s.get());
    } else {
      dev.call(p, s.get(), 0, p.n);
    }
    ASSERT_TRUE(stream_ok(s.get()));
    const std::vector<float> got_out = dev.out.download(), got_state = dev.state.download();

    std::vector<float> st_c = p.state0, st_r = p.state0;
    std::vector<float> out_c(static_cast<size_t>(p.n * p.out_row), kSentinel), out_r = out_c;
    std::vector<double> scratch(gated_delta_rule_scratch_doubles(kChunk, p.dk, p.dv));
    const GatedDeltaArgs ac =
        delta_args(p, p.qkv.data(), p.g.data(), p.beta.data(), st_c.data(), out_c.data(), 0, p.n);
    gated_delta_rule_chunked_reference(ac, kChunk, 0, p.nv, scratch.data());
    const GatedDeltaArgs ar =
        delta_args(p, p.qkv.data(), p.g.data(), p.beta.data(), st_r.data(), out_r.data(), 0, p.n);
    gated_delta_rule_recurrent(ar, 0, p.nv, scratch.data());

    // Worst error relative to the output scale, printed for the record.
    double scale = 1.0, worst = 0.0;
    for (size_t i = 0; i < out_c.size(); ++i) {
      if (static_cast<int64_t>(i) % p.out_row >= int64_t{p.nv} * p.dv) continue;
      scale = std::max(scale, std::fabs(double{out_c[i]}));
    }
    for (size_t i = 0; i < out_c.size(); ++i) {
      if (static_cast<int64_t>(i) % p.out_row >= int64_t{p.nv} * p.dv) continue;
      worst = std::max(worst, std::fabs(double{got_out[i]} - out_c[i]));
    }
    std::printf("[chunked] %s: max |gpu - cpu chunked| / scale = %.3g u\n", describe(c).c_str(),
                worst / scale / kU);

    auto where_out = [&](size_t i) -> std::string {
      const int64_t t = static_cast<int64_t>(i) / p.out_row,
                    col = static_cast<int64_t>(i) % p.out_row;
      if (col >= int64_t{p.nv} * p.dv) return "";
      return "t " + std::to_string(t) + " v-head " + std::to_string(col / p.dv) + " column " +
             std::to_string(col % p.dv);
    };
    auto where_state = [&](size_t i) { return "state[" + std::to_string(i) + "]"; };
    const double tight_out = 32 * kU * scale;
    const double tight_state = 32 * kU * std::max(1.0, max_abs(st_c));
    EXPECT_TRUE(all_close(
        got_out, out_c, [&](size_t) { return tight_out; }, where_out))
        << "outputs vs CPU chunked";
    EXPECT_TRUE(all_close(
        got_state, st_c, [&](size_t) { return tight_state; }, where_state))
        << "state vs CPU chunked";
    EXPECT_TRUE(delta_out_close(p, got_out, out_r)) << "outputs vs CPU recurrent";
    EXPECT_TRUE(delta_state_close(p, got_state, st_r)) << "state vs CPU recurrent";
  }
}

}  // namespace
}  // namespace geist
