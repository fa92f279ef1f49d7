// Launchers of the CUDA backend's kernels (matmul_cuda.cu, ops_cuda.cu, kv_cuda.cu,
// kv_attn_cuda.cu), callable from host C++. Every pointer is a device address; shapes as in
// the named CPU kernel.
// Each launcher enqueues on stream s and returns the launch status (cudaGetLastError), so a
// bad configuration is reported where it happens; execution errors surface at the next
// synchronizing call.
//
// Determinism: each output element is computed by a fixed sequence of f32 operations that
// depends only on its inputs and the sizes that shape it (n_in, head_dim, ...), never on
// n_tok, the tiling or timing: no atomics, reductions in a fixed tree order, FMAs explicit.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "formats/ggml_type.h"
#include "kernels/attention.h"
#include "kernels/attention_kv.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace geist::cuda {

// The weight types the matmul / get_rows kernels decode (Q5_0, IQ4_NL and Q3_K reach them as
// Q8_0 / Q6_K rows of the same values: CudaBackend::upload_weight, weight_to_exact_rows).
bool weight_type_supported(GgmlType t);

// Device copies of weights: Q8_0 is repacked for the kernels (matmul_cuda.cu, DevW: the same
// bytes regrouped so that lanes load 16 aligned bytes at a time); other types keep their GGUF
// rows. device_weight_bytes() is the size of the device copy; repack_weight() writes it to dst
// from w, whose data is a device copy of the GGUF rows (enqueued on s; nothing for the types
// that are not repacked).
size_t device_weight_bytes(GgmlType t, int64_t n_in, int64_t n_out);
bool weight_is_repacked(GgmlType t);
cudaError_t repack_weight(cudaStream_t s, const WeightMatrix& w, uint8_t* dst);

// y[t][o] = sum_i x[t][i] * W[o][i] (kernels/matmul.h matmul()), W a device copy made by
// CudaBackend::upload_weight (see above). F32 weights: lane l of a warp sums elements [256c + 8l,
// 256c + 8l + 8) of each 256-chunk c in index order with FMAs, then the 32 lanes combine by a xor
// tree. Q8_0 and Q4_0: the CPU's Q8 formula bitwise (activations quantized to int8 per 32-block,
// exact int8 dots, one f32 FMA per block in block order; matmul_q8_cuda.cu). F16, BF16, Q4_K,
// Q6_K, Q4_1, Q5_1, Q5_K, Q2_K, IQ4_XS: tensor cores (bf16 mma, weights and activations each split
// into bf16 hi + lo, f32 accumulation) in a k order fixed by n_in alone; matmul_cuda.cu says how.
// scratch: device bytes [scratch_bytes] for the activation codes of a Q8_0 / Q4_0 prefill
// (matmul_scratch_bytes(w, n_tok) takes the batch in one round; less takes it in rounds, none
// in 8-token decode launches: the same bits, slower). In use until the launches finish.
size_t matmul_scratch_bytes(const WeightMatrix& w, int32_t n_tok);
cudaError_t matmul(cudaStream_t s, const WeightMatrix& w, const float* x, int64_t x_stride,
                   int32_t n_tok, float* y, int64_t y_stride, void* scratch = nullptr,
                   size_t scratch_bytes = 0);

// Several matmuls over the same activations as one launch (decode: the q / k / v or gate / up
// projections of a layer): y_i = W_i x for i < n, each bitwise what matmul() writes alone.
// Only where matmul_batchable(w, n_tok) holds for every W_i (Q8_0 or Q4_0, n_tok <=
// kBatchMaxTok), all with the same n_in (a change of weight type starts another launch). More
// tokens take the prefill kernels (matmul_prefill_batch), the same bits.
constexpr int kMaxMatmulBatch = 4;
constexpr int32_t kBatchMaxTok = 16;
struct MatmulOut {
  WeightMatrix w;
  float* y;  // [n_tok][y_stride]
  int64_t y_stride;
};
bool matmul_batchable(const WeightMatrix& w, int32_t n_tok);
// scratch: device bytes for the activation codes of 3-16 tokens (matmul_batch_scratch_bytes of
// any W_i: they share n_in; 0 for other token counts); without it those run on a slower kernel,
// the same bits. In use until the launches finish.
size_t matmul_batch_scratch_bytes(const WeightMatrix& w, int32_t n_tok);
cudaError_t matmul_batch(cudaStream_t s, const MatmulOut* outs, int n, const float* x,
                         int64_t x_stride, int32_t n_tok, void* scratch = nullptr,
                         size_t scratch_bytes = 0);

