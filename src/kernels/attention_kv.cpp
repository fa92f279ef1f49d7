#include "kernels/attention_kv.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/status.h"
#include "kernels/kv_codec.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/simd/attention_simd.h"

namespace geist {
namespace {

using namespace kv_codec;

// An f32 row slice as a float pointer: in place when aligned, else copied into buf (rows
// inside a byte buffer, e.g. a mixed source, may be unaligned; the values are the same).
const float* f32_span(const uint8_t* row, int32_t off, int32_t n, float* buf) {
  const uint8_t* p = row + static_cast<int64_t>(off) * 4;
  if (reinterpret_cast<uintptr_t>(p) % alignof(float) == 0) {
    return reinterpret_cast<const float*>(p);
  }
  std::memcpy(buf, p, static_cast<size_t>(n) * 4);
  return buf;
}

// Pointer to f32 values [off, ...) of position p when stored as plain F32, else nullptr.
const float* direct_f32(const KvSource& src, int32_t p, int32_t off) {
  const KvSegment& s = segment_of(src, p);
  if (s.enc != KvEnc::F32 || (src.ref.c != nullptr && p < src.split)) return nullptr;
  const uint8_t* row = s.data + seg_row(s, p) * s.row_bytes + static_cast<int64_t>(off) * 4;
  // Rows inside a byte buffer may be unaligned; then the caller copies them (same values).
  if (reinterpret_cast<uintptr_t>(row) % alignof(float) != 0) return nullptr;
  return reinterpret_cast<const float*>(row);
}

// ---- SIMD path --------------------------------------------------------------------------------
// A work item is a tile: up to kTileQ queries, the heads of one kv head (or a chunk of them) for
// a few consecutive tokens, so each K/V row slice is decoded once for all of them. Every
// query's scores, softmax and value sums run the same operations in the same order whatever
// else is in its tile (the SIMD kernels compute each row alone), so results do not depend on
// how tokens are tiled. Causal ranges differ inside a tile: queries are ordered token-major,
// so the queries that see position p are a suffix of the tile.
// Q8/Q4 rows are never un-rotated: with M = H / sqrt(B) symmetric and orthonormal,
// q . (M y) = (M q) . y, so q is rotated once per item and dotted with the decoded codes y;
// likewise sum_p w_p M y_p = M sum_p w_p y_p, so V codes are accumulated in the rotated domain
// and rotated back once at the end.

constexpr int32_t kMaxNq = 4;   // query heads of a decode item (one token)
constexpr int32_t kTileQ = 64;  // queries of a prefill item

// Floats of the longest run of whole blocks covering one head slice: a slice that does not start
// on a block boundary (heads of 48 in blocks of 32) touches up to two extra partial blocks.
int32_t cover_width(const AttentionShape& s) {
  return std::max(s.head_dim_k, s.head_dim_v) + 2 * kKvBlock;
}

// attn_decode_blocks' code for a row encoding with blocks, 0 for the others.
int decode_bits(KvEnc e) {
  switch (e) {
    case KvEnc::Q8:
      return 8;
    case KvEnc::Q8A:
      return -8;
    case KvEnc::Q4:
      return 4;
    case KvEnc::A4:
      return -4;
    case KvEnc::A2:
      return -2;
    default:
      return 0;
  }
}

// The whole blocks of `block` values covering values [off, off + n) of a row.
struct Cover {
  int32_t first;  // first block
  int32_t nb;     // blocks
  int32_t skip;   // values of the first block before off
};

Cover cover_of(int32_t off, int32_t n, int32_t block) {
  const int32_t b0 = off / block, b1 = (off + n + block - 1) / block;
  return {b0, b1 - b0, off - b0 * block};
}

// Positions [pa, pb) of `src` that `seg` holds, clipped to [0, n_pos).
void seg_range(const KvSource& src, bool hi, int32_t n_pos, int32_t* pa, int32_t* pb) {
  const int32_t split = std::min(src.split, n_pos);
  *pa = hi ? split : 0;
  *pb = hi ? n_pos : split;
}

// Everything one tile reads and writes. Query j is head j % hq of token j / hq of the tile.
struct Tile {
  const float* q;  // [nq][n_k] the tile's queries, copied contiguous
  float* scores;   // [nq][kv_len], row j at scores + j * kv_len
  int64_t kv_len;
  int nq;          // queries
  int hq;          // query heads per token
  int32_t p_full;  // positions [0, p_full) are seen by every query (the first token's range)
  int32_t n_pos;   // positions of the last token: [0, n_pos)
  float* qrot;     // [nq][width] scratch for the rotated queries
  float* buf;      // [kAxpyPositions][width] decoded row slices (row r at buf + r * width)
  float* w;        // [kAxpyPositions][kTileQ] positions' weights
  float* dots;     // [nq] one position's raw dots
  float* gsc;      // [nq][kKvBlock] CH group scores
  int32_t width;   // cover_width

