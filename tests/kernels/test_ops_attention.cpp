// Causal grouped-query attention against a naive double implementation; RMSNorm, softmax,
// SwiGLU and dot against their definitions in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/ops.h"

namespace geist {
namespace {

struct AttnCase {
  AttentionShape s;
  int32_t n_tok, pos0;
};

struct AttnData {
  int64_t q_stride, k_stride, v_stride, o_stride;
  std::vector<float> q, k, v;
};

AttnData make_attn_data(const AttnCase& c, std::mt19937* rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  AttnData d;
  d.q_stride = c.s.n_head * c.s.head_dim_k + 1;  // padding checks that strides are honoured
  d.k_stride = c.s.n_head_kv * c.s.head_dim_k + 3;
  d.v_stride = c.s.n_head_kv * c.s.head_dim_v + 2;
  d.o_stride = c.s.n_head * c.s.head_dim_v + 5;
  const int32_t kv_len = c.pos0 + c.n_tok;
  d.q.resize(static_cast<size_t>(c.n_tok * d.q_stride));
  d.k.resize(static_cast<size_t>(kv_len * d.k_stride));
  d.v.resize(static_cast<size_t>(kv_len * d.v_stride));
  for (float& f : d.q) f = nd(*rng);
  for (float& f : d.k) f = nd(*rng);
  for (float& f : d.v) f = nd(*rng);
  return d;
}

std::vector<float> run_attention(const AttnCase& c, const AttnData& d, int n_threads) {
  ThreadPool pool(n_threads);
  std::vector<float> scratch(attention_scratch_floats(c.pos0 + c.n_tok, n_threads));
  std::vector<float> out(static_cast<size_t>(c.n_tok * d.o_stride), 0.0f);
  attention(c.s, d.q.data(), d.q_stride, c.n_tok, c.pos0, d.k.data(), d.k_stride, d.v.data(),
            d.v_stride, out.data(), d.o_stride, scratch.data(), pool);
  return out;
}

TEST(OpsAttention, MatchesNaiveDouble) {
  std::mt19937 rng(42);
  const AttnCase cases[] = {
      {{8, 4, 8, 8, 1.0f / std::sqrt(8.0f)}, 5, 0},
      {{4, 2, 32, 32, 1.0f / std::sqrt(32.0f)}, 3, 11},
      {{6, 1, 5, 7, 0.3f}, 4, 2},  // MQA, head_dim_v != head_dim_k, odd sizes
      {{3, 3, 16, 16, 0.25f}, 1, 40},
  };
  for (const AttnCase& c : cases) {
    const AttnData d = make_attn_data(c, &rng);
    const std::vector<float> out = run_attention(c, d, 2);
    const int32_t group = c.s.n_head / c.s.n_head_kv;
    for (int32_t t = 0; t < c.n_tok; ++t) {
      for (int32_t h = 0; h < c.s.n_head; ++h) {
        const int32_t g = h / group;
        const int32_t n_pos = c.pos0 + t + 1;
        std::vector<double> w(static_cast<size_t>(n_pos));
        double mx = -INFINITY, sum = 0;
        for (int32_t p = 0; p < n_pos; ++p) {
          double dot = 0;
          for (int32_t i = 0; i < c.s.head_dim_k; ++i) {
            dot += static_cast<double>(d.q[t * d.q_stride + h * c.s.head_dim_k + i]) *
                   d.k[p * d.k_stride + g * c.s.head_dim_k + i];
          }
          w[p] = dot * c.s.scale;
          mx = std::max(mx, w[p]);
        }
        for (double& x : w) sum += (x = std::exp(x - mx));
        for (int32_t i = 0; i < c.s.head_dim_v; ++i) {
          double ref = 0;
          for (int32_t p = 0; p < n_pos; ++p) {
            ref += w[p] / sum * d.v[p * d.v_stride + g * c.s.head_dim_v + i];
          }
          EXPECT_NEAR(out[t * d.o_stride + h * c.s.head_dim_v + i], ref, 2e-5)
              << "t " << t << " h " << h << " i " << i;
        }
      }
      for (int64_t i = c.s.n_head * c.s.head_dim_v; i < d.o_stride; ++i) {
        EXPECT_EQ(out[t * d.o_stride + i], 0.0f) << "wrote into row padding";
      }
    }
  }
}

TEST(OpsAttention, RowsBitwiseIndependentOfBatchAndThreads) {
  std::mt19937 rng(3);
  const AttnCase c{{4, 2, 16, 16, 0.25f}, 7, 3};
  const AttnData d = make_attn_data(c, &rng);
  const std::vector<float> all = run_attention(c, d, 1);
  for (int threads : {2, 3}) {
    EXPECT_EQ(run_attention(c, d, threads), all) << threads;
  }
  // Token t alone, at position pos0 + t, with the same cache rows.
  for (int32_t t = 0; t < c.n_tok; ++t) {
    AttnCase one = c;
    one.n_tok = 1;
    one.pos0 = c.pos0 + t;
    AttnData dt = d;
    dt.q.assign(d.q.begin() + t * d.q_stride, d.q.begin() + (t + 1) * d.q_stride);
    const std::vector<float> out = run_attention(one, dt, 2);
    EXPECT_EQ(std::memcmp(out.data(), all.data() + t * d.o_stride, d.o_stride * sizeof(float)), 0)
        << t;
  }
}

TEST(OpsElementwise, RmsNormSoftmaxSwigluDot) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const int64_t n = 37;
  std::vector<float> x(n), w(n), y(n);
  for (float& f : x) f = nd(rng);
  for (float& f : w) f = nd(rng);