// matmul_batch() of {gate.w -> gate.y, up.w -> up.y} for one token and swiglu(gate.y, up.y, out,
// n_out) in one launch (a decode step's feed-forward): every row bitwise what the separate
// launches write (out: swiglu()'s values; gate.y and up.y the matmuls', except where out is
// one of them). Only where matmul_swiglu_ok(gate.w, up.w): one Q8_0 or Q4_0 type, the same
// shapes, and the one-token GEMV's shared memory within 48 KB. out is gate.y, up.y, or apart
// from both; x apart from all three.
bool matmul_swiglu_ok(const WeightMatrix& gate, const WeightMatrix& up);
cudaError_t matmul_swiglu(cudaStream_t s, const MatmulOut& gate, const MatmulOut& up,
                          const float* x, float* out);

// out[t][0, n_in) = row ids[t] of W, dequantized bitwise as dequantize_row() does.
// ids: [n] device ints, each < w.n_out.
cudaError_t get_rows(cudaStream_t s, const WeightMatrix& w, const int32_t* ids, int32_t n,
                     float* out);

// rms_norm() per row: sum of squares in double (each of T(n) threads, a power of two fixed by
// the row length, sums a strided subset in index order, then a fixed tree), the rest in f32
// as the CPU kernel.
cudaError_t rms_norm(cudaStream_t s, const float* x, int64_t x_stride, const float* w, float* y,
                     int64_t y_stride, int32_t n_rows, int64_t n, float eps);

// The same, fused with the residual add before it: x[r][i] += res[r][i] (x rows contiguous,
// row r at x + r * n, res likewise), then y[r] = rms_norm(x[r]) * w. Bitwise equal to add()
// followed by rms_norm(). y may alias x or res row for row.
cudaError_t add_rms_norm(cudaStream_t s, float* x, const float* res, const float* w, float* y,
                         int64_t y_stride, int32_t n_rows, int64_t n, float eps);

// rope() for n_tok tokens at positions pos0 + t (+ *pos_dev when pos_dev is not null: the
// position of a replayed graph step, read on the device); angles in double. p.freq_factors
// is a device address or nullptr. Tensors a and b (b.n_head 0: none; q and k of a layer,
// disjoint) turn in one launch, each element bitwise as in a launch of its own.
// A tensor with a src is first rms_norm()ed per head from src into x (the norm of Qwen3.5's
// q / k heads, decode step): each element bitwise rms_norm(src rows, norm_w, norm_eps) with
// rows of head_dim, then rope(); needs rope_can_norm(head_dim).
struct RopeTensor {
  float* x = nullptr;  // token t's heads at x + t * x_stride, [n_head][head_dim]
  int64_t x_stride = 0;
  int32_t n_head = 0;
  const float* src = nullptr;  // nullptr, or head h of token t at src + (t n_head + h) src_stride
  int64_t src_stride = 0;
  const float* norm_w = nullptr;  // [head_dim] or nullptr
  float norm_eps = 0;
};
bool rope_can_norm(int32_t head_dim);
cudaError_t rope(cudaStream_t s, const RopeTensor& a, const RopeTensor& b, int32_t n_tok,
                 int32_t head_dim, int32_t pos0, const int32_t* pos_dev, const RopeParams& p);

