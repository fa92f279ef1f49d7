// CUDA kernels of the gated DeltaNet; see deltanet_cuda.h for the numerics and the mapping.
// Launched with launch_pdl (launch_cuda.cuh): every kernel starts with pdl_begin().
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/deltanet_chunk_cuda.h"
#include "backends/cuda/deltanet_cuda.h"
#include "backends/cuda/deltanet_rows_cuda.cuh"
#include "backends/cuda/deltanet_scan_cuda.h"
#include "backends/cuda/launch_cuda.cuh"
#include "base/status.h"

namespace geist::cuda {
namespace {

constexpr int kBlock = 256;            // threads per block of the element-wise kernels
constexpr int kWarpsPerRow = 8;        // warps (= rows) per block of the warp-per-row kernels
constexpr int64_t kMaxGrid = 1 << 20;  // grid-stride loops cover anything larger

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int grid_for(int64_t work_items, int64_t per_block) {
  return static_cast<int>(std::min(ceil_div(work_items, per_block), kMaxGrid));
}

__device__ __forceinline__ float sigmoid_dev(float x) { return 1.0f / (1.0f + expf(-x)); }

// softplus_f32: identity above 20 so large inputs neither overflow nor lose precision.
__device__ __forceinline__ float softplus_dev(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// Sum over the 32 lanes by xor butterfly. Floating-point addition is commutative, so at every
// step lanes L and L^m compute the same value, and all lanes end with the identical sum.
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// ---- gates ----

__global__ void gates_kernel(float* beta, float* g, int64_t total, int32_t n_heads, const float* a,
                             const float* dt_bias) {
  pdl_begin();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int32_t h = static_cast<int32_t>(i % n_heads);
    beta[i] = sigmoid_dev(beta[i]);
    g[i] = a[h] * softplus_dev(g[i] + dt_bias[h]);
  }
}

// ---- conv1d + SiLU ----

// out[t][c] = silu(sum_j w[c][j] * in[t - hist + j][c]) with in[s < 0] from the state. The sum
// runs over j in the CPU's order with explicit round-to-nearest operations, so no FMA
// contraction changes it.
__global__ void conv1d_silu_kernel(const float* x, int64_t x_stride, int32_t n_tok, int64_t n_ch,
                                   const float* w, int32_t kernel, const float* state, float* out,
                                   int64_t out_stride) {
  pdl_begin();
  const int64_t total = int64_t{n_tok} * n_ch;
  const int32_t hist = kernel - 1;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / n_ch;
    const int64_t c = i % n_ch;
    const float* wc = w + c * kernel;
    float acc = 0.0f;
    for (int32_t j = 0; j < kernel; ++j) {
      const int64_t src = t - hist + j;
      const float r = src < 0 ? state[(hist + src) * n_ch + c] : x[src * x_stride + c];
      acc = __fadd_rn(acc, __fmul_rn(wc[j], r));
    }
    out[t * out_stride + c] = acc * sigmoid_dev(acc);
  }
}

// Advances each channel's state column to the last hist inputs of [state; x]. One thread per
// channel walks its column in order, so the in-place shift (n < hist) reads each slot before
// overwriting it.
__global__ void conv1d_state_kernel(const float* x, int64_t x_stride, int32_t n_tok, int64_t n_ch,
                                    int32_t hist, float* state) {
  pdl_begin();
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < n_ch;
       c += int64_t{gridDim.x} * blockDim.x) {
    if (n_tok >= hist) {
      for (int32_t r = 0; r < hist; ++r) {
        state[r * n_ch + c] = x[int64_t{n_tok - hist + r} * x_stride + c];
      }
    } else {
      for (int32_t r = 0; r < hist - n_tok; ++r)
        state[r * n_ch + c] = state[(r + n_tok) * n_ch + c];
      for (int32_t r = 0; r < n_tok; ++r) {
        state[int64_t{hist - n_tok + r} * n_ch + c] = x[int64_t{r} * x_stride + c];
      }
    }
  }
}

