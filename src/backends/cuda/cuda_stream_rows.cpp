// CudaStream's ops over the rows of a batched decode step (Stream::conv1d_silu_rows,
// Stream::gated_delta_rule_rows, Stream::rope_attend_rows): each session's one-token DeltaNet
// step, with its own state, and each session's rope + KV rows + attention, with its own cache,
// as one launch for up to 64 sessions instead of one (or two) per session.
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
    cuda::gated_delta_rule_rows(core_->stream, b, n, st);
    core_->ok(cudaGetLastError(), "gated_delta_rule_rows kernel launch");
  }
}

void CudaStream::rope_attend_rows(int32_t il, const AttentionShape& s, const RopeParams& p,
                                  KvStore* const* kv, const int32_t* pos, int32_t n_rows, float* q,
                                  int64_t q_stride, float* k, int64_t k_stride, const float* v,
                                  int64_t v_stride, float* out, int64_t out_stride) {
  if (fuse_ && rope_attend_rows_fused(il, s, p, kv, pos, n_rows, q, q_stride, k, k_stride, v,
                                      v_stride, out, out_stride)) {
    return;
  }
  Stream::rope_attend_rows(il, s, p, kv, pos, n_rows, q, q_stride, k, k_stride, v, v_stride, out,
                           out_stride);
}

bool CudaStream::rope_attend_rows_fused(int32_t il, const AttentionShape& s, const RopeParams& p,
                                        KvStore* const* kv, const int32_t* pos, int32_t n_rows,
                                        float* q, int64_t q_stride, float* k, int64_t k_stride,
                                        const float* v, int64_t v_stride, float* out,
                                        int64_t out_stride) {
  StreamCore& c = *core_;
  if (n_rows <= 0) return false;
  rope_rows_.resize(static_cast<size_t>(n_rows));
  // Row r's arguments as attend_on's one-token step takes them (CudaKvStore::attend_core's
  // rope_attend, with the rope pair of CudaStream::rope_attend): the position relative to the
  // step's on the device in a recorded step (StreamCore::pos_ref), the store's rows and view.
  const int32_t* pd = nullptr;
  for (int32_t r = 0; r < n_rows; ++r) {
    int32_t off = 0;
    pd = c.pos_ref(pos[r], &off);
    RopeRow& w = rope_rows_[static_cast<size_t>(r)];
    w = RopeRow{};
    if (!cuda_kv_rope_row(*kv[r], il, pos[r], v + r * v_stride, v_stride, off, pd, &w)) {
      return false;
    }
    w.st.q = RopeTensor{q + r * q_stride, q_stride, s.n_head};
    w.st.k = RopeTensor{k + r * k_stride, k_stride, s.n_head_kv};
    w.st.head_dim = s.head_dim_k;
    w.st.pos0 = off;
    w.st.pos_dev = pd;
    w.st.p = p;
    w.pos0 = off;
    w.out = out + r * out_stride;
  }
  if (!kv_attention_rope_rows_fit(s, rope_rows_.data(), n_rows, pd, out_stride)) return false;
  // The op, then each row's cache and position: a replayed graph writes the rows its capture
  // wrote.
  bool skip = c.note_op(kRecAttendRows, il, n_rows, s.n_head, s.n_head_kv, s.head_dim_k,
                        s.head_dim_v, s.scale, p.style, p.n_rot, p.freq_base, p.freq_scale,
                        p.freq_factors, q, q_stride, k, k_stride, v, v_stride, out, out_stride, pd);
  for (const RopeRow& w : rope_rows_) {
    skip = c.note_op(w.k.lo.data, w.v.lo.data, w.st.kv.f16, w.pos0) || skip;
  }
  if (!skip) {
    if (!c.ok(kv_attention_rope_rows(c.stream, s, rope_rows_.data(), n_rows, pd, out_stride),
              "rope + kv attention rows kernel launch")) {
      return true;  // recorded on the stream (or the capture fails and the step runs again)
    }
  }
  for (int32_t r = 0; r < n_rows; ++r) cuda_kv_row_written(*kv[r], il, pos[r]);
  return true;
}

}  // namespace geist::cuda
