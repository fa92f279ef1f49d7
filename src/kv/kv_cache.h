// Per-session key/value cache for the attention layers of a model (any subset of its layers:
// hybrid models have recurrent layers without KV), in one of several representations.
//
// Every representation is position-major from offset 0: for each attention layer the state
// that determines attention over positions [0, n) is a fixed list of contiguous byte regions
// (see regions()), so a snapshot copies exactly the used bytes.
//   F32, F16: K [max_seq_len][n_embd_k], V [max_seq_len][n_embd_v] in that element type.
//   Q8, Q4:   the same rows as Hadamard-rotated blocks of B values along the row
//             (kernels/attention_kv.h has the byte layouts): Q8 keys Q8A (f16 scale and
//             min, 36 B per 32 values), Q8 values Q8 (f16 scale, 34 B), Q4 keys and values
//             Q4 (f16 scale, 18 B). B = kKvBlock = 32, or the head width for heads narrower
//             than 32 (kv_block_for_head_dim), so that a block never mixes two heads' channels.
//             Q8 keys are stored relative to the key of position 0 (K_REF, f16, one row per
//             layer): k_p - k_0 for every p. Softmax is invariant to adding q . k_0 to every
//             score of a query, so attention over the relative keys equals attention over the
//             keys, while a channel's constant offset (stories260K's outlier channels) no
//             longer sets the block scales. k_0 is fixed once position 0 is written, so the
//             bytes of a position still depend only on the tokens.
//             Q4 keys are stored relative to c = K_REF turned by RoPE to their position:
//             k_p - R_p c (R_p the layer's RoPE at p, KvLayerSpec::rope; RoPE at position 0 is
//             the identity, so c is also the pre-RoPE key of position 0). An offset channel
//             rotates with p, which a plain k_0 reference misses; R_p c varies with p, so the
//             kernel adds q . R_p c back to the score of every quantized position (KvKeyRef).
//             Q4 also keeps the newest positions in f16 (K_WIN, V_WIN: rings of kQ4Window rows,
//             absolute keys): queries at n positions read q4 rows for [0, Qend(n)) and f16
//             rows for [Qend(n), n), Qend(n) = max(0, floor((n - 32) / 32)) * 32, so 32 to 63
//             recent positions (all of them below 64) are exact to f16. Every position's q4
//             rows are written at once, so they never change; attend() splits a call where
//             Qend changes, so a query's result does not depend on the split either.
//   KIVI4, KIVI2 (Liu et al. 2024): keys quantized per channel over groups of G = kKvBlock
//             positions, values per token in blocks of B channels, asymmetric (scale
//             and min in f16) with 4 or 2 bits. The positions of the group being filled are
//             kept in f16 (the residual window, up to G - 1 positions). A group is quantized
//             exactly when the position that fills it is written, from the f16 residual values,
//             so the quantized bytes depend only on the tokens, never on how the sequence was
//             split into calls.
// The attention kernel reads these bytes directly (dequantizing a head slice at a time).
//
// Why G = 32 for KIVI: it equals the block of the other quantized modes (one block format for
// keys and values), it is the group size the KIVI paper evaluates, and the f16 residual it
// implies is at most 31 positions, so a 200-token reference is mostly quantized state.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/state_arena.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/attention_kv.h"

