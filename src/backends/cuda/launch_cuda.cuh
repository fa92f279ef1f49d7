// Kernel launches with Programmatic Dependent Launch (PDL, sm_90+), for the kernels of a
// decode step (the small ones, the Q8_0 / Q4_0 decode matmuls, the F16 / F32 attention).
//
// Why: a decode step is ~10 kernels per layer, most of them a few microseconds long, and on an
// H200 the device spends about as long again between two dependent kernels of a graph
// (the first kernel's completion and memory flush, then the next one's launch). A kernel
// launched with programmatic stream serialization may be scheduled before the kernel ahead of
// it has finished; it then waits in pdl_begin() (griddepcontrol.wait) until that kernel has
// completed and its writes are visible, so its launch overlaps the previous kernel's tail
// instead of following it. Correctness rests on one rule: every kernel launched through
// launch_pdl calls pdl_begin() (or pdl_wait()) before it reads global memory that an earlier
// kernel writes and before it writes any. Nothing else changes: the
// same kernels run with the same arguments in the same stream order, so results are bitwise
// those of plain launches. Kernels that are not launched this way (the other matmuls) wait for
// their predecessors as usual.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace geist::cuda {

// The two halves of pdl_begin(), for kernels that have work which reads nothing an earlier
// kernel of the step writes (weights, constants, the step's position, which a copy node
// fills before the first kernel) and may do it before pdl_wait(): the decode matmuls load
// their first weights, rope computes its angles. pdl_trigger() comes only after pdl_wait()
// (so a kernel launched early always finds the ones before its predecessor complete), or not
// at all: a block that exits counts as triggered, so the next kernel then launches as the
// last blocks finish (gemv_q8_cuda.cu's early_trigger).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The first statement of a kernel launched with launch_pdl (a no-op in plain launches and
// before sm_90): waits for the kernels ahead in the stream, then lets the next kernel's
// blocks be scheduled (they wait the same way, so they never run ahead of this one's writes).
__device__ __forceinline__ void pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether launch_pdl asks for programmatic serialization: on, unless GEIST_CUDA_PDL=0 (read
// once per process; for measurements and for comparisons with plain launches).
bool pdl_enabled();

// The shared-memory share of a multiprocessor's L1 that launch_pdl asks for (percent) for
// kernels with at most kUniformCarveSmem bytes of dynamic shared memory: the kernels of a decode
// step. Left to itself the driver sizes the split per kernel, and a kernel launched early (PDL)
// whose split differs from that of the kernel still running on a multiprocessor must wait for
// it to drain before it can be resident, so the overlap PDL is for is lost at such a boundary.
// One split for all of them keeps the overlap. H200, llama-1b q8_0 tg128 (one lease): rope_kv
// removed from the step (a timing probe) went 1169 -> 1053-1069 tok/s with the driver's splits
// but 1168 -> 1194 with 25 % for all; 100 % (least L1) made every step slower (1064-1076), 0 %
// too (1033); prefill (llama-1b, qwen35-0.8b) did not move. Kernels with more dynamic shared
// memory (the prefill attention's blocks of 51 KB and more, for one) keep the driver's choice:
// a quarter would leave them fewer resident blocks.
constexpr int kUniformCarve = 25;
constexpr size_t kUniformCarveSmem = 32 * 1024;

// kernel<<<grid, block, smem, s>>>(args...), as a programmatic dependent launch when
// pdl_enabled(). Returns the launch status.
template <class... P, class... A>
cudaError_t launch_pdl(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                       A&&... args) {
  // A hint (not a stream operation, so it may be set while a step is captured); where it cannot
  // be set the launch goes ahead without it.
  if (smem <= kUniformCarveSmem &&
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, kUniformCarve) !=
          cudaSuccess) {
    cudaGetLastError();
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
}

}  // namespace geist::cuda