// rope(a, b) and the KV rows of the same tokens in one launch (a plain F32 / F16 cache's write
// of the step): K's rows are tensor b's turned rows (b.n_head * head_dim values), V's rows
// kv.v's, each bitwise what kv_encode_rows() writes from them after rope() (F16: round to
// nearest even). b.n_head > 0; a may be empty; v must not overlap a's or b's rows.
struct KvRowsOut {
  bool f16 = false;          // F16 rows, else F32
  const float* v = nullptr;  // token t's values at v + t * v_stride, [nv]
  int64_t v_stride = 0;
  int32_t nv = 0;
  uint8_t* k_dst = nullptr;  // token t's key row at k_dst + (t + *row_dev) * k_row_bytes
  int64_t k_row_bytes = 0;
  uint8_t* v_dst = nullptr;  // token t's value row at v_dst + (t + *row_dev) * v_row_bytes
  int64_t v_row_bytes = 0;
  const int32_t* row_dev = nullptr;  // nullptr: no shift (as kv_encode_rows)
};
cudaError_t rope_kv(cudaStream_t s, const RopeTensor& a, const RopeTensor& b, int32_t n_tok,
                    int32_t head_dim, int32_t pos0, const int32_t* pos_dev, const RopeParams& p,
                    const KvRowsOut& kv);

cudaError_t add(cudaStream_t s, float* y, const float* x, int64_t n);
cudaError_t swiglu(cudaStream_t s, const float* gate, const float* up, float* out, int64_t n);
cudaError_t sigmoid_mul(cudaStream_t s, float* x, int64_t x_stride, const float* gate,
                        int64_t gate_stride, int32_t n_rows, int64_t n);

// *out = argmax_first(x, n) (kernels/ops.h: the lowest index of the largest value, NaN read as
// -inf), on the device: the greedy choice of a logits row without copying the row out.
// parts: device scratch [kArgmaxParts]; count: a device counter that is 0 at rest (zero it once;
// the kernel leaves it 0). cudaErrorInvalidValue for n <= 0.
struct ArgmaxPart {
  float v;
  int32_t i;
};
constexpr int kArgmaxParts = 64;
// rows > 1: row r of x at x + r * n, with its own parts[r * kArgmaxParts ...], count[r] and
// out[r] (cudaErrorInvalidValue also for rows outside [1, 65535]).
cudaError_t argmax_first(cudaStream_t s, const float* x, int32_t n, ArgmaxPart* parts,
                         unsigned* count, int32_t* out, int32_t rows = 1);

// ---- KV cache (kv_cuda.cu, kv_attn_cuda.cu): KvCache's encodings (kernels/attention_kv.h) ----

// A run of positions in one encoding in device memory, as KvSegment: position p (>= first) is
// row r = p - first, bytes [r * row_bytes, ...) for row encodings; for CH4 / CH2 group
// r / kKvBlock (row_bytes = bytes per group) and entry r % kKvBlock of each channel's block.
struct KvDevSeg {
  KvEnc enc = KvEnc::F32;
  const uint8_t* data = nullptr;
  int64_t row_bytes = 0;
  int32_t block = kKvBlock;  // Q8 / Q8A / Q4 / A4 / A2: values per block along the row
  int32_t first = 0;
  int32_t ring = 0;  // row encodings: > 0, row (p - first) % ring (a ring buffer, KvSegment)
};

// K or V for positions [0, kv_len): positions < split from lo, the rest from hi.
struct KvDevSrc {
  KvDevSeg lo;
  KvDevSeg hi;
  int32_t split = INT32_MAX;
  KvKeyRef ref;  // K: lo's keys relative to R_p c (KvSource::ref), device addresses
};

// kv_quantize_row() of n rows of n_embd floats (row i at src + i * src_stride) into dst
// (row i at dst + i * dst_row_bytes) in a row encoding with blocks of `block` values, bitwise
// the CPU's bytes. ref: nullptr, or n_embd device halves subtracted from every row first
// (Q8 / Q4 keys relative to position 0's key: x - float(ref), as KvCache::write).
// row_dev: nullptr, or a device int32 of rows to skip in dst first (a replayed graph step's
// position; the rows land at dst + (*row_dev + i) * dst_row_bytes).
cudaError_t kv_encode_rows(cudaStream_t s, KvEnc enc, int32_t block, const float* src,
                           int64_t src_stride, int32_t n, int32_t n_embd, const uint16_t* ref,
                           uint8_t* dst, int64_t dst_row_bytes, const int32_t* row_dev = nullptr);

