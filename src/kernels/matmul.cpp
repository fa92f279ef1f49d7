#include "kernels/matmul.h"

#include "base/status.h"
#include "kernels/quant.h"
#include "kernels/simd/matmul_simd.h"

namespace geist {
namespace {

constexpr int64_t kRowGroup = 4;         // weight rows unpacked and dotted together
constexpr int64_t kTokPerThread = 64;    // activation rows per chunk and thread (see scratch)
constexpr int64_t kInlineQuantRows = 4;  // chunks this small are quantized by the caller alone
constexpr int64_t kPackedMaxRows = 2;    // up to this many rows, Q8_0/Q4_0 skip the unpacking

// Floats of one Q16 activation row: int16 values, then dx and sx per 32-block.
int64_t q16_row_floats(int64_t n_in) { return n_in / 2 + 2 * (n_in / simd::kQ16Block); }

// Per-thread weight buffer: [4][n_in] f32, or [4][n_in] int16 + dw, mw [4][n_in / 32].
int64_t weight_buf_floats(int64_t n_in) { return kRowGroup * n_in; }

struct Q16Rows {
  int16_t* q;  // [n_rows][n_in]
  float* dx;   // [n_rows][n_in / 32]
  float* sx;   // [n_rows][n_in / 32]
};

Q16Rows q16_rows(float* base, int64_t n_rows, int64_t n_in) {
  const int64_t nb = n_in / simd::kQ16Block;
  Q16Rows r;
  r.q = reinterpret_cast<int16_t*>(base);
  r.dx = base + n_rows * n_in / 2;
  r.sx = r.dx + n_rows * nb;
  return r;
}

// Integer path: activations quantized per row (so a row's codes never depend on the batch),
// then each thread unpacks its groups of weight rows once per chunk and dots them with every
// activation row of the chunk.
void matmul_int16(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
                  int64_t y_stride, float* scratch, ThreadPool& pool) {
  const int nt = pool.n_threads();
  const int64_t n_in = w.n_in;
  const int64_t nb = n_in / simd::kQ16Block;
  const int64_t chunk = kTokPerThread * nt;
  float* act = scratch + static_cast<size_t>(nt) * weight_buf_floats(n_in);
  const bool has_min = simd::int16_has_min(w.type);
  const int64_t n_groups = (w.n_out + kRowGroup - 1) / kRowGroup;
  for (int64_t t0 = 0; t0 < n_tok; t0 += chunk) {
    const int64_t m = n_tok - t0 < chunk ? n_tok - t0 : chunk;
    const Q16Rows a = q16_rows(act, m, n_in);
    auto quantize = [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        simd::quantize_row_q16(x + (t0 + t) * x_stride, n_in, a.q + t * n_in, a.dx + t * nb,
                               a.sx + t * nb);
      }
    };
    if (m <= kInlineQuantRows) {
      quantize(0, m);
    } else {
      pool.parallel_for(m, quantize);
    }
    // Both ways give the same bits; unpacking pays off once a row is used several times.
    const bool packed = m <= kPackedMaxRows && simd::packed_dot_supported(w.type);
    pool.run([&](int ti, int n_threads) {
      const int64_t g_begin = n_groups * ti / n_threads;
      const int64_t g_end = n_groups * (ti + 1) / n_threads;
      float* buf = scratch + static_cast<size_t>(ti) * weight_buf_floats(n_in);
      int16_t* w16 = reinterpret_cast<int16_t*>(buf);
      float* dw = buf + kRowGroup * n_in / 2;
      float* mw = dw + kRowGroup * nb;
      for (int64_t g = g_begin; g < g_end; ++g) {
        const int64_t o0 = g * kRowGroup;
        const int count = static_cast<int>(w.n_out - o0 < kRowGroup ? w.n_out - o0 : kRowGroup);
        const uint8_t* rows = w.data + static_cast<size_t>(o0) * w.row_bytes;
        if (packed) {
          for (int64_t t = 0; t < m; ++t) {
            simd::dot_packed_rows(w.type, rows, w.row_bytes, count, n_in, a.q + t * n_in,
                                  a.dx + t * nb, y + (t0 + t) * y_stride + o0);
          }
          continue;
        }
        simd::unpack_rows_i16(w.type, rows, w.row_bytes, count, n_in, w16, dw, mw);
        simd::dot_i16_batch(w16, dw, has_min ? mw : nullptr, count, n_in, a.q, a.dx, a.sx, m,
                            y + t0 * y_stride + o0, y_stride);
      }
    });
  }
}

constexpr int64_t kRowUnit = 16;  // weight rows per unit of work split over the threads (and
                                  // rows per GROUPS16 group)

// Q8 path (Q8_0, Q4_0, Q4_K, Q6_K; Q4_1, Q5_1, Q5_K, Q2_K and IQ4_XS in their I8M GROUPS16
// form): activations quantized to int8 per 32-block, 8-bit
// multiply-adds. A chunk of at most simd::q8_rows_max tokens keeps the row layout (the decode
// kernel puts weight rows in vector lanes and reads each weight once for all the chunk's tokens,
// so a decode step of several sessions costs about one weight read); longer chunks go to panels
// of 16 tokens (the prefill kernel puts tokens in lanes). Both compute the same per-output
// formula (matmul_simd.h), so the bits agree.
void matmul_q8(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
               int64_t y_stride, float* scratch, ThreadPool& pool) {
  const int nt = pool.n_threads();
  const int64_t n_in = w.n_in;
  const int64_t nb = n_in / simd::kQ16Block;
  const int64_t chunk = kTokPerThread * nt;  // a multiple of kQ8Panel
  // Exactly the Q16 activation area matmul_scratch_floats reserves: 2.25 bytes per element.
  auto* act =
      reinterpret_cast<uint8_t*>(scratch + static_cast<size_t>(nt) * weight_buf_floats(n_in));
  const int64_t n_units = (w.n_out + kRowUnit - 1) / kRowUnit;
  const int planes = simd::q8_planes(w.type);
  // Q6_K's kernels take its -32 from the activations' half sums, the I8M ones their mins
  // (matmul_simd.h).
  const bool half_sums = w.type == GgmlType::Q6_K || simd::i8m_type(w.type);
  const int64_t rows_max = simd::q8_rows_max(w.type, w.layout == WeightLayout::GROUPS16);
  for (int64_t t0 = 0; t0 < n_tok; t0 += chunk) {
    const int64_t m = n_tok - t0 < chunk ? n_tok - t0 : chunk;
    const bool row_layout = m <= rows_max;
    const int64_t slots =
        row_layout ? m : (m + simd::kQ8Panel - 1) / simd::kQ8Panel * simd::kQ8Panel;
    // rows [slots][2][n_in] or panels [slots / 16][2][nb][8][16][4]
    int8_t* q = reinterpret_cast<int8_t*>(act);
    float* dx =
        reinterpret_cast<float*>(act + slots * 2 * n_in);       // [slots][nb] or [slots/16][nb][16]
    int32_t* sx = reinterpret_cast<int32_t*>(dx + slots * nb);  // like dx
    auto quantize = [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const float* xt = t < m ? x + (t0 + t) * x_stride : nullptr;
        if (row_layout) {
          simd::quantize_row_q8(xt, n_in, planes, q + t * 2 * n_in, dx + t * nb, sx + t * nb);
          if (half_sums) simd::q8_half_sums_row(q + t * 2 * n_in, n_in);
        } else {
          const int64_t p = t / simd::kQ8Panel;
          simd::quantize_row_q8_panel(xt, n_in, planes, t % simd::kQ8Panel, q + p * nb * 1024,
                                      dx + p * nb * simd::kQ8Panel, sx + p * nb * simd::kQ8Panel);
          if (half_sums) simd::q8_half_sums_panel(q + p * nb * 1024, nb, t % simd::kQ8Panel);
        }
      }
    };
    if (slots <= kInlineQuantRows) {
      quantize(0, slots);
    } else {
      pool.parallel_for(slots, quantize);
    }
    pool.run([&](int ti, int n_threads) {
      const int64_t o0 = n_units * ti / n_threads * kRowUnit;
      const int64_t o1_unit = n_units * (ti + 1) / n_threads * kRowUnit;
      const int64_t o1 = o1_unit < w.n_out ? o1_unit : w.n_out;
      if (o1 <= o0) return;
      const uint8_t* rows = w.data + static_cast<size_t>(o0) * w.row_bytes;
      const int count = static_cast<int>(o1 - o0);
      float* out = y + t0 * y_stride + o0;
      // o0 is a multiple of 16, so rows is also where group o0 / 16 of GROUPS16 starts.
      const bool groups = w.layout == WeightLayout::GROUPS16;
      if (row_layout) {
        simd::dot_q8_rows(w.type, groups, rows, w.row_bytes, count, n_in, q, dx, sx, m, out,
                          y_stride);
      } else {
        simd::dot_q8_panels(w.type, groups, rows, w.row_bytes, count, n_in, q, dx, sx, m, out,
                            y_stride);
      }
    });
  }
}

