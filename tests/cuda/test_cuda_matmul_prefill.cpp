// The tiled prefill matmul (matmul_prefill_cuda.cu) against the decode kernel: every output
// element must be bitwise what matmul() gives its token alone (n_tok = 1 takes the decode
// kernel; test_cuda_matmul_q8 checks both against the CPU's formula), for every tile size, on
// shapes that do not fit the tiles: n_out and n_tok not multiples of 32 / 64 / 128, an odd number
// of chunks, strided and unaligned activation rows, and a scratch that takes the batch in rounds.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/matmul_prefill_cuda.h"
#include "cuda/cuda_test_util.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace geist {
namespace {

using test::DeviceVec;

using test::random_floats;

class CudaMatmulPrefill : public test::CudaStreamTest {
 protected:
  void SetUp() override {
    test::CudaStreamTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    GEIST_CUDA_OK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (s_ != nullptr) cudaStreamDestroy(s_);
    test::CudaStreamTest::TearDown();
  }
  // A random n_out x n_in matrix quantized on the host, uploaded (repacked where the backend
  // does); bytes keeps the host rows alive for the upload.
  WeightMatrix weight(GgmlType t, int64_t n_in, int64_t n_out, uint32_t seed,
                      std::vector<uint8_t>* bytes) {
    return upload_quantized(t, random_floats(static_cast<size_t>(n_in * n_out), seed), n_in, n_out,
                            bytes);
  }
  // y[t] = matmul of token t alone (the decode kernels), rows [n_tok][y_stride].
  std::vector<float> per_token(const WeightMatrix& w, const DeviceVec<float>& x, int64_t x_stride,
                               int32_t n_tok, int64_t y_stride) {
    DeviceVec<float> y(static_cast<size_t>(n_tok * y_stride));
    for (int32_t t = 0; t < n_tok; ++t) {
      stream_->matmul(w, x.ptr() + t * x_stride, x_stride, 1, y.ptr() + t * y_stride, y_stride);
    }
    return y.download();
  }
  cudaStream_t s_ = nullptr;
};

TEST_F(CudaMatmulPrefill, EqualsDecodeKernelsBitwiseOnAwkwardShapes) {
  struct Shape {
    int64_t n_in, n_out, x_stride;
  };
  // 3 chunks: one part, odd; 45 chunks: 16 parts, odd; 72 chunks: 16 parts. x_stride n_in + 1
  // makes rows unaligned (the scalar load path).
  const Shape shapes[] = {{96, 70, 96}, {1440, 200, 1441}, {2304, 131, 2308}, {1440, 64, 1440}};
  const int32_t max_tok = 300;
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    for (const Shape& sh : shapes) {
      SCOPED_TRACE(std::string(ggml_type_name(type)) + " n_in=" + std::to_string(sh.n_in) +
                   " n_out=" + std::to_string(sh.n_out) +
                   " x_stride=" + std::to_string(sh.x_stride));
      std::vector<uint8_t> bytes;
      const WeightMatrix w =
          weight(type, sh.n_in, sh.n_out, 11u + static_cast<uint32_t>(sh.n_in), &bytes);
      const DeviceVec<float> x(random_floats(static_cast<size_t>(sh.x_stride * max_tok), 5));
      const int64_t y_stride = sh.n_out + 3;
      const std::vector<float> want = per_token(w, x, sh.x_stride, max_tok, y_stride);
      for (const cuda::PrefillTile tile :
           {cuda::PrefillTile::LARGE, cuda::PrefillTile::MEDIUM, cuda::PrefillTile::TINY,
            cuda::PrefillTile::SMALL, cuda::PrefillTile::AUTO}) {
        for (const int32_t n_tok : {9, 17, 100, 300}) {
          SCOPED_TRACE("tile " + std::to_string(static_cast<int>(tile)) +
                       " n_tok=" + std::to_string(n_tok));
          DeviceVec<float> y(static_cast<size_t>(n_tok * y_stride));
          // n_tok = 100 with room for 37 tokens: three rounds.
          const int32_t room = n_tok == 100 ? 37 : n_tok;
          const size_t ws_bytes = cuda::matmul_prefill_scratch_bytes(type, sh.n_in, room);
          DeviceVec<uint8_t> ws(ws_bytes);
          GEIST_CUDA_OK(cuda::matmul_prefill(s_, w, x.ptr(), sh.x_stride, n_tok, y.ptr(), y_stride,
                                             ws.ptr(), ws_bytes, tile));
          const std::vector<float> got = y.download();
          for (int32_t t = 0; t < n_tok; ++t) {
            for (int64_t o = 0; o < sh.n_out; ++o) {
              ASSERT_EQ(got[t * y_stride + o], want[t * y_stride + o])
                  << "token " << t << " out " << o;
            }
          }
        }
      }
    }
  }
}

