// cp.async (sm_80+) helpers: asynchronous global -> shared copies in commit groups, so a
// kernel can keep several stages of operands in flight without staging registers.
#pragma once

#include <cstdint>

namespace geist::cuda {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Asynchronous copy of N bytes global -> shared; !ok fills the N bytes with zeros (src is then
// not read). 16 bytes bypass L1 (.cg: every byte is staged once per block); 4 and 8 may not.
template <int N>
__device__ __forceinline__ void cp_async(void* dst, const void* src, bool ok) {
  static_assert(N == 4 || N == 8 || N == 16, "cp.async sizes");
  if constexpr (N == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(ok ? 16 : 0)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "n"(N), "r"(ok ? N : 0)
                 : "memory");
  }
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace geist::cuda
