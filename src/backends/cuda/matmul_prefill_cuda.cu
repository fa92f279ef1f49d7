// Prefill matmul of the 8-bit path (Q8_0, Q4_0) on the int8 tensor cores.
//
// The arithmetic of every output element is the one fixed at the top of matmul_q8_cuda.cu:
// per 32-block b in order, acc = fma(float(isum_b), dw_b * dx_b, acc) from +0, isum_b the exact
// int32 dot of the weight codes with the activation codes. Only the feeding differs from the
// decode kernel: the activations are quantized once per call into a device scratch
// (quantize_kernel: the codes in the fragments' slot order, so that staging and fragment loads
// are plain 16-byte moves), then a block owns BM rows x BN tokens and walks the block pairs in
// order; each pair's codes and scales are staged in shared memory once per block for all its
// warps.
//
// Q8_0 (ring_kernel): the repacked rows and the scratch are 16-byte aligned slot-order copies,
// so a pair's operands go global -> shared by cp.async (no registers hold staged data) into a
// ring of kRing stages: kRing - 1 pairs are in flight while one is multiplied, one barrier per
// pair. Each thread sets up its copies' sources once (rows past n_out and tokens past n_tok
// clamped to the last one: their products are never stored) and advances them a pair per
// stage; with the bounds checks and addresses recomputed per stage the LARGE loop was 1282
// instructions, ~180 of them address arithmetic, and llama-1b pp2048 went 47.5k -> 52.0k
// without them (H200). A block is issue-bound at 2-3 warps per scheduler (ncu: ~65 % of
// cycles issue), so AUTO picks the tile by a fitted estimate of rounds x concurrency
// (pick_ring). The swiglu variant (SW) multiplies gate and up rows of the same columns in one
// block and takes swiglu in registers (matmul_prefill_swiglu).
// Q4_0 (prefill_kernel): its 18-byte blocks are only 2-byte aligned and their nibbles must be
// unpacked, so they are staged through registers: the next pair's loads are in flight while the
// current pair is multiplied (two shared buffers).
#include <cmath>

#include "backends/cuda/cp_async_cuda.cuh"
#include "backends/cuda/matmul_common.cuh"
#include "backends/cuda/matmul_prefill_cuda.h"
#include "backends/cuda/norm_cuda.cuh"

