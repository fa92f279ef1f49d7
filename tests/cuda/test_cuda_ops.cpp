// CUDA backend ops vs the CPU kernels (src/kernels), which are the oracle.
//
// Tolerances, from f32 rounding (u = 2^-24 ~ 6e-8 per operation):
//   matmul: the GPU and an exact (double) dot of the SAME dequantized weights differ by the
//     f32 accumulation error, bounded by ~n u sum|w x| and typically sqrt(n) u sum|w x|, plus,
//     for the tensor-core types (all but F32), the bf16 hi+lo splitting of both factors: at
//     most ~2^-16 relative per product; we allow 1e-5 * sqrt(n_in) * sum|w x| (n_in >= 32). Weight
//     decoding itself is checked bitwise through get_rows, which uses the same decoders as the
//     matmul kernel.
//   vs the CPU matmul() (which quantizes activations per block for quantized types, finely
//     enough for 2e-4 * sum|w x| + 1e-6, except for Q4_0, Q4_K and Q6_K weights on CPUs with
//     the 8-bit kernels (one int8 plane; elsewhere finer int16 codes): steps of
//     amax_b / 127 per 32-block b, so each activation is off by up to amax_b / 254 and the
//     CPU's dot by up to sum_b amax_b / 254 * sum_{i in b} |w_i|, which is added).
//   rms_norm: the only difference is the order of the double sum of squares: 4 ulp.
//   rope: cos/sin/pow of the device's double libm (<= 2 ulp in double) rounded to f32: 2e-6
//     absolute for |x| <= 1.
//   element-wise: device expf is within 2 ulp: 1e-6 relative.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "archs/test_qwen35_support.h"
#include "backends/backend.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_stream.h"
#include "base/thread_pool.h"
#include "cuda/cuda_test_util.h"
#include "kernels/deltanet.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "support/fixtures.h"

