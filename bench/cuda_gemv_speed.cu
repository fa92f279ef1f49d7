// Decode GEMV speed on the GPU against the device's read bandwidth: the Q8_0 matmuls of a decode
// step of the llama-1b and qwen35-0.8b shapes for 1-8 tokens (cuda::matmul_batch; one token:
// cuda::matmul_swiglu for the gate / up pair, more: matmul_batch of the pair), each timed as 64
// launches captured in a CUDA graph (as a decode step runs them) over copies of the weights that
// together pass 400 MB, so that L2 holds none of them; next to a plain read of the same bytes in
// the same process. Not a test; prints numbers. Build (after a CUDA build in build/cuda):
//   B=build/cuda; nvcc -O3 -std=c++20 -arch=sm_90 -Isrc -Iinclude bench/cuda_gemv_speed.cu \
//     -o cuda_gemv_speed $B/libgeist_backends_cuda.a $B/libgeist_backends.a $B/libgeist_kv.a \
//     $B/libgeist_kernels.a $B/libgeist_formats.a $B/libgeist_base.a -lpthread
//   ./cuda_gemv_speed [name-filter [tokens]]   (tokens 1-8, default 1; "" filters nothing)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "backends/cuda/cuda_kernels.h"

using geist::GgmlType;
using geist::WeightLayout;
using geist::WeightMatrix;

