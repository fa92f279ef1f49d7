// The tiled prefill matmul (matmul_prefill_cuda.cu) against the decode kernel: every output
// element must be bitwise what matmul() gives its token alone (n_tok = 1 takes the decode
// kernel; test_cuda_matmul_q8 checks both against the CPU's formula), for every tile size, on
// shapes that do not fit the tiles: n_out and n_tok not multiples of 32 / 64 / 128, an odd number
// of chunks, strided and unaligned activation rows, and a scratch that takes the batch in rounds.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
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
      for (const cuda::PrefillTile tile : {cuda::PrefillTile::LARGE, cuda::PrefillTile::TINY,
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
        GEIST_CUDA_OK(cuda::matmul_prefill(s_, w, x.ptr(), sh.n_in, n_tok, y.ptr(), sh.n_out,
                                           ws.ptr(), ws_bytes));
        cudaEvent_t e0 = nullptr, e1 = nullptr;
        GEIST_CUDA_OK(cudaEventCreate(&e0));
        GEIST_CUDA_OK(cudaEventCreate(&e1));
        const int reps = 10;
        GEIST_CUDA_OK(cudaEventRecord(e0, s_));
        for (int r = 0; r < reps; ++r) {
          GEIST_CUDA_OK(cuda::matmul_prefill(s_, w, x.ptr(), sh.n_in, n_tok, y.ptr(), sh.n_out,
                                             ws.ptr(), ws_bytes));
        }
        GEIST_CUDA_OK(cudaEventRecord(e1, s_));
        GEIST_CUDA_OK(cudaEventSynchronize(e1));
        float ms = 0.0f;
        GEIST_CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        const double us = 1e3 * ms / reps;
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