namespace geist {
namespace {

using test::DeviceVec;

using test::random_floats;

// A random n_out x n_in matrix quantized to type t on the host (the CPU quantizers).
struct HostWeight {
  std::vector<uint8_t> bytes;  // [n_out][row_bytes]
  WeightMatrix w;
  std::vector<float> deq;  // [n_out][n_in]: what dequantize_row() makes of the bytes
};

HostWeight make_weight(GgmlType t, int64_t n_in, int64_t n_out, uint32_t seed) {
  HostWeight h;
  const size_t rb = ggml_row_size(t, n_in);
  const std::vector<float> src = random_floats(static_cast<size_t>(n_in * n_out), seed);
  h.bytes.resize(rb * static_cast<size_t>(n_out));
  h.deq.resize(static_cast<size_t>(n_in * n_out));
  for (int64_t o = 0; o < n_out; ++o) {
    quantize_row(t, src.data() + o * n_in, h.bytes.data() + o * rb, n_in);
    dequantize_row(t, h.bytes.data() + o * rb, h.deq.data() + o * n_in, n_in);
  }
  h.w = WeightMatrix{t, h.bytes.data(), n_in, n_out, rb};
  return h;
}

class CudaOps : public test::CudaStreamTest {
 protected:
  WeightMatrix upload(const HostWeight& h) {
    WeightMatrix dev;
    const Status st = backend_->upload_weight(h.w, &dev);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return dev;
  }
};

struct MatmulCase {
  GgmlType type;
  int64_t n_in;
};

const MatmulCase kMatmulCases[] = {
    {GgmlType::F32, 67},
    {GgmlType::F32, 300},
    {GgmlType::F16, 67},
    {GgmlType::F16, 520},
    {GgmlType::BF16, 75},
    {GgmlType::BF16, 256},
    {GgmlType::Q8_0, 96},
    {GgmlType::Q8_0, 544},
    {GgmlType::Q4_0, 32},
    {GgmlType::Q4_0, 800},
    {GgmlType::Q4_K, 256},
    {GgmlType::Q4_K, 768},
    {GgmlType::Q6_K, 256},
    {GgmlType::Q6_K, 1280},
    {GgmlType::Q8_0, 4096},
    {GgmlType::F16, 2085},
    // Issue 26's types: Q5_0 / IQ4_NL / Q3_K reach the kernels as Q8_0 / Q6_K rows of the same
    // values (weight_to_exact_rows), the others have decoders of their own (cuda_quant.cuh).
    {GgmlType::Q4_1, 96},
    {GgmlType::Q4_1, 800},
    {GgmlType::Q5_1, 64},
    {GgmlType::Q5_1, 544},
    {GgmlType::Q5_0, 160},
    {GgmlType::Q5_0, 800},
    {GgmlType::IQ4_NL, 96},
    {GgmlType::IQ4_NL, 544},
    {GgmlType::Q2_K, 256},
    {GgmlType::Q2_K, 768},
    {GgmlType::Q3_K, 256},
    {GgmlType::Q3_K, 1280},
    {GgmlType::Q5_K, 256},
    {GgmlType::Q5_K, 768},
    {GgmlType::IQ4_XS, 256},
    {GgmlType::IQ4_XS, 1280},
};

// The types whose GPU matmul is the CPU's 8-bit Q8_0 formula (two activation planes) or Q4_0's
// (one plane), on the device copy's type.
bool gpu_q8_two_planes(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q5_0 || t == GgmlType::IQ4_NL;
}

TEST_F(CudaOps, GetRowsDecodesBitwiseLikeDequantizeRow) {
  for (const MatmulCase& c : kMatmulCases) {
    SCOPED_TRACE(std::string(ggml_type_name(c.type)) + " n_in=" + std::to_string(c.n_in));
    const int64_t n_out = 41;
    const HostWeight h = make_weight(c.type, c.n_in, n_out, 7u + static_cast<uint32_t>(c.n_in));
    const WeightMatrix dev = upload(h);
    const std::vector<int32_t> ids = {0, 40, 3, 3, 17, 39, 1};
    DeviceVec<float> out(ids.size() * static_cast<size_t>(c.n_in));
    stream_->get_rows(dev, ids.data(), static_cast<int32_t>(ids.size()), out.ptr());
    const std::vector<float> got = out.download();
    std::vector<float> want(static_cast<size_t>(c.n_in));
    for (size_t t = 0; t < ids.size(); ++t) {
      get_row(h.w, ids[t], want.data());
      for (int64_t i = 0; i < c.n_in; ++i) {
        ASSERT_EQ(got[t * c.n_in + i], want[i])
            << "token " << t << " (row " << ids[t] << ") element " << i;
      }
    }
  }
}

TEST_F(CudaOps, MatmulMatchesExactDotAndCpuMatmul) {
  ThreadPool pool(1);
  for (const MatmulCase& c : kMatmulCases) {
    for (const int32_t n_tok : {1, 3, 64, 300}) {
      SCOPED_TRACE(std::string(ggml_type_name(c.type)) + " n_in=" + std::to_string(c.n_in) +
                   " n_tok=" + std::to_string(n_tok));
      const int64_t n_out = 37;  // not a multiple of the 8 rows of a block
      const HostWeight h = make_weight(c.type, c.n_in, n_out, 11u + static_cast<uint32_t>(c.n_in));
      const WeightMatrix dev = upload(h);
      const int64_t x_stride = c.n_in + 5;  // strided rows
      const int64_t y_stride = n_out + 3;
      const std::vector<float> x = random_floats(static_cast<size_t>(x_stride * n_tok), 99);
      DeviceVec<float> dx(x);
      DeviceVec<float> dy(static_cast<size_t>(y_stride * n_tok));
      stream_->matmul(dev, dx.ptr(), x_stride, n_tok, dy.ptr(), y_stride);
      const std::vector<float> y = dy.download();

      std::vector<float> cpu(static_cast<size_t>(y_stride * n_tok));
      std::vector<float> scratch(matmul_scratch_floats(c.n_in, 1));
      matmul(h.w, x.data(), x_stride, n_tok, cpu.data(), y_stride, scratch.data(), pool);
      int bad = 0;
      for (int32_t t = 0; t < n_tok && bad < 5; ++t) {
        for (int64_t o = 0; o < n_out && bad < 5; ++o) {
          double exact = 0, mag = 0;
          for (int64_t i = 0; i < c.n_in; ++i) {
            const double p = static_cast<double>(h.deq[o * c.n_in + i]) * x[t * x_stride + i];
            exact += p;
            mag += std::fabs(p);
          }
          // The CPU's int8 activation rounding (see the top); an upper bound where it takes
          // the finer int16 path instead.
          const bool one_plane =
              c.type == GgmlType::Q4_0 || c.type == GgmlType::Q4_K || c.type == GgmlType::Q6_K;
          // The GPU's Q8_0 / Q4_0 path has the CPU's 8-bit activation codes (matmul_q8_cuda.cu):
          // half a step per activation, amax_b / 254 (Q4_0, one plane) or amax_b / 64516 (Q8_0).
          const bool gpu_q8 = gpu_q8_two_planes(c.type) || c.type == GgmlType::Q4_0;
          double q8_err = 0, gpu_q8_err = 0;
          for (int64_t b0 = 0; (one_plane || gpu_q8) && b0 < c.n_in; b0 += 32) {
            double amax = 0, wsum = 0;
            for (int64_t i = b0; i < b0 + 32; ++i) {
              amax = std::max(amax, static_cast<double>(std::fabs(x[t * x_stride + i])));
              wsum += std::fabs(static_cast<double>(h.deq[o * c.n_in + i]));
            }
            if (one_plane) q8_err += amax / 254.0 * wsum;
            if (gpu_q8) gpu_q8_err += amax / (gpu_q8_two_planes(c.type) ? 64516.0 : 254.0) * wsum;
          }
          const float g = y[t * y_stride + o];
          const double tol_exact =
              1e-5 * std::sqrt(static_cast<double>(c.n_in)) * mag + 1e-30 + gpu_q8_err;
          const double tol_cpu = 2e-4 * mag + 1e-6 + q8_err;
          if (std::fabs(g - exact) > tol_exact || std::fabs(g - cpu[t * y_stride + o]) > tol_cpu) {
            ++bad;
            ADD_FAILURE() << "y[" << t << "][" << o << "] gpu " << g << " exact " << exact
                          << " cpu " << cpu[t * y_stride + o] << " (tol " << tol_exact << " / "
                          << tol_cpu << ")";
          }
        }
      }
      // Untouched padding between rows: the kernel writes only n_out floats per row.
      for (int32_t t = 0; t < n_tok; ++t) {
        for (int64_t o = n_out; o < y_stride; ++o) ASSERT_EQ(y[t * y_stride + o], 0.0f);
      }
    }
  }
}

// A token's outputs must not depend on how many tokens share the call (the engine's prefill
// split invariance and snapshot bit-exactness rely on it). Batches of 1..8 take the decode
// kernel (k split over warps), longer ones the prefill kernel: both must agree bitwise. n_in
// 2304 has 72 chunks of 32, the most k parts; 2085 (F16) ends in a partial chunk.
TEST_F(CudaOps, MatmulRowsAreBitwiseIndependentOfBatchSize) {
  const MatmulCase cases[] = {
      {GgmlType::F32, 512},    {GgmlType::Q8_0, 512},  {GgmlType::Q8_0, 2304},
      {GgmlType::Q4_0, 2304},  {GgmlType::Q4_K, 2304}, {GgmlType::Q6_K, 2304},
      {GgmlType::F16, 2085},   {GgmlType::BF16, 2304}, {GgmlType::Q4_1, 2304},
      {GgmlType::Q5_1, 2304},  {GgmlType::Q5_0, 2304}, {GgmlType::IQ4_NL, 2304},
      {GgmlType::Q2_K, 2304},  {GgmlType::Q3_K, 2304}, {GgmlType::Q5_K, 2304},
      {GgmlType::IQ4_XS, 2304}};
  for (const MatmulCase& c : cases) {
    SCOPED_TRACE(std::string(ggml_type_name(c.type)) + " n_in=" + std::to_string(c.n_in));
    const int64_t n_in = c.n_in, n_out = 70;
    const HostWeight h = make_weight(c.type, n_in, n_out, 5);
    const WeightMatrix dev = upload(h);
    const int32_t n_tok = 300;
    const std::vector<float> x = random_floats(static_cast<size_t>(n_in * n_tok), 3);
    DeviceVec<float> dx(x);
    DeviceVec<float> all(static_cast<size_t>(n_out * n_tok));
    stream_->matmul(dev, dx.ptr(), n_in, n_tok, all.ptr(), n_out);
    const std::vector<float> y_all = all.download();
    for (const int32_t tok : {0, 2, 17, 150, 291, 299}) {
      for (const int32_t batch : {1, 3, 8, 9, 40}) {
        if (tok + batch > n_tok) continue;
        DeviceVec<float> part(static_cast<size_t>(n_out * batch));
        stream_->matmul(dev, dx.ptr() + tok * n_in, n_in, batch, part.ptr(), n_out);
        const std::vector<float> y = part.download();
        for (int32_t t = 0; t < batch; ++t) {
          for (int64_t o = 0; o < n_out; ++o) {
            ASSERT_EQ(y[t * n_out + o], y_all[(tok + t) * n_out + o])
                << "token " << tok + t << " batch " << batch << " out " << o;
          }
        }
      }
    }
  }
}

// Inside a forward step, decode matmuls over the same activations run as one launch
// (Stream::matmul_many on CUDA): every output must be bitwise what a lone matmul writes. Five
// matrices (one more than a launch takes), the third writing into rows of the second's buffer
// (disjoint elements), the fifth reading other activations (a launch of its own).
TEST_F(CudaOps, HeldDecodeMatmulsEqualLoneMatmulsBitwise) {
  const int64_t n_in = 1024;
  const int64_t n_outs[] = {37, 512, 16, 300, 70};
  std::vector<HostWeight> hw;
  std::vector<WeightMatrix> dw;
  for (int i = 0; i < 5; ++i) {
    hw.push_back(make_weight(GgmlType::Q8_0, n_in, n_outs[i], 40u + static_cast<uint32_t>(i)));
    dw.push_back(upload(hw.back()));
  }
  for (const int32_t n_tok : {1, 3}) {
    SCOPED_TRACE("n_tok=" + std::to_string(n_tok));
    const std::vector<float> x = random_floats(static_cast<size_t>(2 * n_in * n_tok), 8);
    DeviceVec<float> dx(x);
    const int64_t y_stride = 1024;  // every output row; matrix 2 at column 600 of matrix 1's
    const float* xs[] = {dx.ptr(), dx.ptr(), dx.ptr(), dx.ptr(), dx.ptr() + n_in * n_tok};
    const int64_t offs[] = {0, 0, 600, 0, 0};
    const int bufs[] = {0, 1, 1, 2, 3};
    std::vector<std::vector<float>> lone, held;
    for (const bool in_step : {false, true}) {
      DeviceVec<float> ys[4];
      for (DeviceVec<float>& y : ys) y.alloc(static_cast<size_t>(y_stride * n_tok));
      if (in_step) stream_->begin_forward(nullptr, n_tok, 0);
      if (in_step) {
        std::vector<MatmulDst> outs;
        for (int i = 0; i < 5; ++i) {
          outs.push_back(MatmulDst{&dw[i], ys[bufs[i]].ptr() + offs[i], y_stride});
        }
        stream_->matmul_many(outs.data(), 4, xs[0], n_in, n_tok);
        stream_->matmul_many(outs.data() + 4, 1, xs[4], n_in, n_tok);
      } else {
        for (int i = 0; i < 5; ++i) {
          stream_->matmul(dw[i], xs[i], n_in, n_tok, ys[bufs[i]].ptr() + offs[i], y_stride);
        }
      }
      if (in_step) {
        ASSERT_TRUE(stream_->end_forward());
      }
      for (DeviceVec<float>& y : ys) (in_step ? held : lone).push_back(y.download());
    }
    for (size_t b = 0; b < lone.size(); ++b) {
      for (size_t i = 0; i < lone[b].size(); ++i) {
        ASSERT_EQ(held[b][i], lone[b][i]) << "buffer " << b << " element " << i;
      }
    }
  }
}

TEST_F(CudaOps, MatmulToHostWritesStridedHostRows) {
  const int64_t n_in = 256, n_out = 45;
  const HostWeight h = make_weight(GgmlType::Q8_0, n_in, n_out, 21);
  const WeightMatrix dev = upload(h);
  const int32_t n_tok = 3;
  const std::vector<float> x = random_floats(static_cast<size_t>(n_in * n_tok), 4);
  DeviceVec<float> dx(x);
  DeviceVec<float> dy(static_cast<size_t>(n_out * n_tok));
  stream_->matmul(dev, dx.ptr(), n_in, n_tok, dy.ptr(), n_out);
  const std::vector<float> ref = dy.download();
  const int64_t y_stride = n_out + 7;
  std::vector<float> host(static_cast<size_t>(y_stride * n_tok), -5.0f);
  stream_->matmul_to_host(dev, dx.ptr(), n_in, n_tok, host.data(), y_stride);
  for (int32_t t = 0; t < n_tok; ++t) {
    for (int64_t o = 0; o < y_stride; ++o) {
      const float want = o < n_out ? ref[t * n_out + o] : -5.0f;
      ASSERT_EQ(host[t * y_stride + o], want) << t << "," << o;
    }
  }
}

// cuda::argmax_first against the definition's host implementation (kernels/ops.h): the lowest
// index of the largest value, NaN read as -inf, +0 == -0. Ties across and within the kernel's
// slices, specials, one-block and many-block lengths; calls back to back reuse the counter,
// which the kernel must leave at 0.
TEST_F(CudaOps, ArgmaxFirstEqualsTheHostDefinition) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  DeviceVec<cuda::ArgmaxPart> parts(cuda::kArgmaxParts);
  DeviceVec<unsigned> count(1);
  DeviceVec<int32_t> out(1);
  std::mt19937 rng(77);
  int cases = 0;
  for (const int32_t n : {1, 2, 31, 257, 2048, 2049, 5000, 131072, 128256, 248320, 300001}) {
    for (int kind = 0; kind < 8; ++kind) {
      std::vector<float> x(static_cast<size_t>(n));
      std::uniform_int_distribution<int> few(-3, 3);  // many ties
      std::uniform_real_distribution<float> wide(-30.0f, 30.0f);
      for (float& v : x) v = kind % 2 == 0 ? static_cast<float>(few(rng)) : wide(rng);
      std::uniform_int_distribution<int32_t> at(0, n - 1);
      switch (kind) {
        case 2:  // NaN everywhere but a few values
          for (float& v : x) v = nan;
          x[static_cast<size_t>(at(rng))] = -inf;
          x[static_cast<size_t>(at(rng))] = -5.0f;
          break;
        case 3:  // every value NaN: 0
          for (float& v : x) v = nan;
          break;
        case 4:  // -0 before +0 as the largest, NaN before both
          for (float& v : x) v = -1.0f;
          x[static_cast<size_t>(at(rng))] = nan;
          x[static_cast<size_t>(n - 1)] = 0.0f;
          x[static_cast<size_t>(at(rng))] = -0.0f;
          break;
        case 5:  // +inf twice
          x[static_cast<size_t>(at(rng))] = inf;
          x[static_cast<size_t>(at(rng))] = inf;
          break;
        case 6:  // every value -inf: 0
          for (float& v : x) v = -inf;
          break;
        default:
          break;
      }
      DeviceVec<float> dx(x);
      ASSERT_EQ(cuda::argmax_first(nullptr, dx.ptr(), n, parts.ptr(), count.ptr(), out.ptr()),
                cudaSuccess);
      const std::vector<int32_t> got = out.download();
      ASSERT_EQ(got[0], argmax_first(x.data(), n)) << "n " << n << " kind " << kind;
      ASSERT_EQ(count.download()[0], 0u) << "n " << n << " kind " << kind;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 88);
  EXPECT_EQ(cuda::argmax_first(nullptr, nullptr, 0, parts.ptr(), count.ptr(), out.ptr()),
            cudaErrorInvalidValue);
}

// Several rows in one launch: each row's id is that row's argmax_first, with its own counter
// left at 0 (ties and NaN in some rows, a maximum in the first and last element of others).
TEST_F(CudaOps, ArgmaxFirstOfRowsIsEachRowsOwn) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const int32_t n : {1, 2049, 248320}) {
    const int32_t rows = 7;
    std::mt19937 rng(78);
    std::uniform_int_distribution<int> few(-3, 3);
    std::vector<float> x(static_cast<size_t>(n) * rows);
    for (float& v : x) v = static_cast<float>(few(rng));
    x[static_cast<size_t>(n) * 1] = 9.0f;                                        // row 1: first
    x[static_cast<size_t>(n) * 3 - 1] = 9.0f;                                    // row 2: last
    for (int32_t i = 0; i < n; i += 3) x[static_cast<size_t>(n) * 4 + i] = nan;  // row 4
    DeviceVec<cuda::ArgmaxPart> parts(static_cast<size_t>(cuda::kArgmaxParts) * rows);
    DeviceVec<unsigned> count(std::vector<unsigned>(rows, 0u));
    DeviceVec<int32_t> out(rows);
    DeviceVec<float> dx(x);
    ASSERT_EQ(cuda::argmax_first(nullptr, dx.ptr(), n, parts.ptr(), count.ptr(), out.ptr(), rows),
              cudaSuccess);
    const std::vector<int32_t> got = out.download();
    for (int32_t r = 0; r < rows; ++r) {
      EXPECT_EQ(got[static_cast<size_t>(r)], argmax_first(x.data() + int64_t{r} * n, n))
          << "n " << n << " row " << r;
    }
    for (const unsigned c : count.download()) EXPECT_EQ(c, 0u);
  }
}