namespace geist {

// Values match the public geist_kv_mode.
enum class KvMode : int32_t {
  F32 = 0,
  F16 = 1,
  Q8 = 2,
  Q4 = 3,
  KIVI4 = 4,
  KIVI2 = 5,
};
constexpr int32_t kKvModeCount = 6;

// "f32", "f16", "q8", "q4", "kivi4", "kivi2".
const char* kv_mode_name(KvMode m);
// Parses a name as above; false when it is none of them.
bool kv_mode_from_name(std::string_view name, KvMode* out);
// False for values outside the enum (e.g. from the C ABI).
bool kv_mode_valid(int32_t m);

// One entry per model layer; a layer without attention has n_embd_k == n_embd_v == 0.
struct KvLayerSpec {
  int32_t n_embd_k = 0;  // n_head_kv * head_dim_k
  int32_t n_embd_v = 0;  // n_head_kv * head_dim_v
  // Head widths, which set the block length of Q8/Q4 rows and KIVI value rows
  // (kv_block_for_head_dim: blocks never span heads); 0: unknown, blocks of kKvBlock.
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  // The RoPE the layer applies to its keys (per head of head_dim_k; n_rot 0: none). Q4 keys
  // are relative to position 0's key turned by it. freq_factors: host memory, read only by
  // KvCache::create (and the backends' create_kv).
  RopeParams rope = {};
};

// The smallest G such that a prefill split at any multiple of G (and restored from a snapshot
// there) writes the same bytes and gives the same attention rows as the unsplit prefill, as far
// as the KV cache of mode m decides it (ArchModel::prefill_grid adds the model's own layers).
// 1 in every mode: F32 / F16 / Q8 rows are per position (Q8's K_REF is fixed by position 0);
// Q4 rows are written once per position and attend() splits a call where the f16 window's
// start moves; a KIVI group is quantized from its f16 residual rows (which a snapshot carries)
// when the position that fills it is written, never from where a call ends. A codec that
// coded a group of positions from the f32 rows of one call would return its group here.
// tests/api/test_api_exact_split.cpp checks every mode at off-group cuts.
int32_t kv_mode_split_grid(KvMode m);

// Q4's f16 window (kv_cache.h top): rows per layer for K and for V.
constexpr int32_t kQ4Window = 64;
// First position a query at n positions reads from the Q4 window.
constexpr int32_t kv_q4_window_start(int32_t n) { return n < 64 ? 0 : (n - 32) / 32 * 32; }

// What a region of a layer holds. F32/F16/Q8/Q4 have K and V; KIVI has all four.
enum KvPart : uint32_t {
  KV_PART_K = 0,  // row modes: K rows [0, n_pos); KIVI: quantized key groups [0, n_pos / G)
  KV_PART_V = 1,  // row modes: V rows [0, n_pos); KIVI: quantized value rows [0, G * (n_pos / G))
  KV_PART_K_RESID = 2,  // KIVI: f16 key rows of positions [G * (n_pos / G), n_pos)
  KV_PART_V_RESID = 3,  // KIVI: f16 value rows of the same positions
  // Q8/Q4: the f16 key row of position 0 that K rows are relative to; n_embd_k * 2 bytes
  // once n_pos > 0 (the same part number as KIVI's K_RESID: parts are per mode).
  KV_PART_K_REF = 2,
  // Q4: f16 key / value rows of positions [kv_q4_window_start(n_pos), n_pos), position order.
  KV_PART_K_WIN = 3,
  KV_PART_V_WIN = 4,
};

struct KvRegion {
  int32_t layer = 0;
  uint32_t part = 0;  // KvPart
  uint64_t nbytes = 0;
};

// The layout rules every backend's KV store follows (KvCache here, the CUDA store on a GPU),
// so their regions and bytes agree by construction:
// the encodings of K rows (KIVI: of full key groups) and of V rows in mode m,
KvEnc kv_mode_key_enc(KvMode m);
KvEnc kv_mode_value_enc(KvMode m);
// the number of parts per attention layer (KvPart values [0, n)),
uint32_t kv_mode_parts(KvMode m);
// and the used bytes of `part` of a layer after positions [0, n_pos), for a layer whose K rows
// (KIVI: key groups) take k_row bytes and V rows v_row bytes.
uint64_t kv_part_bytes(KvMode m, const KvLayerSpec& spec, int64_t k_row, int64_t v_row,
                       uint32_t part, int32_t n_pos);

// Where the attention piece that starts at position a ends, for a call ending at end: a call's
// queries are cut where a KIVI key group fills (the position that fills it is a piece of its
// own: the first query to see the group quantized; the queries before it see the group's f16
// residual rows) and where Q4's window start moves (for the query at t where t + 1 is a
// multiple of 32 and at least 64). Every backend cuts a call into these same pieces.
inline int32_t kv_attend_piece_end(KvMode m, int32_t a, int32_t end) {
  if (m == KvMode::KIVI4 || m == KvMode::KIVI2) {
    const int32_t fill = a - a % kKvBlock + kKvBlock - 1;
    return fill < end ? (a < fill ? fill : fill + 1) : end;
  }
  if (m == KvMode::Q4) return std::min(end, std::max(63, (a + 1) / 32 * 32 + 31));
  return end;
}

class KvCache {
 public:
  // GEIST_E_INVALID_ARG for max_seq_len <= 0, negative sizes or an unknown mode, GEIST_E_OOM.
  // arena: where the state bytes live (nullptr: the heap); must outlive the cache, and be in
  // an access span during create and every call that reads or writes rows.
  static Status create(KvMode mode, const std::vector<KvLayerSpec>& layers, int32_t max_seq_len,
                       std::unique_ptr<KvCache>* out, StateArena* arena = nullptr);