// One token (decode): the gates, the conv1d + SiLU with its state advance, and the l2 norms of
// the first n_l2 * l2_heads heads of the output, in one launch. Each element takes the
// arithmetic of gates_kernel / conv1d_silu_kernel + conv1d_state_kernel / l2_norm_heads_kernel
// (the same device functions, the same order), so the results are bitwise the separate
// launches'. Blocks [0, n_l2 * l2_heads) each own one normed head of d channels (thread t:
// channels t + kPrepBlock m), so every channel's loads are issued at once rather than one
// channel after another; the other channels go one per thread of the blocks after them; the
// last block computes the gates.
constexpr int kPrepBlock = 128;

// The conv output of channel c (before any norm); advances the channel's state column.
__device__ __forceinline__ float conv_step(const DeltaPrep& p, int64_t c) {
  const int32_t hist = p.kernel - 1;
  const float* wc = p.w + c * p.kernel;
  float acc = 0.0f;
  for (int32_t j = 0; j < hist; ++j)
    acc = __fadd_rn(acc, __fmul_rn(wc[j], p.state[j * p.n_ch + c]));
  const float xc = p.x[c];
  acc = __fadd_rn(acc, __fmul_rn(wc[hist], xc));
  // The state column after the read: shifted by one, x last (conv1d_state_kernel, n_tok 1).
  for (int32_t r = 0; r + 1 < hist; ++r) p.state[r * p.n_ch + c] = p.state[(r + 1) * p.n_ch + c];
  if (hist > 0) p.state[int64_t{hist - 1} * p.n_ch + c] = xc;
  return acc * sigmoid_dev(acc);
}

__global__ void __launch_bounds__(kPrepBlock)
    deltanet_prep_kernel(const DeltaPrep p, int32_t n_normed, int32_t conv_blocks) {
  pdl_begin();
  extern __shared__ double sq[];  // [d] squares of the head's outputs, then [d] floats: outputs
  __shared__ float s_inv;
  const int32_t b = static_cast<int32_t>(blockIdx.x);
  if (b == conv_blocks) {
    for (int32_t i = threadIdx.x; i < p.gate_heads; i += blockDim.x) {
      p.beta[i] = sigmoid_dev(p.beta[i]);
      p.g[i] = p.a[i] * softplus_dev(p.g[i] + p.dt_bias[i]);
    }
    return;
  }
  if (b < n_normed) {
    float* xs = reinterpret_cast<float*>(sq + p.d);
    const int64_t c0 = int64_t{b} * p.d;
    for (int32_t i = threadIdx.x; i < p.d; i += kPrepBlock) {
      const float x = conv_step(p, c0 + i);
      xs[i] = x;
      sq[i] = double{x} * x;
    }
    __syncthreads();
    if (threadIdx.x < 32) {  // l2_norm_heads_kernel's lane sums and butterfly
      const int lane = threadIdx.x;
      double ss = 0.0;
      for (int32_t i = lane; i < p.d; i += 32) ss += sq[i];
      ss = warp_sum(ss);
      if (lane == 0) s_inv = 1.0f / sqrtf(static_cast<float>(ss) + p.eps);
    }
    __syncthreads();
    const float inv = s_inv;
    const float scale = b < p.l2_heads ? p.scale_q : p.scale_k;
    for (int32_t i = threadIdx.x; i < p.d; i += kPrepBlock) {
      float v = xs[i] * inv;
      if (scale != 1.0f) v *= scale;
      p.out[c0 + i] = v;
    }
    return;
  }
  const int64_t c = int64_t{n_normed} * p.d + int64_t{b - n_normed} * kPrepBlock + threadIdx.x;
  if (c < p.n_ch) p.out[c] = conv_step(p, c);
}

// ---- per-head / per-row norms (one warp per vector) ----