// The stream's greedy output: the id of each of matmul_to_host's rows (one row: a decode
// step; several: a batched one), the host scratch left unwritten.
TEST_F(CudaOps, MatmulArgmaxToHostIsTheArgmaxOfEachRow) {
  for (const GgmlType t : {GgmlType::Q8_0, GgmlType::F32}) {
    for (const int64_t n_out : {int64_t{1}, int64_t{45}, int64_t{5003}, int64_t{40000}}) {
      for (const int32_t n_tok : {1, 3, 64}) {
        SCOPED_TRACE(std::string(ggml_type_name(t)) + " n_out " + std::to_string(n_out) + " rows " +
                     std::to_string(n_tok));
        const int64_t n_in = 256;
        const HostWeight h = make_weight(t, n_in, n_out, 23);
        const WeightMatrix dev = upload(h);
        const std::vector<float> x = random_floats(static_cast<size_t>(n_in * n_tok), 5);
        DeviceVec<float> dx(x);
        const size_t total = static_cast<size_t>(n_out * n_tok);
        std::vector<float> rows(total);
        stream_->matmul_to_host(dev, dx.ptr(), n_in, n_tok, rows.data(), n_out);
        std::vector<float> scratch(total, -7.0f);
        std::vector<int32_t> ids(static_cast<size_t>(n_tok), -1);
        stream_->matmul_argmax_to_host(dev, dx.ptr(), n_tok, scratch.data(), ids.data());
        for (int32_t r = 0; r < n_tok; ++r) {
          EXPECT_EQ(ids[static_cast<size_t>(r)], argmax_first(rows.data() + r * n_out, n_out))
              << "row " << r;
        }
        EXPECT_EQ(std::count(scratch.begin(), scratch.end(), -7.0f),
                  static_cast<std::ptrdiff_t>(total));
      }
    }
  }
}