  // First query that attends position p (the rest of the tile does too).
  int first(int32_t p) const { return p < p_full ? 0 : (p - p_full + 1) * hq; }
  // Positions query j attends: [0, n_pos_of(j)).
  int32_t n_pos_of(int j) const { return p_full + j / hq; }
};

// The tile's q_j . R_p c for keys relative to a KvKeyRef, as uw[j] . cs_p + cst[j]:
// uw[j] = (q_a c_a + q_b c_b, q_b c_a - q_a c_b) per rotated pair (a, b) of the head, cst[j]
// = q_j . c over the head's channels RoPE leaves alone.
struct RefDots {
  const float* cs = nullptr;  // [positions][n_rot]
  int32_t n_rot = 0;
  const float* uw = nullptr;  // [nq][n_rot]
  float* cst = nullptr;       // [nq]
  float* cd = nullptr;        // [nq] scratch: one position's uw[j] . cs_p
};

// Fills rd for the tile's queries over channels [off, off + n) (one head). uw: [nq][n_rot],
// cst and cd: [nq].
void ref_prepare(const KvKeyRef& ref, int32_t off, int32_t n, const Tile& it, float* uw, float* cst,
                 float* cd, RefDots* rd) {
  GEIST_CHECK(ref.n_rot == 0 || (ref.head_dim == n && off % n == 0 && ref.n_rot <= n),
              "attention_kv: a key reference needs whole heads");
  rd->cs = ref.cs;
  rd->n_rot = ref.n_rot;
  rd->uw = uw;
  rd->cst = cst;
  rd->cd = cd;
  const int32_t half = ref.n_rot / 2;
  const int32_t stride_pair = ref.neox ? 1 : 2, second = ref.neox ? half : 1;
  for (int j = 0; j < it.nq; ++j) {
    const float* q = it.q + j * n;
    for (int32_t i = 0; i < half; ++i) {
      const int32_t a = i * stride_pair, b = a + second;
      const float ca = fp16_to_fp32(load_u16(ref.c + (off + a) * 2));
      const float cb = fp16_to_fp32(load_u16(ref.c + (off + b) * 2));
      uw[j * ref.n_rot + 2 * i] = q[a] * ca + q[b] * cb;
      uw[j * ref.n_rot + 2 * i + 1] = q[b] * ca - q[a] * cb;
    }
    float c = 0;
    for (int32_t d = ref.n_rot; d < n; ++d)
      c += q[d] * fp16_to_fp32(load_u16(ref.c + (off + d) * 2));
    cst[j] = c;
  }
}

// Decodes row p's values [off, off + n) of a row segment that is not rotated; returns them
// (in place for aligned F32 rows, else in buf).
// An F16 segment's row p from channel off: its halves as stored.
const uint8_t* f16_row(const KvSegment& s, int32_t p, int32_t off) {
  return s.data + seg_row(s, p) * s.row_bytes + static_cast<int64_t>(off) * 2;
}

const float* plain_row(const KvSource& src, const KvSegment& s, int bits, int32_t p, int32_t off,
                       int32_t n, float* buf) {
  const uint8_t* row = s.data + seg_row(s, p) * s.row_bytes;
  if (s.enc == KvEnc::F32) return f32_span(row, off, n, buf);
  if (s.enc == KvEnc::F16) {
    simd::attn_widen_f16(f16_row(s, p, off), n, buf);
    return buf;
  }
  if (bits != 0) {
    const Cover cv = cover_of(off, n, s.block);
    simd::attn_decode_blocks(bits, row + cv.first * block_bytes(s.enc, s.block), cv.nb, s.block,
                             buf);
    return buf + cv.skip;
  }
  kv_dequantize(src, p, off, n, buf);
  return buf;
}

// Scores of positions [pa, pb) of one segment against the tile's queries over channels
// [off, off + n): scores[j][p] = scale * q_j . k_p for the queries that see p (rd: keys
// relative to a reference, whose q_j . R_p c is added).
void segment_scores(const KvSource& src, const KvSegment& s, int32_t pa, int32_t pb, int32_t off,
                    int32_t n, float scale, const Tile& it, const RefDots* rd) {
  if (pa >= pb) return;
  float* dots = it.dots;
  const auto put = [&](int32_t p, int j0) {
    if (rd != nullptr) {
      float* cd = rd->cd;
      if (rd->n_rot > 0) {
        simd::attn_dot_rows(rd->uw + j0 * rd->n_rot, rd->n_rot, it.nq - j0,
                            rd->cs + int64_t{p} * rd->n_rot, rd->n_rot, cd + j0);
      } else {
        std::fill(cd + j0, cd + it.nq, 0.0f);
      }
      for (int j = j0; j < it.nq; ++j) dots[j] += cd[j] + rd->cst[j];
    }
    for (int j = j0; j < it.nq; ++j) it.scores[j * it.kv_len + p] = dots[j] * scale;
  };
  const int bits = decode_bits(s.enc);
  if (s.enc == KvEnc::CH4 || s.enc == KvEnc::CH2) {
    const int64_t bb = block_bytes(s.enc, kKvBlock);
    for (int32_t p = pa; p < pb;) {
      const int32_t r = p - s.first, grp = r / kKvBlock;
      const int g0 = it.first(p);
      simd::attn_ch_group_scores(enc_bits(s.enc), s.data + grp * bb * s.n_chan, bb, off, n,
                                 it.q + g0 * n, n, it.nq - g0, it.gsc + g0 * kKvBlock);
      const int32_t end = std::min(pb, p + (kKvBlock - r % kKvBlock));
      for (; p < end; ++p) {
        const int j0 = it.first(p);
        for (int j = j0; j < it.nq; ++j) dots[j] = it.gsc[j * kKvBlock + (p - s.first) % kKvBlock];
        put(p, j0);
      }
    }
    return;
  }
  if (is_rotated(s.enc)) {
    const int32_t B = s.block;
    const Cover cv = cover_of(off, n, B);
    const int64_t bb = block_bytes(s.enc, B);
    const int32_t len = cv.nb * B;
    for (int j = 0; j < it.nq; ++j) {
      float* qr = it.qrot + j * it.width;
      std::fill(qr, qr + len, 0.0f);
      std::memcpy(qr + cv.skip, it.q + j * n, static_cast<size_t>(n) * sizeof(float));
      for (int32_t b = 0; b < len; b += B) fwht(qr + b, B);
    }
    for (int32_t p = pa; p < pb; ++p) {
      const int j0 = it.first(p);
      const uint8_t* row = s.data + seg_row(s, p) * s.row_bytes;
      simd::attn_decode_blocks(bits, row + cv.first * bb, cv.nb, B, it.buf);
      simd::attn_dot_rows(it.qrot + j0 * it.width, it.width, it.nq - j0, it.buf, len, dots + j0);
      put(p, j0);
    }
    return;
  }
  const bool f16 = s.enc == KvEnc::F16 && n % 8 == 0;  // attn_dot_rows_f16's rows
  int32_t p = pa;
  if (f16) {
    // Runs of P positions that the same queries see, P rows a call (the same bits as P calls).
    constexpr int P = simd::kDotPositions;
    float d4[P * kTileQ];
    for (; p + P <= pb && it.first(p) == it.first(p + P - 1); p += P) {
      const int j0 = it.first(p);
      const uint8_t* hs[P];
      for (int r = 0; r < P; ++r) hs[r] = f16_row(s, p + r, off);
      simd::attn_dot_rows4_f16(it.q + j0 * n, n, it.nq - j0, hs, n, d4, kTileQ);
      for (int r = 0; r < P; ++r) {
        std::copy(d4 + r * kTileQ, d4 + r * kTileQ + (it.nq - j0), dots + j0);
        put(p + r, j0);
      }
    }
  }
  for (; p < pb; ++p) {
    const int j0 = it.first(p);
    if (f16) {  // widened as it is read: the same bits as plain_row's copy
      simd::attn_dot_rows_f16(it.q + j0 * n, n, it.nq - j0, f16_row(s, p, off), n, dots + j0);
    } else {
      const float* x = plain_row(src, s, bits, p, off, n, it.buf);
      simd::attn_dot_rows(it.q + j0 * n, n, it.nq - j0, x, n, dots + j0);
    }
    put(p, j0);
  }
}

// acc[j][0, n) += sum_p scores[j][p] * v_p over channels [off, off + n) of the positions
// [pa, pb) of one segment, for the queries that see p. Rotated segments accumulate their codes
// into acc_rot[j] (stride width) instead, for one rotation at the end; returns whether it did.
bool segment_values(const KvSource& src, const KvSegment& s, int32_t pa, int32_t pb, int32_t off,
                    int32_t n, const Tile& it, float* acc, float* acc_rot) {
  const int bits = decode_bits(s.enc);
  const bool rot = is_rotated(s.enc);
  const bool f16 = s.enc == KvEnc::F16 && n % 8 == 0;  // attn_axpy_rows4_f16's rows
  const Cover cv = rot ? cover_of(off, n, s.block) : Cover{};
  // Rotated rows: their codes over the cover, summed into acc_rot; others into acc.
  const int64_t len = rot ? int64_t{cv.nb} * s.block : n;
  float* dst = rot ? acc_rot : acc;
  const int64_t dst_stride = rot ? it.width : n;
  const auto value_row = [&](int32_t p, float* buf) -> const float* {
    if (!rot) return plain_row(src, s, bits, p, off, n, buf);
    const uint8_t* row = s.data + seg_row(s, p) * s.row_bytes;
    simd::attn_decode_blocks(bits, row + cv.first * block_bytes(s.enc, s.block), cv.nb, s.block,
                             buf);
    return buf;
  };
  float* w = it.w;
  constexpr int P = simd::kAxpyPositions;
  int32_t p = pa;
  // Runs of P positions that the same queries see, in one pass over dst (the same bits).
  for (; p + P <= pb && it.first(p) == it.first(p + P - 1); p += P) {
    const int j0 = it.first(p);
    const float* xs[P];
    const uint8_t* hs[P];  // F16: the rows' halves, widened as they are read
    for (int r = 0; r < P; ++r) {
      for (int j = j0; j < it.nq; ++j) w[r * kTileQ + j] = it.scores[j * it.kv_len + p + r];
      if (f16) {
        hs[r] = f16_row(s, p + r, off);
      } else {
        xs[r] = value_row(p + r, it.buf + r * it.width);
      }
    }
    if (f16) {
      simd::attn_axpy_rows4_f16(w + j0, kTileQ, it.nq - j0, hs, n, acc + j0 * n, n);
    } else {
      simd::attn_axpy_rows4(w + j0, kTileQ, it.nq - j0, xs, len, dst + j0 * dst_stride, dst_stride);
    }
  }
  for (; p < pb; ++p) {
    const int j0 = it.first(p);
    for (int j = j0; j < it.nq; ++j) w[j] = it.scores[j * it.kv_len + p];
    simd::attn_axpy_rows(w + j0, it.nq - j0, value_row(p, it.buf), len, dst + j0 * dst_stride,
                         dst_stride);
  }
  return rot && pa < pb;
}

// How attention_kv() tiles a call of n_tok tokens: hq query heads of a kv head for tt
// consecutive tokens per item.
struct Tiling {
  int32_t hq, tt;
};

Tiling tiling_of(const AttentionShape& s, int32_t n_tok) {
  const int32_t group = s.n_head / s.n_head_kv;
  // A single token keeps decode's chunks of four heads: more items for the threads.
  if (n_tok <= 1) return {std::min(group, kMaxNq), 1};
  const int32_t hq = std::min(group, kTileQ);
  return {hq, std::max(1, kTileQ / hq)};
}

// Floats of one thread's scratch for tiles of up to kTileQ queries.
size_t tile_scratch_floats(const AttentionShape& s, int32_t kv_len) {
  const size_t width = static_cast<size_t>(cover_width(s));
  const size_t per_q = static_cast<size_t>(kv_len) + 2 * static_cast<size_t>(s.head_dim_k) +
                       2 * width + static_cast<size_t>(s.head_dim_v) + 3 + simd::kAxpyPositions +
                       kKvBlock;
  return kTileQ * per_q + simd::kAxpyPositions * width;
}
}  // namespace

size_t attention_kv_scratch_floats(const AttentionShape& s, int32_t kv_len, int n_threads) {
  return tile_scratch_floats(s, kv_len) * static_cast<size_t>(n_threads);
}

void attention_kv_reference(const AttentionShape& s, const float* q, int64_t q_stride,
                            int32_t n_tok, int32_t pos0, const KvSource& k, const KvSource& v,
                            float* out, int64_t out_stride, float* scratch, ThreadPool& pool) {
  GEIST_CHECK(s.n_head > 0 && s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0,
              "attention: n_head must be a positive multiple of n_head_kv");
  const int32_t group = s.n_head / s.n_head_kv;
  const int32_t kv_len = pos0 + n_tok;
  const size_t per_thread = attention_kv_scratch_floats(s, kv_len, 1);
  const int64_t n_items = static_cast<int64_t>(n_tok) * s.n_head;
  pool.run([&](int ti, int nt) {
    float* scores = scratch + static_cast<size_t>(ti) * per_thread;  // [kv_len]
    float* krow = scores + kv_len;                                   // [head_dim_k]
    float* vrow = krow + s.head_dim_k;                               // [head_dim_v]
    const int64_t begin = n_items * ti / nt;
    const int64_t end = n_items * (ti + 1) / nt;
    for (int64_t item = begin; item < end; ++item) {
      const int32_t t = static_cast<int32_t>(item / s.n_head);
      const int32_t h = static_cast<int32_t>(item % s.n_head);
      const int32_t g = h / group;
      const int32_t n_pos = pos0 + t + 1;  // causal: keys [0, pos0 + t]
      const float* qh = q + t * q_stride + static_cast<int64_t>(h) * s.head_dim_k;
      const int32_t koff = g * s.head_dim_k;
      for (int32_t p = 0; p < n_pos; ++p) {
        const float* kp = direct_f32(k, p, koff);
        if (!kp) {
          kv_dequantize(k, p, koff, s.head_dim_k, krow);
          kp = krow;
        }
        scores[p] = dot_f32(qh, kp, s.head_dim_k) * s.scale;
      }
      softmax(scores, n_pos);
      float* oh = out + t * out_stride + static_cast<int64_t>(h) * s.head_dim_v;
      for (int32_t d = 0; d < s.head_dim_v; ++d) oh[d] = 0;
      const int32_t voff = g * s.head_dim_v;
      for (int32_t p = 0; p < n_pos; ++p) {
        const float* vp = direct_f32(v, p, voff);
        if (!vp) {
          kv_dequantize(v, p, voff, s.head_dim_v, vrow);
          vp = vrow;
        }
        const float w = scores[p];
        for (int32_t d = 0; d < s.head_dim_v; ++d) oh[d] += w * vp[d];
      }
    }
  });
}

}  // namespace geist