// Rows [0, rows) of x_a (scale_a), then rows [rows, 2 * rows) of x_b (scale_b) when x_b is set.
__global__ void l2_norm_heads_kernel(float* x_a, float scale_a, float* x_b, float scale_b,
                                     int64_t x_stride, int64_t rows, int32_t n_heads, int32_t d,
                                     float eps) {
  pdl_begin();
  const int lane = threadIdx.x & 31;
  const int64_t warp0 = blockIdx.x * int64_t{kWarpsPerRow} + (threadIdx.x >> 5);
  const int64_t all = x_b != nullptr ? 2 * rows : rows;
  for (int64_t r = warp0; r < all; r += int64_t{gridDim.x} * kWarpsPerRow) {
    const bool in_a = r < rows;
    const int64_t row = in_a ? r : r - rows;
    const float scale = in_a ? scale_a : scale_b;
    float* p = (in_a ? x_a : x_b) + (row / n_heads) * x_stride + (row % n_heads) * int64_t{d};
    double ss = 0.0;
    for (int32_t i = lane; i < d; i += 32) ss += double{p[i]} * p[i];
    ss = warp_sum(ss);
    const float inv = 1.0f / sqrtf(static_cast<float>(ss) + eps);
    for (int32_t i = lane; i < d; i += 32) {
      float v = p[i] * inv;
      if (scale != 1.0f) v *= scale;
      p[i] = v;
    }
  }
}

// rms_norm_gated of one row by one warp (lane l: elements l + 32 i). All lanes finish reading
// their x values before the (synchronising) reduction, and each lane then rewrites only its own
// elements, so out may alias x. x is read through L2 (__ldcg): the fused delta rule reads rows
// that other blocks wrote.
__device__ __forceinline__ void gated_norm_row(const float* xr, const float* zr, const float* w,
                                               int32_t d, float eps, float* orow, int lane) {
  double ss = 0.0;
  for (int32_t i = lane; i < d; i += 32) {
    const float xi = __ldcg(xr + i);
    ss += double{xi} * xi;
  }
  ss = warp_sum(ss);
  const float inv = 1.0f / sqrtf(static_cast<float>(ss) / static_cast<float>(d) + eps);
  for (int32_t i = lane; i < d; i += 32) {
    const float zi = zr[i];
    orow[i] = w[i] * (__ldcg(xr + i) * inv) * (zi * sigmoid_dev(zi));
  }
}

__global__ void rms_norm_gated_kernel(const float* x, const float* z, const float* w,
                                      int32_t n_rows, int32_t d, float eps, float* out) {
  pdl_begin();
  const int lane = threadIdx.x & 31;
  const int64_t warp0 = blockIdx.x * int64_t{kWarpsPerRow} + (threadIdx.x >> 5);
  for (int64_t row = warp0; row < n_rows; row += int64_t{gridDim.x} * kWarpsPerRow) {
    gated_norm_row(x + row * d, z + row * d, w, d, eps, out + row * d, lane);
  }
}

// The gated norm a one-token delta rule runs on its output rows (gated_delta_rule_norm).
struct GatedNorm {
  const float* z = nullptr;  // [n_v_heads][d_v]
  const float* w = nullptr;  // [d_v]
  float eps = 0;
  unsigned* count = nullptr;  // [n_v_heads] blocks of the head done; 0 between launches
};

// ---- gated delta rule ----

constexpr int kMaxDk = 512;  // kStepWarps x the largest rows-per-thread instantiation (64)

// Prefill by the chunked form (where it applies) only with GEIST_CUDA_DELTA_CHUNK=1 (read once
// per process). Why not by default: measured on an H200 (qwen35-0.8b pp2048), its prep kernel
// runs one block of 256 threads per (chunk, head) and is issue- and latency-bound: 22.1k tok/s
// with 512-token calls against 23.7k for the token walk it was measured with (a block per
// value head x 2 columns, warp-shuffle sums), which delta_scan_kernel has since replaced. It is
// correct (tests/cuda/test_deltanet_cuda.cpp runs it directly) and waits for more parallelism
// inside a chunk (tensor-core products, a split solve).
bool delta_chunk_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("GEIST_CUDA_DELTA_CHUNK");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