  KvMode mode() const { return mode_; }
  int32_t max_seq_len() const { return max_seq_len_; }
  int32_t n_layer() const { return static_cast<int32_t>(layers_.size()); }
  bool has_layer(int32_t il) const;

  // Stores rows for positions [pos, pos + n) of attention layer il.
  //   k: [n][k_stride], the first n_embd_k floats of each row; v likewise with n_embd_v.
  // Caller guarantees has_layer(il), 0 <= pos, pos + n <= max_seq_len() (checked), and that
  // can_resume_at(pos) (KIVI needs the residual positions before pos of pos's group). The Q4
  // window then holds the last kQ4Window positions written.
  void write(int32_t il, int32_t pos, int32_t n, const float* k, int64_t k_stride, const float* v,
             int64_t v_stride);

  // K and V of attention layer il as the kernel reads them for queries whose last key is at
  // position n_pos - 1 (KIVI: groups full at n_pos are quantized, the rest is residual).
  // Valid until the next write.
  void view(int32_t il, int32_t n_pos, KvSource* k, KvSource* v) const;

  // Writes rows [pos, pos + n) of layer il and runs causal attention for the n queries at those
  // positions (kernels/attention_kv.h; q, out and shapes as there). KIVI runs the kernel in
  // pieces split where a group fills, so every query sees the cache exactly as it is after its
  // own position was written: a row's result does not depend on how the sequence was split.
  //   scratch: >= attention_scratch_floats(s, pos + n, pool.n_threads()) floats
  void attend(int32_t il, const AttentionShape& s, const float* q, int64_t q_stride, int32_t n,
              int32_t pos, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
              float* out, int64_t out_stride, float* scratch, ThreadPool& pool);
  static size_t attention_scratch_floats(const AttentionShape& s, int32_t kv_len, int n_threads) {
    return attention_kv_scratch_floats(s, kv_len, n_threads);
  }

  // Whether writing can continue at pos given what was last written: always for F32 / F16 /
  // Q8; KIVI needs pos on a group boundary or in the group of the last written position (whose
  // residual rows it still holds); Q4 needs its window to still hold the positions
  // [kv_q4_window_start(pos + 1), pos).
  bool can_resume_at(int32_t pos) const;

  // Bytes per position of the quantized state, all layers (KIVI: full groups; the residual
  // window costs f16 rows until its group fills).
  int64_t bytes_per_token() const;
  int64_t layer_bytes_per_token(int32_t il) const;

