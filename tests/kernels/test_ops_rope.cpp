// RoPE (both pairings, partial rotary, scaling, frequency factors) against the rotation
// formula evaluated in double in the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"

namespace geist {
namespace {

// The definition: pair i of a head turns by pos * scale * base^(-2i/n_rot) / factor[i];
// NORMAL pairs (2i, 2i+1), NEOX pairs (i, i + n_rot/2); dims >= n_rot are untouched.
std::vector<double> rope_ref(const std::vector<float>& x, int n_head, int head_dim, int pos,
                             const RopeParams& p) {
  std::vector<double> y(x.begin(), x.end());
  for (int h = 0; h < n_head; ++h) {
    for (int i = 0; i < p.n_rot / 2; ++i) {
      const int a = h * head_dim + (p.style == RopeStyle::NORMAL ? 2 * i : i);
      const int b = a + (p.style == RopeStyle::NORMAL ? 1 : p.n_rot / 2);
      double theta = pos * static_cast<double>(p.freq_scale) *
                     std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
      if (p.freq_factors) theta /= p.freq_factors[i];
      y[a] = x[a] * std::cos(theta) - x[b] * std::sin(theta);
      y[b] = x[a] * std::sin(theta) + x[b] * std::cos(theta);
    }
  }
  return y;
}

TEST(OpsRope, MatchesFormula) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> ud(-2.0f, 2.0f);
  const std::vector<float> factors = {1.0f, 1.5f, 4.0f, 8.0f, 32.0f, 1.0f};
  struct Case {
    RopeStyle style;
    int n_head, head_dim, n_rot;
    float base, scale;
    bool use_factors;
  };
  const Case cases[] = {
      {RopeStyle::NORMAL, 3, 8, 8, 10000.0f, 1.0f, false},
      {RopeStyle::NEOX, 3, 8, 8, 10000.0f, 1.0f, false},
      {RopeStyle::NORMAL, 2, 16, 12, 500000.0f, 0.25f, true},  // partial, linear, factors
      {RopeStyle::NEOX, 4, 32, 8, 1e7f, 1.0f, false},          // Qwen3.5-style partial
      {RopeStyle::NEOX, 1, 12, 12, 10000.0f, 0.5f, true},
  };
  for (const Case& c : cases) {
    RopeParams p;
    p.style = c.style;
    p.n_rot = c.n_rot;
    p.freq_base = c.base;
    p.freq_scale = c.scale;
    p.freq_factors = c.use_factors ? factors.data() : nullptr;
    for (int pos : {0, 1, 17, 4095}) {
      std::vector<float> x(static_cast<size_t>(c.n_head * c.head_dim));
      for (float& f : x) f = ud(rng);
      const std::vector<double> ref = rope_ref(x, c.n_head, c.head_dim, pos, p);
      rope(x.data(), c.n_head, c.head_dim, pos, p);
      for (size_t i = 0; i < x.size(); ++i) {
        // cos/sin rounded to f32 plus two f32 products: a few ulp of |x| <= 2.
        EXPECT_NEAR(x[i], ref[i], 2e-6) << "pos " << pos << " i " << i;
      }
    }
  }
}

TEST(OpsRope, PositionZeroIsIdentity) {
  RopeParams p;
  p.n_rot = 4;
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> before = x;
  rope(x.data(), 1, 6, 0, p);
  EXPECT_EQ(x, before);
}

// YaRN from its authors' formulas (the YaRN paper's reference code, as Hugging Face's
// _compute_yarn_parameters also has it), in double: the correction range of dims between beta
// rotations, a linear ramp over the pairs, inverse frequencies mixed between interpolation
// (theta / s) and extrapolation (theta), and the attention factor 0.1 ln(s) + 1.
struct YarnRef {
  std::vector<double> inv_freq;  // [n_rot / 2]
  double mscale;
};

YarnRef yarn_ref(const YarnConfig& y, int n_rot, double base) {
  const double pi = std::acos(-1.0);
  auto corr_dim = [&](double rotations) {
    return n_rot * std::log(y.n_ctx_orig / (rotations * 2 * pi)) / (2 * std::log(base));
  };
  const double low = std::max(std::floor(corr_dim(y.beta_fast)), 0.0);
  double high = std::min(std::ceil(corr_dim(y.beta_slow)), n_rot - 1.0);
  if (low == high) high += 0.001;
  YarnRef r;
  for (int i = 0; i < n_rot / 2; ++i) {
    const double pos_freq = std::pow(base, 2.0 * i / n_rot);
    const double extrap = 1.0 / pos_freq, interp = 1.0 / (y.factor * pos_freq);
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extrap_factor = 1.0 - ramp;
    r.inv_freq.push_back(interp * (1 - extrap_factor) + extrap * extrap_factor);
  }
  r.mscale = (0.1 * std::log(double{y.factor}) + 1.0) * y.attn_factor;
  return r;
}

TEST(OpsRope, YarnMatchesTheYarnFormulas) {
  struct Case {
    YarnConfig y;
    int n_rot;
    float base;
  };
  Case cases[2];
  cases[0].y.factor = 4;  // Llama-like: 64 pairs, the ramp over pairs 20..46
  cases[0].y.n_ctx_orig = 4096;
  cases[0].n_rot = 128;
  cases[0].base = 10000;
  cases[1].y.factor = 8;  // other betas, a long original context, an attention factor
  cases[1].y.n_ctx_orig = 32768;
  cases[1].y.beta_fast = 16;
  cases[1].y.beta_slow = 2;
  cases[1].y.attn_factor = 0.9f;
  cases[1].n_rot = 64;
  cases[1].base = 1e6f;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.n_rot);
    const YarnRef ref = yarn_ref(c.y, c.n_rot, c.base);
    std::vector<float> factors(static_cast<size_t>(c.n_rot / 2), 1.0f);
    float mscale = 0;
    yarn_rope_factors(c.y, c.n_rot, c.base, factors.data(), &mscale);
    EXPECT_NEAR(mscale, ref.mscale, 1e-6 * ref.mscale);
    int interpolated = 0, extrapolated = 0;
    for (int i = 0; i < c.n_rot / 2; ++i) {
      // The rope's frequency for pair i: base^(-2i/n_rot) / factors[i].
      const double got = std::pow(double{c.base}, -2.0 * i / c.n_rot) / factors[i];
      EXPECT_NEAR(got, ref.inv_freq[i], 1e-6 * ref.inv_freq[i]) << i;
      const double pos_freq = std::pow(double{c.base}, 2.0 * i / c.n_rot);
      interpolated += std::fabs(ref.inv_freq[i] * pos_freq * c.y.factor - 1) < 1e-12;
      extrapolated += std::fabs(ref.inv_freq[i] * pos_freq - 1) < 1e-12;
    }
    EXPECT_GT(interpolated, 0);  // the cases reach both ends of the ramp
    EXPECT_GT(extrapolated, 0);
    // The rope with them: each pair turned by pos * inv_freq, scaled by mscale.
    RopeParams p;
    p.n_rot = c.n_rot;
    p.freq_base = c.base;
    p.freq_factors = factors.data();
    p.mscale = mscale;
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int n_head = 2, head_dim = c.n_rot;
    for (int pos : {0, 7, 300}) {
      std::vector<float> x(static_cast<size_t>(n_head * head_dim));
      for (float& v : x) v = nd(rng);
      std::vector<float> y = x;
      rope(y.data(), n_head, head_dim, pos, p);
      for (int h = 0; h < n_head; ++h) {
        for (int i = 0; i < c.n_rot / 2; ++i) {
          const int a = h * head_dim + 2 * i, b = a + 1;
          const double th = pos * ref.inv_freq[i];
          const double ya = ref.mscale * (x[a] * std::cos(th) - x[b] * std::sin(th));
          const double yb = ref.mscale * (x[a] * std::sin(th) + x[b] * std::cos(th));
          EXPECT_NEAR(y[a], ya, 1e-4) << pos << " " << i;
          EXPECT_NEAR(y[b], yb, 1e-4) << pos << " " << i;
        }
      }
    }
  }
}
}  // namespace
}  // namespace geist