TEST_F(CudaOps, RmsNormMatchesCpu) {
  for (const int64_t n : {1, 7, 256, 1000, 4096}) {
    for (const bool with_w : {false, true}) {
      SCOPED_TRACE("n=" + std::to_string(n) + (with_w ? " weighted" : ""));
      const int32_t rows = 5;
      const int64_t stride = n + 3;
      const std::vector<float> x = random_floats(static_cast<size_t>(stride * rows), 8, -3, 3);
      const std::vector<float> w = random_floats(static_cast<size_t>(n), 9);
      DeviceVec<float> dx(x), dw(w);
      DeviceVec<float> dy(static_cast<size_t>(stride * rows));
      stream_->rms_norm(dx.ptr(), stride, with_w ? dw.ptr() : nullptr, dy.ptr(), stride, rows, n,
                        1e-6f);
      // In place too (x and y alias).
      stream_->rms_norm(dx.ptr(), stride, with_w ? dw.ptr() : nullptr, dx.ptr(), stride, rows, n,
                        1e-6f);
      const std::vector<float> y = dy.download();
      const std::vector<float> y_inplace = dx.download();
      for (int32_t r = 0; r < rows; ++r) {
        std::vector<float> ref(static_cast<size_t>(n));
        rms_norm(x.data() + r * stride, with_w ? w.data() : nullptr, ref.data(), n, 1e-6f);
        for (int64_t i = 0; i < n; ++i) {
          const float g = y[r * stride + i];
          ASSERT_NEAR(g, ref[i], 4.8e-7 * std::fabs(ref[i]) + 1e-30) << "row " << r << " i " << i;
          ASSERT_EQ(y_inplace[r * stride + i], g) << "in place differs, row " << r << " i " << i;
        }
      }
    }
  }
}

