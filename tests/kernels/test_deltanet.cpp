// DeltaNet kernels against naive double-precision implementations of their definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "kernels/deltanet.h"

namespace geist {
namespace {

struct Problem {
  int64_t n;
  int32_t n_k_heads, n_v_heads, d_k, d_v;
  std::vector<float> q, k, v, g, beta;  // q,k: [n][n_k_heads][d_k]; v: [n][n_v_heads][d_v]
  std::vector<float> state0;            // [n_v_heads][d_k][d_v]
};

Problem make_problem(int64_t n, int32_t nk, int32_t nv, int32_t dk, int32_t dv, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  Problem p{n, nk, nv, dk, dv, {}, {}, {}, {}, {}, {}};
  p.q.resize(static_cast<size_t>(n * nk * dk));
  p.k.resize(p.q.size());
  p.v.resize(static_cast<size_t>(n * nv * dv));
  p.g.resize(static_cast<size_t>(n * nv));
  p.beta.resize(p.g.size());
  p.state0.resize(static_cast<size_t>(nv) * dk * dv);
  for (auto& x : p.q) x = nd(rng);
  for (auto& x : p.k) x = nd(rng);
  for (auto& x : p.v) x = nd(rng);
  // Decays spanning slow (close to 0) and fast (e^-4) forgetting, as Qwen3.5 produces.
  for (auto& x : p.g) x = -4.0f * ud(rng) * ud(rng);
  for (auto& x : p.beta) x = ud(rng);
  for (auto& x : p.state0) x = 0.3f * nd(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int64_t r = 0; r < n * nk; ++r) {
    l2_norm_inplace(&p.q[static_cast<size_t>(r * dk)], dk, 1e-6f);
    l2_norm_inplace(&p.k[static_cast<size_t>(r * dk)], dk, 1e-6f);
    for (int32_t i = 0; i < dk; ++i) p.q[static_cast<size_t>(r * dk + i)] *= scale;
  }
  return p;
}

// The recurrence exactly as defined, in double. Key head of value head h: h % n_k_heads.
void naive_delta_rule(const Problem& p, std::vector<double>* out, std::vector<double>* state) {
  const int32_t dk = p.d_k, dv = p.d_v;
  state->assign(p.state0.begin(), p.state0.end());
  out->assign(static_cast<size_t>(p.n * p.n_v_heads * dv), 0.0);
  for (int32_t h = 0; h < p.n_v_heads; ++h) {
    const int32_t kh = h % p.n_k_heads;
    double* s = state->data() + static_cast<size_t>(h) * dk * dv;
    for (int64_t t = 0; t < p.n; ++t) {
      const float* q = &p.q[static_cast<size_t>((t * p.n_k_heads + kh) * dk)];
      const float* k = &p.k[static_cast<size_t>((t * p.n_k_heads + kh) * dk)];
      const float* v = &p.v[static_cast<size_t>((t * p.n_v_heads + h) * dv)];
      const double decay =
          std::exp(static_cast<double>(p.g[static_cast<size_t>(t * p.n_v_heads + h)]));
      const double beta = p.beta[static_cast<size_t>(t * p.n_v_heads + h)];
      for (int32_t i = 0; i < dk * dv; ++i) s[i] *= decay;
      for (int32_t b = 0; b < dv; ++b) {
        double pred = 0.0;
        for (int32_t i = 0; i < dk; ++i) pred += s[i * dv + b] * k[i];
        const double u = beta * (v[b] - pred);
        for (int32_t i = 0; i < dk; ++i) s[i * dv + b] += k[i] * u;
      }
      double* o = out->data() + static_cast<size_t>((t * p.n_v_heads + h) * dv);
      for (int32_t b = 0; b < dv; ++b) {
        double acc = 0.0;
        for (int32_t i = 0; i < dk; ++i) acc += s[i * dv + b] * q[i];
        o[b] = acc;
      }
    }
  }
}

// Runs one form over tokens [t0, t1) of the problem, continuing `state`.
enum class Form { kRecurrent, kChunked };
void run_form(const Problem& p, Form form, int32_t chunk, int64_t t0, int64_t t1,
              std::vector<float>* state, std::vector<float>* out) {
  GatedDeltaArgs a;
  a.n_tokens = t1 - t0;
  a.n_k_heads = p.n_k_heads;
  a.n_v_heads = p.n_v_heads;
  a.d_k = p.d_k;
  a.d_v = p.d_v;
  a.q_stride = a.k_stride = int64_t{p.n_k_heads} * p.d_k;
  a.v_stride = a.out_stride = int64_t{p.n_v_heads} * p.d_v;
  a.q = p.q.data() + t0 * a.q_stride;
  a.k = p.k.data() + t0 * a.k_stride;
  a.v = p.v.data() + t0 * a.v_stride;
  a.g = p.g.data() + t0 * p.n_v_heads;
  a.beta = p.beta.data() + t0 * p.n_v_heads;
  a.state = state->data();
  a.out = out->data() + t0 * a.out_stride;
  std::vector<double> scratch(gated_delta_rule_scratch_doubles(chunk, p.d_k, p.d_v));
  if (form == Form::kRecurrent) {
    gated_delta_rule_recurrent(a, 0, p.n_v_heads, scratch.data());
  } else {
    // Two head ranges, as two threads would run them.
    const int32_t mid = p.n_v_heads / 2;
    gated_delta_rule_chunked(a, chunk, 0, mid, scratch.data());
    gated_delta_rule_chunked(a, chunk, mid, p.n_v_heads, scratch.data());
  }
}

double max_abs_diff(const std::vector<float>& x, const std::vector<double>& y) {
  EXPECT_EQ(x.size(), y.size());
  double m = 0.0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

// Outputs are O(1) (unit keys, |v| ~ 1). The kernels accumulate in double and round the f32
// state once per token (recurrent) or per chunk (chunked), so over <= 201 steps they stay
// within a few f32 ulps of the double recurrence.
constexpr double kDeltaTol = 1e-5;

TEST(DeltaNetKernels, RecurrentMatchesNaiveDouble) {
  for (int64_t n : {1, 2, 17, 130}) {
    const Problem p = make_problem(n, 2, 4, 12, 20, static_cast<uint32_t>(n));
    std::vector<double> ref_out, ref_state;
    naive_delta_rule(p, &ref_out, &ref_state);
    std::vector<float> state = p.state0, out(ref_out.size());
    run_form(p, Form::kRecurrent, 1, 0, n, &state, &out);
    EXPECT_LT(max_abs_diff(out, ref_out), kDeltaTol) << "n=" << n;
    EXPECT_LT(max_abs_diff(state, ref_state), kDeltaTol) << "n=" << n;
  }
}

TEST(DeltaNetKernels, ChunkedMatchesNaiveDoubleAndRecurrent) {
  struct Case {
    int64_t n;
    int32_t chunk, nk, nv, dk, dv;
  };
  const Case cases[] = {
      {1, 64, 2, 4, 16, 16},   {7, 4, 2, 4, 12, 20},   {63, 64, 2, 4, 32, 32},
      {64, 64, 1, 3, 8, 24},   {65, 64, 2, 4, 32, 32}, {130, 16, 2, 2, 20, 12},
      {201, 64, 2, 4, 32, 32}, {33, 1, 2, 4, 8, 8},
  };
  for (const Case& cs : cases) {
    const Problem p =
        make_problem(cs.n, cs.nk, cs.nv, cs.dk, cs.dv, static_cast<uint32_t>(cs.n * 31 + cs.chunk));
    std::vector<double> ref_out, ref_state;
    naive_delta_rule(p, &ref_out, &ref_state);
    std::vector<float> st_c = p.state0, out_c(ref_out.size());
    run_form(p, Form::kChunked, cs.chunk, 0, cs.n, &st_c, &out_c);
    std::vector<float> st_r = p.state0, out_r(ref_out.size());
    run_form(p, Form::kRecurrent, 1, 0, cs.n, &st_r, &out_r);
    EXPECT_LT(max_abs_diff(out_c, ref_out), kDeltaTol) << "n=" << cs.n << " chunk=" << cs.chunk;
    EXPECT_LT(max_abs_diff(st_c, ref_state), kDeltaTol) << "n=" << cs.n << " chunk=" << cs.chunk;
    double m = 0.0;
    for (size_t i = 0; i < out_c.size(); ++i)
      m = std::max(m, double{std::fabs(out_c[i] - out_r[i])});
    EXPECT_LT(m, kDeltaTol) << "chunked vs recurrent, n=" << cs.n << " chunk=" << cs.chunk;
  }
}

TEST(DeltaNetKernels, ChunkedStateCarriesAcrossCalls) {
  // Calls of 5, 70 and 58 tokens with chunk 32: boundaries inside and across chunks.
  const Problem p = make_problem(133, 2, 4, 16, 16, 7);
  std::vector<double> ref_out, ref_state;
  naive_delta_rule(p, &ref_out, &ref_state);
  std::vector<float> state = p.state0, out(ref_out.size());
  run_form(p, Form::kChunked, 32, 0, 5, &state, &out);
  run_form(p, Form::kRecurrent, 1, 5, 6, &state, &out);
  run_form(p, Form::kChunked, 32, 6, 75, &state, &out);
  run_form(p, Form::kChunked, 32, 75, 133, &state, &out);
  EXPECT_LT(max_abs_diff(out, ref_out), kDeltaTol);
  EXPECT_LT(max_abs_diff(state, ref_state), kDeltaTol);
}

// The SIMD chunked rule against the scalar one on every compiled target the CPU runs, at
// Qwen3.5's head shape (d_k = d_v = 128, chunk 64) and a small one, with a partial last chunk
// and two head ranges: both compute the same chunk algebra in double, so the f32 outputs and
// state agree to a few f32 ulps (1e-6 on O(1) values), far inside the 1e-5 both keep from the
// naive recurrence (checked here for the SIMD one too).
TEST(DeltaNetKernels, SimdChunkedMatchesScalarChunkedOnEveryTarget) {
  struct Case {
    int64_t n;
    int32_t chunk, nk, nv, dk, dv;
  };
  const Case cases[] = {{150, 64, 2, 4, 128, 128}, {37, 16, 1, 2, 16, 32}};
  for (const Case& cs : cases) {
    const Problem p = make_problem(cs.n, cs.nk, cs.nv, cs.dk, cs.dv, 99);
    std::vector<double> ref_out, ref_state;
    naive_delta_rule(p, &ref_out, &ref_state);
    GatedDeltaArgs a;
    a.n_tokens = cs.n;
    a.n_k_heads = cs.nk;
    a.n_v_heads = cs.nv;
    a.d_k = cs.dk;
    a.d_v = cs.dv;
    a.q_stride = a.k_stride = int64_t{cs.nk} * cs.dk;
    a.v_stride = a.out_stride = int64_t{cs.nv} * cs.dv;
    a.q = p.q.data();
    a.k = p.k.data();
    a.v = p.v.data();
    a.g = p.g.data();
    a.beta = p.beta.data();
    std::vector<double> scratch(gated_delta_rule_scratch_doubles(cs.chunk, cs.dk, cs.dv));
    std::vector<float> st_ref = p.state0, out_ref(ref_out.size());
    a.state = st_ref.data();
    a.out = out_ref.data();
    gated_delta_rule_chunked_reference(a, cs.chunk, 0, cs.nv, scratch.data());
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      SCOPED_TRACE(hwy::TargetName(target));
      std::vector<float> st = p.state0, out(ref_out.size(), -7.0f);
      a.state = st.data();
      a.out = out.data();
      gated_delta_rule_chunked(a, cs.chunk, 0, 1, scratch.data());
      gated_delta_rule_chunked(a, cs.chunk, 1, cs.nv, scratch.data());
      double m_out = 0.0, m_st = 0.0;
      for (size_t i = 0; i < out.size(); ++i)
        m_out = std::max(m_out, double{std::fabs(out[i] - out_ref[i])});
      for (size_t i = 0; i < st.size(); ++i)
        m_st = std::max(m_st, double{std::fabs(st[i] - st_ref[i])});
      EXPECT_LT(m_out, 1e-6) << "dk=" << cs.dk;
      EXPECT_LT(m_st, 1e-6) << "dk=" << cs.dk;
      EXPECT_LT(max_abs_diff(out, ref_out), kDeltaTol) << "dk=" << cs.dk;
      EXPECT_LT(max_abs_diff(st, ref_state), kDeltaTol) << "dk=" << cs.dk;
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

// The SIMD recurrent rule (decode) against the scalar one, bitwise, on every compiled target the
// CPU runs: outputs and state memcmp-equal, since the vector form runs each value lane's double
// operations in the reference's order. Shapes: Qwen3.5-0.8B's decode step (16 heads of
// d_k = d_v = 128, one token); d_v = 40 (a 4-vector block plus single vectors on AVX-512, two
// blocks and a tail on AVX2) over 9 tokens; d_v = 6 (whole vectors only on SSE4 / NEON, the
// reference elsewhere). Two head ranges, as two threads run them. Also within the naive
// recurrence's tolerance, so the oracle is not wrong in the same way.
TEST(DeltaNetKernels, SimdRecurrentEqualsScalarRecurrentBitwiseOnEveryTarget) {
  struct Case {
    int64_t n;
    int32_t nk, nv, dk, dv;
  };
  const Case cases[] = {{1, 16, 16, 128, 128}, {9, 2, 4, 16, 40}, {5, 1, 2, 12, 6}};
  for (const Case& cs : cases) {
    const Problem p = make_problem(cs.n, cs.nk, cs.nv, cs.dk, cs.dv, 1234);
    std::vector<double> ref_out, ref_state;
    naive_delta_rule(p, &ref_out, &ref_state);
    GatedDeltaArgs a;
    a.n_tokens = cs.n;
    a.n_k_heads = cs.nk;
    a.n_v_heads = cs.nv;
    a.d_k = cs.dk;
    a.d_v = cs.dv;
    a.q_stride = a.k_stride = int64_t{cs.nk} * cs.dk;
    a.v_stride = a.out_stride = int64_t{cs.nv} * cs.dv;
    a.q = p.q.data();
    a.k = p.k.data();
    a.v = p.v.data();
    a.g = p.g.data();
    a.beta = p.beta.data();
    std::vector<double> scratch(gated_delta_rule_scratch_doubles(1, cs.dk, cs.dv));
    std::vector<float> st_ref = p.state0, out_ref(ref_out.size());
    a.state = st_ref.data();
    a.out = out_ref.data();
    gated_delta_rule_recurrent_reference(a, 0, cs.nv, scratch.data());
    EXPECT_LT(max_abs_diff(out_ref, ref_out), kDeltaTol) << "dv=" << cs.dv;
    EXPECT_LT(max_abs_diff(st_ref, ref_state), kDeltaTol) << "dv=" << cs.dv;
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      SCOPED_TRACE(hwy::TargetName(target));
      std::vector<float> st = p.state0, out(ref_out.size(), -7.0f);
      a.state = st.data();
      a.out = out.data();
      gated_delta_rule_recurrent(a, 0, 1, scratch.data());
      gated_delta_rule_recurrent(a, 1, cs.nv, scratch.data());
      ASSERT_EQ(out.size(), out_ref.size());
      ASSERT_EQ(st.size(), st_ref.size());
      EXPECT_EQ(std::memcmp(out.data(), out_ref.data(), out.size() * sizeof(float)), 0)
          << "dv=" << cs.dv;
      EXPECT_EQ(std::memcmp(st.data(), st_ref.data(), st.size() * sizeof(float)), 0)
          << "dv=" << cs.dv;
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

// conv1d against its definition in double, and split calls against one call (bitwise).
TEST(DeltaNetKernels, Conv1dStateCarriedAcrossCallsEqualsOneCall) {
  const int64_t n = 23, ch = 10;
  const int32_t kernel = 4;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * ch)), w(static_cast<size_t>(ch * kernel));
  std::vector<float> state0(static_cast<size_t>((kernel - 1) * ch));
  for (auto& e : x) e = nd(rng);
  for (auto& e : w) e = nd(rng);
  for (auto& e : state0) e = nd(rng);

  // Definition: out[t][c] = sum_j w[c][j] * seq[t + j][c] over seq = [state0; x].
  std::vector<double> ref(static_cast<size_t>(n * ch));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < ch; ++c) {
      double acc = 0.0;
      for (int32_t j = 0; j < kernel; ++j) {
        const int64_t s = t + j - (kernel - 1);
        const float in = s < 0 ? state0[static_cast<size_t>((kernel - 1 + s) * ch + c)]
                               : x[static_cast<size_t>(s * ch + c)];
        acc += double{w[static_cast<size_t>(c * kernel + j)]} * in;
      }
      ref[static_cast<size_t>(t * ch + c)] = acc;
    }
  }
  std::vector<float> st_one = state0, out_one(x.size());
  conv1d_causal(x.data(), ch, n, ch, w.data(), kernel, st_one.data(), out_one.data(), ch, 0, ch);
  EXPECT_LT(max_abs_diff(out_one, ref), 1e-5);
  // Final state is the last kernel-1 input rows.
  for (int64_t r = 0; r < kernel - 1; ++r) {
    for (int64_t c = 0; c < ch; ++c) {
      EXPECT_EQ(st_one[static_cast<size_t>(r * ch + c)],
                x[static_cast<size_t>((n - (kernel - 1) + r) * ch + c)]);
    }
  }
  // Pieces of 1, 2, 1, 7, 12 tokens (shorter and longer than kernel-1), channels in 2 ranges.
  std::vector<float> st = state0, out(x.size());
  int64_t t0 = 0;
  for (int64_t len : {1, 2, 1, 7, 12}) {
    conv1d_causal(x.data() + t0 * ch, ch, len, ch, w.data(), kernel, st.data(),
                  out.data() + t0 * ch, ch, 0, 4);
    conv1d_causal(x.data() + t0 * ch, ch, len, ch, w.data(), kernel, st.data(),
                  out.data() + t0 * ch, ch, 4, ch);
    t0 += len;
  }
  ASSERT_EQ(t0, n);
  EXPECT_EQ(out, out_one);
  EXPECT_EQ(st, st_one);
}

TEST(DeltaNetKernels, ElementwiseHelpersMatchDefinitions) {
  for (float x : {-30.0f, -3.0f, -0.5f, 0.0f, 0.7f, 5.0f, 19.9f, 25.0f}) {
    const double ref = std::log1p(std::exp(double{x}));
    EXPECT_NEAR(softplus_f32(x), ref, 1e-6 * std::max(1.0, ref)) << x;
    EXPECT_NEAR(sigmoid_f32(x), 1.0 / (1.0 + std::exp(-double{x})), 1e-7) << x;
  }
  const int32_t d = 9;
  std::vector<float> x(d), z(d), w(d), out(d);
  for (int32_t i = 0; i < d; ++i) {
    x[i] = 0.3f * static_cast<float>(i) - 1.0f;
    z[i] = 0.5f - 0.2f * static_cast<float>(i);
    w[i] = 1.0f + 0.1f * static_cast<float>(i);
  }
  double ss = 0.0;
  for (float e : x) ss += double{e} * e;
  rms_norm_gated(x.data(), z.data(), w.data(), d, 1e-6f, out.data());
  for (int32_t i = 0; i < d; ++i) {
    const double zi = z[i];
    const double ref = w[i] * (x[i] / std::sqrt(ss / d + 1e-6)) * (zi / (1.0 + std::exp(-zi)));
    EXPECT_NEAR(out[i], ref, 1e-6) << i;
  }
  std::vector<float> y = x;
  l2_norm_inplace(y.data(), d, 1e-6f);
  for (int32_t i = 0; i < d; ++i) EXPECT_NEAR(y[i], x[i] / std::sqrt(ss + 1e-6), 1e-7) << i;
}

}  // namespace
}  // namespace geist