namespace geist::cuda {

namespace {

using namespace mm;  // NOLINT(build/namespaces): the helpers shared with the decode kernels

constexpr int kMaxGridY = 65535;

// Scratch of n tokens: codes [n][P][pairs][64] (pair k of plane p: lane quad q's 16 bytes at
// 16q, chunk 2k's slot words then chunk 2k + 1's; an odd last chunk zero), then the steps
// dx [n][2 * pairs] floats (the padding chunk 0).
struct ActQ8 {
  const uint8_t* codes;
  const float* dx;
  int64_t pairs;
};

size_t act_token_bytes(int planes, int64_t n_in) {
  const int64_t pairs = q8_pairs(n_in);
  return static_cast<size_t>(pairs) * (64 * static_cast<size_t>(planes) + 8);
}

// Four lanes per (token, chunk slot): simd::quantize_row_q8_reference's codes, bitwise
// (quant_quad).
template <int P>
__global__ void quantize_kernel(const float* __restrict__ x, int64_t x_stride, int32_t n_tok,
                                int64_t n_in, bool vec, uint8_t* __restrict__ codes,
                                float* __restrict__ dxs) {
  const int64_t pairs = q8_pairs(n_in);
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t blk = idx >> 2;  // whole warps stay in the loop: the shuffles need all lanes
  const int q = static_cast<int>(idx & 3);
  const bool live = blk < n_tok * 2 * pairs;
  const int64_t t = live ? blk / (2 * pairs) : 0, b = live ? blk % (2 * pairs) : 0;
  float va[4], vb[4];
  x_load4(x, x_stride, n_tok, vec, live && b < n_in / 32, t, b * 32 + 4 * q, va);
  x_load4(x, x_stride, n_tok, vec, live && b < n_in / 32, t, b * 32 + 16 + 4 * q, vb);
  const float v[8] = {va[0], va[1], va[2], va[3], vb[0], vb[1], vb[2], vb[3]};
  uint32_t lo[P], hi[P];
  const float dx = quant_quad<P>(v, lo, hi);
  if (!live) return;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    uint8_t* dst = codes + ((t * P + p) * pairs + b / 2) * 64 + 8 * (b & 1) + 16 * q;
    *reinterpret_cast<uint2*>(dst) = make_uint2(lo[p], hi[p]);
  }
  if (q == 0) dxs[t * 2 * pairs + b] = dx;
}

// One block pair's operands. Lane (g, q) reads 16 bytes at [row][q] for 8 consecutive rows
// (or tokens): with 64-byte rows those are 128 contiguous bytes per quarter warp, free of bank
// conflicts, and so are the staging writes.
template <int BM, int BN, int P>
struct Stage {
  uint4 a[BM][4];     // [row][lane quad]: the pair's weight codes (PairLoader)
  uint4 b[P][BN][4];  // [plane][token][lane quad]: the activation codes
  uint32_t dw[BM];    // [row]: the two f16 scales
  float2 dx[BN];      // [token]: the two steps
};

constexpr int kStaged = 2;  // prefill_kernel's shared buffers

// Block = WM x WN warps, each MR m16 tiles x NR n8 tiles (rows x tokens).
template <int MR, int NR, int WM, int WN, int P>
struct Tile {
  static constexpr int kThreads = 32 * WM * WN;
  static constexpr int kRows = 16 * MR * WM;
  static constexpr int kToks = 8 * NR * WN;
  static constexpr int kATasks = kRows * 4 / kThreads;      // (row, quad) loads per thread
  static constexpr int kBTasks = P * kToks * 4 / kThreads;  // (plane, token, quad) loads
  static_assert(kRows * 4 % kThreads == 0 && P * kToks * 4 % kThreads == 0, "staging split");
  static_assert(kRows + kToks <= kThreads, "one scale load per thread");
  static constexpr int kPlanes = P;
  using St = Stage<kRows, kToks, P>;
};

// The A quad of m-tile rows wr + 16 i (+ g, + g + 8), chunk 2k + h, for lane (g, q): two rows'
// words 2q, 2q + 1 (register moves: the mma takes the quad in consecutive registers; staging
// the quads themselves in shared memory by 4-byte copies measured 10 % slower end to end).
template <class St>
__device__ __forceinline__ uint4 a_quad(const St& s, int wr, int i, int h, int g, int q) {
  const uint4 lo = s.a[wr + 16 * i + g][q], hi = s.a[wr + 16 * i + g + 8][q];
  return h == 0 ? make_uint4(lo.x, hi.x, lo.y, hi.y) : make_uint4(lo.z, hi.z, lo.w, hi.w);
}

// One stage's products for a warp: MR x NR tiles of 16 rows x 8 tokens, chunk 2k then chunk
// 2k + 1 (the block order of every element's chain).
template <int MR, int NR, int P, class St>
__device__ __forceinline__ void pair_products(const St& s, int wr, int wt, int g, int q,
                                              float (&acc)[MR][NR][4]) {
  uint4 a[MR][2];  // [m-tile][chunk]: the mma's A quads
  uint32_t dwb[MR][2];
#pragma unroll
  for (int i = 0; i < MR; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      a[i][h] = a_quad(s, wr, i, h, g, q);
      dwb[i][h] = s.dw[wr + 16 * i + g + 8 * h];
    }
  }
#pragma unroll
  for (int j = 0; j < NR; ++j) {
    const int tok = wt + 8 * j + g;
    uint4 b4[P];
#pragma unroll
    for (int p = 0; p < P; ++p) b4[p] = s.b[p][tok][q];
    const float2 dx0 = s.dx[wt + 8 * j + 2 * q], dx1 = s.dx[wt + 8 * j + 2 * q + 1];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint2 b[P];
#pragma unroll
      for (int p = 0; p < P; ++p) {
        b[p] = h == 0 ? make_uint2(b4[p].x, b4[p].y) : make_uint2(b4[p].z, b4[p].w);
      }
#pragma unroll
      for (int i = 0; i < MR; ++i) {
        block_fma<P>(a[i][h], b, f16_bits(h == 0 ? dwb[i][0] & 0xFFFFu : dwb[i][0] >> 16),
                     f16_bits(h == 0 ? dwb[i][1] & 0xFFFFu : dwb[i][1] >> 16),
                     h == 0 ? dx0.x : dx0.y, h == 0 ? dx1.x : dx1.y, acc[i][j]);
      }
    }
  }
}