// Several weights over the same activations (one quantization per round, as the stream's held
// q / k / v and gate / up take them): each output bitwise what its token alone gives.
TEST_F(CudaMatmulPrefill, BatchOfWeightsSharesTheQuantizationBitwise) {
  const int64_t n_in = 1440, x_stride = 1441;  // 45 chunks: odd; unaligned rows
  const int64_t n_outs[] = {200, 64, 131};
  const int32_t max_tok = 300;
  const DeviceVec<float> x(random_floats(static_cast<size_t>(x_stride * max_tok), 21));
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    std::vector<uint8_t> bytes[3];
    std::vector<cuda::MatmulOut> outs;
    std::vector<std::unique_ptr<DeviceVec<float>>> ys;
    std::vector<std::vector<float>> want;
    for (int i = 0; i < 3; ++i) {
      const WeightMatrix w =
          weight(type, n_in, n_outs[i], 31u + static_cast<uint32_t>(i), &bytes[i]);
      const int64_t y_stride = n_outs[i] + 2 * i;
      ys.push_back(std::make_unique<DeviceVec<float>>(static_cast<size_t>(max_tok * y_stride)));
      outs.push_back(cuda::MatmulOut{w, ys.back()->ptr(), y_stride});
      want.push_back(per_token(w, x, x_stride, max_tok, y_stride));
    }
    for (const int32_t n_tok : {9, 100, 300}) {
      SCOPED_TRACE(std::string(ggml_type_name(type)) + " n_tok=" + std::to_string(n_tok));
      const int32_t room = n_tok == 100 ? 37 : n_tok;  // three rounds
      const size_t ws_bytes = cuda::matmul_prefill_scratch_bytes(type, n_in, room);
      DeviceVec<uint8_t> ws(ws_bytes);
      GEIST_CUDA_OK(cuda::matmul_prefill_batch(s_, outs.data(), 3, x.ptr(), x_stride, n_tok,
                                               ws.ptr(), ws_bytes));
      for (int i = 0; i < 3; ++i) {
        const std::vector<float> got = ys[static_cast<size_t>(i)]->download();
        for (int32_t t = 0; t < n_tok; ++t) {
          for (int64_t o = 0; o < n_outs[i]; ++o) {
            const size_t at = static_cast<size_t>(t * outs[i].y_stride + o);
            ASSERT_EQ(got[at], want[static_cast<size_t>(i)][at])
                << "weight " << i << " token " << t << " out " << o;
          }
        }
      }
    }
  }
  // Mixed types or widths cannot share one quantization.
  std::vector<uint8_t> b1, b2;
  const cuda::MatmulOut mixed[] = {{weight(GgmlType::Q8_0, 96, 8, 1u, &b1), nullptr, 8},
                                   {weight(GgmlType::Q4_0, 96, 8, 2u, &b2), nullptr, 8}};
  DeviceVec<uint8_t> ws(cuda::matmul_prefill_scratch_bytes(GgmlType::Q8_0, 96, 16));
  EXPECT_EQ(cuda::matmul_prefill_batch(s_, mixed, 2, x.ptr(), 96, 16, ws.ptr(),
                                       cuda::matmul_prefill_scratch_bytes(GgmlType::Q8_0, 96, 16)),
            cudaErrorInvalidValue);
}

