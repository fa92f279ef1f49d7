// The rope + KV rows + attention launch of a batched decode step's sessions
// (kv_attn_rope_cuda.cu; one session's step is cuda::kv_attention_rope, cuda_kernels.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_kernels.h"

namespace geist::cuda {

// A batched decode step's kv_attention_rope calls, one token of each of n_rows sessions
// (Stream::rope_attend_rows): row r is kv_attention_rope(sh, rows[r].st, rows[r].pos0,
// rows[r].k, rows[r].v, rows[r].out, out_stride, pos_dev), bitwise, in one launch per 64 rows
// (attn_dec_rows_kernel). The rows must be ones kv_attention_rope takes (but a pos0 below 0 is
// fine with pos_dev: an offset to the step's position), of one cache layout (each its own
// cache: no two share K or V rows) and rope, with their st.q.x, st.k.x, st.kv.v and out at
// r times row 0's strides from row 0's, st.pos_dev == pos_dev, and their outputs apart from
// their inputs (the rows run at once). kv_attention_rope_rows_fit says whether they are, on
// the host (nothing enqueued); kv_attention_rope_rows launches them, cudaErrorInvalidValue
// (nothing enqueued) where they are not.
struct RopeRow {
  RopeStep st;           // the token's q, k and KV rows (st.pos0 its rope position)
  int32_t pos0 = 0;      // its attention position (== st.pos0)
  KvDevSrc k, v;         // its session's cache, the token's rows included
  float* out = nullptr;  // its attention row
};
bool kv_attention_rope_rows_fit(const AttentionShape& sh, const RopeRow* rows, int32_t n_rows,
                                const int32_t* pos_dev, int64_t out_stride);
cudaError_t kv_attention_rope_rows(cudaStream_t s, const AttentionShape& sh, const RopeRow* rows,
                                   int32_t n_rows, const int32_t* pos_dev, int64_t out_stride);

}  // namespace geist::cuda
