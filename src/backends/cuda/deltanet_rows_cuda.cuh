// What the one-token and prefill forms of the CUDA delta rule share (deltanet_cuda.cu,
// deltanet_scan_cuda.cu): a block's warps and how many key rows each thread owns.
#pragma once

#include <cstdint>
#include <type_traits>

namespace geist::cuda {

constexpr int kStepWarps = 8;  // warps per block; warp w owns key rows [w RPT, (w + 1) RPT)

// Calls f(std::integral_constant<int, R>{}) for the smallest instantiated rows-per-thread R
// (a power of two up to 64) that covers d_k over `groups` row groups.
template <class F>
void with_rpt(int32_t d_k, int32_t groups, F&& f) {
  const int64_t rpt = (int64_t{d_k} + groups - 1) / groups;
  if (rpt <= 1) {
    f(std::integral_constant<int, 1>{});
  } else if (rpt <= 2) {
    f(std::integral_constant<int, 2>{});
  } else if (rpt <= 4) {
    f(std::integral_constant<int, 4>{});
  } else if (rpt <= 8) {
    f(std::integral_constant<int, 8>{});
  } else if (rpt <= 16) {
    f(std::integral_constant<int, 16>{});
  } else if (rpt <= 32) {
    f(std::integral_constant<int, 32>{});
  } else {
    f(std::integral_constant<int, 64>{});
  }
}

}  // namespace geist::cuda