TEST_F(CudaOps, RopeMatchesCpu) {
  const std::vector<float> ff = random_floats(32, 12, 1.0f, 8.0f);
  DeviceVec<float> dff(ff);
  struct Case {
    RopeStyle style;
    int32_t head_dim, n_rot;
    float base, scale;
    bool factors;
    int32_t pos0;
  };
  const Case cases[] = {
      {RopeStyle::NORMAL, 64, 64, 10000, 1, false, 0},
      {RopeStyle::NEOX, 128, 128, 1e6f, 1, false, 3},
      {RopeStyle::NEOX, 256, 64, 1e7f, 1, false, 1000},  // partial rotation (Qwen3.5)
      {RopeStyle::NORMAL, 64, 48, 500000, 0.25f, true, 7},
      {RopeStyle::NEOX, 64, 64, 500000, 1, true, 32000},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + " n_rot " + std::to_string(c.n_rot) +
                 " pos0 " + std::to_string(c.pos0));
    const int32_t n_head = 3, n_tok = 5;
    const int64_t stride = n_head * c.head_dim + 2;
    const std::vector<float> x = random_floats(static_cast<size_t>(stride * n_tok), 13);
    DeviceVec<float> dx(x);
    RopeParams p;
    p.style = c.style;
    p.n_rot = c.n_rot;
    p.freq_base = c.base;
    p.freq_scale = c.scale;
    p.freq_factors = c.factors ? dff.ptr() : nullptr;
    stream_->rope(dx.ptr(), stride, n_tok, n_head, c.head_dim, c.pos0, p);
    const std::vector<float> got = dx.download();
    std::vector<float> ref = x;
    p.freq_factors = c.factors ? ff.data() : nullptr;
    for (int32_t t = 0; t < n_tok; ++t)
      rope(ref.data() + t * stride, n_head, c.head_dim, c.pos0 + t, p);
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 2e-6) << "element " << i;
  }
}

