// KV cache representations: encodings against their definitions, byte costs against the
// documented layouts, attention over every mode against a double-precision attention over
// values the test decodes itself from the documented byte layout, split / thread invariance,
// and the snapshot region contract (round trip into a fresh cache is bit-exact).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention_kv.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kv/kv_cache.h"

namespace geist {
namespace {

constexpr KvMode kAllModes[] = {KvMode::F32, KvMode::F16,   KvMode::Q8,
                                KvMode::Q4,  KvMode::KIVI4, KvMode::KIVI2};
constexpr int32_t G = 32;  // KIVI group, kv_cache.h

bool is_kivi(KvMode m) { return m == KvMode::KIVI4 || m == KvMode::KIVI2; }

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

std::vector<float> randn(size_t n, std::mt19937* rng, float sd = 1.0f) {
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> x(n);
  for (float& f : x) f = nd(*rng);
  return x;
}

// y = H x / sqrt(n) with H[i][j] = (-1)^popcount(i & j) (Sylvester's Hadamard matrix, n = 8,
// 16 or 32): the rotation Q8 and Q4 blocks are stored in (attention_kv.h).
std::vector<double> hadamard(const std::vector<double>& x) {
  const int n = static_cast<int>(x.size());
  std::vector<double> y(x.size(), 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) y[i] += (__builtin_popcount(i & j) % 2 ? -x[j] : x[j]);
    y[i] /= std::sqrt(static_cast<double>(n));
  }
  return y;
}
std::vector<double> hadamard32(const std::vector<double>& x) { return hadamard(x); }

// ---- encodings -------------------------------------------------------------------------------

TEST(KvEncoding, RowErrorsWithinHalfAStep) {
  std::mt19937 rng(1);
  for (int32_t n : {32, 64, 40, 7}) {  // whole blocks and a short last block
    const std::vector<float> x = randn(static_cast<size_t>(n), &rng, 3.0f);
    for (KvEnc e : {KvEnc::F16, KvEnc::Q8, KvEnc::Q8A, KvEnc::Q4, KvEnc::A4, KvEnc::A2}) {
      std::vector<uint8_t> buf(static_cast<size_t>(kv_row_bytes(e, n)));
      kv_quantize_row(e, x.data(), n, buf.data());
      KvSource src;
      src.lo = KvSegment{e, buf.data(), kv_row_bytes(e, n), 0, 0};
      std::vector<float> y(static_cast<size_t>(n));
      kv_dequantize(src, 0, 0, n, y.data());
      for (int32_t b0 = 0; b0 < n; b0 += 32) {
        const int32_t m = std::min(32, n - b0);
        if (e == KvEnc::Q8 || e == KvEnc::Q8A || e == KvEnc::Q4) {
          // Codes approximate the rotated block (zero-padded): check the error there, where
          // each value is within half a step (q8: amax/127; q4: amax/8, the +8 end clamps to
          // +7, a full step) plus the f16 rounding of the scale.
          std::vector<double> xb(32, 0.0), yb(32, 0.0);
          for (int32_t i = 0; i < m; ++i) xb[i] = x[b0 + i], yb[i] = y[b0 + i];
          const std::vector<double> rx = hadamard32(xb);
          double amax = 0, rmin = rx[0], rmax = rx[0];
          for (double v : rx) {
            amax = std::max(amax, std::fabs(v));
            rmin = std::min(rmin, v);
            rmax = std::max(rmax, v);
          }
          // Reconstructed values beyond the row are not stored; rotate what the row holds.
          const std::vector<double> ry = hadamard32(yb);
          double err2 = 0;
          for (int32_t i = 0; i < 32; ++i) err2 += (ry[i] - rx[i]) * (ry[i] - rx[i]);
          // q8a: half of (max - min) / 255, plus the f16 rounding of min and scale.
          const double step = e == KvEnc::Q8    ? amax / 127 * 0.5
                              : e == KvEnc::Q8A ? (rmax - rmin) / 255 * 0.5 +
                                                      (std::fabs(rmin) + std::fabs(rmax)) * 0x1p-10
                                                : amax / 8;
          // Padding positions are not reconstructed, so bound the error norm, not each value.
          EXPECT_LE(std::sqrt(err2), std::sqrt(32.0) * step * 1.003 + 1e-5)
              << "enc " << int(e) << " n " << n;
          continue;
        }
        float amax = 0, mn = x[b0], mx = x[b0];
        for (int32_t i = b0; i < b0 + m; ++i) {
          amax = std::max(amax, std::fabs(x[i]));
          mn = std::min(mn, x[i]);
          mx = std::max(mx, x[i]);
        }
        // Step of each code: f16 has 11 significant bits; q8 amax/127; q4 amax/8 (the value
        // coded -8 is exact, +8 clamps to +7: a full step); asym (max-min)/(2^b - 1), plus the
        // f16 rounding of scale and min.
        for (int32_t i = b0; i < b0 + m; ++i) {
          float tol = 0;
          switch (e) {
            case KvEnc::F16:
              tol = std::fabs(x[i]) * 0x1p-11f;
              break;
            case KvEnc::Q8:
              tol = amax / 127 * 0.5f * 1.002f + 1e-6f;
              break;
            case KvEnc::Q4:
              tol = amax / 8 * 1.002f + 1e-6f;
              break;
            default: {
              const float step = (mx - mn) / (e == KvEnc::A4 ? 15.0f : 3.0f);
              tol = step * 0.5f * 1.01f + std::fabs(mn) * 0x1p-10f + 1e-5f;
            }
          }
          EXPECT_LE(std::fabs(y[i] - x[i]), tol) << "enc " << int(e) << " n " << n << " i " << i;
        }
      }
    }
  }
}

TEST(KvEncoding, ChannelGroupErrors) {
  std::mt19937 rng(2);
  const int32_t nc = 48;
  const std::vector<float> x = randn(static_cast<size_t>(G * nc), &rng, 2.0f);
  for (KvEnc e : {KvEnc::CH4, KvEnc::CH2}) {
    std::vector<uint8_t> buf(static_cast<size_t>(kv_group_bytes(e, nc)));
    ASSERT_EQ(buf.size(), static_cast<size_t>(nc) * (4 + 32 * (e == KvEnc::CH4 ? 4 : 2) / 8));
    kv_quantize_group(e, x.data(), nc, nc, buf.data());
    KvSource src;
    src.lo = KvSegment{e, buf.data(), 0, nc, 0};
    for (int32_t c = 0; c < nc; ++c) {
      float mn = INFINITY, mx = -INFINITY;
      for (int32_t t = 0; t < G; ++t) {
        mn = std::min(mn, x[t * nc + c]);
        mx = std::max(mx, x[t * nc + c]);
      }
      const float tol =
          (mx - mn) / (e == KvEnc::CH4 ? 15.0f : 3.0f) * 0.505f + std::fabs(mn) * 0x1p-10f + 1e-5f;
      for (int32_t t = 0; t < G; ++t) {
        float y = 0;
        kv_dequantize(src, t, c, 1, &y);
        EXPECT_LE(std::fabs(y - x[t * nc + c]), tol) << "c " << c << " t " << t;
      }
    }
  }
}

// ---- names and sizes -------------------------------------------------------------------------

TEST(KvCacheModes, NamesRoundTripAndBadInput) {
  for (KvMode m : kAllModes) {
    KvMode back;
    ASSERT_TRUE(kv_mode_from_name(kv_mode_name(m), &back));
    EXPECT_EQ(back, m);
  }
  KvMode m;
  EXPECT_FALSE(kv_mode_from_name("q5", &m));
  EXPECT_FALSE(kv_mode_valid(6));
  EXPECT_FALSE(kv_mode_valid(-1));
  std::unique_ptr<KvCache> c;
  EXPECT_EQ(KvCache::create(static_cast<KvMode>(9), {{32, 32}}, 8, &c).code(), GEIST_E_INVALID_ARG);
  EXPECT_EQ(KvCache::create(KvMode::Q4, {{32, 32}}, 0, &c).code(), GEIST_E_INVALID_ARG);
}

TEST(KvCacheModes, BytesPerTokenFromLayout) {
  // stories260K's attention: 4 KV heads of 8 -> 32 values per K and V row, 5 layers; plus a
  // layer without attention, which costs nothing.
  std::vector<KvLayerSpec> specs(5, KvLayerSpec{32, 32});
  specs.push_back(KvLayerSpec{0, 0});
  // Bytes of a K row and a V row of 32 values: q8 keys Q8A (f16 scale + min + 32 codes), q8
  // values Q8 (f16 scale + 32 codes), q4 f16 scale + 16 bytes of nibbles.
  const double per_k_row[] = {32 * 4, 32 * 2, 36, 18, 0, 0};
  const double per_v_row[] = {32 * 4, 32 * 2, 34, 18, 0, 0};
  for (KvMode m : kAllModes) {
    std::unique_ptr<KvCache> c;
    ASSERT_TRUE(KvCache::create(m, specs, 64, &c));
    double expect = 0;
    if (is_kivi(m)) {
      const int bits = m == KvMode::KIVI4 ? 4 : 2;
      // keys: per channel and group of 32 tokens f16 scale + f16 min + 32 codes; values: per
      // token and block of 32 channels, the same.
      expect = 2 * (4.0 + 32.0 * bits / 8);
    } else {
      expect = per_k_row[static_cast<int>(m)] + per_v_row[static_cast<int>(m)];
    }
    EXPECT_EQ(c->bytes_per_token(), static_cast<int64_t>(expect * 5)) << kv_mode_name(m);
  }
  std::unique_ptr<KvCache> f16, q4;
  ASSERT_TRUE(KvCache::create(KvMode::F16, specs, 64, &f16));
  ASSERT_TRUE(KvCache::create(KvMode::Q4, specs, 64, &q4));
  EXPECT_LE(static_cast<double>(q4->bytes_per_token()), 0.3 * f16->bytes_per_token());
}

// ---- attention over the cache ----------------------------------------------------------------

struct Case {
  AttentionShape s;
  int32_t n_pos;
  RopeParams rope;  // the keys' RoPE (q4 keys are relative to position 0's key turned by it)
};

// Llama-3-style per-pair frequency divisors for case 1's 16 rotated pairs.
const float kFreqFactors[16] = {1, 1, 1, 1, 1.5f, 2, 2.5f, 3, 4, 5, 6, 8, 8, 8, 8, 8};

const Case kCases[] = {
    // stories260K: heads of 8 (blocks of 8), 4 heads a row, every channel rotated
    {{8, 4, 8, 8, 1.0f / std::sqrt(8.0f)}, 75, {RopeStyle::NORMAL, 8, 10000, 1, nullptr}},
    // head slices straddle 32-blocks; NEOX on 32 of 48 channels, with frequency factors
    {{4, 2, 48, 48, 1.0f / std::sqrt(48.0f)}, 70, {RopeStyle::NEOX, 32, 1e6f, 1, kFreqFactors}},
    // short last block, head_dim_v != k, linear scaling
    {{6, 2, 20, 12, 0.3f}, 40, {RopeStyle::NORMAL, 12, 10000, 0.5f, nullptr}},
};

struct Inputs {
  int64_t nk, nv, nq, no;
  std::vector<float> q, k, v;  // [n_pos][nq], [n_pos][nk], [n_pos][nv]
};

Inputs make_inputs(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Inputs in;
  in.nk = int64_t{c.s.n_head_kv} * c.s.head_dim_k;
  in.nv = int64_t{c.s.n_head_kv} * c.s.head_dim_v;
  in.nq = int64_t{c.s.n_head} * c.s.head_dim_k;
  in.no = int64_t{c.s.n_head} * c.s.head_dim_v;
  in.q = randn(static_cast<size_t>(c.n_pos * in.nq), &rng);
  in.k = randn(static_cast<size_t>(c.n_pos * in.nk), &rng);
  in.v = randn(static_cast<size_t>(c.n_pos * in.nv), &rng);
  return in;
}

std::unique_ptr<KvCache> make_cache(KvMode m, const Case& c, const Inputs& in) {
  std::unique_ptr<KvCache> cache;
  const std::vector<KvLayerSpec> specs = {{0, 0},
                                          {static_cast<int32_t>(in.nk), static_cast<int32_t>(in.nv),
                                           c.s.head_dim_k, c.s.head_dim_v, c.rope}};
  EXPECT_TRUE(KvCache::create(m, specs, c.n_pos + 8, &cache));
  return cache;
}

// Outputs [n_pos][no] of running positions [0, n_pos) through layer 1 in the given pieces.
std::vector<float> run(KvCache& cache, const Case& c, const Inputs& in,
                       const std::vector<int32_t>& pieces, int n_threads, int32_t from = 0) {
  ThreadPool pool(n_threads);
  std::vector<float> scratch(KvCache::attention_scratch_floats(c.s, c.n_pos, n_threads));
  std::vector<float> out(static_cast<size_t>(c.n_pos * in.no), 0.0f);
  size_t i = 0;
  for (int32_t pos = from; pos < c.n_pos; ++i) {
    const int32_t n = std::min(pieces[i % pieces.size()], c.n_pos - pos);
    cache.attend(1, c.s, in.q.data() + pos * in.nq, in.nq, n, pos, in.k.data() + pos * in.nk, in.nk,
                 in.v.data() + pos * in.nv, in.nv, out.data() + pos * in.no, in.no, scratch.data(),
                 pool);
    pos += n;
  }
  return out;
}

// The test's own decoder of a region's bytes (layouts as documented in attention_kv.h).
float decode_block(KvEnc e, const uint8_t* blk, int32_t i) {
  switch (e) {
    case KvEnc::Q8:
      return half(blk) * static_cast<int8_t>(blk[2 + i]);
    case KvEnc::Q8A:
      return half(blk + 2) + half(blk) * blk[4 + i];
    case KvEnc::Q4:
      return half(blk) * (((blk[2 + i / 2] >> (4 * (i % 2))) & 15) - 8);
    default: {
      const int bits = (e == KvEnc::A4 || e == KvEnc::CH4) ? 4 : 2;
      const int q = (blk[4 + i * bits / 8] >> ((i * bits) % 8)) & ((1 << bits) - 1);
      return half(blk + 2) + half(blk) * q;
    }
  }
}

// c (n_head rows of head_dim) turned by RoPE to position p: kernels/ops.h rope() itself.
std::vector<float> roped(const std::vector<float>& c, int32_t head_dim, int32_t p,
                         const RopeParams& rp) {
  std::vector<float> x = c;
  if (rp.n_rot > 0) rope(x.data(), static_cast<int32_t>(x.size()) / head_dim, head_dim, p, rp);
  return x;
}

// Values row p of K (or V) holds for a query at position qpos, from the cache's regions.
// q8 keys are decoded as stored plus the K_REF row c (the f16 key of position 0), q4 keys as
// stored plus c turned by the case's RoPE to p; either should bring them back near the input
// keys. q4 rows of positions in the query's window are the window's f16 rows.
std::vector<double> decoded_rows(const KvCache& cache, KvMode m, bool key, int32_t n_pos,
                                 int32_t qpos, int64_t width, const std::vector<float>& input,
                                 const Case& cs) {
  std::vector<KvRegion> regs;
  cache.regions(n_pos, &regs);
  std::vector<uint8_t> main, ref, win;
  const bool centered = key && (m == KvMode::Q8 || m == KvMode::Q4);
  const int32_t head_dim = key ? cs.s.head_dim_k : cs.s.head_dim_v;
  const int32_t B = kv_block_for_head_dim(head_dim);
  for (const KvRegion& r : regs) {
    if (r.part == (key ? KV_PART_K : KV_PART_V)) {
      main.resize(r.nbytes);
      cache.read_region(r, n_pos, main.data());
    }
    if (m == KvMode::Q4 && r.part == (key ? KV_PART_K_WIN : KV_PART_V_WIN)) {
      EXPECT_EQ(r.nbytes, static_cast<uint64_t>((n_pos - kv_q4_window_start(n_pos)) * width * 2));
      win.resize(r.nbytes);
      cache.read_region(r, n_pos, win.data());
    }
    if (centered && r.part == KV_PART_K_REF) {
      EXPECT_EQ(r.nbytes, static_cast<uint64_t>(n_pos > 0 ? width * 2 : 0));
      ref.resize(r.nbytes);
      cache.read_region(r, n_pos, ref.data());
    }
  }
  // K_REF is the input key of position 0 rounded to f16.
  for (int64_t c = 0; c < static_cast<int64_t>(ref.size() / 2); ++c) {
    EXPECT_EQ(half(ref.data() + c * 2), fp16_to_fp32(fp32_to_fp16(input[c])));
  }
  std::vector<float> c_ref(ref.size() / 2);
  for (size_t c = 0; c < c_ref.size(); ++c) c_ref[c] = half(ref.data() + c * 2);
  std::vector<double> out(static_cast<size_t>(n_pos * width));
  const int32_t nb = static_cast<int32_t>((width + B - 1) / B);
  const int32_t win0 = kv_q4_window_start(n_pos);  // the window region's first position
  for (int32_t p = 0; p < n_pos; ++p) {
    const std::vector<float> rc =
        m == KvMode::Q4 && centered ? roped(c_ref, head_dim, p, cs.rope) : c_ref;
    for (int64_t c = 0; c < width; ++c) {
      double x = 0;
      const float in = input[p * width + c];
      switch (m) {
        case KvMode::F32:
          x = in;
          break;
        case KvMode::F16:
          x = fp16_to_fp32(fp32_to_fp16(in));
          break;
        case KvMode::Q8:
        case KvMode::Q4: {
          if (m == KvMode::Q4 && p >= kv_q4_window_start(qpos + 1)) {
            // The query read the window: f16 rows of the absolute inputs. The window region of
            // n_pos holds those of [win0, n_pos), in position order.
            x = fp16_to_fp32(fp32_to_fp16(in));
            if (p >= win0) {
              EXPECT_EQ(half(win.data() + ((p - win0) * width + c) * 2), x);
            }
            break;
          }
          const KvEnc e = m == KvMode::Q4 ? KvEnc::Q4 : key ? KvEnc::Q8A : KvEnc::Q8;
          const int64_t bb = e == KvEnc::Q4 ? 2 + B / 2 : e == KvEnc::Q8A ? 4 + B : 2 + B;
          const uint8_t* blk = main.data() + (p * nb + c / B) * bb;
          std::vector<double> codes(static_cast<size_t>(B));
          for (int i = 0; i < B; ++i) codes[i] = decode_block(e, blk, i);
          x = hadamard(codes)[c % B];  // the rotation is its own inverse
          if (centered) x += rc[c];
          break;
        }
        default: {
          const bool k4 = m == KvMode::KIVI4;
          const int64_t bb = k4 ? 20 : 12;               // CH blocks of G positions
          const int64_t vbb = 4 + B * (k4 ? 4 : 2) / 8;  // A blocks of B channels
          if (p >= (qpos + 1) / G * G) {                 // the group is not full yet: f16 residual
            x = fp16_to_fp32(fp32_to_fp16(in));
          } else if (key) {
            x = decode_block(k4 ? KvEnc::CH4 : KvEnc::CH2, main.data() + ((p / G) * width + c) * bb,
                             p % G);
          } else {
            x = decode_block(k4 ? KvEnc::A4 : KvEnc::A2, main.data() + (p * nb + c / B) * vbb,
                             c % B);
          }
        }
      }
      out[p * width + c] = x;
    }
  }
  return out;
}

TEST(KvCacheAttention, EveryModeMatchesDoubleAttentionOverDecodedBytes) {
  for (const Case& c : kCases) {
    const Inputs in = make_inputs(c, 7);
    for (KvMode m : kAllModes) {
      std::unique_ptr<KvCache> cache = make_cache(m, c, in);
      const std::vector<float> out = run(*cache, c, in, {c.n_pos}, 2);
      const int32_t grp = c.s.n_head / c.s.n_head_kv;
      double worst = 0;
      for (int32_t t = 0; t < c.n_pos; t += (is_kivi(m) ? 1 : 7)) {
        const std::vector<double> kd = decoded_rows(*cache, m, true, c.n_pos, t, in.nk, in.k, c);
        const std::vector<double> vd = decoded_rows(*cache, m, false, c.n_pos, t, in.nv, in.v, c);
        for (int32_t h = 0; h < c.s.n_head; ++h) {
          const int32_t g = h / grp;
          std::vector<double> w(static_cast<size_t>(t + 1));
          double mx = -INFINITY, sum = 0;
          for (int32_t p = 0; p <= t; ++p) {
            double d = 0;
            for (int32_t i = 0; i < c.s.head_dim_k; ++i) {
              d += double{in.q[t * in.nq + h * c.s.head_dim_k + i]} *
                   kd[p * in.nk + g * c.s.head_dim_k + i];
            }
            w[p] = d * c.s.scale;
            mx = std::max(mx, w[p]);
          }
          for (double& x : w) sum += (x = std::exp(x - mx));
          for (int32_t i = 0; i < c.s.head_dim_v; ++i) {
            double o = 0;
            for (int32_t p = 0; p <= t; ++p)
              o += w[p] / sum * vd[p * in.nv + g * c.s.head_dim_v + i];
            const double got = out[t * in.no + h * c.s.head_dim_v + i];
            worst = std::max(worst, std::fabs(got - o));
          }
        }
      }
      // f32 accumulation over <= 75 positions of O(1) values.
      EXPECT_LE(worst, 2e-5) << kv_mode_name(m) << " head_dim " << c.s.head_dim_k;
    }
  }
}

TEST(KvCacheAttention, SplitAndThreadInvariantInEveryMode) {
  for (const Case& c : kCases) {
    const Inputs in = make_inputs(c, 11);
    for (KvMode m : kAllModes) {
      std::unique_ptr<KvCache> a = make_cache(m, c, in), b = make_cache(m, c, in),
                               d = make_cache(m, c, in);
      const std::vector<float> one = run(*a, c, in, {c.n_pos}, 1);
      const std::vector<float> tok = run(*b, c, in, {1}, 3);
      const std::vector<float> odd = run(*d, c, in, {5, 31, 2, 33}, 2);
      EXPECT_EQ(std::memcmp(one.data(), tok.data(), one.size() * 4), 0) << kv_mode_name(m);
      EXPECT_EQ(std::memcmp(one.data(), odd.data(), one.size() * 4), 0) << kv_mode_name(m);
      // The cache bytes themselves are the same however the sequence was split.
      std::vector<KvRegion> ra, rb;
      a->regions(c.n_pos, &ra);
      b->regions(c.n_pos, &rb);
      ASSERT_EQ(ra.size(), rb.size());
      for (size_t i = 0; i < ra.size(); ++i) {
        std::vector<uint8_t> x(ra[i].nbytes), y(rb[i].nbytes);
        a->read_region(ra[i], c.n_pos, x.data());
        b->read_region(rb[i], c.n_pos, y.data());
        EXPECT_EQ(x, y) << kv_mode_name(m) << " region " << i;
      }
    }
  }
}

TEST(KvCacheAttention, F32ModeIsBitwiseThePlainKernel) {
  const Case& c = kCases[1];
  const Inputs in = make_inputs(c, 5);
  std::unique_ptr<KvCache> cache = make_cache(KvMode::F32, c, in);
  const std::vector<float> got = run(*cache, c, in, {c.n_pos}, 2);
  ThreadPool pool(2);
  std::vector<float> scratch(attention_scratch_floats(c.n_pos, 2));
  std::vector<float> ref(got.size());
  attention(c.s, in.q.data(), in.nq, c.n_pos, 0, in.k.data(), in.nk, in.v.data(), in.nv, ref.data(),
            in.no, scratch.data(), pool);
  EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * 4), 0);
}

