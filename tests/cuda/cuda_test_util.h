// Shared helpers for the CUDA backend tests (tests/cuda).
//
// Every test that needs a GPU starts with GEIST_REQUIRE_CUDA(). Without a device the test is
// skipped, and at the end of the run one loud line counts the skips, so a CI machine with nvcc
// but no GPU shows plainly that nothing GPU-side was exercised. With GEIST_REQUIRE_CUDA=1 in
// the environment a missing device is a test failure instead (for the GPU runner).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_stream.h"
#include "kernels/quant.h"

namespace geist::test {

inline int& cuda_skip_counter() {
  static int n = 0;  // test-process-wide count of GPU tests skipped for lack of a device
  return n;
}

inline int cuda_devices() {
  static const int n = ::geist::cuda_device_count_impl();
  return n;
}

inline bool cuda_required() {
  const char* v = std::getenv("GEIST_REQUIRE_CUDA");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// Prints the loud line after all tests ran (gtest calls TearDown at the end of RUN_ALL_TESTS).
class CudaSkipReporter : public ::testing::Environment {
 public:
  void TearDown() override {
    if (cuda_skip_counter() > 0) {
      std::fprintf(stderr, "\n*** SKIPPED: no CUDA device — %d CUDA test(s) skipped ***\n\n",
                   cuda_skip_counter());
    }
  }
};

// Registered once per test binary (inline variable), before main runs.
inline const bool kCudaSkipReporterRegistered =
    (::testing::AddGlobalTestEnvironment(new CudaSkipReporter), true);

// Fails the current test with the CUDA error string when st != cudaSuccess.
#define GEIST_CUDA_OK(call)                                      \
  do {                                                           \
    const cudaError_t geist_cuda_err_ = (call);                  \
    ASSERT_EQ(geist_cuda_err_, cudaSuccess)                      \
        << #call << ": " << cudaGetErrorString(geist_cuda_err_); \
  } while (0)

// A device array of T, freed on destruction. Copies are synchronous (tests only).
template <typename T>
class DeviceVec {
 public:
  DeviceVec() = default;
  explicit DeviceVec(size_t n) { alloc(n); }
  explicit DeviceVec(const std::vector<T>& host) {
    alloc(host.size());
    upload(host);
  }
  ~DeviceVec() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;

  // Zero-filled; records a gtest failure (and leaves ptr() null) when the allocation fails.
  void alloc(size_t n) {
    n_ = n;
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, n == 0 ? 1 : n * sizeof(T));
    if (e != cudaSuccess) {
      ADD_FAILURE() << "cudaMalloc(" << n * sizeof(T) << "): " << cudaGetErrorString(e);
      return;
    }
    p_ = static_cast<T*>(p);
    const cudaError_t z = cudaMemset(p_, 0, n == 0 ? 1 : n * sizeof(T));
    if (z != cudaSuccess) ADD_FAILURE() << "cudaMemset: " << cudaGetErrorString(z);
  }
  void upload(const std::vector<T>& host) {
    EXPECT_LE(host.size(), n_);
    const cudaError_t e =
        cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) ADD_FAILURE() << "cudaMemcpy H2D: " << cudaGetErrorString(e);
    // A pageable cudaMemcpy may return before the DMA lands, and the backend's streams are
    // non-blocking (not ordered after the legacy stream): wait before anyone reads it.
    const cudaError_t s = cudaDeviceSynchronize();
    if (s != cudaSuccess) ADD_FAILURE() << "cudaDeviceSynchronize: " << cudaGetErrorString(s);
  }
  // Waits for all device work first, so results of asynchronous launches are complete.
  std::vector<T> download() const {
    std::vector<T> host(n_);
    const cudaError_t s = cudaDeviceSynchronize();
    if (s != cudaSuccess) ADD_FAILURE() << "cudaDeviceSynchronize: " << cudaGetErrorString(s);
    const cudaError_t e = cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) ADD_FAILURE() << "cudaMemcpy D2H: " << cudaGetErrorString(e);
    return host;
  }
  T* ptr() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// A CUDA backend and one stream on it; records a test failure (and leaves them null) on error.
