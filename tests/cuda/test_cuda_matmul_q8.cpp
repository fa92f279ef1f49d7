// The 8-bit path of the CUDA matmul (Q8_0, Q4_0; matmul_q8_cuda.cu) against the CPU's Q8
// formula written out here from its definition (kernels/simd/matmul_simd.h, "Q8 path"):
// activations quantized by the CPU's scalar quantize_row_q8_reference, the weight codes read
// from the GGUF blocks, isum_b an exact integer dot, then acc = fma(float(isum_b), dw_b * dx_b,
// acc) from +0 in block order. The device must give exactly these bits (tolerance 0), for the
// decode kernels (n_tok <= 16), the prefill kernel (n_tok > 16), and the fused decode launch.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_kernels.h"
#include "cuda/cuda_test_util.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/simd/matmul_simd.h"

namespace geist {
namespace {

using test::DeviceVec;

// Activations with a different magnitude per 32-block (2^-6 .. 2^6), and an all-zero block
// now and then (the amax = 0 case of the quantizer).
std::vector<float> activations(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> e(-6, 6);
  std::vector<float> v(n);
  for (size_t b = 0; b < n; b += 32) {
    const bool zero = rng() % 17 == 0;
    const float scale = std::ldexp(1.0f, e(rng));
    for (size_t i = b; i < b + 32 && i < n; ++i) v[i] = zero ? 0.0f : u(rng) * scale;
  }
  return v;
}

// The weight codes of block b of a GGUF row and its scale.
void weight_codes(GgmlType t, const uint8_t* row, int64_t b, int32_t codes[32], float* dw) {
  uint16_t h;
  if (t == GgmlType::Q8_0) {
    const uint8_t* blk = row + b * 34;
    std::memcpy(&h, blk, 2);
    for (int i = 0; i < 32; ++i) codes[i] = static_cast<int8_t>(blk[2 + i]);
  } else {
    const uint8_t* blk = row + b * 18;
    std::memcpy(&h, blk, 2);
    for (int i = 0; i < 16; ++i) {
      codes[i] = (blk[2 + i] & 0xF) - 8;
      codes[i + 16] = (blk[2 + i] >> 4) - 8;
    }
  }
  *dw = fp16_to_fp32(h);
}

// y[t][o] by the formula, for token rows x[t] (stride x_stride).
std::vector<float> reference(GgmlType t, const std::vector<uint8_t>& w, int64_t n_in, int64_t n_out,
                             const std::vector<float>& x, int64_t x_stride, int32_t n_tok) {
  const int planes = t == GgmlType::Q8_0 ? 2 : 1;
  const int64_t nb = n_in / 32;
  const size_t rb = ggml_row_size(t, n_in);
  std::vector<float> y(static_cast<size_t>(n_out * n_tok));
  std::vector<int8_t> q(static_cast<size_t>(2 * n_in));  // [2][n_in]: q1, then q2
  std::vector<float> dx(static_cast<size_t>(nb));
  std::vector<int32_t> sx(static_cast<size_t>(nb));
  std::vector<int32_t> codes(static_cast<size_t>(n_out * n_in));
  std::vector<float> dw(static_cast<size_t>(n_out * nb));
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t b = 0; b < nb; ++b) {
      weight_codes(t, w.data() + o * rb, b, codes.data() + o * n_in + b * 32, &dw[o * nb + b]);
    }
  }
  for (int32_t tok = 0; tok < n_tok; ++tok) {
    simd::quantize_row_q8_reference(x.data() + tok * x_stride, n_in, planes, q.data(), dx.data(),
                                    sx.data());
    for (int64_t o = 0; o < n_out; ++o) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const int32_t* c = codes.data() + o * n_in + b * 32;
        int32_t d1 = 0, d2 = 0;
        for (int i = 0; i < 32; ++i) {
          d1 += c[i] * q[b * 32 + i];
          if (planes == 2) d2 += c[i] * q[n_in + b * 32 + i];
        }
        const int32_t isum = planes == 2 ? simd::kQ8Fine * d1 + d2 : d1;
        const float s = dw[o * nb + b] * dx[b];
        acc = std::fma(static_cast<float>(isum), s, acc);
      }
      y[tok * n_out + o] = acc;
    }
  }
  return y;
}

class CudaMatmulQ8 : public test::CudaStreamTest {
 protected:
  // A random n_out x n_in matrix quantized on the host (rows kept in *bytes) and uploaded.
  WeightMatrix weight(GgmlType t, int64_t n_in, int64_t n_out, uint32_t seed,
                      std::vector<uint8_t>* bytes) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 0.05f);
    std::vector<float> src(static_cast<size_t>(n_in * n_out));
    for (float& v : src) v = d(rng);
    return upload_quantized(t, src, n_in, n_out, bytes);
  }
};

