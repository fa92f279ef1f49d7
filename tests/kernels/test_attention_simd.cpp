// The SIMD attention kernels against the scalar versions kept in the tree as oracles:
// attention_kv() vs attention_kv_reference() for every KV encoding (and mixed lo/hi sources),
// attention() vs attention_reference(), on random shapes with odd head sizes, blocks that span
// heads and GQA groups that are not a multiple of the 4-head chunk. Plus the determinism the
// KV cache relies on: a row's bits do not depend on the batch split or the thread count, nor on
// how the kernel tiles tokens (prefill items hold several tokens with different causal ranges).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/attention.h"
#include "kernels/attention_kv.h"
#include "kernels/quant.h"
#include "kernels/simd/attention_simd.h"

namespace geist {
namespace {

constexpr int32_t G = kKvBlock;

struct Shape {
  AttentionShape s;
  int32_t n_tok, pos0;
};

// Shapes with head sizes that are not multiples of the 8-lane vector (12, 20, 5/7), heads of 48
// whose 32-blocks span two heads, group sizes 1, 3, 4 and 6 (chunks of 4 + 2).
const Shape kShapes[] = {
    {{8, 2, 64, 64, 0.125f}, 9, 30},
    {{6, 1, 12, 12, 0.3f}, 5, 37},
    {{6, 2, 48, 48, 0.15f}, 4, 61},
    {{3, 3, 20, 20, 0.2f}, 7, 26},
    {{12, 2, 8, 8, 0.35f}, 3, 70},
    {{4, 1, 16, 24, 0.25f}, 6, 33},
    // Prefill from position 0 over many tiles with a short last one (37 tokens): group 4 (tiles
    // of 4 tokens), group 1 (16 tokens), group 20 (more heads than one tile holds), odd sizes.
    {{8, 2, 64, 64, 0.125f}, 37, 0},
    {{2, 2, 12, 12, 0.3f}, 37, 5},
    {{20, 1, 16, 16, 0.25f}, 3, 9},
};

struct Mode {
  const char* name;
  KvEnc k_lo, k_hi, v_lo, v_hi;
  bool split;  // hi holds positions from the last multiple of 32 on
};

const Mode kModes[] = {
    {"f32", KvEnc::F32, KvEnc::F32, KvEnc::F32, KvEnc::F32, false},
    {"f16", KvEnc::F16, KvEnc::F16, KvEnc::F16, KvEnc::F16, false},
    {"q8", KvEnc::Q8A, KvEnc::Q8A, KvEnc::Q8, KvEnc::Q8, false},
    {"q4", KvEnc::Q4, KvEnc::Q4, KvEnc::Q4, KvEnc::Q4, false},
    {"kivi4", KvEnc::CH4, KvEnc::F16, KvEnc::A4, KvEnc::F16, true},
    {"kivi2", KvEnc::CH2, KvEnc::F16, KvEnc::A2, KvEnc::F16, true},
    // Not built by the KV cache, but the kernel takes any source: the remaining paths.
    {"a4k-q8v", KvEnc::A4, KvEnc::Q8, KvEnc::Q4, KvEnc::Q8, true},
    {"a2k-ch4v", KvEnc::A2, KvEnc::F32, KvEnc::CH4, KvEnc::F32, true},
    {"q8a-mixed", KvEnc::Q8A, KvEnc::Q4, KvEnc::Q8A, KvEnc::Q8, true},
};

bool is_ch(KvEnc e) { return e == KvEnc::CH4 || e == KvEnc::CH2; }

// Encodes positions [first, last) of x ([n_pos][n_chan]) as one segment; bytes holds its data.
KvSegment encode(KvEnc e, const std::vector<float>& x, int32_t n_chan, int32_t first, int32_t last,
                 int32_t head_dim, std::vector<uint8_t>* bytes) {
  KvSegment seg;
  seg.enc = e;
  seg.first = first;
  seg.block = kv_block_for_head_dim(head_dim);
  if (is_ch(e)) {
    seg.n_chan = n_chan;
    const int32_t n_groups = (last - first + G - 1) / G;
    const int64_t gb = kv_group_bytes(e, n_chan);
    bytes->assign(static_cast<size_t>(n_groups * gb), 0);
    // A last partial group is filled up with copies of its first row (the cache never holds
    // one; this only has to be well-formed).
    std::vector<float> tmp(static_cast<size_t>(G * n_chan));
    for (int32_t gi = 0; gi < n_groups; ++gi) {
      for (int32_t r = 0; r < G; ++r) {
        const int32_t p = std::min(first + gi * G + r, last - 1);
        std::memcpy(tmp.data() + r * n_chan, x.data() + static_cast<size_t>(p) * n_chan,
                    static_cast<size_t>(n_chan) * 4);
      }
      kv_quantize_group(e, tmp.data(), n_chan, n_chan, bytes->data() + gi * gb);
    }
  } else {
    seg.row_bytes = kv_row_bytes(e, n_chan, seg.block) + 6;  // padding: strides are honoured
    bytes->assign(static_cast<size_t>((last - first) * seg.row_bytes), 0xA5);
    for (int32_t p = first; p < last; ++p) {
      kv_quantize_row(e, x.data() + static_cast<size_t>(p) * n_chan, n_chan,
                      bytes->data() + (p - first) * seg.row_bytes, seg.block);
    }
  }
  seg.data = bytes->data();
  return seg;
}

struct Data {
  int64_t q_stride, o_stride;
  std::vector<float> q, k, v;  // [n_tok][q_stride], [kv_len][n_embd_k], [kv_len][n_embd_v]
  std::vector<uint8_t> bytes[4];
  KvSource ks, vs;
};

Data make_data(const Shape& c, const Mode& m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Data d;
  const int32_t kv_len = c.pos0 + c.n_tok;
  const int32_t nk = c.s.n_head_kv * c.s.head_dim_k, nv = c.s.n_head_kv * c.s.head_dim_v;
  d.q_stride = c.s.n_head * c.s.head_dim_k + 3;
  d.o_stride = c.s.n_head * c.s.head_dim_v + 1;
  d.q.resize(static_cast<size_t>(c.n_tok * d.q_stride));
  d.k.resize(static_cast<size_t>(kv_len * nk));
  d.v.resize(static_cast<size_t>(kv_len * nv));
  for (float& f : d.q) f = nd(rng);
  for (float& f : d.k) f = nd(rng);
  for (float& f : d.v) f = nd(rng);
  // Outlier channels, as real keys have, so that the rotation and the scales matter.
  for (int32_t p = 0; p < kv_len; ++p) d.k[static_cast<size_t>(p * nk)] *= 8.0f;
  const int32_t split = m.split ? (c.pos0 + 1) / G * G : kv_len;
  d.ks.split = d.vs.split = m.split ? split : INT32_MAX;
  d.ks.lo = encode(m.k_lo, d.k, nk, 0, split, c.s.head_dim_k, &d.bytes[0]);
  d.vs.lo = encode(m.v_lo, d.v, nv, 0, split, c.s.head_dim_v, &d.bytes[1]);
  if (m.split) {
    d.ks.hi = encode(m.k_hi, d.k, nk, split, kv_len, c.s.head_dim_k, &d.bytes[2]);
    d.vs.hi = encode(m.v_hi, d.v, nv, split, kv_len, c.s.head_dim_v, &d.bytes[3]);
  }
  return d;
}

using KvFn = void (*)(const AttentionShape&, const float*, int64_t, int32_t, int32_t,
                      const KvSource&, const KvSource&, float*, int64_t, float*, ThreadPool&);

// Runs tokens [0, n_tok) in calls of `piece` tokens.
std::vector<float> run_kv(KvFn fn, const Shape& c, const Data& d, int n_threads, int32_t piece) {
  ThreadPool pool(n_threads);
  std::vector<float> scratch(attention_kv_scratch_floats(c.s, c.pos0 + c.n_tok, n_threads));
  std::vector<float> out(static_cast<size_t>(c.n_tok * d.o_stride), -7.0f);
  for (int32_t t = 0; t < c.n_tok; t += piece) {
    const int32_t n = std::min(piece, c.n_tok - t);
    fn(c.s, d.q.data() + t * d.q_stride, d.q_stride, n, c.pos0 + t, d.ks, d.vs,
       out.data() + t * d.o_stride, d.o_stride, scratch.data(), pool);
  }
  return out;
}

// Both versions compute the same sums in f32 in different orders (8-lane partial sums, FMA,
// rotated queries instead of un-rotated keys, per-channel scale folded into the query), so each
// score differs by a few ulps of sum |q_i k_i| and the softmax weights move by as much
// relatively; outputs are weighted means of values of order 1-3. The largest difference seen
// over these shapes and modes is 1.5e-6 (AVX2); a decoding or rotation bug gives errors of
// order 0.1-1.
constexpr float kTol = 2e-5f;

TEST(AttentionSimd, EveryEncodingMatchesScalarReference) {
  uint32_t seed = 1;
  for (const Mode& m : kModes) {
    for (const Shape& c : kShapes) {
      const Data d = make_data(c, m, seed++);
      const std::vector<float> ref = run_kv(attention_kv_reference, c, d, 2, c.n_tok);
      const std::vector<float> got = run_kv(attention_kv, c, d, 2, c.n_tok);
      float worst = 0.0f;
      for (int32_t t = 0; t < c.n_tok; ++t) {
        for (int64_t i = 0; i < int64_t{c.s.n_head} * c.s.head_dim_v; ++i) {
          const size_t at = static_cast<size_t>(t * d.o_stride + i);
          ASSERT_TRUE(std::isfinite(got[at])) << m.name;
          worst = std::max(worst, std::fabs(got[at] - ref[at]));
        }
        // Padding between output rows is never written.
        if (d.o_stride > int64_t{c.s.n_head} * c.s.head_dim_v) {
          EXPECT_EQ(got[static_cast<size_t>(t * d.o_stride + d.o_stride - 1)], -7.0f);
        }
      }
      EXPECT_LE(worst, kTol) << m.name << " head_dim " << c.s.head_dim_k << " group "
                             << c.s.n_head / c.s.n_head_kv;
    }
  }
}

TEST(AttentionSimd, RowsBitwiseIndependentOfSplitAndThreads) {
  uint32_t seed = 100;
  for (const Mode& m : kModes) {
    for (const Shape& c : kShapes) {
      const Data d = make_data(c, m, seed++);
      const std::vector<float> all = run_kv(attention_kv, c, d, 1, c.n_tok);
      for (int threads : {2, 3}) {
        for (int32_t piece : {1, 2, c.n_tok}) {
          const std::vector<float> got = run_kv(attention_kv, c, d, threads, piece);
          EXPECT_EQ(std::memcmp(got.data(), all.data(), all.size() * 4), 0)
              << m.name << " threads " << threads << " piece " << piece;
        }
      }
    }
  }
}

// Each token of a prefill call against the same token run alone (a decode step with pos0 = its
// position): the tiles of the prefill call mix tokens whose causal ranges differ.
TEST(AttentionSimd, PrefillTilesBitwiseEqualSingleTokens) {
  uint32_t seed = 300;
  for (const Mode& m : kModes) {
    const Shape c = {{8, 2, 24, 24, 0.2f}, 41, 33};
    const Data d = make_data(c, m, seed++);
    const std::vector<float> all = run_kv(attention_kv, c, d, 2, c.n_tok);
    const std::vector<float> one = run_kv(attention_kv, c, d, 2, 1);
    EXPECT_EQ(std::memcmp(one.data(), all.data(), all.size() * 4), 0) << m.name;
  }
}

// The vectorised softmax against its definition in double: exp within 1 ulp and a sum in a
// different order leave each weight within a few ulps; lengths cover vector tails and long rows.
TEST(AttentionSimd, SoftmaxMatchesDouble) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 6.0f);
  for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 63, 200, 1031}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& f : x) f = nd(rng);
    double mx = -INFINITY, sum = 0;
    for (float f : x) mx = std::max(mx, static_cast<double>(f));
    for (float f : x) sum += std::exp(static_cast<double>(f) - mx);
    std::vector<float> y = x;
    simd::attn_softmax(y.data(), n);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(static_cast<double>(x[static_cast<size_t>(i)]) - mx) / sum;
      // x - max is rounded to f32 first (as in ops.h softmax): up to 2^-24 |x - max| of
      // relative error in the weight, on top of the exp's ulp and the sum's few ulps.
      const double d = std::fabs(static_cast<double>(x[static_cast<size_t>(i)]) - mx);
      EXPECT_NEAR(y[static_cast<size_t>(i)], want, want * (1.2e-7 * d + 5e-7) + 1e-37)
          << n << " " << i;
      total += y[static_cast<size_t>(i)];
    }
    EXPECT_NEAR(total, 1.0, 1e-5) << n;
  }
}

