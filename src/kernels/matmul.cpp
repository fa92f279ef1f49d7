#include "kernels/matmul.h"

#include <cstring>

#include "base/status.h"
#include "kernels/ops.h"
#include "kernels/quant.h"

namespace geist {
namespace {

constexpr int64_t kRowGroup = 4;  // weight rows dotted together, so x is read once per group

// Four dot products of one x row; each one follows dot_f32's exact operation order, so a row
// gives the same bits whichever of the two functions computes it.
void dot4_f32(const float* const w[4], const float* x, int64_t n, float out[4]) {
  float acc[4][8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int r = 0; r < 4; ++r) {
      for (int j = 0; j < 8; ++j) acc[r][j] += w[r][i + j] * x[i + j];
    }
  }
  for (int j = 0; i < n; ++i, ++j) {
    for (int r = 0; r < 4; ++r) acc[r][j] += w[r][i] * x[i];
  }
  for (int r = 0; r < 4; ++r) {
    const float* a = acc[r];
    out[r] = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
  }
}

// Points rows[k] at weight row first + k as f32, dequantizing into scratch unless the type is
// already f32.
void load_rows(const WeightMatrix& w, int64_t first, int64_t count, float* scratch,
               const float* rows[4]) {
  for (int64_t k = 0; k < count; ++k) {
    const uint8_t* src = w.data + static_cast<size_t>(first + k) * w.row_bytes;
    if (w.type == GgmlType::F32) {
      rows[k] = reinterpret_cast<const float*>(src);
    } else {
      float* dst = scratch + k * w.n_in;
      dequantize_row(w.type, src, dst, w.n_in);
      rows[k] = dst;
    }
  }
}

}  // namespace

size_t matmul_scratch_floats(int64_t n_in, int n_threads) {
  return static_cast<size_t>(n_in) * kRowGroup * static_cast<size_t>(n_threads);
}

void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
            int64_t y_stride, float* scratch, ThreadPool& pool) {
  GEIST_CHECK(w.row_bytes == ggml_row_size(w.type, w.n_in), "matmul: row_bytes mismatch");
  // Groups are fixed by n_out alone: whether a row is computed by dot4_f32 or dot_f32 never
  // depends on the batch or the thread split (the two are bitwise equal anyway).
  const int64_t n_groups = (w.n_out + kRowGroup - 1) / kRowGroup;
  pool.run([&](int ti, int nt) {
    const int64_t g_begin = n_groups * ti / nt;
    const int64_t g_end = n_groups * (ti + 1) / nt;
    float* my_scratch = scratch + static_cast<size_t>(ti) * kRowGroup * w.n_in;
    for (int64_t g = g_begin; g < g_end; ++g) {
      const int64_t o0 = g * kRowGroup;
      const int64_t count = w.n_out - o0 < kRowGroup ? w.n_out - o0 : kRowGroup;
      const float* rows[4] = {nullptr, nullptr, nullptr, nullptr};
      load_rows(w, o0, count, my_scratch, rows);
      for (int64_t t = 0; t < n_tok; ++t) {
        const float* xt = x + t * x_stride;
        float* yt = y + t * y_stride + o0;
        if (count == kRowGroup) {
          dot4_f32(rows, xt, w.n_in, yt);
        } else {
          for (int64_t k = 0; k < count; ++k) yt[k] = dot_f32(rows[k], xt, w.n_in);
        }
      }
    }
  });
}

void get_row(const WeightMatrix& w, int64_t row, float* dst) {
  GEIST_CHECK(row >= 0 && row < w.n_out, "get_row: row out of range");
  const uint8_t* src = w.data + static_cast<size_t>(row) * w.row_bytes;
  if (w.type == GgmlType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(w.n_in) * sizeof(float));
  } else {
    dequantize_row(w.type, src, dst, w.n_in);
  }
}

}  // namespace geist