// ---- snapshot regions ------------------------------------------------------------------------

TEST(KvCacheRegions, RoundTripIntoFreshCacheIsBitExact) {
  const Case& c = kCases[1];
  const Inputs in = make_inputs(c, 13);
  for (KvMode m : kAllModes) {
    for (int32_t cut : {0, 1, 31, 32, 33, 64, 65}) {
      std::unique_ptr<KvCache> src = make_cache(m, c, in), dst = make_cache(m, c, in),
                               ref = make_cache(m, c, in);
      // Noise in the destination's unused bytes must not matter.
      std::mt19937 rng(3);
      const std::vector<float> noise = randn(static_cast<size_t>(c.n_pos * in.nk), &rng);
      run(*dst, c, Inputs{in.nk, in.nv, in.nq, in.no, in.q, noise, noise}, {c.n_pos}, 1);
      Case head = c;
      head.n_pos = cut;
      if (cut > 0) run(*src, head, in, {7}, 1);
      std::vector<KvRegion> regs;
      src->regions(cut, &regs);
      uint64_t total = 0;
      for (const KvRegion& r : regs) {
        std::vector<uint8_t> bytes(r.nbytes);
        src->read_region(r, cut, bytes.data());
        dst->write_region(r, cut, bytes.data());
        total += r.nbytes;
      }
      uint64_t resid = is_kivi(m) ? static_cast<uint64_t>(cut % G) * (in.nk + in.nv) * 2
                       : (m == KvMode::Q8 || m == KvMode::Q4) && cut > 0
                           ? static_cast<uint64_t>(in.nk) * 2  // K_REF
                           : 0;
      if (m == KvMode::Q4) {  // K_WIN, V_WIN: f16 rows of [kv_q4_window_start(cut), cut)
        resid += static_cast<uint64_t>(cut - kv_q4_window_start(cut)) * (in.nk + in.nv) * 2;
      }
      const uint64_t quantized =
          is_kivi(m) ? static_cast<uint64_t>(cut / G * G) : static_cast<uint64_t>(cut);
      EXPECT_EQ(total, quantized * static_cast<uint64_t>(src->bytes_per_token()) + resid)
          << kv_mode_name(m) << " cut " << cut;
      ASSERT_TRUE(dst->can_resume_at(cut));
      const std::vector<float> want = run(*ref, c, in, {c.n_pos}, 2);
      const std::vector<float> got = run(*dst, c, in, {3}, 2, cut);
      const size_t off = static_cast<size_t>(cut * in.no);
      EXPECT_EQ(std::memcmp(got.data() + off, want.data() + off, (got.size() - off) * 4), 0)
          << kv_mode_name(m) << " cut " << cut;
    }
  }
}