TEST_F(CudaOps, ElementwiseOpsMatchCpu) {
  const int64_t n = 100003;
  const std::vector<float> a = random_floats(static_cast<size_t>(n), 1, -8, 8);
  const std::vector<float> b = random_floats(static_cast<size_t>(n), 2, -8, 8);
  DeviceVec<float> da(a), db(b), dout(static_cast<size_t>(n));
  stream_->swiglu(da.ptr(), db.ptr(), dout.ptr(), n);
  std::vector<float> ref(static_cast<size_t>(n));
  swiglu(a.data(), b.data(), ref.data(), n);
  std::vector<float> got = dout.download();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(got[i], ref[i], 1e-6 * std::fabs(ref[i]) + 1e-30) << "swiglu " << i;
  }
  stream_->add(da.ptr(), db.ptr(), n);
  got = da.download();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], a[i] + b[i]) << "add " << i;

  // sigmoid_mul on strided rows: only the first n2 of each row change.
  const int32_t rows = 7;
  const int64_t n2 = 301, xs = 310, gs = 305;
  const std::vector<float> x = random_floats(static_cast<size_t>(xs * rows), 3, -4, 4);
  const std::vector<float> g = random_floats(static_cast<size_t>(gs * rows), 4, -9, 9);
  DeviceVec<float> dx(x), dg(g);
  stream_->sigmoid_mul(dx.ptr(), xs, dg.ptr(), gs, rows, n2);
  got = dx.download();
  for (int32_t r = 0; r < rows; ++r) {
    for (int64_t d = 0; d < xs; ++d) {
      const float want = d < n2 ? x[r * xs + d] * sigmoid_f32(g[r * gs + d]) : x[r * xs + d];
      ASSERT_NEAR(got[r * xs + d], want, 1e-6 * std::fabs(want) + 1e-30) << r << "," << d;
    }
  }
}

