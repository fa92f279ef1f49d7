// Prefill matmul of the integer-times-scale weight types (Q8_0, Q4_0) on the tensor cores.
//
// The arithmetic of every output element is the one fixed at the top of matmul_cuda.cu: per
// 32-element chunk the mma chain q.x_hi, q.x_lo for k16 step 0 then step 1 from +0, then
// acc += d * D; each part of the k range from +0; the parts folded in order. Only the feeding
// differs from the decode kernels: a block owns BM rows x BN tokens and walks all chunks in
// order, and each chunk's operands are staged in shared memory once per block (the quants
// decoded to bf16 words, the activations split into bf16 hi / lo words) for all its warps to
// read their fragments from. The next chunk's global loads are in flight in registers while
// the current chunk is multiplied: two shared buffers, one barrier per chunk.
#include <cuda_bf16.h>

#include "backends/cuda/matmul_common.cuh"
#include "backends/cuda/matmul_prefill_cuda.h"

namespace geist::cuda {

namespace {

using namespace mm;  // NOLINT(build/namespaces): the helpers shared with matmul_cuda.cu

constexpr int kMaxGridY = 65535;

// One chunk's operands. A lane (g, q) reads 16 bytes at [row][q] for 8 consecutive rows (or
// tokens): with 64-byte rows those are 128 contiguous bytes per quarter warp, free of bank
// conflicts, and so are the staging writes.
template <int BM, int BN>
struct Stage {
  uint4 a[BM][4];  // [row][lane quad q]: bf16x2 words of the quants 8q .. 8q + 7 (word j: 2j, 2j+1)
  uint4 xh[BN][4];  // [token][q]: hi words of the activations 8q .. 8q + 7
  uint4 xl[BN][4];  // [token][q]: lo words
  float d[BM];      // [row]: the chunk's scale
};

// Global loads of one (row, lane quad) of a chunk, kept raw in registers until stored.
template <GgmlType T>
struct WeightStager {  // any ScaledInt type: decoded as it loads
  struct Raw {
    uint32_t q[4];
    float d;
  };
  static __device__ __forceinline__ void load(const DevW& w, int64_t r, int64_t c, int q,
                                              Raw* raw) {
    if (r < w.n_out) {
      ScaledInt<T>::load(w, r, c, q, raw->q, &raw->d);
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) raw->q[k] = 0u;
      raw->d = 0.0f;
    }
  }
  static __device__ __forceinline__ void store(const Raw& raw, uint4* a, float* d, bool with_d) {
    *a = make_uint4(raw.q[0], raw.q[1], raw.q[2], raw.q[3]);
    if (with_d) *d = raw.d;
  }
};

// Q8_0: the repacked rows (DevW); bytes and the f16 scale stay raw until the store, so the
// loads do not wait on the decode.
template <>
struct WeightStager<GgmlType::Q8_0> {
  struct Raw {
    uint2 v;     // quants 8q .. 8q + 7
    uint32_t d;  // f16 bits of the scale (lane quad 0 only)
  };
  static __device__ __forceinline__ void load(const DevW& w, int64_t r, int64_t c, int q,
                                              Raw* raw) {
    if (r < w.n_out) {
      raw->v = __ldg(reinterpret_cast<const uint2*>(w.data + r * w.qrow + 64 * (c >> 1) + 16 * q +
                                                    8 * (c & 1)));
      raw->d = q == 0 ? __ldg(w.scales + r * w.drow + c) : 0u;
    } else {
      raw->v = make_uint2(0u, 0u);
      raw->d = 0u;
    }
  }
  static __device__ __forceinline__ void store(const Raw& raw, uint4* a, float* d, bool with_d) {
    uint32_t q[4];
    i8x8_bf16(raw.v.x, raw.v.y, q);
    *a = make_uint4(q[0], q[1], q[2], q[3]);
    if (with_d) *d = f16_bits(raw.d);
  }
};

// d += A * B as mma_bf16, but not volatile: the independent chains of a chunk may be
// interleaved by the compiler (each chain's own order is fixed by its data dependence).
__device__ __forceinline__ void mma_bf16_nv(float d[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                            uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// scaled_chunk (matmul_common.cuh) for JG n-tiles x MR m-tiles at once, written so that the
// MR * JG independent mma chains are interleaved (one chain alone waits on the mma latency at
// every step): per tile the same chain D = hi, lo of step 0, hi, lo of step 1 from +0, then
// acc += d * D.
template <int MR, int NR, int JG>
__device__ __forceinline__ void scaled_chunks(const uint32_t (&a)[MR][2][4],
                                              const float (&dw)[MR][2], const uint32_t (&bh)[JG][4],
                                              const uint32_t (&bl)[JG][4], float (&acc)[MR][NR][4],
                                              int j0) {
  float d[JG][MR][4];
#pragma unroll
  for (int j = 0; j < JG; ++j) {
#pragma unroll
    for (int i = 0; i < MR; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) d[j][i][e] = 0.0f;
    }
  }
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int k = 2 * s;
#pragma unroll
    for (int lo = 0; lo < 2; ++lo) {
#pragma unroll
      for (int j = 0; j < JG; ++j) {
        const uint32_t* b = lo ? bl[j] : bh[j];
#pragma unroll
        for (int i = 0; i < MR; ++i) {
          mma_bf16_nv(d[j][i], a[i][0][k], a[i][1][k], a[i][0][k + 1], a[i][1][k + 1], b[k],
                      b[k + 1]);
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < JG; ++j) {
#pragma unroll
    for (int i = 0; i < MR; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc[i][j0 + j][e] = __fmaf_rn(dw[i][e >> 1], d[j][i][e], acc[i][j0 + j][e]);
      }
    }
  }
}

// Block = WM x WN warps, each MR m16 tiles x NR n8 tiles (rows x tokens).
template <int MR, int NR, int WM, int WN>
struct Tile {
  static constexpr int kThreads = 32 * WM * WN;
  static constexpr int kRows = 16 * MR * WM;
  static constexpr int kToks = 8 * NR * WN;
  static constexpr int kATasks = kRows * 4 / kThreads;  // (row, lane quad) loads per thread
  static constexpr int kXTasks = kToks * 4 / kThreads;  // (token, lane quad) loads per thread
  static_assert(kRows * 4 % kThreads == 0 && kToks * 4 % kThreads == 0, "staging split");
  using St = Stage<kRows, kToks>;
  static constexpr int kAcc = MR * NR * 4;  // accumulators per thread
  // Two stages, then the folded parts: [kAcc][kThreads] floats (thread-minor: no conflicts).
  static constexpr size_t kSmem = 2 * sizeof(St) + sizeof(float) * kAcc * kThreads;
};

template <GgmlType T, int MR, int NR, int WM, int WN>
__global__ void __launch_bounds__(32 * WM * WN, 1)
    prefill_kernel(const DevW w, const float* __restrict__ x, int64_t x_stride, int32_t n_tok,
                   bool vec, float* __restrict__ y, int64_t y_stride) {
  using C = Tile<MR, NR, WM, WN>;
  using St = typename C::St;
  extern __shared__ uint4 smem[];
  St* st = reinterpret_cast<St*>(smem);  // [2]: chunk c staged in st[c & 1]
  // The parts folded so far (in shared memory: registers hold the current part's sums).
  float* total = reinterpret_cast<float*>(st + 2);  // [kAcc][kThreads]
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, wp = tid >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int wr = (wp % WM) * 16 * MR;  // the warp's first row in the block
  const int wt = (wp / WM) * 8 * NR;   // the warp's first token in the block
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * C::kRows;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * C::kToks;
  const int64_t n_chunks = w.n_in / 32;
  const int parts = num_parts(n_chunks);

  typename WeightStager<T>::Raw ra[C::kATasks];
  float xr[C::kXTasks][8];
  auto load = [&](int64_t c) {
#pragma unroll
    for (int k = 0; k < C::kATasks; ++k) {
      const int id = tid + k * C::kThreads;
      WeightStager<T>::load(w, r0 + (id >> 2), c, id & 3, &ra[k]);
    }
#pragma unroll
    for (int k = 0; k < C::kXTasks; ++k) {
      const int id = tid + k * C::kThreads;
      x_load8(x, x_stride, n_tok, w.n_in, vec, t0 + (id >> 2), c * 32 + 8 * (id & 3), xr[k]);
    }
  };
  auto store = [&](St& s) {
#pragma unroll
    for (int k = 0; k < C::kATasks; ++k) {
      const int id = tid + k * C::kThreads;
      WeightStager<T>::store(ra[k], &s.a[id >> 2][id & 3], &s.d[id >> 2], (id & 3) == 0);
    }
#pragma unroll
    for (int k = 0; k < C::kXTasks; ++k) {
      const int id = tid + k * C::kThreads;
      uint32_t hi[4], lo[4];
      split8(xr[k], hi, lo);
      s.xh[id >> 2][id & 3] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
      s.xl[id >> 2][id & 3] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
    }
  };

  float acc[MR][NR][4];  // the current part's sum, accumulator layout of mma m16n8
#pragma unroll
  for (int i = 0; i < MR; ++i) {
#pragma unroll
    for (int j = 0; j < NR; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    }
  }
  load(0);
  store(st[0]);
  __syncthreads();
  int p = 0;
  int64_t p_end = part_begin(n_chunks, parts, 1);
  for (int64_t c = 0; c < n_chunks; ++c) {
    const bool more = c + 1 < n_chunks;
    if (more) load(c + 1);
    const St& s = st[c & 1];
    uint32_t a[MR][2][4];  // [m-tile][row g / g + 8][word]
    float dw[MR][2];
#pragma unroll
    for (int i = 0; i < MR; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = wr + 16 * i + g + 8 * h;
        const uint4 v = s.a[row][q];
        a[i][h][0] = v.x, a[i][h][1] = v.y, a[i][h][2] = v.z, a[i][h][3] = v.w;
        dw[i][h] = s.d[row];
      }
    }
    constexpr int JG = MR >= 4 ? 1 : 4 / MR;  // n-tiles per group: >= 4 chains in flight
    static_assert(NR % JG == 0, "n-tile groups");
#pragma unroll
    for (int j0 = 0; j0 < NR; j0 += JG) {
      uint32_t bh[JG][4], bl[JG][4];
#pragma unroll
      for (int j = 0; j < JG; ++j) {
        const int tok = wt + 8 * (j0 + j) + g;
        const uint4 h4 = s.xh[tok][q], l4 = s.xl[tok][q];
        bh[j][0] = h4.x, bh[j][1] = h4.y, bh[j][2] = h4.z, bh[j][3] = h4.w;
        bl[j][0] = l4.x, bl[j][1] = l4.y, bl[j][2] = l4.z, bl[j][3] = l4.w;
      }
      scaled_chunks<MR, NR, JG>(a, dw, bh, bl, acc, j0);
    }
    // Part p ends after this chunk (a loop only in case a part were empty: it adds +0, as
    // the part loop of the other kernels would).
    while (c + 1 == p_end) {
#pragma unroll
      for (int i = 0; i < MR; ++i) {
#pragma unroll
        for (int j = 0; j < NR; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float* t = total + ((i * NR + j) * 4 + e) * C::kThreads + tid;
            *t = p == 0 ? acc[i][j][e] : __fadd_rn(*t, acc[i][j][e]);
            acc[i][j][e] = 0.0f;
          }
        }
      }
      ++p;
      p_end = p < parts ? part_begin(n_chunks, parts, p + 1) : -1;
    }
    if (more) store(st[(c + 1) & 1]);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < MR; ++i) {
#pragma unroll
    for (int j = 0; j < NR; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t r = r0 + wr + 16 * i + g + (e >= 2 ? 8 : 0);
        const int64_t t = t0 + wt + 8 * j + 2 * q + (e & 1);
        if (r < w.n_out && t < n_tok) {
          y[t * y_stride + r] = total[((i * NR + j) * 4 + e) * C::kThreads + tid];
        }
      }
    }
  }
}