  double ss = 0;
  for (float f : x) ss += static_cast<double>(f) * f;
  const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
  rms_norm(x.data(), w.data(), y.data(), n, 1e-5f);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(y[i], x[i] * inv * w[i], 1e-5 * std::fabs(y[i]) + 1e-6);
  rms_norm(x.data(), nullptr, y.data(), n, 1e-5f);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i] * inv, 1e-6);

  std::vector<float> s = x;
  softmax(s.data(), n);
  double mx = -INFINITY, sum = 0;
  for (float f : x) mx = std::max(mx, static_cast<double>(f));
  for (float f : x) sum += std::exp(f - mx);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(s[i], std::exp(x[i] - mx) / sum, 1e-6);

  swiglu(x.data(), w.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double g = x[i];
    EXPECT_NEAR(y[i], g / (1.0 + std::exp(-g)) * w[i], 1e-5 * (1 + std::fabs(y[i])));
  }

  double dot = 0, mag = 0;
  for (int64_t i = 0; i < n; ++i) {
    dot += static_cast<double>(x[i]) * w[i];
    mag += std::fabs(static_cast<double>(x[i]) * w[i]);
  }
  EXPECT_NEAR(dot_f32(x.data(), w.data(), n), dot, n * 6e-8 * mag);
}

// The vectorised SwiGLU against double, over the whole range of gates (both saturations),
// with tails of every length; each element's value must not depend on where a range starts
// or ends (the CPU backend splits it over threads), and out may alias gate.
TEST(OpsElementwise, SwigluSimdMatchesDoubleAndIsSplitInvariant) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> ud(-120.0f, 120.0f);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  const int64_t n = 1000;
  std::vector<float> g(n), u(n), y(n);
  for (int64_t i = 0; i < n; ++i) g[i] = i % 3 == 0 ? ud(rng) : nd(rng);
  for (float& f : u) f = nd(rng);
  swiglu_simd(g.data(), u.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double gd = g[i];
    const double ref = gd / (1.0 + std::exp(-gd)) * u[i];
    // Exp within 1 ulp, then a divide and a multiply: a few f32 ulp; clamped exp below -80.
    EXPECT_NEAR(y[i], ref, 4e-7 * std::fabs(ref) + 1e-30) << i << " gate " << g[i];
  }
  for (int64_t start : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{13}}) {
    for (int64_t len : {int64_t{1}, int64_t{5}, int64_t{16}, int64_t{17}, int64_t{333}}) {
      std::vector<float> part(static_cast<size_t>(len));
      swiglu_simd(g.data() + start, u.data() + start, part.data(), len);
      ASSERT_EQ(std::memcmp(part.data(), y.data() + start, static_cast<size_t>(len) * 4), 0)
          << start << " " << len;
    }
  }
  std::vector<float> alias = g;
  swiglu_simd(alias.data(), u.data(), alias.data(), n);
  ASSERT_EQ(std::memcmp(alias.data(), y.data(), static_cast<size_t>(n) * 4), 0);
}

}  // namespace
}  // namespace geist