  // Snapshot contract. The regions that determine attention over positions [0, n_pos), in a
  // fixed order (layer ascending, then part ascending), each with its used byte count. For
  // n_pos a multiple of G (any n_pos in row modes) the sizes sum to bytes_per_token() * n_pos,
  // plus Q8/Q4's K_REF row and Q4's window rows.
  void regions(int32_t n_pos, std::vector<KvRegion>* out) const;
  // Copies region r's nbytes bytes out of / into the cache. r must come from regions(n_pos) of
  // a cache with the same mode and layer sizes (Q4: and RoPE). After write_region of every
  // region of n_pos
  // into a fresh cache, attention over [0, n_pos) is bitwise that of the source.
  void read_region(const KvRegion& r, int32_t n_pos, uint8_t* dst) const;
  void write_region(const KvRegion& r, int32_t n_pos, const uint8_t* src);
  // Where write_region(r, n_pos, src) would memcpy its r.nbytes bytes, for a caller that makes
  // the copy itself together with others (a restore's parallel copy): every part but Q4's
  // window rows, which write_region reorders; nullptr for those and for empty regions (call
  // write_region then). Marks the layer written up to n_pos as write_region does, so the copy
  // must be complete before the cache is used again.
  uint8_t* write_region_dst(const KvRegion& r, int32_t n_pos);

  // Bytes held by the cache (all layers, all parts, at full capacity).
  size_t size_bytes() const;

 private:
  struct Layer {
    KvLayerSpec spec;
    int64_t k_row = 0;           // bytes per K row (row modes) / per key group (KIVI)
    int64_t v_row = 0;           // bytes per V row (quantized in KIVI)
    int32_t k_block = 0;         // values per block of quantized K rows (row modes)
    int32_t v_block = 0;         // values per block of quantized V rows
    StateBytes k;                // row modes: [max_seq_len][k_row]; KIVI: [max_seq_len / G][k_row]
    StateBytes v;                // [max_seq_len][v_row] (KIVI: only full groups used)
    StateBytes k_resid;          // KIVI: [G][n_embd_k] f16, row p % G holds position p
    StateBytes v_resid;          // KIVI: [G][n_embd_v] f16, likewise
    StateBytes k_ref;            // Q8/Q4: [n_embd_k] f16, the key of position 0
    StateBytes k_win;            // Q4: [kQ4Window][n_embd_k] f16, row p % kQ4Window: position p
    StateBytes v_win;            // Q4: [kQ4Window][n_embd_v] f16, likewise
    std::vector<float> rope_cs;  // Q4: [max_seq_len][rope.n_rot / 2][2] (kv_rope_table)
    int32_t written_end = 0;     // one past the last position written
  };
  KvCache() = default;
  bool kivi() const { return mode_ == KvMode::KIVI4 || mode_ == KvMode::KIVI2; }
  // Q8/Q4: keys stored relative to position 0's (K_REF).
  bool centered() const { return mode_ == KvMode::Q8 || mode_ == KvMode::Q4; }
  // Q4: keys relative to K_REF turned by RoPE, and the f16 window.
  bool windowed() const { return mode_ == KvMode::Q4; }
  KvKeyRef key_ref(const Layer& l) const;
  int64_t win_row_bytes(const KvRegion& r) const;  // bytes of one row of a K_WIN / V_WIN part
  void quantize_group(Layer& l, int32_t g);
  uint64_t part_bytes(int32_t il, uint32_t part, int32_t n_pos) const;
  uint8_t* region_ptr(const KvRegion& r, int32_t n_pos, uint64_t* nbytes);

  KvMode mode_ = KvMode::F32;
  KvEnc k_enc_ = KvEnc::F32;  // encoding of K rows (KIVI: of full key groups)
  KvEnc v_enc_ = KvEnc::F32;  // encoding of V rows (KIVI: of full-group value rows)
  int32_t max_seq_len_ = 0;
  std::vector<Layer> layers_;     // [n_layer]; empty vectors for layers without attention
  std::vector<float> group_tmp_;  // KIVI: [G][max(n_embd_k, n_embd_v)] f32 of a filling group;
                                  // Q8/Q4: [max n_embd_k] f32, a key row minus K_REF
};

}  // namespace geist