// attn_dot_rows / attn_axpy_rows over more than four rows (the tile kernels pass whole tiles):
// every row's result is bitwise that of the row processed alone.
TEST(AttentionSimd, RowKernelsIndependentOfRowCount) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t n : {5, 8, 24, 64, 67, 128}) {
    const int nq = 11;
    std::vector<float> q(static_cast<size_t>(nq * n)), x(static_cast<size_t>(n)), w(nq);
    for (float& f : q) f = nd(rng);
    for (float& f : x) f = nd(rng);
    for (float& f : w) f = nd(rng);
    std::vector<float> dots(nq), acc(q);
    simd::attn_dot_rows(q.data(), n, nq, x.data(), n, dots.data());
    simd::attn_axpy_rows(w.data(), nq, x.data(), n, acc.data(), n);
    for (int j = 0; j < nq; ++j) {
      float one;
      simd::attn_dot_rows(q.data() + j * n, n, 1, x.data(), n, &one);
      EXPECT_EQ(std::memcmp(&one, &dots[static_cast<size_t>(j)], 4), 0) << n << " " << j;
      double want = 0;
      for (int64_t i = 0; i < n; ++i)
        want += double{q[static_cast<size_t>(j * n + i)]} * x[static_cast<size_t>(i)];
      EXPECT_NEAR(one, want, 1e-5 * static_cast<double>(n)) << n << " " << j;
      std::vector<float> row(q.begin() + j * n, q.begin() + (j + 1) * n);
      simd::attn_axpy_rows(&w[static_cast<size_t>(j)], 1, x.data(), n, row.data(), n);
      EXPECT_EQ(std::memcmp(row.data(), acc.data() + j * n, static_cast<size_t>(n) * 4), 0)
          << n << " " << j;
      for (int64_t i = 0; i < n; ++i) {
        const size_t at = static_cast<size_t>(j * n + i);
        EXPECT_NEAR(row[static_cast<size_t>(i)],
                    q[at] + w[static_cast<size_t>(j)] * x[static_cast<size_t>(i)], 1e-5);
      }
    }
  }
}