template <GgmlType T, int MR, int NR, int WM, int WN>
__global__ void __launch_bounds__(32 * WM * WN, 1)
    prefill_kernel(const DevW w, const ActQ8 act, int32_t n_tok, float* __restrict__ y,
                   int64_t y_stride) {
  constexpr int P = T == GgmlType::Q8_0 ? 2 : 1;
  using C = Tile<MR, NR, WM, WN, P>;
  using St = typename C::St;
  extern __shared__ uint4 smem[];
  St* st = reinterpret_cast<St*>(smem);  // [2]: pair k staged in st[k & 1]
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, wp = tid >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int wr = (wp % WM) * 16 * MR;  // the warp's first row in the block
  const int wt = (wp / WM) * 8 * NR;   // the warp's first token in the block
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * C::kRows;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * C::kToks;
  const int64_t pairs = act.pairs;

  uint4 ra[C::kATasks];
  uint4 rb[C::kBTasks];
  uint32_t rs = 0u;  // tid < kRows: row tid's scales; then token tid - kRows's steps
  float2 rx = make_float2(0.0f, 0.0f);
  auto load = [&](int64_t k) {
#pragma unroll
    for (int i = 0; i < C::kATasks; ++i) {
      const int id = tid + i * C::kThreads;
      ra[i] = PairLoader<T>::codes(w, r0 + (id >> 2), k, id & 3);
    }
    if (tid < C::kRows) rs = PairLoader<T>::scales(w, r0 + tid, k);
#pragma unroll
    for (int i = 0; i < C::kBTasks; ++i) {
      const int id = tid + i * C::kThreads;
      const int p = id / (C::kToks * 4), tq = id % (C::kToks * 4);
      const int64_t t = t0 + (tq >> 2);
      rb[i] = t < n_tok ? __ldg(reinterpret_cast<const uint4*>(
                              act.codes + ((t * P + p) * pairs + k) * 64 + 16 * (tq & 3)))
                        : make_uint4(0u, 0u, 0u, 0u);
    }
    if (tid >= C::kRows && tid < C::kRows + C::kToks) {
      const int64_t t = t0 + tid - C::kRows;
      rx = t < n_tok ? __ldg(reinterpret_cast<const float2*>(act.dx + t * 2 * pairs + 2 * k))
                     : make_float2(0.0f, 0.0f);
    }
  };
  auto store = [&](St& s) {
#pragma unroll
    for (int i = 0; i < C::kATasks; ++i) {
      const int id = tid + i * C::kThreads;
      s.a[id >> 2][id & 3] = ra[i];
    }
#pragma unroll
    for (int i = 0; i < C::kBTasks; ++i) {
      const int id = tid + i * C::kThreads;
      const int p = id / (C::kToks * 4), tq = id % (C::kToks * 4);
      s.b[p][tq >> 2][tq & 3] = rb[i];
    }
    if (tid < C::kRows) {
      s.dw[tid] = rs;
    } else if (tid < C::kRows + C::kToks) {
      s.dx[tid - C::kRows] = rx;
    }
  };

  float acc[MR][NR][4];  // accumulator layout of mma m16n8
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
  for (int64_t k = 0; k < pairs; ++k) {
    const bool more = k + 1 < pairs;
    if (more) load(k + 1);
    pair_products<MR, NR, P>(st[k & 1], wr, wt, g, q, acc);
    if (more) store(st[(k + 1) & 1]);
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
        if (r < w.n_out && t < n_tok) y[t * y_stride + r] = acc[i][j][e];
      }
    }
  }
}

// ---- Q8_0: cp.async ring ----

constexpr int kRing = 4;  // stages: kRing - 1 pairs in flight while one is multiplied

// What a ring launch writes. Plain (SW false): y[t][r] for the rows r of w. SW: the rows of
// gate (w) and up (u) for the same columns in one block, so that swiglu is taken in registers:
// a warp's m-tiles i < MR / 2 are gate rows and i >= MR / 2 the up rows of the same columns
// (a block: kRows / 2 columns); it writes gate's values to y and up's to y2 (each unless
// null) and swiglu_elem(gate, up) to out.
struct RingOut {
  DevW w, u;
  float* y;
  int64_t y_stride;
  float* y2;
  int64_t y2_stride;
  float* out;
  int64_t out_stride;
};

