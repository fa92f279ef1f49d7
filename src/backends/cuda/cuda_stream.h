// Internal to the CUDA backend: the stream object shared by a CudaStream and its KV store.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/deltanet_cuda.h"
#include "backends/cuda/kv_attn_rope_cuda.h"
#include "base/status.h"

namespace geist::cuda {

// How the ops of the current forward step reach the device (CudaStream::begin_forward):
//   PLAIN    launched one by one as they are issued.
//   CAPTURE  recorded into a CUDA graph with the same launches and arguments (nothing runs
//            yet); end_forward() launches the graph.
//   REPLAY   nothing is launched or recorded: each op only checks that it is the op, with the
//            arguments, that the current graph was captured from (StreamCore::note);
//            end_forward() launches that graph when every op matched.
enum class StepMode { PLAIN, CAPTURE, REPLAY };

// An op argument as one word of a step record (StreamCore::record): pointers by address,
// floats by their bits, integers and enums by value.
template <class T>
uint64_t record_word(T v) {
  if constexpr (std::is_pointer_v<T>) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(v));
  } else if constexpr (std::is_same_v<T, float>) {
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    return u;
  } else {
    return static_cast<uint64_t>(v);
  }
}

// The first word of each op's entry in a step record.
enum RecordOp : uint64_t {
  kRecGetRows = 1,
  kRecMatmul,
  kRecToHost,
  kRecToHostArgmax,
  kRecRmsNorm,
  kRecRope,
  kRecAdd,
  kRecSwiglu,
  kRecSigmoidMul,
  kRecGates,
  kRecConv,
  kRecL2Norm,
  kRecDelta,
  kRecNormGated,
  kRecFillZero,
  kRecAttend,
  kRecConvRows,
  kRecDeltaRows,
  kRecAttendRows,
  kRecAddRmsNorm,
  kRecMatmulMany,
  kRecMatmulSwiglu,
  kRecL2Pair,
  kRecDeltaPrep,
  kRecDeltaNorm,
  kRecRopeAttend,
};

// A rope of q and k (cuda::rope of tensors t and b) on its way to a KV store's attention
// (StreamCore::rope_kv / rope_attention).
struct RopePair {
  RopeTensor t;
  RopeTensor b;       // the second tensor (n_head 0: none)
  int32_t n_tok = 0;  // 0: nothing to launch
  int32_t head_dim = 0;
  int32_t pos_off = 0;
  const int32_t* pos_dev = nullptr;
  RopeParams p;
};

// One cudaStream_t and the first CUDA failure seen on it. Shared (shared_ptr) by the
// CudaStream and the KvStore it creates, so neither outlives the stream they enqueue on,
// whatever order the session destroys them in.
//
// Why a recorded error: Stream ops return void (they are asynchronous on a device), so a
// failed launch or copy is recorded here, printed once to stderr, and readable through
// cuda_stream_status(); downloads after a failure fill their destination with 0xFF bytes
// (NaN floats), so results are never silently stale. While a step is captured, failures
// only mark the capture as failed (the step is then issued again and runs plainly).
struct StreamCore {
  cudaStream_t stream = nullptr;
  Status error;

  StepMode mode = StepMode::PLAIN;
  bool step_failed = false;  // an op of the step being captured could not be recorded

  // Capture once, replay many: a captured step's ops, as words of their arguments (noted by
  // each op; positions relative to the step's), so that a later step whose ops note the same
  // words can replay the graph instead of capturing it again. Kernels that depend on the
  // position read it from pos_dev, which the graph's first node fills from pinned memory, so
  // one graph serves every position. An op whose launches bake a position in (KIVI and q4
  // KV writes, the first key of a centred cache) marks the capture `absolute`: such graphs
  // are captured anew at every step, as before.
  std::vector<uint64_t> record;  // CAPTURE: appended; REPLAY: compared at `cursor`
  size_t cursor = 0;
  bool mismatch = false;       // REPLAY: an op differed from the record
  bool absolute = false;       // CAPTURE: a launch holds an absolute position
  int32_t step_pos = 0;        // position of the step's first token
  int32_t* pos_dev = nullptr;  // device int32 [1]: step_pos while a graph runs (null: none)