// ---- one-token step (decode) ----

// Block (value head h, tile of 32 columns): lane l owns column tile * 32 + l, so each state
// row a warp reads or writes is one contiguous 128-byte line, and the 1 MB state of a Qwen3.5
// layer streams at memory speed. The two sums over key rows are per-thread partials in double
// (rows in order) added over the kStepWarps warps in warp order from shared memory: a fixed
// order, so results are deterministic.
// NORM: the block of a head that finishes last (a counter per head, reset by that block) runs
// rms_norm_gated on the head's output row in place, with warp 0 and gated_norm_row's
// arithmetic: bitwise the separate launch.
template <int RPT, bool NORM>
__device__ __forceinline__ void delta_step_block(const GatedDeltaArgs& a, int32_t col_tiles,
                                                 const GatedNorm& nrm) {
  __shared__ double red_k[kStepWarps][32];
  __shared__ double red_q[kStepWarps][32];
  const int32_t dk = a.d_k, dv = a.d_v;
  const int32_t h = static_cast<int32_t>(blockIdx.x) / col_tiles;
  const int32_t tile = static_cast<int32_t>(blockIdx.x) % col_tiles;
  const int32_t kh = h % a.n_k_heads;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int32_t col = tile * 32 + lane;
  const bool live = col < dv;
  const int32_t row0 = warp * RPT;
  float* st = a.state + int64_t{h} * dk * dv;  // [d_k][d_v]
  const float* kp = a.k + int64_t{kh} * dk;
  const float* qp = a.q + int64_t{kh} * dk;
  float sv[RPT], kr[RPT], qr[RPT];
#pragma unroll
  for (int m = 0; m < RPT; ++m) {
    const int32_t i = row0 + m;
    const bool in = i < dk;
    sv[m] = (in && live) ? st[int64_t{i} * dv + col] : 0.0f;
    kr[m] = in ? kp[i] : 0.0f;
    qr[m] = in ? qp[i] : 0.0f;
  }
  const double decay = exp(double{a.g[h]});
  const double beta = a.beta[h];
  const double vc = live ? double{a.v[int64_t{h} * dv + col]} : 0.0;
  double kv = 0.0;
#pragma unroll
  for (int m = 0; m < RPT; ++m) kv += (double{sv[m]} * decay) * kr[m];
  red_k[warp][lane] = kv;
  __syncthreads();
  kv = 0.0;
#pragma unroll
  for (int w = 0; w < kStepWarps; ++w) kv += red_k[w][lane];
  const double u = beta * (vc - kv);
  double acc = 0.0;
#pragma unroll
  for (int m = 0; m < RPT; ++m) {
    const double nr = double{sv[m]} * decay + double{kr[m]} * u;
    sv[m] = static_cast<float>(nr);
    acc += nr * qr[m];
  }
  red_q[warp][lane] = acc;
#pragma unroll
  for (int m = 0; m < RPT; ++m) {
    const int32_t i = row0 + m;
    if (i < dk && live) st[int64_t{i} * dv + col] = sv[m];
  }
  __syncthreads();
  if (warp == 0) {
    double o = 0.0;
#pragma unroll
    for (int w = 0; w < kStepWarps; ++w) o += red_q[w][lane];
    if (live) a.out[int64_t{h} * dv + col] = static_cast<float>(o);
  }
  if constexpr (NORM) {
    __shared__ bool s_last;
    __threadfence();  // this block's outputs are visible device-wide before it is counted
    __syncthreads();
    if (threadIdx.x == 0)
      s_last = atomicAdd(nrm.count + h, 1u) == static_cast<unsigned>(col_tiles - 1);
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    if (warp == 0) {
      float* row = a.out + int64_t{h} * dv;  // token 0
      gated_norm_row(row, nrm.z + int64_t{h} * dv, nrm.w, dv, nrm.eps, row, lane);
      if (lane == 0) nrm.count[h] = 0;
    }
  }
}