// Q8_0 only (two planes). MINB: blocks per multiprocessor the registers are budgeted for.
template <int MR, int NR, int WM, int WN, int MINB, bool SW>
__global__ void __launch_bounds__(32 * WM * WN, MINB)
    ring_kernel(const RingOut o, const ActQ8 act, int32_t n_tok) {
  constexpr int P = 2;
  using C = Tile<MR, NR, WM, WN, P>;
  using St = typename C::St;
  static_assert(!SW || MR % 2 == 0, "SW: a warp's m-tiles split evenly between gate and up");
  extern __shared__ uint4 smem[];
  St* st = reinterpret_cast<St*>(smem);  // [kRing]: pair k in st[k % kRing]
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, wp = tid >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int wr = (wp % WM) * 16 * MR;  // the warp's first row in the block
  const int wt = (wp / WM) * 8 * NR;   // the warp's first token in the block
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * C::kToks;
  const int64_t pairs = act.pairs;
  const int64_t n_out = o.w.n_out;
  // Row (plain) or column (SW) of the block's stage row sr; *up: an up row.
  auto out_row = [&](int sr, bool* up) -> int64_t {
    if constexpr (SW) {
      const int i = (sr >> 4) % MR;
      *up = i >= MR / 2;
      return static_cast<int64_t>(blockIdx.x) * (C::kRows / 2) + (sr >> 4) / MR * 8 * MR +
             (i % (MR / 2)) * 16 + (sr & 15);
    } else {
      *up = false;
      return static_cast<int64_t>(blockIdx.x) * C::kRows + sr;
    }
  };

  // Thread tid copies 16-byte pieces tid + i * kThreads of each stage: (row, quad) of the
  // weight codes, then (plane, token, quad) of the activation codes; then one row's scales
  // (tid < kRows) or one token's steps. The sources are set up once and advance by one pair
  // per stage (the loop issues the pairs in order). Rows past n_out and tokens past n_tok
  // read the last row / token instead: their products reach only outputs that are not
  // stored, so the copies need no bounds checks.
  const uint8_t* src_a[C::kATasks];
#pragma unroll
  for (int i = 0; i < C::kATasks; ++i) {
    const int id = tid + i * C::kThreads;
    bool up;
    const int64_t r = min(out_row(id >> 2, &up), n_out - 1);
    src_a[i] = (up ? o.u.data : o.w.data) + r * o.w.qrow + 16 * (id & 3);
  }
  const uint8_t* src_b[C::kBTasks];
#pragma unroll
  for (int i = 0; i < C::kBTasks; ++i) {
    const int id = tid + i * C::kThreads;
    const int p = id / (C::kToks * 4), tq = id % (C::kToks * 4);
    const int64_t t = min(t0 + (tq >> 2), static_cast<int64_t>(n_tok) - 1);
    src_b[i] = act.codes + (t * P + p) * pairs * 64 + 16 * (tq & 3);
  }
  const uint8_t* src_s = nullptr;  // this thread's scales (4 bytes a pair) or steps (8)
  if (tid < C::kRows) {
    bool up;
    const int64_t r = min(out_row(tid, &up), n_out - 1);
    src_s = reinterpret_cast<const uint8_t*>((up ? o.u.scales : o.w.scales) + r * o.w.drow);
  } else if (tid < C::kRows + C::kToks) {
    const int64_t t = min(t0 + tid - C::kRows, static_cast<int64_t>(n_tok) - 1);
    src_s = reinterpret_cast<const uint8_t*>(act.dx + t * 2 * pairs);
  }
  auto issue = [&](St& s) {
#pragma unroll
    for (int i = 0; i < C::kATasks; ++i) {
      const int id = tid + i * C::kThreads;
      cp_async<16>(&s.a[id >> 2][id & 3], src_a[i], true);
      src_a[i] += 64;
    }
#pragma unroll
    for (int i = 0; i < C::kBTasks; ++i) {
      const int id = tid + i * C::kThreads;
      const int p = id / (C::kToks * 4), tq = id % (C::kToks * 4);
      cp_async<16>(&s.b[p][tq >> 2][tq & 3], src_b[i], true);
      src_b[i] += 64;
    }
    if (tid < C::kRows) {
      cp_async<4>(&s.dw[tid], src_s, true);
      src_s += 4;
    } else if (tid < C::kRows + C::kToks) {
      cp_async<8>(&s.dx[tid - C::kRows], src_s, true);
      src_s += 8;
    }
  };

  float acc[MR][NR][4];  // accumulator layout of mma m16n8
#pragma unroll
  for (int i = 0; i < MR; ++i) {
#pragma unroll
    for (int j = 0; j < NR; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    }
  }
  // Every iteration commits one group (empty past the last pair), so "all but kRing - 2
  // groups done" always means "pair k has landed".
#pragma unroll
  for (int k = 0; k < kRing - 1; ++k) {
    if (k < pairs) issue(st[k]);
    cp_async_commit();
  }
  int slot = 0;  // k % kRing
  for (int64_t k = 0; k < pairs; ++k) {
    cp_async_wait<kRing - 2>();
    // Pair k is visible to all warps, and all of them are done with pair k - 1, whose slot
    // the next copy reuses.
    __syncthreads();
    const int64_t kn = k + kRing - 1;
    if (kn < pairs) issue(st[slot == 0 ? kRing - 1 : slot - 1]);
    cp_async_commit();
    pair_products<MR, NR, P>(st[slot], wr, wt, g, q, acc);
    slot = slot + 1 == kRing ? 0 : slot + 1;
  }
  cp_async_wait<0>();
  // Each warp store covers 8 consecutive rows (32 bytes) of 4 tokens: whole sectors.
  constexpr int kOutTiles = SW ? MR / 2 : MR;
#pragma unroll
  for (int i = 0; i < kOutTiles; ++i) {
#pragma unroll
    for (int j = 0; j < NR; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        bool up;
        const int64_t r = out_row(wr + 16 * i + g + (e >= 2 ? 8 : 0), &up);
        const int64_t t = t0 + wt + 8 * j + 2 * q + (e & 1);
        if (r >= n_out || t >= n_tok) continue;
        if constexpr (SW) {
          const float gv = acc[i][j][e], uv = acc[i + MR / 2][j][e];
          if (o.y != nullptr) o.y[t * o.y_stride + r] = gv;
          if (o.y2 != nullptr) o.y2[t * o.y2_stride + r] = uv;
          o.out[t * o.out_stride + r] = swiglu_elem(gv, uv);
        } else {
          o.y[t * o.y_stride + r] = acc[i][j][e];
        }
      }
    }
  }
}