// On every SIMD target: attn_axpy_rows4 is kAxpyPositions attn_axpy_rows calls in position
// order, bitwise, for row
// counts 1..11, widths with and without a tail, and a weight stride past nq; and its values are
// acc + sum_r w_r x_r (double reference, a few ulps of the four-term sum).
TEST(AttentionSimd, AxpyRows4IsPositionCallsInOrder) {
  test::for_each_target([&] {
    std::mt19937 rng(12);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    constexpr int P = simd::kAxpyPositions;
    for (int64_t n : {3, 8, 24, 64, 67, 128, 256}) {
      for (int nq : {1, 4, 11}) {
        const int64_t ws = 13;  // weight row stride
        std::vector<float> w(static_cast<size_t>(P * ws)), x(static_cast<size_t>(P * n));
        std::vector<float> start(static_cast<size_t>(nq * n));
        for (float& f : w) f = nd(rng);
        for (float& f : x) f = nd(rng);
        for (float& f : start) f = nd(rng);
        std::vector<float> want = start, acc = start;
        const float* xs[P];
        for (int r = 0; r < P; ++r) {
          xs[r] = x.data() + r * n;
          simd::attn_axpy_rows(w.data() + r * ws, nq, xs[r], n, want.data(), n);
        }
        simd::attn_axpy_rows4(w.data(), ws, nq, xs, n, acc.data(), n);
        EXPECT_EQ(std::memcmp(acc.data(), want.data(), acc.size() * 4), 0) << n << " " << nq;
        for (size_t e = 0; e < acc.size(); ++e) {
          const int j = static_cast<int>(e / static_cast<size_t>(n));
          const int64_t i = static_cast<int64_t>(e % static_cast<size_t>(n));
          double ref = start[e], mag = std::fabs(double{start[e]});
          for (int r = 0; r < P; ++r) {
            const double t = double{w[static_cast<size_t>(r * ws + j)]} * xs[r][i];
            ref += t;
            mag += std::fabs(t);
          }
          EXPECT_NEAR(acc[e], ref, 4 * 6e-8 * mag + 1e-30) << n << " " << nq << " " << e;
        }
      }
    }
  });
}

