// Runs a test body once per SIMD target of the kernels' run-time dispatch.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "hwy/targets.h"
#include "kernels/simd/matmul_simd.h"

namespace geist::test {

// Runs body once per SIMD target that is both compiled in and supported by this CPU (checking
// that the dispatcher really picked it), then restores the normal dispatch.
template <class F>
void for_each_target(F&& body) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    SCOPED_TRACE(hwy::TargetName(t));
    ASSERT_STREQ(simd::target_name(), hwy::TargetName(t));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace geist::test
