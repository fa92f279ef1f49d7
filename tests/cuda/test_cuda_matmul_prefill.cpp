// The tiled prefill matmul (matmul_prefill_cuda.cu) against the decode kernel: every output
// element must be bitwise what matmul() gives its token alone (n_tok = 1 takes the decode
// kernel; test_cuda_matmul_q8 checks both against the CPU's formula), for every tile size, on
// shapes that do not fit the tiles: n_out and n_tok not multiples of 32 / 64 / 128, an odd number
// of chunks, strided and unaligned activation rows, and a scratch that takes the batch in rounds.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/matmul_prefill_cuda.h"
#include "cuda/cuda_test_util.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace geist {
namespace {

using test::DeviceVec;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

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
