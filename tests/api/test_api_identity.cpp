// geist_model_identity: names the file (the snapshot_id that images carry at offset 32,
// docs/SNAPSHOT_FORMAT.md), the backend and the CPU kernels' SIMD target; stable across loads,
// different between files.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "geist/geist.h"
#include "geist/geist_backend.h"
#include "geist/geist_snapshot.h"
#include "geist/geist_util.h"
#include "support/fixtures.h"

namespace {

std::string identity_of(geist_model* m) {
  size_t n = 0;
  EXPECT_EQ(geist_model_identity(m, nullptr, 0, &n), GEIST_E_INVALID_ARG);
  std::string s(n, '\0');
  EXPECT_EQ(geist_model_identity(m, s.data(), s.size(), &n), GEIST_OK);
  s.resize(n);
  return s;
}

geist_model* load(const std::string& rel, int backend = GEIST_BACKEND_CPU) {
  geist_model_params p;
  geist_model_params_default(&p);
  p.backend = backend;
  geist_model* m = nullptr;
  char err[512] = {};
  EXPECT_EQ(geist_model_load(geist::test::fixture_path(rel).c_str(), &p, &m, err, sizeof err),
            GEIST_OK)
      << err;
  return m;
}

TEST(ApiIdentity, NamesFileBackendAndKernels) {
  GEIST_REQUIRE_FIXTURES();
  geist_model* a = load("models/stories260K.gguf");
  geist_model* a2 = load("models/stories260K.gguf");
  geist_model* b = load("models/stories-qwen35-f32.gguf");
  geist_model* dl = load("models/stories260K.gguf", GEIST_BACKEND_CPU_DEVICE_LOCAL);
  ASSERT_TRUE(a && a2 && b && dl);
  const std::string ia = identity_of(a);
  std::smatch m;
  ASSERT_TRUE(std::regex_match(ia, m,
                               std::regex("snapshot_id=([0-9a-f]{16});backend=cpu;cpu_kernels=([A-"
                                          "Za-z0-9_]+);numerics=[1-9][0-9]*")))
      << ia;
  EXPECT_EQ(ia, identity_of(a2));
  EXPECT_NE(ia, identity_of(b));
  EXPECT_NE(ia, identity_of(dl));
  EXPECT_NE(identity_of(dl).find("backend=cpu-devlocal"), std::string::npos);

  // The snapshot_id is the one a snapshot image of this model carries (little-endian u64 at
  // offset 32 of the header).
  geist_session* s = nullptr;
  ASSERT_EQ(geist_session_create(a, nullptr, &s), GEIST_OK);
  const geist_token t[2] = {1, 2};
  ASSERT_EQ(geist_session_prefill(s, t, 2), GEIST_OK);
  size_t size = 0, written = 0;
  ASSERT_EQ(geist_session_snapshot_size(s, &size), GEIST_OK);
  std::vector<uint8_t> img(size);
  ASSERT_EQ(geist_session_snapshot(s, img.data(), img.size(), &written), GEIST_OK);
  uint64_t id = 0;
  for (int i = 0; i < 8; ++i) id |= static_cast<uint64_t>(img[32 + i]) << (8 * i);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(id));
  EXPECT_EQ(m[1].str(), hex);
  geist_session_destroy(s);
  for (geist_model* x : {a, a2, b, dl}) geist_model_free(x);
}

TEST(ApiIdentity, RefusesBadArguments) {
  size_t n = 0;
  EXPECT_EQ(geist_model_identity(nullptr, nullptr, 0, &n), GEIST_E_INVALID_ARG);
}

}  // namespace
