// The device-buffer snapshot path, exercised without a GPU: the cpu-devlocal backend keeps
// every state buffer unmapped except inside its ops and its upload/download calls, so these
// tests fail (fault) if snapshot or restore reached state memory any other way. Its kernels
// are the CPU's, so images and continuations must be bitwise those of the cpu backend, and
// an image moves between the two backends in both directions.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "backends/backend.h"
#include "kv/kv_cache.h"
#include "snapshot/snapshot_util.h"

namespace geist::test {
namespace {

constexpr int kSteps = 40;

std::vector<int32_t> prompt(uint32_t seed, int n) {
  std::mt19937 g(seed);
  std::vector<int32_t> t{1};
  for (int i = 1; i < n; ++i) t.push_back(static_cast<int32_t>(3 + g() % 500));
  return t;
}

TEST(DeviceLocalBackend, StateIsUnreachableOutsideTheBackend) {
  std::unique_ptr<Backend> b;
  ASSERT_TRUE(create_backend(BackendKind::CPU_DEVICE_LOCAL, &b));
  std::unique_ptr<Stream> s;
  ASSERT_TRUE(b->new_stream(&s));
  std::unique_ptr<Buffer> buf;
  ASSERT_TRUE(s->alloc(64, &buf));
  const uint8_t src[4] = {1, 2, 3, 4};
  s->upload(buf->data(), src, 4);
  uint8_t back[4] = {};
  s->download(back, buf->data(), 4);
  EXPECT_EQ(std::vector<uint8_t>(back, back + 4), std::vector<uint8_t>(src, src + 4));
  {
    StreamScope scope(*s);  // inside the backend's span the memory is reachable
    EXPECT_EQ(buf->data()[2], 3);
  }
  volatile uint8_t* p = buf->data();
  EXPECT_DEATH({ (void)p[0]; }, "");  // outside it, any access faults
}

using Param = SnapshotParam;

class DeviceLocalSnapshot : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    GEIST_REQUIRE_FIXTURES();
    cpu_ = load_model(std::get<0>(GetParam()), GEIST_BACKEND_CPU);
    dev_ = load_model(std::get<0>(GetParam()), GEIST_BACKEND_CPU_DEVICE_LOCAL);
    ASSERT_TRUE(cpu_ && dev_);
    nv_ = cpu_.n_vocab();
  }
  SessionHandle session(const ModelHandle& m) {
    return make_session(m, std::get<1>(GetParam()), std::get<2>(GetParam()));
  }
  ModelHandle cpu_, dev_;
  int32_t nv_ = 0;
};

TEST_P(DeviceLocalSnapshot, ImagesAndContinuationsMatchTheCpuBackend) {
  const std::vector<int32_t> p = prompt(5, 45);
  SessionHandle ref = session(cpu_);
  ASSERT_EQ(ref.prefill(p), GEIST_OK) << ref.last_error();
  std::vector<uint8_t> cpu_img;
  ASSERT_EQ(ref.snapshot(&cpu_img), GEIST_OK) << ref.last_error();
  const Trace ref_trace = run_steps(ref, nv_, kSteps);

  SessionHandle d = session(dev_);
  ASSERT_EQ(d.prefill(p), GEIST_OK) << d.last_error();
  std::vector<uint8_t> dev_img;
  ASSERT_EQ(d.snapshot(&dev_img), GEIST_OK) << d.last_error();
  EXPECT_EQ(dev_img, cpu_img) << "the image depends on where the state lived";
  EXPECT_TRUE(same_continuation(ref_trace, 0, run_steps(d, nv_, kSteps), nv_));

  // Device-local restore of the CPU image, into a used session, continues bitwise.
  ASSERT_EQ(d.restore(cpu_img), GEIST_OK) << d.last_error();
  EXPECT_TRUE(same_continuation(ref_trace, 0, run_steps(d, nv_, kSteps), nv_));

  // And the reverse: the device-local image restores on the CPU backend.
  SessionHandle c = session(cpu_);
  ASSERT_EQ(c.restore(dev_img), GEIST_OK) << c.last_error();
  EXPECT_TRUE(same_continuation(ref_trace, 0, run_steps(c, nv_, kSteps), nv_));
}

TEST_P(DeviceLocalSnapshot, FailedRestoreLeavesTheSessionUntouched) {
  const std::vector<int32_t> p = prompt(6, 33);
  SessionHandle ref = session(dev_);
  ASSERT_EQ(ref.prefill(p), GEIST_OK);
  std::vector<uint8_t> img;
  ASSERT_EQ(ref.snapshot(&img), GEIST_OK);
  const Trace ref_trace = run_steps(ref, nv_, kSteps);

  SessionHandle d = session(dev_);
  ASSERT_EQ(d.prefill(p), GEIST_OK);
  std::vector<uint8_t> bad = img;
  bad[bad.size() / 2] ^= 0x20;  // inside the state bytes: the checksum must refuse it
  EXPECT_EQ(d.restore(bad), GEIST_E_FORMAT);
  EXPECT_TRUE(same_continuation(ref_trace, 0, run_steps(d, nv_, kSteps), nv_));
}

// Row layout, quantized rows and KIVI groups + residual; attention-only and hybrid models.
INSTANTIATE_TEST_SUITE_P(Models, DeviceLocalSnapshot,
                         ::testing::Combine(::testing::Values("models/stories260K.gguf",
                                                              "models/stories-qwen35-f32.gguf"),
                                            ::testing::Values(static_cast<int32_t>(KvMode::F16),
                                                              static_cast<int32_t>(KvMode::Q4),
                                                              static_cast<int32_t>(KvMode::KIVI2)),
                                            ::testing::Bool()),
                         snapshot_param_name);

}  // namespace
}  // namespace geist::test