// Gate and up in one launch with swiglu taken in registers: the outputs bitwise the separate
// matmuls (each token alone) and swiglu(), for every tile, awkward shapes (columns not a
// multiple of a block's, an odd chunk count, unaligned rows, rounds) and out apart from, or
// equal to, gate or up.
TEST_F(CudaMatmulPrefill, SwigluOfGateAndUpEqualsSeparateLaunchesBitwise) {
  struct Shape {
    int64_t n_in, n_out, x_stride;
  };
  const Shape shapes[] = {{96, 70, 96}, {1440, 200, 1441}, {2048, 520, 2048}};
  const int32_t max_tok = 300;
  for (const Shape& sh : shapes) {
    SCOPED_TRACE("n_in=" + std::to_string(sh.n_in) + " n_out=" + std::to_string(sh.n_out));
    std::vector<uint8_t> bg, bu;
    const WeightMatrix wg = weight(GgmlType::Q8_0, sh.n_in, sh.n_out, 41u, &bg);
    const WeightMatrix wu = weight(GgmlType::Q8_0, sh.n_in, sh.n_out, 43u, &bu);
    ASSERT_TRUE(cuda::matmul_prefill_swiglu_ok(wg, wu));
    const DeviceVec<float> x(random_floats(static_cast<size_t>(sh.x_stride * max_tok), 17));
    const int64_t ys = sh.n_out + 3;
    const std::vector<float> want_g = per_token(wg, x, sh.x_stride, max_tok, ys);
    const std::vector<float> want_u = per_token(wu, x, sh.x_stride, max_tok, ys);
    std::vector<float> want_sw(want_g.size());
    {
      const DeviceVec<float> g(want_g), u(want_u);
      DeviceVec<float> o(want_g.size());
      GEIST_CUDA_OK(
          cuda::swiglu(s_, g.ptr(), u.ptr(), o.ptr(), static_cast<int64_t>(want_g.size())));
      want_sw = o.download();
    }
    for (const cuda::PrefillTile tile :
         {cuda::PrefillTile::LARGE, cuda::PrefillTile::MEDIUM, cuda::PrefillTile::SMALL,
          cuda::PrefillTile::TINY, cuda::PrefillTile::AUTO}) {
      for (const int32_t n_tok : {9, 100, 300}) {
        for (const int where : {0, 1, 2}) {  // out apart, out = gate, out = up
          SCOPED_TRACE("tile " + std::to_string(static_cast<int>(tile)) +
                       " n_tok=" + std::to_string(n_tok) + " out " + std::to_string(where));
          DeviceVec<float> g(static_cast<size_t>(max_tok * ys)),
              u(static_cast<size_t>(max_tok * ys));
          DeviceVec<float> apart(static_cast<size_t>(max_tok * ys));
          float* out = where == 0 ? apart.ptr() : (where == 1 ? g.ptr() : u.ptr());
          const int32_t room = n_tok == 100 ? 37 : n_tok;
          const size_t ws_bytes = cuda::matmul_prefill_scratch_bytes(GgmlType::Q8_0, sh.n_in, room);
          DeviceVec<uint8_t> ws(ws_bytes);
          GEIST_CUDA_OK(cuda::matmul_prefill_swiglu(s_, {wg, g.ptr(), ys}, {wu, u.ptr(), ys},
                                                    x.ptr(), sh.x_stride, n_tok, out, ys, ws.ptr(),
                                                    ws_bytes, tile));
          const std::vector<float> got_g = g.download(), got_u = u.download();
          const std::vector<float> got_o =
              where == 0 ? apart.download() : (where == 1 ? got_g : got_u);
          for (int32_t t = 0; t < n_tok; ++t) {
            for (int64_t c = 0; c < sh.n_out; ++c) {
              const size_t at = static_cast<size_t>(t * ys + c);
              ASSERT_EQ(got_o[at], want_sw[at]) << "swiglu token " << t << " col " << c;
              if (where != 1) {
                ASSERT_EQ(got_g[at], want_g[at]) << "gate token " << t << " col " << c;
              }
              if (where != 2) {
                ASSERT_EQ(got_u[at], want_u[at]) << "up token " << t << " col " << c;
              }
            }
          }
        }
      }
    }
  }
  std::vector<uint8_t> b1, b2;
  EXPECT_FALSE(cuda::matmul_prefill_swiglu_ok(weight(GgmlType::Q8_0, 96, 8, 1u, &b1),
                                              weight(GgmlType::Q8_0, 96, 16, 2u, &b2)));
}