TEST_F(CudaOps, MemoryAllocUploadDownloadFillZero) {
  std::unique_ptr<Buffer> buf;
  ASSERT_TRUE(stream_->alloc(4099, &buf).is_ok());
  ASSERT_EQ(buf->size(), 4099u);
  std::vector<uint8_t> host(4099, 0xAB);
  stream_->download(host.data(), buf->data(), host.size());
  for (size_t i = 0; i < host.size(); ++i) ASSERT_EQ(host[i], 0) << "alloc not zeroed at " << i;
  std::vector<uint8_t> src(4099);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  stream_->upload(buf->data(), src.data(), src.size());
  stream_->download(host.data(), buf->data(), host.size());
  ASSERT_EQ(host, src);
  stream_->fill_zero(buf->data() + 100, 50);
  stream_->download(host.data(), buf->data(), host.size());
  for (size_t i = 0; i < host.size(); ++i) {
    ASSERT_EQ(host[i], i >= 100 && i < 150 ? 0 : src[i]) << i;
  }
}

TEST_F(CudaOps, UnsupportedWeightTypeIsReported) {
  // Every type the CPU computes has a CUDA path now; IQ2_XS (known to the format, computed by
  // neither backend) must still be refused by name.
  std::vector<uint8_t> bytes(ggml_row_size(GgmlType::IQ2_XS, 256) * 2);
  const WeightMatrix host{GgmlType::IQ2_XS, bytes.data(), 256, 2,
                          ggml_row_size(GgmlType::IQ2_XS, 256)};
  WeightMatrix dev;
  const Status st = backend_->upload_weight(host, &dev);
  EXPECT_EQ(st.code(), GEIST_E_UNSUPPORTED);
  EXPECT_NE(st.message().find(ggml_type_name(GgmlType::IQ2_XS)), std::string::npos) << st.message();
  EXPECT_NE(backend_->description().find("cuda ("), std::string::npos) << backend_->description();
}