// The grid of a tile C over `rows` (rows of a block: C::kRows / div) x n_tok tokens, in
// launches of at most 65535 token tiles: launch(grid, act part, tokens, first token).
template <class C, class F>
cudaError_t launch_grid(int64_t rows, int div, const ActQ8& act, int32_t n_tok, F launch) {
  const int64_t per_block = C::kRows / div;
  const int64_t blocks_x = (rows + per_block - 1) / per_block;
  if (blocks_x > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const int64_t per_launch = static_cast<int64_t>(kMaxGridY) * C::kToks;
  const size_t tok_codes = static_cast<size_t>(C::kPlanes * act.pairs * 64);
  for (int64_t t = 0; t < n_tok; t += per_launch) {
    const int64_t nt = n_tok - t < per_launch ? n_tok - t : per_launch;
    const dim3 grid(static_cast<unsigned>(blocks_x),
                    static_cast<unsigned>((nt + C::kToks - 1) / C::kToks));
    const ActQ8 part{act.codes + t * tok_codes, act.dx + t * 2 * act.pairs, act.pairs};
    launch(grid, part, static_cast<int32_t>(nt), t);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// Past 48 KB a kernel's dynamic shared memory must be allowed explicitly.
template <class K>
cudaError_t allow_smem(K kernel, size_t smem) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(smem));
}

// Q4_0's register-staged kernel.
template <GgmlType T, int MR, int NR, int WM, int WN>
cudaError_t launch_tile(cudaStream_t s, const DevW& w, const ActQ8& act, int32_t n_tok, float* y,
                        int64_t y_stride) {
  using C = Tile<MR, NR, WM, WN, q8_planes(T)>;
  const auto kernel = prefill_kernel<T, MR, NR, WM, WN>;
  const size_t smem = kStaged * sizeof(typename C::St);
  const cudaError_t e = allow_smem(kernel, smem);
  if (e != cudaSuccess) return e;
  return launch_grid<C>(
      w.n_out, 1, act, n_tok, [&](dim3 grid, const ActQ8& a, int32_t nt, int64_t t) {
        kernel<<<grid, C::kThreads, smem, s>>>(w, a, nt, y + t * y_stride, y_stride);
      });
}

// Q8_0's ring kernels: LARGE 8 warps of 64 rows x 32 tokens (128 x 128), MEDIUM 8 warps of
// 32 x 32 (128 x 64), SMALL 4 warps of 32 x 32 (64 x 64), TINY 4 warps of 16 x 16 (32 x 32).
// The swiglu variants (SW) of all but TINY (one m-tile per warp) pair gate and up rows.
template <int MR, int NR, int WM, int WN, int MINB>
struct RingTile {
  using C = Tile<MR, NR, WM, WN, 2>;
  static constexpr size_t kSmem = kRing * sizeof(typename C::St);
  template <bool SW>
  static constexpr auto kernel = ring_kernel<MR, NR, WM, WN, MINB, SW>;
};
template <PrefillTile K>
struct Ring;
template <>
struct Ring<PrefillTile::LARGE> : RingTile<4, 4, 2, 4, 1> {};
template <>
struct Ring<PrefillTile::MEDIUM> : RingTile<2, 4, 4, 2, 2> {};
template <>
struct Ring<PrefillTile::SMALL> : RingTile<2, 4, 2, 2, 3> {};
template <>
struct Ring<PrefillTile::TINY> : RingTile<1, 2, 2, 2, 4> {};

template <PrefillTile K, bool SW>
cudaError_t launch_ring(cudaStream_t s, const RingOut& o, const ActQ8& act, int32_t n_tok) {
  using R = Ring<K>;
  using C = typename R::C;
  const auto kernel = R::template kernel<SW>;
  const cudaError_t e = allow_smem(kernel, R::kSmem);
  if (e != cudaSuccess) return e;
  return launch_grid<C>(o.w.n_out, SW ? 2 : 1, act, n_tok,
                        [&](dim3 grid, const ActQ8& a, int32_t nt, int64_t t) {
                          RingOut ot = o;
                          ot.y = o.y != nullptr ? o.y + t * o.y_stride : nullptr;
                          ot.y2 = o.y2 != nullptr ? o.y2 + t * o.y2_stride : nullptr;
                          ot.out = o.out != nullptr ? o.out + t * o.out_stride : nullptr;
                          kernel<<<grid, C::kThreads, R::kSmem, s>>>(ot, a, nt);
                        });
}

// A ring tile's estimated time (us) for n_out x n_tok x pairs: the busiest multiprocessor takes
// `per_sm` blocks in rounds of m <= occ resident ones; a lone block takes `us` per pair (it is
// latency-bound), m blocks together pow(m, kShare) times that. Fitted to the H200 timings of
// every tile on llama-1b's and qwen35-0.8b's projections at 128, 256, 512 and 2048 tokens
// (CudaMatmulPrefill.Q8TilesTimedOnModelShapesAndSampledBitwise): us = 2.3 (LARGE), 1.7
// (MEDIUM), 0.85 (SMALL), 0.5 (TINY), kShare 0.45. With the sources set up once per block
// (session 12) its pick was the fastest tile for 46 of the 48 (shape, batch) pairs, at most
// 1.6 % off (SMALL at 1.0, the earlier fit: 37 of 48, up to 4.4 % off; any SMALL value in
// 0.75-0.9 picks the same).
constexpr double kShare = 0.45;

template <PrefillTile K>
cudaError_t ring_estimate(int sms, int64_t n_out, int32_t n_tok, int64_t pairs, double us,
                          double* est) {
  using R = Ring<K>;
  using C = typename R::C;
  const auto kernel = R::template kernel<false>;
  cudaError_t e = allow_smem(kernel, R::kSmem);
  int occ = 0;
  if (e == cudaSuccess) {
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, C::kThreads, R::kSmem);
  }
  if (e != cudaSuccess) return e;
  occ = occ < 1 ? 1 : occ;
  const int64_t blocks = ((n_out + C::kRows - 1) / C::kRows) * ((n_tok + C::kToks - 1) / C::kToks);
  const int64_t per_sm = (blocks + sms - 1) / sms;
  const int64_t m = per_sm < occ ? per_sm : occ;
  const int64_t rounds = (per_sm + m - 1) / m;
  *est = static_cast<double>(rounds) * static_cast<double>(pairs) * us *
         pow(static_cast<double>(m), kShare);
  return cudaSuccess;
}