namespace geist {

namespace {

// One attention_kv call cut into its work items (tiles).
struct KvJob {
  const AttentionKvCall* c;
  int32_t group, n_chunks, kv_len;
  Tiling tl;
  int64_t per_tile, n_items;
};

KvJob kv_job(const AttentionShape& s, const AttentionKvCall& c) {
  GEIST_CHECK(s.n_head > 0 && s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0,
              "attention: n_head must be a positive multiple of n_head_kv");
  // acc_rot holds one block structure: two rotated segments must share it.
  GEIST_CHECK(!is_rotated(c.v.lo.enc) || !is_rotated(c.v.hi.enc) || c.v.lo.block == c.v.hi.block,
              "attention_kv: rotated V segments with different blocks");
  KvJob j;
  j.c = &c;
  j.group = s.n_head / s.n_head_kv;
  j.tl = tiling_of(s, c.n_tok);
  j.n_chunks = (j.group + j.tl.hq - 1) / j.tl.hq;
  const int32_t n_tiles = (c.n_tok + j.tl.tt - 1) / j.tl.tt;
  j.kv_len = c.pos0 + c.n_tok;
  j.per_tile = int64_t{s.n_head_kv} * j.n_chunks;
  j.n_items = n_tiles * j.per_tile;
  return j;
}

// Work item `item` of job j on one thread's scratch (tile_scratch_floats(s, j.kv_len) floats
// at base). What an item computes depends only on the call and the item.
void kv_item(const AttentionShape& s, const KvJob& j, int64_t item, float* base) {
  const AttentionKvCall& c = *j.c;
  const KvSource& k = c.k;
  const KvSource& v = c.v;
  const int32_t kv_len = j.kv_len;
  const int32_t width = cover_width(s);
  const int32_t nk = s.head_dim_k, nv = s.head_dim_v;
  const Tiling tl = j.tl;
  Tile it;
  it.scores = base;  // [kTileQ][kv_len]
  it.kv_len = kv_len;
  float* qt = it.scores + int64_t{kTileQ} * kv_len;   // [kTileQ][nk]
  it.qrot = qt + kTileQ * nk;                         // [kTileQ][width]
  float* acc_rot = it.qrot + kTileQ * width;          // [kTileQ][width]
  float* acc = acc_rot + kTileQ * width;              // [kTileQ][nv]
  float* uw = acc + kTileQ * nv;                      // [kTileQ][n_rot <= nk] (RefDots)
  it.dots = uw + kTileQ * nk;                         // [kTileQ]
  it.w = it.dots + kTileQ;                            // [kAxpyPositions][kTileQ]
  float* cst = it.w + simd::kAxpyPositions * kTileQ;  // [kTileQ]
  float* cd = cst + kTileQ;                           // [kTileQ]
  it.gsc = cd + kTileQ;                               // [kTileQ][kKvBlock]
  it.buf = it.gsc + kTileQ * kKvBlock;                // [kAxpyPositions][width]
  it.width = width;
  it.q = qt;
  const int32_t t0 = static_cast<int32_t>(item / j.per_tile) * tl.tt;
  const int32_t g = static_cast<int32_t>(item % j.per_tile / j.n_chunks);
  const int32_t chunk = static_cast<int32_t>(item % j.n_chunks);
  const int32_t h0 = g * j.group + chunk * tl.hq;
  const int32_t n_t = std::min(tl.tt, c.n_tok - t0);
  it.hq = std::min(tl.hq, j.group - chunk * tl.hq);
  it.nq = n_t * it.hq;
  it.p_full = c.pos0 + t0 + 1;  // causal: token t0 + i sees keys [0, pos0 + t0 + i]
  it.n_pos = it.p_full + n_t - 1;
  for (int32_t i = 0; i < n_t; ++i) {
    std::memcpy(qt + int64_t{i} * it.hq * nk,
                c.q + (t0 + i) * c.q_stride + static_cast<int64_t>(h0) * nk,
                static_cast<size_t>(it.hq) * nk * sizeof(float));
  }
  const int32_t koff = g * nk, voff = g * nv;
  RefDots rd;
  if (k.ref.c != nullptr) ref_prepare(k.ref, koff, nk, it, uw, cst, cd, &rd);
  for (int hi = 0; hi < 2; ++hi) {
    int32_t pa, pb;
    seg_range(k, hi != 0, it.n_pos, &pa, &pb);
    segment_scores(k, hi ? k.hi : k.lo, pa, pb, koff, nk, s.scale, it,
                   !hi && k.ref.c != nullptr ? &rd : nullptr);
  }
  for (int q = 0; q < it.nq; ++q) simd::attn_softmax(it.scores + q * kv_len, it.n_pos_of(q));
  std::fill(acc, acc + static_cast<int64_t>(it.nq) * nv, 0.0f);
  std::fill(acc_rot, acc_rot + static_cast<int64_t>(it.nq) * width, 0.0f);
  bool any_rot = false;
  for (int hi = 0; hi < 2; ++hi) {
    int32_t pa, pb;
    seg_range(v, hi != 0, it.n_pos, &pa, &pb);
    any_rot |= segment_values(v, hi ? v.hi : v.lo, pa, pb, voff, nv, it, acc, acc_rot);
  }
  const KvSegment& rs = is_rotated(v.lo.enc) ? v.lo : v.hi;
  const Cover cv = any_rot ? cover_of(voff, nv, rs.block) : Cover{0, 0, 0};
  for (int q = 0; q < it.nq; ++q) {
    float* a = acc + q * nv;  // [nv] query q's output, copied to out once complete
    if (any_rot) {
      float* ar = acc_rot + q * width;
      for (int32_t b = 0; b < cv.nb * rs.block; b += rs.block) fwht(ar + b, rs.block);
      for (int32_t d = 0; d < nv; ++d) a[d] += ar[cv.skip + d];
    }
    float* oh = c.out + (t0 + q / it.hq) * c.out_stride + static_cast<int64_t>(h0 + q % it.hq) * nv;
    std::memcpy(oh, a, static_cast<size_t>(nv) * sizeof(float));
  }
}

}  // namespace

void attention_kv(const AttentionShape& s, const float* q, int64_t q_stride, int32_t n_tok,
                  int32_t pos0, const KvSource& k, const KvSource& v, float* out,
                  int64_t out_stride, float* scratch, ThreadPool& pool) {
  AttentionKvCall c;
  c.q = q;
  c.q_stride = q_stride;
  c.n_tok = n_tok;
  c.pos0 = pos0;
  c.k = k;
  c.v = v;
  c.out = out;
  c.out_stride = out_stride;
  attention_kv_many(s, &c, 1, scratch, pool);
}

void attention_kv_many(const AttentionShape& s, const AttentionKvCall* calls, int32_t n_calls,
                       float* scratch, ThreadPool& pool) {
  constexpr int32_t kMaxCalls = 64;  // a batched decode step's sessions (at most a micro-batch)
  GEIST_CHECK(n_calls > 0 && n_calls <= kMaxCalls, "attention_kv_many: 1 to 64 calls");
  KvJob jobs[kMaxCalls];
  int64_t n_items = 0;
  int32_t kv_max = 0;
  for (int32_t i = 0; i < n_calls; ++i) {
    jobs[i] = kv_job(s, calls[i]);
    n_items += jobs[i].n_items;
    kv_max = std::max(kv_max, jobs[i].kv_len);
  }
  const size_t per_thread = tile_scratch_floats(s, kv_max);
  pool.run([&](int ti, int nt) {
    float* base = scratch + static_cast<size_t>(ti) * per_thread;
    // Items dealt round-robin over all calls: later tiles attend more positions, so contiguous
    // ranges would leave the last thread the most work. The assignment never changes a result.
    int32_t ci = 0;
    int64_t first = 0;  // global index of job ci's item 0
    for (int64_t item = ti; item < n_items; item += nt) {
      while (item >= first + jobs[ci].n_items) first += jobs[ci++].n_items;
      kv_item(s, jobs[ci], item - first, base);
    }
  });
}

}  // namespace geist