// On every SIMD target: the f16 row kernels are the f32 ones on the widened rows, bitwise (odd
// byte offsets; widths that are multiples of 8, the kernels' precondition).
TEST(AttentionSimd, F16RowKernelsEqualWidenedRows) {
  test::for_each_target([&] {
    std::mt19937 rng(13);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    constexpr int P = simd::kAxpyPositions;
    for (int64_t n : {8, 64, 72, 256}) {
      const int nq = 6;
      std::vector<uint8_t> halves(static_cast<size_t>(P * n * 2 + 1));
      for (size_t i = 0; i + 1 < halves.size(); i += 2) {
        const uint16_t h = fp32_to_fp16(nd(rng));
        std::memcpy(&halves[i + 1], &h, 2);  // from byte 1: an odd address
      }
      std::vector<float> wide(static_cast<size_t>(P * n));
      const uint8_t* hs[P];
      const float* xs[P];
      for (int r = 0; r < P; ++r) {
        hs[r] = halves.data() + 1 + r * n * 2;
        simd::attn_widen_f16(hs[r], n, wide.data() + r * n);
        xs[r] = wide.data() + r * n;
      }
      std::vector<float> q(static_cast<size_t>(nq * n)), w(static_cast<size_t>(P * nq));
      for (float& f : q) f = nd(rng);
      for (float& f : w) f = nd(rng);
      std::vector<float> d16(nq), d32(nq);
      simd::attn_dot_rows_f16(q.data(), n, nq, hs[0], n, d16.data());
      simd::attn_dot_rows(q.data(), n, nq, xs[0], n, d32.data());
      EXPECT_EQ(std::memcmp(d16.data(), d32.data(), d16.size() * 4), 0) << n;
      std::vector<float> a16(q), a32(q);
      simd::attn_axpy_rows4_f16(w.data(), nq, nq, hs, n, a16.data(), n);
      simd::attn_axpy_rows4(w.data(), nq, nq, xs, n, a32.data(), n);
      EXPECT_EQ(std::memcmp(a16.data(), a32.data(), a16.size() * 4), 0) << n;
      // kDotPositions rows a call: each row's dots those of its own call, for every query count
      // (groups of four and each remainder).
      static_assert(simd::kDotPositions == P);
      for (int m = 1; m <= nq; ++m) {
        std::vector<float> d4(static_cast<size_t>(P * m)), one(static_cast<size_t>(m));
        simd::attn_dot_rows4_f16(q.data(), n, m, hs, n, d4.data(), m);
        for (int r = 0; r < P; ++r) {
          simd::attn_dot_rows_f16(q.data(), n, m, hs[r], n, one.data());
          EXPECT_EQ(std::memcmp(d4.data() + r * m, one.data(), one.size() * 4), 0)
              << n << " " << m << " " << r;
        }
      }
    }
  });
}