// AUTO for Q8_0: the ring tile of least estimated time for n_rows rows of n_in (ties to the
// larger tile); TINY only when `tiny`.
cudaError_t pick_ring(int64_t n_rows, int64_t n_in, int32_t n_tok, bool tiny, PrefillTile* tile) {
  int dev = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) return e;
  const int64_t pairs = q8_pairs(n_in);
  double est[4] = {0, 0, 0, 0};  // LARGE, MEDIUM, SMALL, TINY
  e = ring_estimate<PrefillTile::LARGE>(sms, n_rows, n_tok, pairs, 2.3, &est[0]);
  if (e == cudaSuccess) {
    e = ring_estimate<PrefillTile::MEDIUM>(sms, n_rows, n_tok, pairs, 1.7, &est[1]);
  }
  if (e == cudaSuccess) {
    e = ring_estimate<PrefillTile::SMALL>(sms, n_rows, n_tok, pairs, 0.85, &est[2]);
  }
  if (e == cudaSuccess && tiny) {
    e = ring_estimate<PrefillTile::TINY>(sms, n_rows, n_tok, pairs, 0.5, &est[3]);
  }
  if (e != cudaSuccess) return e;
  const PrefillTile order[4] = {PrefillTile::LARGE, PrefillTile::MEDIUM, PrefillTile::SMALL,
                                PrefillTile::TINY};
  int best = 0;
  for (int i = 1; i < (tiny ? 4 : 3); ++i) best = est[i] < est[best] ? i : best;
  *tile = order[best];
  return cudaSuccess;
}

// A ring launch of `tile` (AUTO: the estimated best for the rows it multiplies; the swiglu
// variant, o.w gate and o.u up, has no TINY tile and takes AUTO's pick for it).
template <bool SW>
cudaError_t launch_ring_tile(cudaStream_t s, const RingOut& o, const ActQ8& act, int32_t n_tok,
                             PrefillTile tile) {
  if (tile == PrefillTile::AUTO || (SW && tile == PrefillTile::TINY)) {
    const cudaError_t e = pick_ring((SW ? 2 : 1) * o.w.n_out, o.w.n_in, n_tok, !SW, &tile);
    if (e != cudaSuccess) return e;
  }
  switch (tile) {
    case PrefillTile::LARGE:
      return launch_ring<PrefillTile::LARGE, SW>(s, o, act, n_tok);
    case PrefillTile::MEDIUM:
      return launch_ring<PrefillTile::MEDIUM, SW>(s, o, act, n_tok);
    case PrefillTile::SMALL:
      return launch_ring<PrefillTile::SMALL, SW>(s, o, act, n_tok);
    default:
      if constexpr (SW) {
        return launch_ring<PrefillTile::SMALL, SW>(s, o, act, n_tok);
      } else {
        return launch_ring<PrefillTile::TINY, SW>(s, o, act, n_tok);
      }
  }
}