  // The launches of a rope pair that a plain (F32 / F16) KV cache may take in
  // (cuda_stream_fused.cpp; CudaStream::rope_attend hands it to the store's attention, nothing
  // else being queued): with its write of the step's rows (cuda::rope_kv, decode steps), or for
  // one token with the rows and the attention too (cuda::kv_attention_rope).
  //
  // A plain cache's write of n_tok rows of keys k (k_stride, nk values each) and the values in
  // kv: when the pair fits (rope_kv_fits), launches it with the rows and returns true, *good
  // the launch's status; else launches the pair alone (launch_rope) and returns false (nothing
  // written). r nullptr or empty: false.
  bool rope_kv(RopePair* r, const float* k, int64_t k_stride, int32_t n_tok, int32_t nk,
               const KvRowsOut& kv, bool* good);
  // The same write for one token whose attention follows at once (q: the pair's first tensor,
  // no head norms; ks / vs the cache's view including the token's rows): when it fits, launches
  // the pair, the rows and the attention as one and returns true, *good the launch's status;
  // else returns false with the pair left as it was.
  bool rope_attention(RopePair* r, const AttentionShape& sh, const float* q, const float* k,
                      int64_t k_stride, const KvRowsOut& kv, const KvDevSrc& ks, const KvDevSrc& vs,
                      int32_t pos0, const int32_t* pos_dev, float* out, int64_t out_stride,
                      bool* good);
  // rope_kv's test: a decode step's pair (at most 8 tokens), one of its tensors k (then *b, the
  // other *a), the tokens and strides match, and v is apart from both tensors.
  bool rope_kv_fits(const RopePair& r, const float* k, int64_t k_stride, int32_t n_tok, int32_t nk,
                    const KvRowsOut& kv, RopeTensor* a, RopeTensor* b) const;
  // Launches what is left of r (nullptr or empty: nothing), which is then empty.
  void launch_rope(RopePair* r);

  StreamCore() = default;
  StreamCore(const StreamCore&) = delete;
  StreamCore& operator=(const StreamCore&) = delete;
  ~StreamCore();

  // Records a failure of `what` (the first one wins); true when e == cudaSuccess.
  bool ok(cudaError_t e, const char* what);
  // An op's identity and arguments: appended to the record while capturing, compared with it
  // while replaying. True when the op must launch nothing (REPLAY).
  bool note(std::initializer_list<uint64_t> words);
  template <class... A>
  bool note_op(A... args) {
    if (mode == StepMode::PLAIN) return false;
    return note({record_word(args)...});
  }
  // A kernel's view of position `pos`: (pointer, offset) with position = offset + *pointer,
  // or (nullptr, pos) when the step is not recorded as position-independent.
  const int32_t* pos_ref(int32_t pos, int32_t* offset) const {
    if (mode == StepMode::PLAIN || pos_dev == nullptr) {
      *offset = pos;
      return nullptr;
    }
    *offset = pos - step_pos;
    return pos_dev;
  }
  // For an op whose launches bake in an absolute position: the capture can serve this step
  // only; a replay fails (the step is then captured). True when the op must launch nothing.
  bool note_absolute();
  // For an op that cannot be recorded in a graph (a host copy): fails the step being
  // captured. True when the op may run (PLAIN).
  bool plain_only();

  // cudaMemcpyAsync device -> host, then waits for the stream; on failure fills dst with 0xFF.
  // (Pinned staging through two halves was measured slower on the H200 host: the driver's
  // pageable path moved 12-14 GB/s device -> host, a staged copy 7-8.5, bound by the host
  // memcpy out of the pinned buffer; see docs/BENCHMARKS.md.)
  void download(void* host_dst, const void* device_src, size_t n);
  // cudaMemcpyAsync host -> device, then waits (the caller may reuse host_src at once).
  void upload(void* device_dst, const void* host_src, size_t n);
};