// Float path (F32, F16, BF16 and the types without an int16 unpacker): weight rows as f32,
// dotted with the f32 activations.
void matmul_f32(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
                int64_t y_stride, float* scratch, ThreadPool& pool) {
  const int64_t n_groups = (w.n_out + kRowGroup - 1) / kRowGroup;
  pool.run([&](int ti, int nt) {
    const int64_t g_begin = n_groups * ti / nt;
    const int64_t g_end = n_groups * (ti + 1) / nt;
    float* buf = scratch + static_cast<size_t>(ti) * weight_buf_floats(w.n_in);
    for (int64_t g = g_begin; g < g_end; ++g) {
      const int64_t o0 = g * kRowGroup;
      const int count = static_cast<int>(w.n_out - o0 < kRowGroup ? w.n_out - o0 : kRowGroup);
      const float* rows[4] = {nullptr, nullptr, nullptr, nullptr};
      for (int k = 0; k < count; ++k) {
        const uint8_t* src = w.data + static_cast<size_t>(o0 + k) * w.row_bytes;
        float* dst = buf + k * w.n_in;
        if (w.type == GgmlType::F32) {
          rows[k] = reinterpret_cast<const float*>(src);
          continue;
        }
        if (w.type == GgmlType::F16 || w.type == GgmlType::BF16) {
          simd::widen_row_f32(w.type, src, dst, w.n_in);
        } else {
          dequantize_row(w.type, src, dst, w.n_in);
        }
        rows[k] = dst;
      }
      for (int64_t t = 0; t < n_tok; ++t) {
        simd::dot_f32_rows(rows, count, x + t * x_stride, w.n_in, y + t * y_stride + o0);
      }
    }
  });
}

}  // namespace

