// The device-buffer snapshot path, exercised without a GPU: the cpu-devlocal backend keeps
// every state buffer unmapped except inside its ops and its upload/download calls, so these
// tests fail (fault) if snapshot or restore reached state memory any other way. Its kernels
// are the CPU's, so images and continuations must be bitwise those of the cpu backend, and
// an image moves between the two backends in both directions.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "api/handles.h"
#include "backends/backend.h"
#include "backends/cpu_backend.h"
#include "kv/kv_cache.h"
#include "snapshot/snapshot_util.h"

namespace geist::test {
namespace {

constexpr int kDevLocalSteps = 40;

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

// The failure switch behind the failed-device tests: a device-local backend's streams report
// it (status, downloads of 0xFF, no uploads), streams made before it included; a plain CPU
// backend refuses it.
TEST(DeviceLocalBackend, AFailedDeviceFailsEveryStreamOfIt) {
  std::unique_ptr<Backend> cpu, b;
  ASSERT_TRUE(create_backend(BackendKind::CPU, &cpu));
  EXPECT_EQ(cpu_devlocal_fail(*cpu, 0, "x").code(), GEIST_E_INVALID_ARG);
  ASSERT_TRUE(create_backend(BackendKind::CPU_DEVICE_LOCAL, &b));
  std::unique_ptr<Stream> s;
  ASSERT_TRUE(b->new_stream(&s));
  std::unique_ptr<Buffer> buf;
  ASSERT_TRUE(s->alloc(16, &buf));
  const uint8_t src[4] = {1, 2, 3, 4};
  s->upload(buf->data(), src, 4);
  EXPECT_TRUE(s->status().is_ok());
  ASSERT_TRUE(cpu_devlocal_fail(*b, 0, "lost the device").is_ok());
  EXPECT_EQ(s->status().code(), GEIST_E_BACKEND);
  EXPECT_NE(s->status().message().find("lost the device"), std::string::npos);
  const uint8_t other[4] = {9, 9, 9, 9};
  s->upload(buf->data(), other, 4);  // copies nothing
  uint8_t back[4] = {};
  s->download(back, buf->data(), 4);
  EXPECT_EQ(std::vector<uint8_t>(back, back + 4), std::vector<uint8_t>(4, 0xFF));
  {
    StreamScope scope(*s);
    EXPECT_EQ(buf->data()[3], 4) << "the upload after the failure wrote";
  }
  std::unique_ptr<Stream> later;
  ASSERT_TRUE(b->new_stream(&later));
  EXPECT_EQ(later->status().code(), GEIST_E_BACKEND);
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
  const Trace ref_trace = run_steps(ref, nv_, kDevLocalSteps);

  SessionHandle d = session(dev_);
  ASSERT_EQ(d.prefill(p), GEIST_OK) << d.last_error();
  std::vector<uint8_t> dev_img;
  ASSERT_EQ(d.snapshot(&dev_img), GEIST_OK) << d.last_error();
  EXPECT_EQ(dev_img, cpu_img) << "the image depends on where the state lived";
  EXPECT_TRUE(same_continuation(ref_trace, 0, run_steps(d, nv_, kDevLocalSteps), nv_));

  // Device-local restore of the CPU image, into a used session, continues bitwise.
  ASSERT_EQ(d.restore(cpu_img), GEIST_OK) << d.last_error();
  EXPECT_TRUE(same_continuation(ref_trace, 0, run_steps(d, nv_, kDevLocalSteps), nv_));

  // And the reverse: the device-local image restores on the CPU backend.
  SessionHandle c = session(cpu_);
  ASSERT_EQ(c.restore(dev_img), GEIST_OK) << c.last_error();
  EXPECT_TRUE(same_continuation(ref_trace, 0, run_steps(c, nv_, kDevLocalSteps), nv_));
}

TEST_P(DeviceLocalSnapshot, FailedRestoreLeavesTheSessionUntouched) {
  const std::vector<int32_t> p = prompt(6, 33);
  SessionHandle ref = session(dev_);
  ASSERT_EQ(ref.prefill(p), GEIST_OK);
  std::vector<uint8_t> img;
  ASSERT_EQ(ref.snapshot(&img), GEIST_OK);
  const Trace ref_trace = run_steps(ref, nv_, kDevLocalSteps);

  SessionHandle d = session(dev_);
  ASSERT_EQ(d.prefill(p), GEIST_OK);
  std::vector<uint8_t> bad = img;
  bad[bad.size() / 2] ^= 0x20;  // inside the state bytes: the checksum must refuse it
  EXPECT_EQ(d.restore(bad), GEIST_E_FORMAT);
  EXPECT_TRUE(same_continuation(ref_trace, 0, run_steps(d, nv_, kDevLocalSteps), nv_));
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

// A device failing under a session. How the engine reacts depends on the model's kinds of
// state regions (attention KV, recurrent), not on the KV mode or sampler: one of each model,
// F16 KV, greedy (this also keeps the sanitizer run short).
class DeviceLocalFailure : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    GEIST_REQUIRE_FIXTURES();
    cpu_ = load_model(GetParam(), GEIST_BACKEND_CPU);
    ASSERT_TRUE(cpu_);
    nv_ = cpu_.n_vocab();
  }
  SessionHandle session(const ModelHandle& m) {
    return make_session(m, static_cast<int32_t>(KvMode::F16), false);
  }
  ModelHandle cpu_;
  int32_t nv_ = 0;
};

// A device that fails under a session (cpu_devlocal_fail: what a CUDA fault looks like to the
// engine) is reported by every call that reads or writes the session's state, and never turns
// into an image: snapshot fails and leaves no restorable bytes, save_file leaves the file as
// it was, restore / reset_to_prefix / prefill / decode fail with GEIST_E_BACKEND. An image
// taken before the failure still continues bitwise elsewhere.
TEST_P(DeviceLocalFailure, AFailedDeviceIsReportedAndNeverSnapshotted) {
  const std::vector<int32_t> p = prompt(8, 30);
  ModelHandle m = load_model(GetParam(), GEIST_BACKEND_CPU_DEVICE_LOCAL);
  ASSERT_TRUE(m);
  SessionHandle s = session(m);
  ASSERT_EQ(s.prefill(p), GEIST_OK) << s.last_error();
  ASSERT_EQ(s.pin_prefix(), GEIST_OK) << s.last_error();
  std::vector<uint8_t> before;
  ASSERT_EQ(s.snapshot(&before), GEIST_OK) << s.last_error();
  const std::string path = test::temp_path("failed_device.snap");
  ASSERT_EQ(s.save_file(path), GEIST_OK) << s.last_error();

  ASSERT_TRUE(cpu_devlocal_fail(m.get()->model->arch().backend(), 0, "test fault").is_ok());
  std::vector<uint8_t> buf(before.size(), 0x5A);
  size_t written = 0;
  EXPECT_EQ(geist_session_snapshot(s.get(), buf.data(), buf.size(), &written), GEIST_E_BACKEND);
  EXPECT_NE(std::string(s.last_error()).find("test fault"), std::string::npos) << s.last_error();
  SessionHandle c = session(cpu_);
  EXPECT_EQ(c.restore(buf), GEIST_E_FORMAT) << "the failed snapshot's bytes must not restore";
  // Not even an earlier image survives in a buffer that a failed snapshot was written to.
  std::vector<uint8_t> reused = before;
  EXPECT_EQ(geist_session_snapshot(s.get(), reused.data(), reused.size(), &written),
            GEIST_E_BACKEND);
  EXPECT_EQ(c.restore(reused), GEIST_E_FORMAT);
  EXPECT_EQ(s.save_file(path), GEIST_E_BACKEND);
  EXPECT_EQ(s.pin_prefix(), GEIST_E_BACKEND);
  EXPECT_EQ(s.restore(before), GEIST_E_BACKEND);
  EXPECT_EQ(s.reset_to_prefix(), GEIST_E_BACKEND);
  EXPECT_EQ(s.prefill({5, 6, 7}), GEIST_E_BACKEND);
  geist_token tok = -1;
  EXPECT_EQ(s.decode(&tok), GEIST_E_BACKEND);

  // The file written before the failure is intact, and so is the image: both continue on
  // the CPU backend exactly as a session that never saw the failing device.
  SessionHandle ref = session(cpu_);
  ASSERT_EQ(ref.prefill(p), GEIST_OK);
  const Trace ref_trace = run_steps(ref, nv_, kDevLocalSteps);
  ASSERT_EQ(c.restore(before), GEIST_OK) << c.last_error();
  EXPECT_TRUE(same_continuation(ref_trace, 0, run_steps(c, nv_, kDevLocalSteps), nv_));
  SessionHandle f = session(cpu_);
  ASSERT_EQ(f.load_file(path), GEIST_OK) << f.last_error();
  EXPECT_TRUE(same_continuation(ref_trace, 0, run_steps(f, nv_, kDevLocalSteps), nv_));
  std::remove(path.c_str());
}

// A device that fails partway through the state's regions (after one copy): the image being
// written is no image, and a restore being written says the session's state is now undefined.
TEST_P(DeviceLocalFailure, ADeviceFailingMidwayLeavesNoImageAndSaysSo) {
  const std::vector<int32_t> p = prompt(9, 30);
  SessionHandle ref = session(cpu_);
  ASSERT_EQ(ref.prefill(p), GEIST_OK) << ref.last_error();
  std::vector<uint8_t> img;
  ASSERT_EQ(ref.snapshot(&img), GEIST_OK) << ref.last_error();

  ModelHandle m = load_model(GetParam(), GEIST_BACKEND_CPU_DEVICE_LOCAL);
  ASSERT_TRUE(m);
  SessionHandle s = session(m);
  ASSERT_EQ(s.prefill(p), GEIST_OK) << s.last_error();
  ASSERT_TRUE(cpu_devlocal_fail(m.get()->model->arch().backend(), 1, "midway").is_ok());
  std::vector<uint8_t> buf(img.size(), 0x5A);
  size_t written = 0;
  EXPECT_EQ(geist_session_snapshot(s.get(), buf.data(), buf.size(), &written), GEIST_E_BACKEND);
  SessionHandle c = session(cpu_);
  EXPECT_EQ(c.restore(buf), GEIST_E_FORMAT) << "a snapshot the device failed under restored";

  ModelHandle m2 = load_model(GetParam(), GEIST_BACKEND_CPU_DEVICE_LOCAL);
  ASSERT_TRUE(m2);
  SessionHandle r = session(m2);
  ASSERT_TRUE(cpu_devlocal_fail(m2.get()->model->arch().backend(), 1, "midway").is_ok());
  EXPECT_EQ(r.restore(img), GEIST_E_BACKEND);
  EXPECT_NE(std::string(r.last_error()).find("state is undefined"), std::string::npos)
      << r.last_error();
}

INSTANTIATE_TEST_SUITE_P(Models, DeviceLocalFailure,
                         ::testing::Values("models/stories260K.gguf",
                                           "models/stories-qwen35-f32.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param).find("qwen") != std::string::npos
                                      ? std::string("qwen35")
                                      : std::string("llama");
                         });

}  // namespace
}  // namespace geist::test