TEST(KvCacheRegions, KiviResumeOnlyWhereResidualIsHeld) {
  const Case& c = kCases[0];
  const Inputs in = make_inputs(c, 17);
  std::unique_ptr<KvCache> k = make_cache(KvMode::KIVI4, c, in);
  Case head = c;
  head.n_pos = 70;
  run(*k, head, in, {70}, 1);
  EXPECT_TRUE(k->can_resume_at(70));
  EXPECT_TRUE(k->can_resume_at(66));   // same group as the last written position
  EXPECT_TRUE(k->can_resume_at(64));   // group boundary
  EXPECT_FALSE(k->can_resume_at(40));  // its group's f16 rows were overwritten
  std::unique_ptr<KvCache> f = make_cache(KvMode::Q4, c, in);
  EXPECT_TRUE(f->can_resume_at(40));
}

// ---- q4: keys relative to the RoPE-turned reference, f16 window ---------------------------------

// Every position's q4 key row is kv_quantize_row of its input key minus position 0's f16 key
// turned by rope() to the position, bitwise; value rows quantize the input values.
TEST(KvCacheQ4, KeyRowsAreRelativeToTheRopedReference) {
  for (const Case& c : kCases) {
    const Inputs in = make_inputs(c, 23);
    std::unique_ptr<KvCache> cache = make_cache(KvMode::Q4, c, in);
    run(*cache, c, in, {9}, 2);
    std::vector<KvRegion> regs;
    cache->regions(c.n_pos, &regs);
    std::vector<uint8_t> kb(regs[0].nbytes), vb(regs[1].nbytes);
    ASSERT_EQ(regs[0].part, KV_PART_K);
    ASSERT_EQ(regs[1].part, KV_PART_V);
    cache->read_region(regs[0], c.n_pos, kb.data());
    cache->read_region(regs[1], c.n_pos, vb.data());
    std::vector<float> c0(static_cast<size_t>(in.nk));
    for (int64_t i = 0; i < in.nk; ++i) c0[i] = fp16_to_fp32(fp32_to_fp16(in.k[i]));
    const int32_t bk = kv_block_for_head_dim(c.s.head_dim_k);
    const int32_t bv = kv_block_for_head_dim(c.s.head_dim_v);
    const int64_t krow = kv_row_bytes(KvEnc::Q4, static_cast<int32_t>(in.nk), bk);
    const int64_t vrow = kv_row_bytes(KvEnc::Q4, static_cast<int32_t>(in.nv), bv);
    for (int32_t p = 0; p < c.n_pos; ++p) {
      const std::vector<float> rc = roped(c0, c.s.head_dim_k, p, c.rope);
      std::vector<float> rel(static_cast<size_t>(in.nk));
      for (int64_t i = 0; i < in.nk; ++i) rel[i] = in.k[p * in.nk + i] - rc[i];
      std::vector<uint8_t> want(static_cast<size_t>(krow)), wantv(static_cast<size_t>(vrow));
      kv_quantize_row(KvEnc::Q4, rel.data(), static_cast<int32_t>(in.nk), want.data(), bk);
      kv_quantize_row(KvEnc::Q4, in.v.data() + p * in.nv, static_cast<int32_t>(in.nv), wantv.data(),
                      bv);
      EXPECT_EQ(std::memcmp(want.data(), kb.data() + p * krow, want.size()), 0) << "pos " << p;
      EXPECT_EQ(std::memcmp(wantv.data(), vb.data() + p * vrow, wantv.size()), 0) << "pos " << p;
    }
  }
}

