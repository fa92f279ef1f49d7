// Internal to the tensor-core attention (kv_attn_mma_cuda.cu: attn_mma_kernel, any number of
// tokens; kv_attn_mma_dec_cuda.cu: attn_dec_kernel, one token): the launch arguments, the key
// tile, and the loads and bf16 splits whose order and values both kernels share, so that a
// row's bits never depend on which kernel computed it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kv_rows_cuda.cuh"
#include "backends/cuda/matmul_common.cuh"

namespace geist::cuda::attn {

using kvrows::row_at;
using kvrows::Rows;
using mm::mma_bf16;
using mm::split2;

constexpr int kKeys = 64;       // key positions per tile
constexpr int kNt = kKeys / 8;  // score n-tiles of a tile
constexpr int kDecRows = 16;    // query rows of attn_dec_kernel's block (one m-tile)

struct MmaArgs {
  int32_t group;
  float scale;
  const float* q;  // [n_tok][q_stride], head h at h * hd
  int64_t q_stride;
  int32_t n_tok, pos0;
  const int32_t* pos_dev;  // nullptr, or a device int32 added to pos0 (a replayed graph step)
  int32_t nq;              // query heads of one kv head per block (<= the block's rows)
  int32_t qt;              // tokens per block (block rows / nq)
  Rows k, v;
  float* out;  // [n_tok][out_stride], head h at h * hd
  int64_t out_stride;
  bool out_vec;  // out and out_stride allow float2 stores
};

// Two elements at p (consecutive channels of a key, or consecutive keys of a value channel)
// as bf16x2 hi and lo words.
template <bool F16>
__device__ __forceinline__ void split_pair(const void* p, uint32_t* hi, uint32_t* lo) {
  float2 f;
  if constexpr (F16) {
    f = __half22float2(*reinterpret_cast<const __half2*>(p));
  } else {
    f = *reinterpret_cast<const float2*>(p);
  }
  split2(f.x, f.y, hi, lo);
}

// split_pair's words for two elements given by value (a value channel's two keys in a
// key-major tile).
template <bool F16, class E>
__device__ __forceinline__ void split_vals(E x, E y, uint32_t* hi, uint32_t* lo) {
  if constexpr (F16) {
    split2(__half2float(x), __half2float(y), hi, lo);
  } else {
    split2(x, y, hi, lo);
  }
}

// Keys [j0, j0 + kKeys) of the head at byte k_off of each row into sK [kKeys][LK] (HD
// elements each), zeros past last_pos; by threads tid of nthreads.
template <class E, int HD, int LK>
__device__ __forceinline__ void load_k_tile(const Rows& k, int32_t j0, int32_t last_pos,
                                            int64_t k_off, E* sK, int tid, int nthreads) {
  constexpr int kEpc = 16 / sizeof(E);  // elements per 16-byte load
  for (int e = tid; e < kKeys * (HD / kEpc); e += nthreads) {
    const int j = e / (HD / kEpc), c = e % (HD / kEpc);
    uint4 x = make_uint4(0, 0, 0, 0);
    if (j0 + j <= last_pos) x = *reinterpret_cast<const uint4*>(row_at(k, j0 + j) + k_off + 16 * c);
    *reinterpret_cast<uint4*>(sK + j * LK + c * kEpc) = x;
  }
}

// The loads of a value tile (DV channels from byte v_off of each row), by threads tid of
// nthreads: for each key pair kp (keys j0 + 2 kp, + 1; zeros past last_pos) and channel ch,
// put(kp, ch, value of key j0 + 2 kp, value of key j0 + 2 kp + 1).
template <class E, int DV, class Put>
__device__ __forceinline__ void for_value_pairs(const Rows& v, int32_t j0, int32_t last_pos,
                                                int64_t v_off, int tid, int nthreads, Put put) {
  constexpr int kEpc = 16 / sizeof(E);
  for (int e = tid; e < (kKeys / 2) * (DV / kEpc); e += nthreads) {
    const int kp = e / (DV / kEpc), c = e % (DV / kEpc);
    const int32_t p = j0 + 2 * kp;
    uint4 x = make_uint4(0, 0, 0, 0), y = make_uint4(0, 0, 0, 0);
    if (p <= last_pos) x = *reinterpret_cast<const uint4*>(row_at(v, p) + v_off + 16 * c);
    if (p + 1 <= last_pos) y = *reinterpret_cast<const uint4*>(row_at(v, p + 1) + v_off + 16 * c);
    const E* xe = reinterpret_cast<const E*>(&x);
    const E* ye = reinterpret_cast<const E*>(&y);
#pragma unroll
    for (int i = 0; i < kEpc; ++i) put(kp, c * kEpc + i, xe[i], ye[i]);
  }
}

// The values of keys [j0, j0 + kKeys), DV channels from byte v_off of each row, transposed
// into sV [DV][LV] (channel-major), zeros past last_pos; by threads tid of nthreads.
template <class E, int DV, int LV>
__device__ __forceinline__ void load_v_tile(const Rows& v, int32_t j0, int32_t last_pos,
                                            int64_t v_off, E* sV, int tid, int nthreads) {
  for_value_pairs<E, DV>(v, j0, last_pos, v_off, tid, nthreads, [&](int kp, int ch, E a, E b) {
    E* dst = sV + ch * LV + 2 * kp;
    dst[0] = a;
    dst[1] = b;
  });
}

// The per-row arithmetic both kernels share (stated at the top of kv_attn_mma_cuda.cu), as
// helpers, so that the two kernels differ only in how they feed them.

// The A fragments of the query tile for channel step ks: rows r0 / r1, words 8 ks + qd (+ 4),
// hi(q) from sQh and lo(q) from sQl (LQ words a row).
template <int LQ>
__device__ __forceinline__ void q_frags(const uint32_t* sQh, const uint32_t* sQl, int r0, int r1,
                                        int ks, int qd, uint32_t (&ah)[4], uint32_t (&al)[4]) {
  const int w = 8 * ks + qd;
  ah[0] = sQh[r0 * LQ + w], ah[1] = sQh[r1 * LQ + w];
  ah[2] = sQh[r0 * LQ + w + 4], ah[3] = sQh[r1 * LQ + w + 4];
  al[0] = sQl[r0 * LQ + w], al[1] = sQl[r1 * LQ + w];
  al[2] = sQl[r0 * LQ + w + 4], al[3] = sQl[r1 * LQ + w + 4];
}

// One 16-element step of a product tile: d += A . B with A given as hi / lo bf16 fragments and
// B's two pairs split to bh / bl (words 0 and 1: the pair at k 2qd and the one at 2qd + 8), as
// mma(hi, hi), mma(hi, lo), mma(lo, hi) in that order.
__device__ __forceinline__ void mma3(float (&d)[4], const uint32_t (&ah)[4],
                                     const uint32_t (&al)[4], const uint32_t (&bh)[2],
                                     const uint32_t (&bl)[2]) {
  mma_bf16(d, ah[0], ah[1], ah[2], ah[3], bh[0], bh[1]);
  mma_bf16(d, ah[0], ah[1], ah[2], ah[3], bl[0], bl[1]);
  mma_bf16(d, al[0], al[1], al[2], al[3], bh[0], bh[1]);
}

// mma3 with B's two pairs at b and b + 8 (a key's channels, or a value channel's keys).
template <bool F16, class E>
__device__ __forceinline__ void split_mma3(float (&d)[4], const uint32_t (&ah)[4],
                                           const uint32_t (&al)[4], const E* b) {
  uint32_t bh[2], bl[2];
  split_pair<F16>(b, &bh[0], &bl[0]);
  split_pair<F16>(b + 8, &bh[1], &bl[1]);
  mma3(d, ah, al, bh, bl);
}

// A score fragment scaled, and -inf past each row's position (p0: row r0, elements 0 and 1;
// p1: row r1); the row maxima mx0 / mx1 take its elements in.
__device__ __forceinline__ void scale_mask(float (&s)[4], int32_t j, int32_t p0, int32_t p1,
                                           float scale, float* mx0, float* mx1) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float x = j + (e & 1) <= (e < 2 ? p0 : p1) ? __fmul_rn(s[e], scale) : -INFINITY;
    s[e] = x;
    if (e < 2) {
      *mx0 = fmaxf(*mx0, x);
    } else {
      *mx1 = fmaxf(*mx1, x);
    }
  }
}