template <GgmlType T, int MR, int NR, int WM, int WN>
cudaError_t launch_tile(cudaStream_t s, const DevW& w, const float* x, int64_t x_stride,
                        int32_t n_tok, bool vec, float* y, int64_t y_stride) {
  using C = Tile<MR, NR, WM, WN>;
  const auto kernel = prefill_kernel<T, MR, NR, WM, WN>;
  // Past 48 KB a kernel's dynamic shared memory must be allowed explicitly.
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(C::kSmem));
  if (e != cudaSuccess) return e;
  const int64_t blocks_x = (w.n_out + C::kRows - 1) / C::kRows;
  if (blocks_x > 0x7fffffff) return cudaErrorInvalidConfiguration;
  // Grid y is capped at 65535 tiles: longer batches go in several launches (x stays 16-byte
  // aligned at every tile boundary when it was at the start).
  const int64_t per_launch = static_cast<int64_t>(kMaxGridY) * C::kToks;
  for (int64_t t = 0; t < n_tok; t += per_launch) {
    const int64_t nt = n_tok - t < per_launch ? n_tok - t : per_launch;
    const dim3 grid(static_cast<unsigned>(blocks_x),
                    static_cast<unsigned>((nt + C::kToks - 1) / C::kToks));
    kernel<<<grid, C::kThreads, C::kSmem, s>>>(
        w, x + t * x_stride, x_stride, static_cast<int32_t>(nt), vec, y + t * y_stride, y_stride);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// LARGE: 8 warps of 64 rows x 32 tokens; SMALL: 4 warps of 32 rows x 32 tokens.
template <GgmlType T>
cudaError_t launch_type(cudaStream_t s, const DevW& w, const float* x, int64_t x_stride,
                        int32_t n_tok, bool vec, float* y, int64_t y_stride, PrefillTile tile) {
  if (tile == PrefillTile::AUTO) {
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    const int64_t large = ((w.n_out + 127) / 128) * ((n_tok + 127) / 128);
    tile = large >= sms ? PrefillTile::LARGE : PrefillTile::SMALL;
  }
  if (tile == PrefillTile::LARGE) {
    return launch_tile<T, 4, 4, 2, 4>(s, w, x, x_stride, n_tok, vec, y, y_stride);
  }
  return launch_tile<T, 2, 4, 2, 2>(s, w, x, x_stride, n_tok, vec, y, y_stride);
}

}  // namespace

bool matmul_prefill_supported(GgmlType t) { return t == GgmlType::Q8_0 || t == GgmlType::Q4_0; }

cudaError_t matmul_prefill(cudaStream_t s, const WeightMatrix& w, const float* x, int64_t x_stride,
                           int32_t n_tok, float* y, int64_t y_stride, PrefillTile tile) {
  if (n_tok <= 0 || w.n_out <= 0) return cudaSuccess;
  if (!matmul_prefill_supported(w.type) || w.n_in <= 0 || w.n_in % 32 != 0) {
    return cudaErrorInvalidValue;
  }
  const DevW d = dev_w(w);
  const bool vec = x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  if (w.type == GgmlType::Q8_0) {
    return launch_type<GgmlType::Q8_0>(s, d, x, x_stride, n_tok, vec, y, y_stride, tile);
  }
  return launch_type<GgmlType::Q4_0>(s, d, x, x_stride, n_tok, vec, y, y_stride, tile);
}

}  // namespace geist::cuda