TEST_F(CudaMatmulQ8, EqualsTheCpuFormulaBitwise) {
  struct Shape {
    int64_t n_in, n_out;
  };
  // n_out not multiples of the tiles (16, 64, 128); odd block counts (1, 3, 45, 129); n_in
  // 16384, where the one-token GEMV's shared memory for Q8_0 passes 48 KB (decode_kernel takes
  // it). 3-16 tokens are the mma GEMV (one 8-token tile, two from 9 on, its shared memory past
  // 48 KB from 11), 77 and 300 the prefill kernels.
  const Shape shapes[] = {{32, 5},     {64, 130},  {96, 17},    {1440, 70}, {2048, 129},
                          {4128, 200}, {8192, 33}, {8192, 257}, {16384, 20}};
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    for (const Shape& sh : shapes) {
      std::vector<uint8_t> bytes;
      const WeightMatrix w =
          weight(type, sh.n_in, sh.n_out, 7u + static_cast<uint32_t>(sh.n_in + sh.n_out), &bytes);
      for (const int32_t n_tok : {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 16, 17, 77, 300}) {
        if (sh.n_out > 200 && n_tok > 77) continue;  // host time
        // Aligned rows, and rows that are not 16-byte aligned (the quantizers' scalar loads).
        const int64_t x_stride = sh.n_in + (n_tok % 2 == 0 ? 4 : 1);
        SCOPED_TRACE(std::string(ggml_type_name(type)) + " n_in=" + std::to_string(sh.n_in) +
                     " n_out=" + std::to_string(sh.n_out) + " n_tok=" + std::to_string(n_tok) +
                     " x_stride=" + std::to_string(x_stride));
        const std::vector<float> xh =
            activations(static_cast<size_t>(x_stride * n_tok), 100u + static_cast<uint32_t>(n_tok));
        const std::vector<float> want =
            reference(type, bytes, sh.n_in, sh.n_out, xh, x_stride, n_tok);
        const DeviceVec<float> x(xh);
        DeviceVec<float> y(static_cast<size_t>(n_tok * sh.n_out));
        stream_->matmul(w, x.ptr(), x_stride, n_tok, y.ptr(), sh.n_out);
        const std::vector<float> got = y.download();
        int64_t bad = 0;
        for (size_t i = 0; i < want.size(); ++i) {
          if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ < 5) {
            ADD_FAILURE() << "token " << i / sh.n_out << " out " << i % sh.n_out << ": got "
                          << got[i] << " want " << want[i];
          }
        }
        ASSERT_EQ(bad, 0);
      }
    }
  }
}

// The quantizer's rounding edges through every kernel (n_tok 1 and 2: the GEMV; 3: the 8-token
// decode kernel; 12: prefill): ties (amax = 127, so d = 1 and x / d = k + 1/2 exactly, to be
// rounded to even), signed zeros, and blocks of very large and very small normal magnitude.
TEST_F(CudaMatmulQ8, QuantizerEdgesEqualTheCpuFormula) {
  const int64_t n_out = 37;
  // 8192: a one-token GEMV's block quantizes the row in four rounds of its threads.
  for (const int64_t n_in : {int64_t{256}, int64_t{8192}}) {
    for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      std::vector<uint8_t> bytes;
      const WeightMatrix w = weight(type, n_in, n_out, 91u, &bytes);
      for (const int32_t n_tok : {1, 2, 3, 12}) {
        SCOPED_TRACE(std::string(ggml_type_name(type)) + " n_in=" + std::to_string(n_in) +
                     " n_tok=" + std::to_string(n_tok));
        std::vector<float> xh(static_cast<size_t>(n_in * n_tok));
        for (int32_t t = 0; t < n_tok; ++t) {
          for (int64_t b = 0; b < n_in / 32; ++b) {
            float* v = xh.data() + t * n_in + b * 32;
            const float sign = (b + t) % 2 == 0 ? 1.0f : -1.0f;
            for (int i = 0; i < 32; ++i) {
              switch ((b + t) % 4) {
                case 0:  // ties, and amax = 127 at element 7
                  v[i] = i == 7 ? sign * 127.0f : sign * (static_cast<float>(i) - 15.5f);
                  break;
                case 1:  // +0 / -0 around one value
                  v[i] = i == 5 ? 3.0f : (i % 2 == 0 ? 0.0f : -0.0f);
                  break;
                case 2:
                  v[i] = sign * (static_cast<float>(i) - 15.5f) * 1e30f;
                  break;
                default:
                  v[i] = sign * (static_cast<float>(i) - 15.5f) * 1e-30f;
                  break;
              }
            }
          }
        }
        const std::vector<float> want = reference(type, bytes, n_in, n_out, xh, n_in, n_tok);
        const DeviceVec<float> x(xh);
        DeviceVec<float> y(static_cast<size_t>(n_tok * n_out));
        stream_->matmul(w, x.ptr(), n_in, n_tok, y.ptr(), n_out);
        const std::vector<float> got = y.download();
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
              << "token " << i / n_out << " out " << i % n_out << ": got " << got[i] << " want "
              << want[i];
        }
      }
    }
  }
}