TEST(AttentionSimd, PlainKernelMatchesScalarAndF32SourceBitwise) {
  uint32_t seed = 200;
  for (const Shape& c : kShapes) {
    const Data d = make_data(c, kModes[0], seed++);
    const int32_t kv_len = c.pos0 + c.n_tok;
    const int64_t nk = int64_t{c.s.n_head_kv} * c.s.head_dim_k;
    const int64_t nv = int64_t{c.s.n_head_kv} * c.s.head_dim_v;
    ThreadPool pool(2);
    std::vector<float> scratch(attention_scratch_floats(kv_len, 2));
    std::vector<float> fast(static_cast<size_t>(c.n_tok * d.o_stride), 0.0f), ref = fast;
    attention(c.s, d.q.data(), d.q_stride, c.n_tok, c.pos0, d.k.data(), nk, d.v.data(), nv,
              fast.data(), d.o_stride, scratch.data(), pool);
    attention_reference(c.s, d.q.data(), d.q_stride, c.n_tok, c.pos0, d.k.data(), nk, d.v.data(),
                        nv, ref.data(), d.o_stride, scratch.data(), pool);
    for (size_t i = 0; i < fast.size(); ++i) ASSERT_NEAR(fast[i], ref[i], kTol) << i;
    // The KV kernel over the same rows in F32 (row stride padded by 6 bytes is not a whole float,
    // so use an unpadded source here).
    KvSource ks, vs;
    ks.lo = KvSegment{KvEnc::F32, reinterpret_cast<const uint8_t*>(d.k.data()), nk * 4, 0, 0};
    vs.lo = KvSegment{KvEnc::F32, reinterpret_cast<const uint8_t*>(d.v.data()), nv * 4, 0, 0};
    std::vector<float> kv_scratch(attention_kv_scratch_floats(c.s, kv_len, 2));
    std::vector<float> via_kv(fast.size(), 0.0f);
    attention_kv(c.s, d.q.data(), d.q_stride, c.n_tok, c.pos0, ks, vs, via_kv.data(), d.o_stride,
                 kv_scratch.data(), pool);
    EXPECT_EQ(std::memcmp(via_kv.data(), fast.data(), fast.size() * 4), 0)
        << "head_dim " << c.s.head_dim_k;
  }
}

