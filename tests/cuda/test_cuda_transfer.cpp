// StreamCore::download / upload (cuda_stream_core.cpp), the path of every snapshot and restore
// on the CUDA backend. Every case moves random bytes one way through the stream and checks them
// the other way with a plain cudaMemcpy after cudaDeviceSynchronize, byte for byte: a copy has
// no tolerance. Sizes from 0 to several MiB, odd lengths and unaligned ends.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cuda_stream.h"
#include "cuda/cuda_test_util.h"

namespace geist {
namespace {

using cuda::StreamCore;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng() >> 24);
  return v;
}

// Index of the first differing byte, or -1 when equal (gtest's vector diff prints megabytes).
int64_t first_diff(const uint8_t* a, const uint8_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

class CudaTransfer : public ::testing::Test {
 protected:
  void SetUp() override {
    GEIST_REQUIRE_CUDA();
    core_ = std::make_shared<StreamCore>();
    GEIST_CUDA_OK(cudaStreamCreateWithFlags(&core_->stream, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (core_ && core_->stream != nullptr && expect_ok_) {
      EXPECT_EQ(cudaStreamSynchronize(core_->stream), cudaSuccess);
      EXPECT_TRUE(core_->error.is_ok()) << core_->error.message();
    }
  }

  // n random bytes up through the stream, checked on the device by cudaMemcpy; then other
  // random bytes written by cudaMemcpy, down through the stream and compared. dev_off / host_off
  // shift both ends off any alignment.
  void round_trip(size_t n, uint32_t seed, size_t dev_off = 0, size_t host_off = 0) {
    SCOPED_TRACE("bytes " + std::to_string(n));
    test::DeviceVec<uint8_t> dev(n + dev_off);
    ASSERT_NE(dev.ptr(), nullptr);
    uint8_t* d = dev.ptr() + dev_off;
    std::vector<uint8_t> up(n + host_off);
    const std::vector<uint8_t> a = random_bytes(n, seed);
    std::copy(a.begin(), a.end(), up.begin() + static_cast<ptrdiff_t>(host_off));
    core_->upload(d, up.data() + host_off, n);
    // The caller may reuse its buffer at once: the device must still get the bytes of before.
    std::fill(up.begin(), up.end(), uint8_t{0xA5});
    std::vector<uint8_t> on_dev(n + 1);
    GEIST_CUDA_OK(cudaDeviceSynchronize());
    GEIST_CUDA_OK(cudaMemcpy(on_dev.data(), d, n, cudaMemcpyDeviceToHost));
    EXPECT_EQ(first_diff(on_dev.data(), a.data(), n), -1) << "upload";

    const std::vector<uint8_t> b = random_bytes(n, seed + 1000);
    GEIST_CUDA_OK(cudaMemcpy(d, b.data(), n, cudaMemcpyHostToDevice));
    GEIST_CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint8_t> down(n + host_off + 1, 0x3C);
    core_->download(down.data() + host_off, d, n);
    EXPECT_EQ(first_diff(down.data() + host_off, b.data(), n), -1) << "download";
    for (size_t i = 0; i < host_off; ++i) EXPECT_EQ(down[i], 0x3C) << "wrote before dst";
    EXPECT_EQ(down[n + host_off], 0x3C) << "wrote past dst";
  }

  std::shared_ptr<StreamCore> core_;
  bool expect_ok_ = true;
};

TEST_F(CudaTransfer, RoundTripsOfManySizes) {
  uint32_t seed = 1;
  for (const size_t n : {size_t{0}, size_t{1}, size_t{4095}, size_t{65536}, size_t{65537},
                         (size_t{1} << 20) - 1, size_t{1} << 20, (size_t{3} << 20) + 7}) {
    round_trip(n, seed++);
  }
}

TEST_F(CudaTransfer, UnalignedEnds) {
  round_trip((size_t{64} << 10) * 3 + 5, 7, 3, 5);
  round_trip((size_t{64} << 10) + 1, 8, 1, 7);
  round_trip(100, 9, 5, 3);
}

// Uploads and downloads back to back: a download must see the bytes of every upload before it,
// and the caller's buffer is reusable as soon as an upload returns.
TEST_F(CudaTransfer, InterleavedCopies) {
  const size_t n = 5 * 8192 + (size_t{64} << 10) + 3;
  constexpr int kBufs = 4;
  std::vector<std::unique_ptr<test::DeviceVec<uint8_t>>> dev;
  std::vector<std::vector<uint8_t>> want;
  for (int i = 0; i < kBufs; ++i) {
    dev.push_back(std::make_unique<test::DeviceVec<uint8_t>>(n));
    ASSERT_NE(dev.back()->ptr(), nullptr);
    want.push_back(random_bytes(n, 500 + static_cast<uint32_t>(i)));
  }
  std::vector<uint8_t> host(n);
  for (int round = 0; round < 3; ++round) {
    if (round > 0) {
      for (int i = 0; i < kBufs; ++i) {
        want[static_cast<size_t>(i)] =
            random_bytes(n, 600 + static_cast<uint32_t>(round * kBufs + i));
      }
    }
    for (int i = 0; i < kBufs; ++i) {
      host = want[static_cast<size_t>(i)];
      core_->upload(dev[static_cast<size_t>(i)]->ptr(), host.data(), n);
      std::fill(host.begin(), host.end(), uint8_t{0});
      if (i > 0) {  // the one uploaded before, read back right behind this upload
        core_->download(host.data(), dev[static_cast<size_t>(i - 1)]->ptr(), n);
        ASSERT_EQ(first_diff(host.data(), want[static_cast<size_t>(i - 1)].data(), n), -1)
            << "round " << round << " buffer " << i - 1;
      }
    }
  }
  for (int i = 0; i < kBufs; ++i) {  // the last round's uploads, read back by cudaMemcpy
    const std::vector<uint8_t> got = dev[static_cast<size_t>(i)]->download();
    ASSERT_EQ(got.size(), n);
    EXPECT_EQ(first_diff(got.data(), want[static_cast<size_t>(i)].data(), n), -1) << "buffer " << i;
  }
}

// A copy the runtime refuses (no device memory behind the source) is recorded on the stream
// as the first error, and the destination reads as 0xFF bytes, not as stale data.
TEST_F(CudaTransfer, FailedDownloadIsRecordedAndFilled) {
  expect_ok_ = false;
  const size_t n = (size_t{64} << 10) + 4096 * 3 + 1;
  std::vector<uint8_t> dst(n, 0x11);
  core_->download(dst.data(), nullptr, n);
  EXPECT_FALSE(core_->error.is_ok());
  EXPECT_NE(core_->error.message().find("device to host"), std::string::npos)
      << core_->error.message();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(dst[i], 0xFF) << "byte " << i;
  // Recorded on this stream only: the runtime's last error is left clear for other streams'
  // launch checks on this thread.
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

}  // namespace
}  // namespace geist