// GEMVs of matrices with thousands of 16-row groups (an output projection) go through the
// kernels whose blocks walk the row groups (one token: gemv_stream_kernel; 3-16 tokens:
// gemv_rows_kernel): the formula's bits for every row, with n_out not a multiple of the groups
// or of the grid, one and several passes per row, and an odd block count.
TEST_F(CudaMatmulQ8, LargeMatrixGemvEqualsTheCpuFormula) {
  struct Shape {
    int64_t n_in, n_out;
  };
  const Shape shapes[] = {{64, 32805}, {2080, 33001}, {4096, 40000}};
  for (const Shape& sh : shapes) {
    std::vector<uint8_t> bytes;
    const WeightMatrix w = weight(GgmlType::Q8_0, sh.n_in, sh.n_out, 5u, &bytes);
    for (const int32_t n_tok : {1, 5, 16}) {
      if (n_tok > 1 && sh.n_in > 2080) continue;  // host time of the reference
      SCOPED_TRACE("n_in=" + std::to_string(sh.n_in) + " n_out=" + std::to_string(sh.n_out) +
                   " n_tok=" + std::to_string(n_tok));
      const std::vector<float> xh = activations(static_cast<size_t>(sh.n_in * n_tok), 17u);
      const std::vector<float> want =
          reference(GgmlType::Q8_0, bytes, sh.n_in, sh.n_out, xh, sh.n_in, n_tok);
      const DeviceVec<float> x(xh);
      DeviceVec<float> y(static_cast<size_t>(sh.n_out * n_tok));
      stream_->matmul(w, x.ptr(), sh.n_in, n_tok, y.ptr(), sh.n_out);
      const std::vector<float> got = y.download();
      int64_t bad = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ < 5) {
          ADD_FAILURE() << "out " << i << ": got " << got[i] << " want " << want[i];
        }
      }
      ASSERT_EQ(bad, 0);
    }
  }
}

// The fused decode launch (q / k / v of a layer) over matrices of both types: each output is
// the formula's, as in a launch of its own; 5, 8, 12 and 16 tokens with the codes' scratch (the
// mma GEMV: one token tile, two) and without it (decode_kernel, 8 tokens a launch).
TEST_F(CudaMatmulQ8, FusedDecodeLaunchEqualsTheFormula) {
  const int64_t n_in = 2048;
  const GgmlType types[3] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q8_0};
  const int64_t n_outs[3] = {300, 64, 48};
  std::vector<uint8_t> bytes[3];
  cuda::MatmulOut outs[3];
  for (const int32_t n_tok : {1, 5, -5, 8, -8, 12, -12, 16, -16}) {
    const bool with_scratch = n_tok > 0;
    const int32_t n_tok_abs = with_scratch ? n_tok : -n_tok;
    SCOPED_TRACE(with_scratch ? "scratch" : "no scratch");
    std::vector<DeviceVec<float>> ys(3);
    const std::vector<float> xh = activations(static_cast<size_t>(n_in * n_tok_abs), 3u);
    const DeviceVec<float> x(xh);
    for (int i = 0; i < 3; ++i) {
      const WeightMatrix w = weight(types[i], n_in, n_outs[i], 40u + i, &bytes[i]);
      ys[i].alloc(static_cast<size_t>(n_tok_abs * n_outs[i]));
      outs[i] = cuda::MatmulOut{w, ys[i].ptr(), n_outs[i]};
      ASSERT_TRUE(cuda::matmul_batchable(w, n_tok_abs));
    }
    const size_t need = cuda::matmul_batch_scratch_bytes(outs[0].w, n_tok_abs);
    EXPECT_EQ(need > 0, n_tok_abs >= 3);
    DeviceVec<uint8_t> scratch(std::max<size_t>(need, 1));
    cudaStream_t s = nullptr;
    GEIST_CUDA_OK(cudaStreamCreate(&s));
    GEIST_CUDA_OK(cuda::matmul_batch(s, outs, 3, x.ptr(), n_in, n_tok_abs,
                                     with_scratch ? scratch.ptr() : nullptr,
                                     with_scratch ? need : 0));
    GEIST_CUDA_OK(cudaStreamSynchronize(s));
    cudaStreamDestroy(s);
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE("matrix " + std::to_string(i) + " n_tok=" + std::to_string(n_tok_abs));
      const std::vector<float> want =
          reference(types[i], bytes[i], n_in, n_outs[i], xh, n_in, n_tok_abs);
      const std::vector<float> got = ys[i].download();
      for (size_t k = 0; k < want.size(); ++k) {
        ASSERT_EQ(std::memcmp(&got[k], &want[k], sizeof(float)), 0)
            << "element " << k << ": got " << got[k] << " want " << want[k];
      }
    }
  }
}

}  // namespace
}  // namespace geist
