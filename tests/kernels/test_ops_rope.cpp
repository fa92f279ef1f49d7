// RoPE (both pairings, partial rotary, scaling, frequency factors) against the rotation
// formula evaluated in double in the test.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace geist