// *us: mean time of `reps` calls of matmul_prefill with `tile` after one warm-up call (void:
// the gtest assertions inside return on failure).
void time_prefill(cudaStream_t s, const WeightMatrix& w, const float* x, int32_t n_tok, float* y,
                  void* ws, size_t ws_bytes, cuda::PrefillTile tile, int reps, double* us) {
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  GEIST_CUDA_OK(cuda::matmul_prefill(s, w, x, w.n_in, n_tok, y, w.n_out, ws, ws_bytes, tile));
  GEIST_CUDA_OK(cudaEventCreate(&e0));
  GEIST_CUDA_OK(cudaEventCreate(&e1));
  GEIST_CUDA_OK(cudaEventRecord(e0, s));
  for (int r = 0; r < reps; ++r) {
    GEIST_CUDA_OK(cuda::matmul_prefill(s, w, x, w.n_in, n_tok, y, w.n_out, ws, ws_bytes, tile));
  }
  GEIST_CUDA_OK(cudaEventRecord(e1, s));
  GEIST_CUDA_OK(cudaEventSynchronize(e1));
  float ms = 0.0f;
  GEIST_CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  *us = 1e3 * ms / reps;
}

// Every Q8_0 tile on the projection shapes of llama-1b and qwen35-0.8b at micro-batches of
// 128, 256, 512 and 2048 tokens: the time of each (printed, the data AUTO's estimate is fitted to),
// and sampled tokens of each bitwise against the decode kernels.
TEST_F(CudaMatmulPrefill, Q8TilesTimedOnModelShapesAndSampledBitwise) {
  struct Shape {
    int64_t n_in, n_out;
  };
  const Shape shapes[] = {{2048, 2048}, {2048, 512},  {2048, 8192}, {8192, 2048},
                          {1024, 32},   {1024, 1024}, {1024, 2048}, {1024, 3584},
                          {1024, 4096}, {1024, 6144}, {3584, 1024}, {2048, 1024}};
  const cuda::PrefillTile tiles[] = {cuda::PrefillTile::LARGE, cuda::PrefillTile::MEDIUM,
                                     cuda::PrefillTile::SMALL, cuda::PrefillTile::TINY,
                                     cuda::PrefillTile::AUTO};
  const char* names[] = {"LARGE", "MEDIUM", "SMALL", "TINY", "AUTO"};
  for (const Shape& sh : shapes) {
    std::vector<uint8_t> bytes;
    const WeightMatrix w = weight(GgmlType::Q8_0, sh.n_in, sh.n_out, 7u, &bytes);
    const int32_t max_tok = 2048;
    const DeviceVec<float> x(random_floats(static_cast<size_t>(sh.n_in * max_tok), 13));
    const int32_t samples[] = {0, 1, 63, 64, 127, 255, 511, 2047};
    std::vector<std::vector<float>> want;
    for (const int32_t t : samples) {
      DeviceVec<float> one(static_cast<size_t>(sh.n_out));
      stream_->matmul(w, x.ptr() + t * sh.n_in, sh.n_in, 1, one.ptr(), sh.n_out);
      want.push_back(one.download());
    }
    for (const int32_t n_tok : {128, 256, 512, 2048}) {
      DeviceVec<float> y(static_cast<size_t>(sh.n_out * n_tok));
      const size_t ws_bytes = cuda::matmul_prefill_scratch_bytes(GgmlType::Q8_0, sh.n_in, n_tok);
      DeviceVec<uint8_t> ws(ws_bytes);
      std::printf("q8_0 %5lld x %5lld n_tok=%4d:", static_cast<long long>(sh.n_out),
                  static_cast<long long>(sh.n_in), n_tok);
      for (int k = 0; k < 5; ++k) {
        SCOPED_TRACE(std::string(names[k]) + " " + std::to_string(sh.n_in) + "->" +
                     std::to_string(sh.n_out) + " n_tok=" + std::to_string(n_tok));
        double us = 0.0;
        time_prefill(s_, w, x.ptr(), n_tok, y.ptr(), ws.ptr(), ws_bytes, tiles[k], 20, &us);
        ASSERT_FALSE(HasFatalFailure());
        const double tops = 2.0 * static_cast<double>(sh.n_in * sh.n_out) * n_tok / (us * 1e6);
        std::printf("  %s %.1f us %.0f TOPS", names[k], us, tops);
        const std::vector<float> got = y.download();
        for (size_t i = 0; i < std::size(samples); ++i) {
          if (samples[i] >= n_tok) continue;
          for (int64_t o = 0; o < sh.n_out; ++o) {
            ASSERT_EQ(got[samples[i] * sh.n_out + o], want[i][o])
                << "token " << samples[i] << " out " << o;
          }
        }
      }
      std::printf("\n");
    }
  }
}