template <int RPT, bool NORM>
__global__ void __launch_bounds__(kStepWarps * 32)
    delta_step_kernel(GatedDeltaArgs a, int32_t col_tiles, const GatedNorm nrm) {
  pdl_begin();
  delta_step_block<RPT, NORM>(a, col_tiles, nrm);
}

// gated_delta_rule_rows: grid y is the row; each row's blocks are delta_step_kernel's.
template <int RPT>
__global__ void __launch_bounds__(kStepWarps * 32)
    delta_step_rows_kernel(GatedDeltaArgs a, int32_t col_tiles, const DeltaRowStates states) {
  pdl_begin();
  const int32_t r = static_cast<int32_t>(blockIdx.y);
  a.q += r * a.q_stride;
  a.k += r * a.k_stride;
  a.v += r * a.v_stride;
  a.g += int64_t{r} * a.n_v_heads;
  a.beta += int64_t{r} * a.n_v_heads;
  a.out += r * a.out_stride;
  a.state = states.p[r];
  delta_step_block<RPT, false>(a, col_tiles, GatedNorm{});
}

template <int RPT, bool NORM>
void launch_step(cudaStream_t s, const GatedDeltaArgs& a, const GatedNorm& nrm) {
  const int32_t col_tiles = static_cast<int32_t>(ceil_div(a.d_v, 32));
  const int64_t blocks = int64_t{a.n_v_heads} * col_tiles;
  GEIST_CHECK(blocks <= 0x7fffffff, "gated_delta_rule: too many heads x column tiles");
  launch_pdl(delta_step_kernel<RPT, NORM>, dim3(static_cast<unsigned>(blocks)),
             dim3(kStepWarps * 32), 0, s, a, col_tiles, nrm);
}

template <int RPT>
void launch_step_rows(cudaStream_t s, const GatedDeltaArgs& a, int32_t n_rows,
                      const DeltaRowStates& states) {
  const int32_t col_tiles = static_cast<int32_t>(ceil_div(a.d_v, 32));
  const int64_t blocks = int64_t{a.n_v_heads} * col_tiles;
  GEIST_CHECK(blocks <= 0x7fffffff, "gated_delta_rule_rows: too many heads x column tiles");
  launch_pdl(delta_step_rows_kernel<RPT>,
             dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(n_rows)),
             dim3(kStepWarps * 32), 0, s, a, col_tiles, states);
}

// conv1d_silu_rows: one thread per (row, channel), conv_step's arithmetic on the row's state.
__global__ void conv1d_rows_kernel(const float* x, int64_t x_stride, int32_t n_rows, int64_t n_ch,
                                   const float* w, int32_t kernel, const DeltaRowStates states,
                                   float* out, int64_t out_stride) {
  pdl_begin();
  const int64_t total = int64_t{n_rows} * n_ch;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / n_ch;
    const int64_t c = i % n_ch;
    DeltaPrep p;
    p.x = x + r * x_stride;
    p.n_ch = n_ch;
    p.w = w;
    p.kernel = kernel;
    p.state = states.p[r];
    out[r * out_stride + c] = conv_step(p, c);
  }
}

}  // namespace

void conv1d_silu_rows(cudaStream_t s, const float* x, int64_t x_stride, int32_t n_rows,
                      int64_t n_ch, const float* w, int32_t kernel, const DeltaRowStates& states,
                      float* out, int64_t out_stride) {
  GEIST_CHECK(n_rows >= 0 && n_rows <= kDeltaRowsPerLaunch && n_ch >= 1 && kernel >= 1 &&
                  x_stride >= n_ch && out_stride >= n_ch,
              "conv1d_silu_rows: bad shape or stride");
  if (n_rows == 0) return;
  launch_pdl(conv1d_rows_kernel, dim3(grid_for(int64_t{n_rows} * n_ch, kBlock)), dim3(kBlock), 0, s,
             x, x_stride, n_rows, n_ch, w, kernel, states, out, out_stride);
}