inline void make_cuda_backend(std::unique_ptr<Backend>* backend, std::unique_ptr<Stream>* stream) {
  const Status st = ::geist::create_cuda_backend(backend);
  if (!st.is_ok()) {
    ADD_FAILURE() << "create_cuda_backend: " << st.message();
    return;
  }
  const Status ss = (*backend)->new_stream(stream);
  if (!ss.is_ok()) ADD_FAILURE() << "new_stream: " << ss.message();
}

template <typename T>
std::vector<T> from_device(const T* dev, size_t n) {
  std::vector<T> host(n);
  const cudaError_t s = cudaDeviceSynchronize();
  if (s != cudaSuccess) ADD_FAILURE() << "cudaDeviceSynchronize: " << cudaGetErrorString(s);
  const cudaError_t e = cudaMemcpy(host.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) ADD_FAILURE() << "cudaMemcpy D2H: " << cudaGetErrorString(e);
  return host;
}

// n uniform floats in [lo, hi) from a fixed seed.
inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace geist::test

// Skips the current test (counted for the loud line) when there is no CUDA device; fails it
// instead under GEIST_REQUIRE_CUDA=1.
#define GEIST_REQUIRE_CUDA()                                                             \
  do {                                                                                   \
    if (::geist::test::cuda_devices() == 0) {                                            \
      if (::geist::test::cuda_required()) {                                              \
        FAIL() << "a CUDA device is required (GEIST_REQUIRE_CUDA=1) but none was found"; \
      }                                                                                  \
      ++::geist::test::cuda_skip_counter();                                              \
      GTEST_SKIP() << "no CUDA device";                                                  \
    }                                                                                    \
  } while (0)

namespace geist::test {

// Fixture base of the tests that drive one CUDA stream directly: skips without a device, and
// fails a test whose stream recorded a CUDA error.
class CudaStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GEIST_REQUIRE_CUDA();
    make_cuda_backend(&backend_, &stream_);
    ASSERT_TRUE(backend_ && stream_);
  }
  void TearDown() override {
    if (stream_) {
      const Status st = cuda::cuda_stream_status(*stream_);
      EXPECT_TRUE(st.is_ok()) << "stream recorded a CUDA failure: " << st.message();
    }
  }
  // src ([n_out][n_in] floats) quantized to t on the host (rows kept in *bytes, which must
  // outlive the upload) and uploaded the way a model's weights are (repacked where the
  // backend does).
  WeightMatrix upload_quantized(GgmlType t, const std::vector<float>& src, int64_t n_in,
                                int64_t n_out, std::vector<uint8_t>* bytes) {
    const size_t rb = ggml_row_size(t, n_in);
    bytes->resize(rb * static_cast<size_t>(n_out));
    for (int64_t o = 0; o < n_out; ++o) {
      quantize_row(t, src.data() + o * n_in, bytes->data() + o * rb, n_in);
    }
    WeightMatrix dev;
    const Status st =
        backend_->upload_weight(WeightMatrix{t, bytes->data(), n_in, n_out, rb}, &dev);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return dev;
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Stream> stream_;
};

// n normal floats of standard deviation sd (seeded: the same every run).
inline std::vector<float> randn(size_t n, uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// u and v have the same length and bits (a fused launch against the launches it replaces).
inline void expect_bits_equal(const std::vector<float>& u, const std::vector<float>& v,
                              const char* what) {
  ASSERT_EQ(u.size(), v.size());
  for (size_t i = 0; i < u.size(); ++i) {
    ASSERT_EQ(std::memcmp(&u[i], &v[i], sizeof(float)), 0)
        << what << " element " << i << ": " << u[i] << " vs " << v[i];
  }
}

}  // namespace geist::test