// A quad's values of rows r0 / r1 combined over its four lanes: xor 1, then xor 2.
__device__ __forceinline__ void quad_max(float* a, float* b) {
#pragma unroll
  for (int o = 1; o <= 2; o <<= 1) {
    *a = fmaxf(*a, __shfl_xor_sync(0xffffffffu, *a, o));
    *b = fmaxf(*b, __shfl_xor_sync(0xffffffffu, *b, o));
  }
}
__device__ __forceinline__ void quad_sum(float* a, float* b) {
#pragma unroll
  for (int o = 1; o <= 2; o <<= 1) {
    *a = __fadd_rn(*a, __shfl_xor_sync(0xffffffffu, *a, o));
    *b = __fadd_rn(*b, __shfl_xor_sync(0xffffffffu, *b, o));
  }
}

// l = l * alpha + the tile's sum (one FMA per row), and the output accumulators scaled by alpha.
template <int N>
__device__ __forceinline__ void rescale(float u0, float u1, float al0, float al1, float* l0,
                                        float* l1, float (&acc)[N][4]) {
  *l0 = __fmaf_rn(*l0, al0, u0);
  *l1 = __fmaf_rn(*l1, al1, u1);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    acc[i][0] = __fmul_rn(acc[i][0], al0);
    acc[i][1] = __fmul_rn(acc[i][1], al0);
    acc[i][2] = __fmul_rn(acc[i][2], al1);
    acc[i][3] = __fmul_rn(acc[i][3], al1);
  }
}