// Over a long run (the window moves 4 times and its ring wraps): the SIMD kernel against the
// scalar reference on the cache's own view, split invariance, and where writing can resume.
TEST(KvCacheQ4, LongRunSimdMatchesReferenceAndSplitsAgree) {
  Case c = kCases[1];
  c.n_pos = 200;
  const Inputs in = make_inputs(c, 29);
  std::unique_ptr<KvCache> a = make_cache(KvMode::Q4, c, in), b = make_cache(KvMode::Q4, c, in);
  const std::vector<float> one = run(*a, c, in, {c.n_pos}, 2);
  const std::vector<float> odd = run(*b, c, in, {1, 62, 3, 33, 64}, 3);
  EXPECT_EQ(std::memcmp(one.data(), odd.data(), one.size() * 4), 0);

  // The last query's view: q4 rows [0, 160) with the reference, f16 window [160, 200).
  KvSource ks, vs;
  a->view(1, c.n_pos, &ks, &vs);
  EXPECT_EQ(ks.split, 160);
  ASSERT_NE(ks.ref.c, nullptr);
  ThreadPool pool(2);
  std::vector<float> scratch(KvCache::attention_scratch_floats(c.s, c.n_pos, 2));
  const int32_t t = c.n_pos - 1;
  std::vector<float> fast(static_cast<size_t>(in.no)), ref(static_cast<size_t>(in.no));
  attention_kv(c.s, in.q.data() + t * in.nq, in.nq, 1, t, ks, vs, fast.data(), in.no,
               scratch.data(), pool);
  attention_kv_reference(c.s, in.q.data() + t * in.nq, in.nq, 1, t, ks, vs, ref.data(), in.no,
                         scratch.data(), pool);
  for (int64_t i = 0; i < in.no; ++i) EXPECT_NEAR(fast[i], ref[i], 1e-5) << i;
  // The kernel's result for the last row is the one attend() gave it.
  EXPECT_EQ(std::memcmp(fast.data(), one.data() + t * in.no, fast.size() * 4), 0);

  // Window of a query at pos + 1 positions: [kv_q4_window_start(pos + 1), pos).
  // The ring holds positions [136, 200).
  EXPECT_TRUE(a->can_resume_at(200));
  EXPECT_TRUE(a->can_resume_at(191));   // window [160, 191)
  EXPECT_FALSE(a->can_resume_at(190));  // window [128, 190): 128's ring row now holds 192
  EXPECT_FALSE(a->can_resume_at(20));   // window [0, 20), long overwritten
}

}  // namespace
}  // namespace geist