void gated_delta_rule_rows(cudaStream_t s, const GatedDeltaArgs& a, int32_t n_rows,
                           const DeltaRowStates& states) {
  GEIST_CHECK(n_rows >= 0 && n_rows <= kDeltaRowsPerLaunch && a.n_k_heads >= 1 &&
                  a.n_v_heads >= 1 && a.d_k >= 1 && a.d_v >= 1 && a.d_k <= kMaxDk,
              "gated_delta_rule_rows: bad shape");
  if (n_rows == 0) return;
  with_rpt(a.d_k, kStepWarps,
           [&](auto r) { launch_step_rows<decltype(r)::value>(s, a, n_rows, states); });
}

void deltanet_gates(cudaStream_t s, float* beta, float* g, int32_t n_tok, int32_t n_heads,
                    const float* a, const float* dt_bias) {
  GEIST_CHECK(n_tok >= 0 && n_heads >= 1, "deltanet_gates: bad shape");
  const int64_t total = int64_t{n_tok} * n_heads;
  if (total == 0) return;
  launch_pdl(gates_kernel, dim3(grid_for(total, kBlock)), dim3(kBlock), 0, s, beta, g, total,
             n_heads, a, dt_bias);
}

void conv1d_silu(cudaStream_t s, const float* x, int64_t x_stride, int32_t n_tok, int64_t n_ch,
                 const float* w, int32_t kernel, float* state, float* out, int64_t out_stride) {
  GEIST_CHECK(n_tok >= 0 && n_ch >= 1 && kernel >= 1 && x_stride >= n_ch && out_stride >= n_ch,
              "conv1d_silu: bad shape or stride");
  if (n_tok == 0) return;
  const int64_t total = int64_t{n_tok} * n_ch;
  launch_pdl(conv1d_silu_kernel, dim3(grid_for(total, kBlock)), dim3(kBlock), 0, s, x, x_stride,
             n_tok, n_ch, w, kernel, static_cast<const float*>(state), out, out_stride);
  // Stream order makes the state advance wait for every output's read of the old state.
  if (kernel > 1) {
    launch_pdl(conv1d_state_kernel, dim3(grid_for(n_ch, kBlock)), dim3(kBlock), 0, s, x, x_stride,
               n_tok, n_ch, kernel - 1, state);
  }
}

void l2_norm_heads(cudaStream_t s, float* x, int64_t x_stride, int32_t n_tok, int32_t n_heads,
                   int32_t d, float eps, float scale) {
  GEIST_CHECK(n_tok >= 0 && n_heads >= 1 && d >= 1 && x_stride >= int64_t{n_heads} * d,
              "l2_norm_heads: bad shape or stride");
  const int64_t rows = int64_t{n_tok} * n_heads;
  if (rows == 0) return;
  launch_pdl(l2_norm_heads_kernel, dim3(grid_for(rows, kWarpsPerRow)), dim3(kWarpsPerRow * 32), 0,
             s, x, scale, static_cast<float*>(nullptr), 1.0f, x_stride, rows, n_heads, d, eps);
}

void l2_norm_heads2(cudaStream_t s, float* x_a, float scale_a, float* x_b, float scale_b,
                    int64_t x_stride, int32_t n_tok, int32_t n_heads, int32_t d, float eps) {
  GEIST_CHECK(n_tok >= 0 && n_heads >= 1 && d >= 1 && x_stride >= int64_t{n_heads} * d,
              "l2_norm_heads: bad shape or stride");
  const int64_t rows = int64_t{n_tok} * n_heads;
  if (rows == 0) return;
  launch_pdl(l2_norm_heads_kernel, dim3(grid_for(2 * rows, kWarpsPerRow)), dim3(kWarpsPerRow * 32),
             0, s, x_a, scale_a, x_b, scale_b, x_stride, rows, n_heads, d, eps);
}