// A new stream on the current device. Environment (read here, once per stream):
// GEIST_CUDA_GRAPHS=0 turns off decode-step graphs, GEIST_CUDA_STATS=1 prints each stream's
// CudaStepStats to stderr when it is destroyed (for measurements), GEIST_CUDA_FUSE=0 the fused
// launches of the fused ops (Stream's add_rms_norm, matmul_many, matmul_swiglu, rope_attend,
// l2_norm_heads_pair, deltanet_prep, gated_delta_rule_norm, and the batched rows' launches: each is
// then its plain ops), for measurements and for the tests that compare them with plain launches.
// GEIST_CUDA_PDL=0 (read once per process, launch_cuda.cuh) launches the small kernels, the Q8_0 /
// Q4_0 decode matmuls and the F16 / F32 attention without programmatic dependent launch.
Status create_cuda_stream(std::unique_ptr<Stream>* out);

// Every KV mode, with KvCache's regions and byte layouts; GEIST_E_INVALID_ARG for bad sizes
// (as KvCache::create); GEIST_E_OOM when device memory runs out.
Status create_cuda_kv_store(std::shared_ptr<StreamCore> core, KvMode mode,
                            const std::vector<KvLayerSpec>& layers, int32_t max_seq_len,
                            std::unique_ptr<KvStore>* out);

// kv.attend_on(stream of c, ...) (KvStore) with rope pair r of q and k first: the store takes
// r into its launches where they fit (StreamCore::rope_kv / rope_attention), else launches it
// before its own. r nullptr: none (a replayed step). kv must be a store of this backend.
void cuda_kv_attend_rope(KvStore& kv, StreamCore& c, RopePair* r, int32_t il,
                         const AttentionShape& s, const float* q, int64_t q_stride, int32_t n,
                         int32_t pos, const float* k, int64_t k_stride, const float* v,
                         int64_t v_stride, float* out, int64_t out_stride);

// A batched decode step's row of a plain (F32 / F16) store from create_cuda_kv_store
// (CudaStream::rope_attend_rows): for the token at pos of layer il, the cache view its attention
// reads (row->k, row->v: the token's rows included) and where its K / V rows go (row->st.kv:
// as the store's own attend writes them, at row_off (+ *row_dev) with the values from v,
// v_stride), exactly as attend() would pass them. False (nothing changed) for another store, a
// layer without KV or a position out of range: the caller then takes attend_on.
bool cuda_kv_rope_row(KvStore& kv, int32_t il, int32_t pos, const float* v, int64_t v_stride,
                      int32_t row_off, const int32_t* row_dev, RopeRow* row);
// The store's record that layer il now holds positions up to pos (inclusive), after the rows'
// launch went out (as attend() keeps it).
void cuda_kv_row_written(KvStore& kv, int32_t il, int32_t pos);

// The core of a stream from create_cuda_stream, nullptr for a stream of another backend (a KV
// store enqueues its attention on the forward's stream, KvStore::attend_on).
StreamCore* stream_core(Stream& s);

// How a stream's forward steps ran (for tests and measurements).
struct CudaStepStats {
  int64_t graph_steps = 0;       // steps that ran as a CUDA graph
  int64_t plain_steps = 0;       // steps launched op by op (includes the repeats below)
  int64_t capture_failures = 0;  // captures that failed (the step was then run plainly)
  int64_t replays = 0;           // graph steps that replayed the last graph without a capture
  // Host wall time (steady clock): between begin_forward and end_forward's return (the step's
  // issue, and its wait when the step syncs), of that the wait for a graph step's results, and
  // between a step's end and the next step's begin (the caller's work).
  int64_t step_ns = 0, wait_ns = 0, gap_ns = 0;
};
// GEIST_E_INVALID_ARG for a stream of another backend.
Status cuda_stream_stats(Stream& s, CudaStepStats* out);

// The first CUDA failure of a stream from create_cuda_stream (OK when none); GEIST_E_INVALID_ARG
// for a stream of another backend. Waits for the stream's queued work first, so execution
// errors of earlier ops are included.
Status cuda_stream_status(Stream& s);

}  // namespace geist::cuda