#define CK(e)                                                                        \
  do {                                                                               \
    const cudaError_t err_ = (e);                                                    \
    if (err_ != cudaSuccess) {                                                       \
      std::printf("CUDA error %s at line %d\n", cudaGetErrorString(err_), __LINE__); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

namespace {

// Random codes, and f16 scales in [2^-8, 2^-7) after the codes (the repacked layout).
__global__ void fill_kernel(uint8_t* p, size_t n, size_t scales_at, uint32_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const bool scale_hi = i >= scales_at && (i - scales_at) % 2 == 1;  // f16 0x1Cxx
    p[i] = scale_hi ? uint8_t{0x1C} : static_cast<uint8_t>(h);
  }
}

// The read the GEMVs are measured against: every byte once, 16 bytes a load.
__global__ void read_kernel(const uint4* __restrict__ p, size_t n, uint32_t* sink) {
  uint32_t a = 0;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const uint4 v = __ldg(p + i);
    a ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (a == 0x9E3779B9u) *sink = a;  // keeps the loads
}

// Microseconds per launch: 64 launches (cycling over the copies) in one graph, best of 5.
float time_graph(cudaStream_t s, int copies, const std::function<void(int)>& launch) {
  const int n = 64;
  for (int i = 0; i < copies; ++i) launch(i);
  CK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < n; ++i) launch(i % copies);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float best = 1e30f;
  for (int r = 0; r < 6; ++r) {
    CK(cudaEventRecord(e0, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (r > 0) best = std::min(best, ms * 1e3f / n);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return best;
}

struct Shape {
  const char* name;
  int64_t n_in, n_out;
  bool pair;  // two matrices of this shape: gate and up, through matmul_swiglu
};

}  // namespace

int main(int argc, char** argv) {
  const Shape shapes[] = {
      {"llama-1b q/k/v", 2048, 3072, false},    {"llama-1b o", 2048, 2048, false},
      {"llama-1b gate+up", 2048, 8192, true},   {"llama-1b down", 8192, 2048, false},
      {"llama-1b output", 2048, 128256, false}, {"qwen35 gate+up", 1024, 3584, true},
      {"qwen35 down", 3584, 1024, false},       {"qwen35 output", 1024, 248320, false},
  };
  const int32_t n_tok = argc > 2 ? std::atoi(argv[2]) : 1;
  if (n_tok < 1 || n_tok > 8) {
    std::printf("tokens: 1 to 8\n");
    return 2;
  }
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  uint32_t* sink;
  CK(cudaMalloc(&sink, 4));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::printf("tokens %d\n%-18s %10s %10s %9s %10s %8s\n", n_tok, "shape", "MB", "gemv us", "GB/s",
              "read GB/s", "ratio");
  for (const Shape& sh : shapes) {
    if (argc > 1 && argv[1][0] != 0 && std::strstr(sh.name, argv[1]) == nullptr) continue;
    const int mats = sh.pair ? 2 : 1;
    const size_t bytes = geist::cuda::device_weight_bytes(GgmlType::Q8_0, sh.n_in, sh.n_out);
    const size_t scales_at = static_cast<size_t>(64 * ((sh.n_in / 32 + 1) / 2) * sh.n_out);
    const int copies = static_cast<int>(std::max<size_t>(2, (400u << 20) / (mats * bytes) + 1));
    std::vector<uint8_t*> bufs(static_cast<size_t>(copies * mats));
    std::vector<WeightMatrix> ws(bufs.size());
    for (size_t i = 0; i < bufs.size(); ++i) {
      CK(cudaMalloc(&bufs[i], bytes));
      fill_kernel<<<4 * sms, 256, 0, s>>>(bufs[i], bytes, scales_at,
                                          77u + static_cast<uint32_t>(i));
      ws[i] = WeightMatrix{
          GgmlType::Q8_0,    bufs[i], sh.n_in, sh.n_out, static_cast<size_t>(sh.n_in / 32 * 34),
          WeightLayout::ROWS};
    }
    std::vector<float> xh(static_cast<size_t>(sh.n_in * n_tok));
    for (size_t i = 0; i < xh.size(); ++i) xh[i] = std::sin(0.37f * i) * (1.0f + i % 7);
    float *x, *y0, *y1;
    CK(cudaMalloc(&x, xh.size() * 4));
    CK(cudaMalloc(&y0, sh.n_out * n_tok * 4));
    CK(cudaMalloc(&y1, sh.n_out * n_tok * 4));
    CK(cudaMemcpy(x, xh.data(), xh.size() * 4, cudaMemcpyHostToDevice));
    const size_t ws_bytes = geist::cuda::matmul_batch_scratch_bytes(ws[0], n_tok);
    void* scratch = nullptr;
    if (ws_bytes > 0) CK(cudaMalloc(&scratch, ws_bytes));
    const float gemv_us = time_graph(s, copies, [&](int c) {
      if (sh.pair && n_tok == 1) {
        CK(geist::cuda::matmul_swiglu(s, {ws[2 * c], y0, sh.n_out}, {ws[2 * c + 1], y1, sh.n_out},
                                      x, y0));
      } else if (sh.pair) {
        const geist::cuda::MatmulOut o[2] = {{ws[2 * c], y0, sh.n_out},
                                             {ws[2 * c + 1], y1, sh.n_out}};
        CK(geist::cuda::matmul_batch(s, o, 2, x, sh.n_in, n_tok, scratch, ws_bytes));
      } else {
        const geist::cuda::MatmulOut o{ws[c], y0, sh.n_out};
        CK(geist::cuda::matmul_batch(s, &o, 1, x, sh.n_in, n_tok, scratch, ws_bytes));
      }
    });
    const float read_us = time_graph(s, copies, [&](int c) {
      for (int m = 0; m < mats; ++m) {
        read_kernel<<<8 * sms, 256, 0, s>>>(reinterpret_cast<const uint4*>(bufs[mats * c + m]),
                                            bytes / 16, sink);
      }
    });
    const double mb = static_cast<double>(mats * bytes) / 1e6;
    std::printf("%-18s %10.1f %10.2f %9.0f %10.0f %8.2f\n", sh.name, mb, gemv_us,
                mb * 1e3 / gemv_us, mb * 1e3 / read_us, read_us / gemv_us);
    for (uint8_t* b : bufs) CK(cudaFree(b));
    CK(cudaFree(x));
    CK(cudaFree(y0));
    CK(cudaFree(y1));
    if (scratch != nullptr) CK(cudaFree(scratch));
  }
  return 0;
}
