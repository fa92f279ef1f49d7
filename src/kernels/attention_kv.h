// Causal grouped-query attention that reads K/V rows in a compact encoding (f16, 8/4-bit
// blocks, KIVI's per-channel and per-token asymmetric blocks) and dequantizes them inside the
// kernel, one head slice at a time: no full-precision copy of the cache is ever made.
// The encodings and their quantizers live here too, so the byte layouts are defined once;
// the KV cache (src/kv) decides which encoding holds which positions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/ops.h"

namespace geist {

// Values per quantization block (at most; rows of heads narrower than this use blocks of one
// head, kv_block_for_head_dim), and KIVI's group of tokens.
constexpr int32_t kKvBlock = 32;

enum class KvEnc : uint8_t {
  F32,  // float per element
  F16,  // IEEE half per element
  // Symmetric blocks of B values along the row (B = 32, or one head when heads are narrower;
  // a short last block is zero-padded), coding y = H x / sqrt(B), H the B-point Walsh-Hadamard
  // (Sylvester) matrix; decoding applies the same rotation (its own inverse). The rotation
  // spreads outlier channels over the block, so one shared scale fits.
  Q8,  // {f16 d; int8 q[B]}: y = d * q                                    34 B for B = 32
  Q4,  // {f16 d; u8 q[B/2]}: element i in nibble i % 2 of byte i / 2; y = d * (q - 8)   18 B
  // Asymmetric 8-bit with the same rotation (q8 keys, whose rotated blocks are not centred on
  // zero: stories260K's outlier channel keeps a sign), {f16 scale; f16 min; u8 q[B]}:
  // y = min + scale * q                                                   36 B for B = 32
  Q8A,
  // Asymmetric b-bit blocks {f16 scale; f16 min; packed q}: x = min + scale * q, element i at
  // bits [i * b, i * b + b) of the packed bytes (little-endian within a byte).
  A4,   // along the row (KIVI values, per token): 20 B per block
  A2,   // 12 B per block
  CH4,  // along positions (KIVI keys, per channel): groups of kKvBlock positions laid out
  CH2,  //   [group][channel] blocks, so group g of a row set is one contiguous run of bytes
};

// Block length of the row encodings for rows made of heads of head_dim values: kKvBlock (32)
// for head_dim >= 32 or unknown (<= 0); for narrower heads the largest power of two dividing
// head_dim (at least 8), so a block never spans two heads (a head's outlier channels then set
// only its own scales; stories260K, head_dim 8, gets blocks of 8). Heads of 64/128/256 keep
// 32 and so q4's 18 B per 32 values; head_dim 48 keeps 32-blocks that span heads.
int32_t kv_block_for_head_dim(int32_t head_dim);

// Bytes of one row of n values in a row encoding (F32, F16, Q8, Q8A, Q4, A4, A2) with blocks of
// `block` values (8, 16 or 32; a short last block is padded): Q8 2 + block, Q8A 4 + block,
// Q4 2 + block / 2, A4 4 + block / 2, A2 4 + block / 4 bytes per block.
int64_t kv_row_bytes(KvEnc e, int32_t n, int32_t block = kKvBlock);
// Bytes of one group of kKvBlock positions of n_chan channels in CH4 / CH2.
int64_t kv_group_bytes(KvEnc e, int32_t n_chan);

// Encodes one row of n floats (row encodings only) in blocks of `block` values. dst receives
// kv_row_bytes(e, n, block) bytes.
void kv_quantize_row(KvEnc e, const float* x, int32_t n, uint8_t* dst, int32_t block = kKvBlock);
// Encodes kKvBlock positions x[t][c] (t < kKvBlock, c < n_chan, row t at x + t * x_stride) in
// CH4 / CH2. dst receives kv_group_bytes(e, n_chan) bytes.
void kv_quantize_group(KvEnc e, const float* x, int64_t x_stride, int32_t n_chan, uint8_t* dst);

// A run of positions stored in one encoding. Position p (>= first) is row r = p - first
// (ring > 0: r = (p - first) % ring, a ring buffer of row encodings):
//   row encodings: bytes [r * row_bytes, (r + 1) * row_bytes) of data
//   CH encodings:  group r / kKvBlock, entry r % kKvBlock of each channel's block
struct KvSegment {
  KvEnc enc = KvEnc::F32;
  const uint8_t* data = nullptr;
  int64_t row_bytes = 0;     // row encodings: stride between positions (>= kv_row_bytes)
  int32_t n_chan = 0;        // CH encodings: channels per position (the whole row width)
  int32_t first = 0;         // first position the segment holds
  int32_t block = kKvBlock;  // Q8/Q4/A4/A2: values per block along the row (8, 16 or 32)
  int32_t ring = 0;          // row encodings: > 0, rows of a ring buffer of this many rows
};

// Keys stored relative to a reference row turned by RoPE to their position (q4 keys, see
// kv/kv_cache.h): the key of position p is the decoded row plus R_p c, R_p the rotation RoPE
// applies at position p, to each head's first n_rot channels (the rest pass through):
//   NORMAL pairs (2i, 2i + 1), NEOX pairs (i, i + n_rot / 2) of a head; pair i of position p
//   turns by the angle whose cos and sin are cs[(p * n_rot / 2 + i) * 2 + {0, 1}]:
//   (a, b) -> (a cos - b sin, a sin + b cos), each product and sum rounded to f32.
// On a GPU backend the pointers are device addresses.
struct KvKeyRef {
  const uint8_t* c = nullptr;  // [n_chan] f16, c; nullptr: the keys are stored as they are
  const float* cs = nullptr;   // [positions][n_rot / 2][2] cos, sin (kv_rope_table)
  int32_t n_rot = 0;           // rotated channels per head (even; 0: R_p is the identity)
  int32_t head_dim = 0;        // channels per head (> 0 when n_rot > 0)
  bool neox = false;           // NEOX pairing
};

// K or V for positions [0, kv_len): positions < split come from lo, the rest from hi.
// ref (K only): lo's keys are relative to ref (the kernels add q . R_p c to their scores).
struct KvSource {
  KvSegment lo;
  KvSegment hi;
  int32_t split = INT32_MAX;
  KvKeyRef ref;
};

// cs of KvKeyRef for positions [0, n_pos): the cos and sin rope() (kernels/ops.h) uses, so
// R_p c equals rope(c, p) bitwise. out: [n_pos][p.n_rot / 2][2]; p.freq_factors read here only.
void kv_rope_table(const RopeParams& p, int32_t n_pos, float* out);

// Channels [off, off + n) of R_p c (the row ref says; n_chan channels in all) into dst[n].
void kv_ref_row(const KvKeyRef& ref, int32_t p, int32_t off, int32_t n, float* dst);

// Writes values [off, off + n) of the row at position p into dst[n] (with R_p c added for
// lo positions of a source with a key reference).
void kv_dequantize(const KvSource& src, int32_t p, int32_t off, int32_t n, float* dst);

// Floats of scratch attention_kv() needs for kv_len key positions on n_threads threads.
size_t attention_kv_scratch_floats(const AttentionShape& s, int32_t kv_len, int n_threads);

// attention() (see attention.h) with K and V read through KvSource: the same formula, scores
// softmaxed and V rows accumulated in position order, so a row's bits depend only on its
// inputs (and the CPU's SIMD target), never on n_tok, pos0's split into calls or threads.
// When every position is F32, the result is bitwise that of attention(). Head g of a row is
// values [g * head_dim, (g + 1) * head_dim).
// SIMD (kernels/simd/attention_simd.h): work is split into tiles of up to 16 queries, the
// query heads of one kv head for consecutive tokens (one token and up to 4 heads when n_tok is
// 1), each K/V row slice decoded once per tile; the softmax uses a vectorised exp (<= 1 ulp off
// std::exp). Every query runs the same operations whatever else is in its tile. Q8/Q4 keys are
// scored against the block-rotated query and Q8/Q4 values accumulated rotated, then rotated back
// once; KIVI key groups are scored 32 positions at a time. Relative keys (src.ref) get
// q . R_p c as a dot of (q_a c_a + q_b c_b, q_b c_a - q_a c_b) per pair with (cos, sin) per pair,
// plus q . c over the channels RoPE leaves alone.
//   scratch: >= attention_kv_scratch_floats(s, pos0 + n_tok, pool.n_threads()) floats
void attention_kv(const AttentionShape& s, const float* q, int64_t q_stride, int32_t n_tok,
                  int32_t pos0, const KvSource& k, const KvSource& v, float* out,
                  int64_t out_stride, float* scratch, ThreadPool& pool);

// One call's arguments of attention_kv_many.
struct AttentionKvCall {
  const float* q = nullptr;
  int64_t q_stride = 0;
  int32_t n_tok = 0;
  int32_t pos0 = 0;
  KvSource k, v;
  float* out = nullptr;
  int64_t out_stride = 0;
};
// attention_kv() of n_calls (1 to 64) calls of one shape in one parallel region (a batched
// decode step's sessions: one pool dispatch for all of them, their tiles dealt over the
// threads together). Each call's results are bitwise its own attention_kv() call's (a tile's
// result does not depend on which thread runs it or what else runs). No two calls may write
// the same output. scratch: >= attention_kv_scratch_floats(s, the largest pos0 + n_tok,
// pool.n_threads()) floats.
void attention_kv_many(const AttentionShape& s, const AttentionKvCall* calls, int32_t n_calls,
                       float* scratch, ThreadPool& pool);
// The scalar version of attention_kv (one value dequantized at a time, work over (token, head)
// pairs), kept as the test oracle for the SIMD one. Same arguments and scratch.
void attention_kv_reference(const AttentionShape& s, const float* q, int64_t q_stride,
                            int32_t n_tok, int32_t pos0, const KvSource& k, const KvSource& v,
                            float* out, int64_t out_stride, float* scratch, ThreadPool& pool);

}  // namespace geist