// The tensor-core matmul on real quantized / f16 weights: the cuda backend's mean |logit -
// fp64| on tiny-qwen35 must be no worse than llama.cpp's on the same file (llama.cpp rounds
// activations to f16 or 8 bits; ours keep ~16 bits, so this is an upper bound).
TEST(CudaMatmulModels, TinyQwen35F16AndQ8_0NoWorseThanLlamaCpp) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  const std::string dir = test::fixture_path("reference/tiny-qwen35/");
  const std::vector<int32_t> toks =
      qwen35_test::json_int_array(test::read_text_file(dir + "hf_reference.json"), "tokens");
  const std::vector<float> hf = test::read_f32_file(dir + "hf_fp64_logits.f32");
  for (const char* type : {"f16", "q8_0"}) {
    SCOPED_TRACE(type);
    std::unique_ptr<GgufFile> file;  // outlives the model
    Status st = GgufFile::open(
        test::fixture_path(std::string("models/tiny-qwen35-") + type + ".gguf"), &file);
    ASSERT_TRUE(st.is_ok()) << st.message();
    std::unique_ptr<ArchModel> model;
    st = load_arch_model(*file, BackendKind::CUDA, Logger{}, &model);
    ASSERT_TRUE(st.is_ok()) << st.message();
    const int32_t nv = model->info().n_vocab;
    ThreadPool pool(1);
    const qwen35_test::Diff ours =
        qwen35_test::compare(qwen35_test::run_rows_fresh(*model, toks, {200}, pool), hf, nv);
    const qwen35_test::Diff tok1 =
        qwen35_test::compare(qwen35_test::run_rows_fresh(*model, toks, {1}, pool), hf, nv);
    const qwen35_test::Diff lc =
        qwen35_test::compare(test::read_f32_file(dir + "llamacpp_" + type + "_logits.f32"), hf, nv);
    std::printf(
        "    tiny-qwen35-%s cuda vs HF fp64: prefill max %.3g mean %.3g argmax %d/%d, token by "
        "token mean %.3g | llama.cpp max %.3g mean %.3g argmax %d/%d\n",
        type, ours.max_abs, ours.mean_abs, ours.argmax_equal, ours.rows, tok1.mean_abs, lc.max_abs,
        lc.mean_abs, lc.argmax_equal, lc.rows);
    EXPECT_LE(ours.mean_abs, lc.mean_abs);
    EXPECT_LE(tok1.mean_abs, lc.mean_abs);
  }
}

}  // namespace
}  // namespace geist