// kv_encode_rows of keys at positions pos0 + i minus R_p c (ref: KvKeyRef with device
// addresses), bitwise KvCache::write's q4 key rows.
// row_dev as above, only with ref.n_rot == 0.
cudaError_t kv_encode_rows_rel(cudaStream_t s, KvEnc enc, int32_t block, const float* src,
                               int64_t src_stride, int32_t n, int32_t n_embd, const KvKeyRef& ref,
                               int32_t pos0, uint8_t* dst, int64_t dst_row_bytes,
                               const int32_t* row_dev = nullptr);

// KIVI: quantizes one full group from its f16 residual rows, as KvCache's quantize_group:
// keys per channel (kv_quantize_group, k_enc CH4 / CH2) into k_dst (one group), values per row
// (kv_quantize_row of the widened row, v_enc A4 / A2, blocks of v_block) into the kKvBlock rows
// at v_dst (stride v_row_bytes). k_resid: [kKvBlock][nk] halves; v_resid: [kKvBlock][nv].
cudaError_t kv_quantize_group(cudaStream_t s, KvEnc k_enc, KvEnc v_enc, int32_t v_block,
                              const uint16_t* k_resid, int32_t nk, const uint16_t* v_resid,
                              int32_t nv, uint8_t* k_dst, uint8_t* v_dst, int64_t v_row_bytes);

// Once per process before kv_attention is captured or launched (raises the kernels' shared
// memory limit; not a stream operation, so it must not happen inside a graph capture).
cudaError_t kv_attention_setup();

// attention_kv() over K and V read through KvDevSrc (dequantized in the kernel), causal for the
// queries at pos0 + t, t < n_tok. Rotated encodings (Q8 / Q8A / Q4) need head dims that are
// multiples of their block (cudaErrorInvalidValue otherwise); head_dim_v <= 256.
// A row's bits depend only on its query, its position and the KV bytes it reads, never on
// n_tok or pos0 (kv_attn_cuda.cu says how). pos_dev: nullptr, or a device int32 added to pos0
// in the kernel (a replayed graph step's position).
cudaError_t kv_attention(cudaStream_t s, const AttentionShape& sh, const float* q, int64_t q_stride,
                         int32_t n_tok, int32_t pos0, const KvDevSrc& k, const KvDevSrc& v,
                         float* out, int64_t out_stride, const int32_t* pos_dev = nullptr);

// A decode step's rope_kv(q, k, kv) followed by its kv_attention over the cache rows that then
// hold the token's, in one launch, bitwise those two: one token, no head norms; the query rows
// are q's turned rows. False (nothing enqueued) when kv_attention would not take its one-token
// tensor-core kernel (F16 / F32 rows, head sizes 64 / 128 / 256, at most 16 query heads per kv
// head) or the step is not such a one; else *err is the launch status.
struct RopeStep {
  RopeTensor q, k;  // q: sh.n_head heads, k: sh.n_head_kv heads of head_dim, src == nullptr
  int32_t head_dim = 0;
  int32_t pos0 = 0;  // the token's rope position: pos0 (+ *pos_dev)
  const int32_t* pos_dev = nullptr;
  RopeParams p;
  KvRowsOut kv;  // the token's rows (nv: all kv heads' values)
};
bool kv_attention_rope(cudaStream_t s, const AttentionShape& sh, const RopeStep& r, int32_t pos0,
                       const KvDevSrc& k, const KvDevSrc& v, float* out, int64_t out_stride,
                       const int32_t* pos_dev, cudaError_t* err);

// kv_attention's fast path for one query token over F32 / F16 rows (no reference, unrotated;
// kv_attn_decode_cuda.cu): bitwise the general kernel's row. False (nothing enqueued) when
// the case is not covered; else *err is the launch status.
bool kv_attention_decode(cudaStream_t s, const AttentionShape& sh, const float* q, int64_t q_stride,
                         int32_t n_tok, int32_t pos0, const KvDevSrc& k, const KvDevSrc& v,
                         float* out, const int32_t* pos_dev, cudaError_t* err);

}  // namespace geist::cuda