cudaError_t launch_q8_0(cudaStream_t s, const DevW& w, const ActQ8& act, int32_t n_tok, float* y,
                        int64_t y_stride, PrefillTile tile) {
  return launch_ring_tile<false>(s, RingOut{w, w, y, y_stride, nullptr, 0, nullptr, 0}, act, n_tok,
                                 tile);
}

// A Q4_0 tile's estimated time for n_out x n_tok: its waves (blocks over the resident blocks
// of the device) times the work of one wave, which `occ` resident blocks share; `cost` weighs
// a tile's time per product.
template <GgmlType T, int MR, int NR, int WM, int WN>
cudaError_t tile_estimate(int sms, int64_t n_out, int32_t n_tok, double cost, double* est) {
  using C = Tile<MR, NR, WM, WN, q8_planes(T)>;
  const auto kernel = prefill_kernel<T, MR, NR, WM, WN>;
  int occ = 0;
  const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &occ, kernel, C::kThreads, kStaged * sizeof(typename C::St));
  if (e != cudaSuccess) return e;
  occ = occ < 1 ? 1 : occ;
  const int64_t blocks = ((n_out + C::kRows - 1) / C::kRows) * ((n_tok + C::kToks - 1) / C::kToks);
  const int64_t slots = static_cast<int64_t>(sms) * occ;
  const int64_t waves = (blocks + slots - 1) / slots;
  *est = static_cast<double>(waves) * C::kRows * C::kToks * occ * cost;
  return cudaSuccess;
}

// Q4_0 (register-staged): LARGE 8 warps of 64 rows x 32 tokens (128 x 128); SMALL (and
// MEDIUM) 4 warps of 32 x 32 (64 x 64); TINY: 4 warps of 16 x 16 (32 x 32). The kernel is
// latency-bound (one pair of prefetch in registers), so resident warps count more than staging
// per product. Measured on the H200 with Q8_0 when it took this kernel (geist bench, pp2048 /
// pp512 with one tile for every matmul): llama-1b LARGE 15.7k / 17.0k tok/s, SMALL 25.4k /
// 29.0k, TINY 24.4k / 27.7k; qwen35-0.8b 7.6k / 8.1k, 12.2k / 13.5k, 13.1k / 14.7k. AUTO: TINY
// for short rows (n_in <= 1024, where a block's prologue is a large share), else the lower
// tile_estimate, TINY weighed 1.1 so that 2048-row matrices (a tie in waves) stay SMALL.
cudaError_t launch_q4_0(cudaStream_t s, const DevW& w, const ActQ8& act, int32_t n_tok, float* y,
                        int64_t y_stride, PrefillTile tile) {
  constexpr GgmlType T = GgmlType::Q4_0;
  if (tile == PrefillTile::AUTO) {
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    double small = 0, tiny = 0;
    e = tile_estimate<T, 2, 4, 2, 2>(sms, w.n_out, n_tok, 1.0, &small);
    if (e == cudaSuccess) e = tile_estimate<T, 1, 2, 2, 2>(sms, w.n_out, n_tok, 1.1, &tiny);
    if (e != cudaSuccess) return e;
    tile = small <= tiny && q8_pairs(w.n_in) > 16 ? PrefillTile::SMALL : PrefillTile::TINY;
  }
  if (tile == PrefillTile::LARGE) return launch_tile<T, 4, 4, 2, 4>(s, w, act, n_tok, y, y_stride);
  if (tile == PrefillTile::SMALL || tile == PrefillTile::MEDIUM) {
    return launch_tile<T, 2, 4, 2, 2>(s, w, act, n_tok, y, y_stride);
  }
  return launch_tile<T, 1, 2, 2, 2>(s, w, act, n_tok, y, y_stride);
}

}  // namespace

bool matmul_prefill_supported(GgmlType t) { return t == GgmlType::Q8_0 || t == GgmlType::Q4_0; }

size_t matmul_prefill_scratch_bytes(GgmlType t, int64_t n_in, int32_t n_tok) {
  if (!matmul_prefill_supported(t) || n_tok <= 0) return 0;
  return act_token_bytes(q8_planes(t), n_in) * static_cast<size_t>(n_tok);
}