// attn_dec_kernel's turn of the token's q and k, and the K / V rows it writes, in front of the
// attention (kv_attention_rope): q, k and v are the token's rows ([heads][hd]); a.q == q.
struct RopeIn {
  float* q;
  float* k;
  const float* v;
  uint8_t* k_dst;  // the token's K row at k_dst + *row_dev * k_row_bytes (row_dev may be null)
  int64_t k_row_bytes;
  uint8_t* v_dst;  // likewise its V row
  int64_t v_row_bytes;
  const int32_t* row_dev;
  int32_t pos0;  // the token's rope position: pos0 (+ *pos_dev)
  const int32_t* pos_dev;
  int32_t n_rot, neox;
  float freq_base, freq_scale;
  const float* freq_factors;  // device, or nullptr
  bool f16;                   // F16 rows, else F32
};

// attn_dec_kernel (kv_attn_mma_dec_cuda.cu): its shared-memory limits (once per process), and one
// launch of a token's rows, a.group <= kDecRows query heads per kv head, over n_head_kv blocks;
// with r (not null) the launch turns q and k and writes the rows first.
cudaError_t attn_dec_setup();
cudaError_t attn_dec_launch(cudaStream_t s, const MmaArgs& a, bool f16, int hd, unsigned n_head_kv,
                            const RopeIn* r = nullptr);

// Sessions of one attn_dec_rows_launch. Its parameters (a kernel argument, so a captured graph
// holds them by value) stay within the classic 4 KB limit of a launch's arguments.
constexpr int kDecRowsPerLaunch = 64;

// Row x's own fields in a rows launch (kv_attention_rope_rows): its cache (a single segment of
// rows: Rows lo == hi), its token's K / V rows (RopeIn::k_dst / v_dst) and its position, the
// same for the rope and the attention (RopeIn::pos0 == MmaArgs::pos0).
struct DecRow {
  const uint8_t* k;
  const uint8_t* v;
  uint8_t* k_dst;
  uint8_t* v_dst;
  int32_t pos0;
};

// The ROPE launch of attn_dec_launch for n sessions' tokens at once, row x in blocks
// (x, kv head): its MmaArgs are a's with q += x * a.q_stride, out += x * a.out_stride and
// k / v / pos0 row[x]'s, its RopeIn r's with q the same, k += x * k_stride, v += x * v_stride
// and k_dst / v_dst / pos0 row[x]'s. a and r are row 0's (a.q == r.q).
struct DecRowsArgs {
  MmaArgs a;
  RopeIn r;
  int64_t k_stride;  // floats between the rows' k (and v) rows
  int64_t v_stride;
  int32_t n;  // rows, 1..kDecRowsPerLaunch
  DecRow row[kDecRowsPerLaunch];
};
static_assert(sizeof(DecRowsArgs) <= 4096, "a rows launch's arguments fit the 4 KB limit");

cudaError_t attn_dec_rows_launch(cudaStream_t s, const DecRowsArgs& p, bool f16, int hd,
                                 unsigned n_head_kv);

// kv_attention_mma's arguments for this cache and shape but the call's tokens and outputs;
// false when the kernels do not take them (a function of the cache and shape alone).
// (kv_attn_mma_cuda.cu)
bool mma_args(const AttentionShape& sh, const KvDevSrc& k, const KvDevSrc& v, MmaArgs* a,
              bool* f16);

// The call's outputs into a.
inline void set_out(float* out, int64_t out_stride, MmaArgs* a) {
  a->out = out;
  a->out_stride = out_stride;
  a->out_vec = reinterpret_cast<uintptr_t>(out) % 8 == 0 && out_stride % 2 == 0;
}

}  // namespace geist::cuda::attn