void deltanet_prep(cudaStream_t s, const DeltaPrep& p) {
  GEIST_CHECK(p.n_ch >= 1 && p.kernel >= 1 && p.n_l2 >= 0 && p.n_l2 <= 2 &&
                  (p.n_l2 == 0 || (p.l2_heads >= 1 && p.d >= 1 && p.d <= 2048 &&
                                   int64_t{p.n_l2} * p.l2_heads * p.d <= p.n_ch)) &&
                  p.gate_heads >= 0,
              "deltanet_prep: bad shape");
  const int64_t n_normed = int64_t{p.n_l2} * p.l2_heads;
  const int64_t rest = p.n_ch - n_normed * p.d;
  const int64_t conv_blocks = n_normed + ceil_div(rest, kPrepBlock);
  GEIST_CHECK(conv_blocks < 0x7fffffff, "deltanet_prep: too many channels");
  const int64_t blocks = conv_blocks + (p.gate_heads > 0 ? 1 : 0);
  const size_t smem =
      n_normed > 0 ? static_cast<size_t>(p.d) * (sizeof(double) + sizeof(float)) : 0;
  launch_pdl(deltanet_prep_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kPrepBlock), smem, s,
             p, static_cast<int32_t>(n_normed), static_cast<int32_t>(conv_blocks));
}

size_t gated_delta_rule_scratch_bytes(const GatedDeltaArgs& a, int32_t chunk) {
  (void)chunk;  // the device form uses its own chunk (kDeltaChunk)
  return delta_chunk_enabled() ? delta_chunked_scratch_bytes(a) : 0;
}

void gated_delta_rule(cudaStream_t s, const GatedDeltaArgs& a, int32_t chunk, void* scratch) {
  (void)chunk;  // the device form uses its own chunk (kDeltaChunk)
  GEIST_CHECK(a.n_tokens >= 0 && a.n_k_heads >= 1 && a.n_v_heads >= 1 && a.d_k >= 1 && a.d_v >= 1,
              "gated_delta_rule: bad shape");
  GEIST_CHECK(a.d_k <= kMaxDk, "gated_delta_rule: d_k > 512 is not instantiated");
  if (a.n_tokens == 0) return;
  if (a.n_tokens == 1) {
    with_rpt(a.d_k, kStepWarps,
             [&](auto r) { launch_step<decltype(r)::value, false>(s, a, GatedNorm{}); });
  } else if (delta_chunk_enabled() && delta_chunked_applies(a)) {
    delta_chunked(s, a, scratch);
  } else {
    delta_scan(s, a);
  }
}

void gated_delta_rule_norm(cudaStream_t s, const GatedDeltaArgs& a, const float* z, const float* w,
                           float eps, unsigned* count) {
  GEIST_CHECK(a.n_tokens == 1 && a.n_k_heads >= 1 && a.n_v_heads >= 1 && a.d_k >= 1 && a.d_v >= 1 &&
                  a.d_k <= kMaxDk,
              "gated_delta_rule_norm: bad shape");
  GatedNorm nrm;
  nrm.z = z;
  nrm.w = w;
  nrm.eps = eps;
  nrm.count = count;
  with_rpt(a.d_k, kStepWarps, [&](auto r) { launch_step<decltype(r)::value, true>(s, a, nrm); });
}

void rms_norm_gated(cudaStream_t s, const float* x, const float* z, const float* w, int32_t n_rows,
                    int32_t d, float eps, float* out) {
  GEIST_CHECK(n_rows >= 0 && d >= 1, "rms_norm_gated: bad shape");
  if (n_rows == 0) return;
  launch_pdl(rms_norm_gated_kernel, dim3(grid_for(n_rows, kWarpsPerRow)), dim3(kWarpsPerRow * 32),
             0, s, x, z, w, n_rows, d, eps, out);
}

}  // namespace geist::cuda