// The llama-1b projection shapes at the benchmark batch sizes: the kernel's time (printed, for
// the record), and sampled tokens bitwise against the decode kernels.
TEST_F(CudaMatmulPrefill, LlamaShapesTimedAndSampledBitwise) {
  struct Shape {
    int64_t n_in, n_out;
  };
  const Shape shapes[] = {{2048, 2048}, {2048, 512}, {2048, 8192}, {8192, 2048}};
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    for (const Shape& sh : shapes) {
      std::vector<uint8_t> bytes;
      const WeightMatrix w = weight(type, sh.n_in, sh.n_out, 3u, &bytes);
      for (const int32_t n_tok : {512, 2048}) {
        SCOPED_TRACE(std::string(ggml_type_name(type)) + " " + std::to_string(sh.n_in) + "->" +
                     std::to_string(sh.n_out) + " n_tok=" + std::to_string(n_tok));
        const DeviceVec<float> x(random_floats(static_cast<size_t>(sh.n_in * n_tok), 9));
        DeviceVec<float> y(static_cast<size_t>(sh.n_out * n_tok));
        const size_t ws_bytes = cuda::matmul_prefill_scratch_bytes(type, sh.n_in, n_tok);
        DeviceVec<uint8_t> ws(ws_bytes);
        double us = 0.0;
        time_prefill(s_, w, x.ptr(), n_tok, y.ptr(), ws.ptr(), ws_bytes, cuda::PrefillTile::AUTO,
                     10, &us);
        ASSERT_FALSE(HasFatalFailure());
        const double tflops = 2.0 * static_cast<double>(sh.n_in * sh.n_out) * n_tok / (us * 1e6);
        std::printf("prefill matmul %s %lldx%lld n_tok=%d: %.1f us, %.1f TOPS (useful)\n",
                    ggml_type_name(type), static_cast<long long>(sh.n_out),
                    static_cast<long long>(sh.n_in), n_tok, us, tflops);
        const std::vector<float> got = y.download();
        for (const int32_t t : {0, 1, 127, 128, n_tok - 1}) {
          DeviceVec<float> one(static_cast<size_t>(sh.n_out));
          stream_->matmul(w, x.ptr() + t * sh.n_in, sh.n_in, 1, one.ptr(), sh.n_out);
          const std::vector<float> want = one.download();
          for (int64_t o = 0; o < sh.n_out; ++o) {
            ASSERT_EQ(got[t * sh.n_out + o], want[o]) << "token " << t << " out " << o;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace geist