size_t matmul_scratch_floats(int64_t n_in, int n_threads) {
  const int64_t per_thread = weight_buf_floats(n_in) + kTokPerThread * q16_row_floats(n_in);
  return static_cast<size_t>(per_thread) * static_cast<size_t>(n_threads);
}

void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
            int64_t y_stride, float* scratch, ThreadPool& pool) {
  GEIST_CHECK(
      w.row_bytes == (w.layout == WeightLayout::GROUPS16 ? weight_groups16_row_bytes(w.type, w.n_in)
                                                         : ggml_row_size(w.type, w.n_in)),
      "matmul: row_bytes mismatch");
  if (w.layout == WeightLayout::GROUPS16) {
    GEIST_CHECK(simd::q8_panels_fast() && w.n_in % simd::kQ16Block == 0,
                "matmul: GROUPS16 weights need the 8-bit kernels (weight_groups16_useful)");
    matmul_q8(w, x, x_stride, n_tok, y, y_stride, scratch, pool);
    return;
  }
  // The path depends on the weight type and the CPU alone, so a row's result never depends on
  // the batch. The 8-bit path only where it has its VNNI kernels: elsewhere (AVX2) its
  // portable loops would be slower than the int16 SIMD path.
  if (simd::q8_path_supported(w.type) && simd::q8_panels_fast() && w.n_in % simd::kQ16Block == 0) {
    matmul_q8(w, x, x_stride, n_tok, y, y_stride, scratch, pool);
  } else if (simd::int16_path_supported(w.type) && w.n_in % simd::kQ16Block == 0) {
    matmul_int16(w, x, x_stride, n_tok, y, y_stride, scratch, pool);
  } else {
    matmul_f32(w, x, x_stride, n_tok, y, y_stride, scratch, pool);
  }
}

}  // namespace geist
