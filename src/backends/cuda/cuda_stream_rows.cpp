// CudaStream's ops over the rows of a batched decode step (Stream::conv1d_silu_rows,
// Stream::gated_delta_rule_rows): each session's one-token DeltaNet step, with its own state,
// as one launch for up to kDeltaRowsPerLaunch sessions instead of one (or two) per session.
#include <algorithm>

#include "backends/cuda/cuda_stream_impl.h"
#include "backends/cuda/deltanet_cuda.h"

namespace geist::cuda {

namespace {

// Notes the states of rows [r0, r0 + n) into the step record after an op's own words (all
// notes of one step agree on whether to launch, StreamCore::note) and copies them into st.
bool note_states(StreamCore& c, float* const* states, int32_t r0, int32_t n, DeltaRowStates* st) {
  bool skip = false;
  for (int32_t i = 0; i < n; ++i) {
    st->p[i] = states[r0 + i];
    skip = c.note_op(st->p[i]);
  }
  return skip;
}

}  // namespace

void CudaStream::conv1d_silu_rows(const float* x, int64_t x_stride, int32_t n_rows, int64_t n_ch,
                                  const float* w, int32_t kernel, float* const* states, float* out,
                                  int64_t out_stride) {
  if (!fuse_) {
    Stream::conv1d_silu_rows(x, x_stride, n_rows, n_ch, w, kernel, states, out, out_stride);
    return;
  }
  for (int32_t r0 = 0; r0 < n_rows; r0 += kDeltaRowsPerLaunch) {
    const int32_t n = std::min(kDeltaRowsPerLaunch, n_rows - r0);
    const float* xr = x + r0 * x_stride;
    float* o = out + r0 * out_stride;
    DeltaRowStates st{};
    bool skip = core_->note_op(kRecConvRows, xr, x_stride, n, n_ch, w, kernel, o, out_stride);
    skip = note_states(*core_, states, r0, n, &st) || skip;
    if (skip) continue;
    core_->flush();
    cuda::conv1d_silu_rows(core_->stream, xr, x_stride, n, n_ch, w, kernel, st, o, out_stride);
    core_->ok(cudaGetLastError(), "conv1d_silu_rows kernel launch");
  }
}

void CudaStream::gated_delta_rule_rows(const GatedDeltaArgs& a, int32_t n_rows,
                                       float* const* states, int32_t chunk) {
  if (!fuse_) {
    Stream::gated_delta_rule_rows(a, n_rows, states, chunk);
    return;
  }
  for (int32_t r0 = 0; r0 < n_rows; r0 += kDeltaRowsPerLaunch) {
    const int32_t n = std::min(kDeltaRowsPerLaunch, n_rows - r0);
    GatedDeltaArgs b = delta_row_args(a, r0, nullptr);  // row r0's operands; states in st
    DeltaRowStates st{};
    bool skip =
        core_->note_op(kRecDeltaRows, b.n_k_heads, b.n_v_heads, b.d_k, b.d_v, b.q, b.q_stride, b.k,
                       b.k_stride, b.v, b.v_stride, b.g, b.beta, b.out, b.out_stride, n);
    skip = note_states(*core_, states, r0, n, &st) || skip;
    if (skip) continue;
    core_->flush();
    cuda::gated_delta_rule_rows(core_->stream, b, n, st);
    core_->ok(cudaGetLastError(), "gated_delta_rule_rows kernel launch");
  }
}

}  // namespace geist::cuda