namespace {

// The rounds of a prefill over n_tok tokens of x (n_in each, planes per type t): each round
// quantizes as many tokens as the scratch holds, then run(act, tokens, first token) launches
// the matmuls that read them.
template <class F>
cudaError_t in_rounds(cudaStream_t s, GgmlType t, int64_t n_in, const float* x, int64_t x_stride,
                      int32_t n_tok, void* scratch, size_t scratch_bytes, F run) {
  const int planes = q8_planes(t);
  const size_t per_tok = act_token_bytes(planes, n_in);
  // Tokens are independent: a scratch smaller than the batch takes it in rounds.
  const int64_t round = static_cast<int64_t>(scratch_bytes / per_tok);
  if (scratch == nullptr || round <= 0) return cudaErrorInvalidValue;
  const int64_t pairs = q8_pairs(n_in);
  for (int64_t t0 = 0; t0 < n_tok; t0 += round) {
    const int32_t nt = static_cast<int32_t>(n_tok - t0 < round ? n_tok - t0 : round);
    const float* xt = x + t0 * x_stride;
    const bool vec = x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(xt) % 16 == 0;
    uint8_t* codes = static_cast<uint8_t*>(scratch);
    float* dx = reinterpret_cast<float*>(codes + static_cast<size_t>(nt) * planes * pairs * 64);
    const int64_t items = static_cast<int64_t>(nt) * 2 * pairs * 4;
    const int threads = 128;
    const int64_t blocks = (items + threads - 1) / threads;
    if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
    if (planes == 2) {
      quantize_kernel<2><<<static_cast<unsigned>(blocks), threads, 0, s>>>(xt, x_stride, nt, n_in,
                                                                           vec, codes, dx);
    } else {
      quantize_kernel<1><<<static_cast<unsigned>(blocks), threads, 0, s>>>(xt, x_stride, nt, n_in,
                                                                           vec, codes, dx);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    e = run(ActQ8{codes, dx, pairs}, nt, t0);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

bool prefill_shape_ok(const WeightMatrix& w) {
  return matmul_prefill_supported(w.type) && w.n_in > 0 && w.n_in % 32 == 0;
}

}  // namespace

cudaError_t matmul_prefill(cudaStream_t s, const WeightMatrix& w, const float* x, int64_t x_stride,
                           int32_t n_tok, float* y, int64_t y_stride, void* scratch,
                           size_t scratch_bytes, PrefillTile tile) {
  const MatmulOut one{w, y, y_stride};
  return matmul_prefill_batch(s, &one, 1, x, x_stride, n_tok, scratch, scratch_bytes, tile);
}

cudaError_t matmul_prefill_batch(cudaStream_t s, const MatmulOut* outs, int n, const float* x,
                                 int64_t x_stride, int32_t n_tok, void* scratch,
                                 size_t scratch_bytes, PrefillTile tile) {
  if (n_tok <= 0 || n <= 0) return cudaSuccess;
  for (int i = 0; i < n; ++i) {
    if (!prefill_shape_ok(outs[i].w) || outs[i].w.type != outs[0].w.type ||
        outs[i].w.n_in != outs[0].w.n_in) {
      return cudaErrorInvalidValue;
    }
  }
  const WeightMatrix& w0 = outs[0].w;
  return in_rounds(s, w0.type, w0.n_in, x, x_stride, n_tok, scratch, scratch_bytes,
                   [&](const ActQ8& act, int32_t nt, int64_t t) {
                     for (int i = 0; i < n; ++i) {
                       const WeightMatrix& w = outs[i].w;
                       if (w.n_out <= 0) continue;
                       const DevW d = dev_w(w);
                       float* y = outs[i].y + t * outs[i].y_stride;
                       const cudaError_t e =
                           w.type == GgmlType::Q8_0
                               ? launch_q8_0(s, d, act, nt, y, outs[i].y_stride, tile)
                               : launch_q4_0(s, d, act, nt, y, outs[i].y_stride, tile);
                       if (e != cudaSuccess) return e;
                     }
                     return cudaSuccess;
                   });
}

bool matmul_prefill_swiglu_ok(const WeightMatrix& gate, const WeightMatrix& up) {
  return gate.type == GgmlType::Q8_0 && up.type == GgmlType::Q8_0 && prefill_shape_ok(gate) &&
         gate.n_in == up.n_in && gate.n_out == up.n_out;
}

cudaError_t matmul_prefill_swiglu(cudaStream_t s, const MatmulOut& gate, const MatmulOut& up,
                                  const float* x, int64_t x_stride, int32_t n_tok, float* out,
                                  int64_t out_stride, void* scratch, size_t scratch_bytes,
                                  PrefillTile tile) {
  if (n_tok <= 0 || gate.w.n_out <= 0) return cudaSuccess;
  if (!matmul_prefill_swiglu_ok(gate.w, up.w)) return cudaErrorInvalidValue;
  return in_rounds(s, gate.w.type, gate.w.n_in, x, x_stride, n_tok, scratch, scratch_bytes,
                   [&](const ActQ8& act, int32_t nt, int64_t t) {
                     // A matmul output that swiglu overwrites is not written first.
                     float* gy = gate.y == out ? nullptr : gate.y + t * gate.y_stride;
                     float* uy = up.y == out ? nullptr : up.y + t * up.y_stride;
                     const RingOut o{dev_w(gate.w),        dev_w(up.w), gy,
                                     gate.y_stride,        uy,          up.y_stride,
                                     out + t * out_stride, out_stride};
                     return launch_ring_tile<true>(s, o, act, nt, tile);
                   });
}

}  // namespace geist::cuda