// attention_kv_many (a batched decode step's sessions in one parallel region): each call's
// output is bitwise that of its own attention_kv call, whatever the other calls (different
// lengths and positions, a prefill piece among one-token rows) and the thread count, and no
// call writes outside its own output rows.
TEST(AttentionSimd, ManyCallsEqualTheirOwnCalls) {
  const AttentionShape s{8, 2, 64, 64, 0.125f};
  const Shape calls[] = {{s, 1, 30}, {s, 1, 61}, {s, 1, 0}, {s, 3, 12}, {s, 1, 95}, {s, 1, 7}};
  constexpr int32_t kCalls = static_cast<int32_t>(sizeof(calls) / sizeof(calls[0]));
  uint32_t seed = 300;
  for (const Mode& m : kModes) {
    std::vector<Data> data;
    std::vector<std::vector<float>> alone;
    int32_t kv_max = 0;
    for (const Shape& c : calls) {
      data.push_back(make_data(c, m, seed++));
      alone.push_back(run_kv(attention_kv, c, data.back(), 1, c.n_tok));
      kv_max = std::max(kv_max, c.pos0 + c.n_tok);
    }
    for (int n_threads : {2, 3}) {
      ThreadPool pool(n_threads);
      std::vector<float> scratch(attention_kv_scratch_floats(s, kv_max, n_threads));
      std::vector<std::vector<float>> outs;
      std::vector<AttentionKvCall> args(static_cast<size_t>(kCalls));
      for (int32_t i = 0; i < kCalls; ++i) {
        const Data& d = data[static_cast<size_t>(i)];
        outs.emplace_back(static_cast<size_t>(calls[i].n_tok * d.o_stride), -7.0f);
        AttentionKvCall& a = args[static_cast<size_t>(i)];
        a.q = d.q.data();
        a.q_stride = d.q_stride;
        a.n_tok = calls[i].n_tok;
        a.pos0 = calls[i].pos0;
        a.k = d.ks;
        a.v = d.vs;
        a.out = outs.back().data();
        a.out_stride = d.o_stride;
      }
      attention_kv_many(s, args.data(), kCalls, scratch.data(), pool);
      for (int32_t i = 0; i < kCalls; ++i) {
        const std::vector<float>& want = alone[static_cast<size_t>(i)];
        ASSERT_EQ(std::memcmp(outs[static_cast<size_t>(i)].data(), want.data(), want.size() * 4), 0)
            << m.name << " call " << i << " threads " << n_threads;
      }
    }
  }
}

}  // namespace
}  // namespace geist
