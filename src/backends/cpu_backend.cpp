#include "backends/cpu_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "base/parallel_copy.h"
#include "base/state_arena.h"

namespace geist {

namespace {

// A device failure of a CPU_DEVICE_LOCAL backend (cpu_devlocal_fail), shared by its streams.
struct DeviceFault {
  std::atomic<bool> failed{false};
  std::atomic<bool> armed{false};  // a failure is due after `countdown` more copies
  std::atomic<int64_t> countdown{0};
  std::string what;  // written once, before `armed` is set

  // Called before each copy between host and state memory: whether it fails (the failure
  // starts at the copy the countdown reaches).
  bool copy_fails() {
    if (failed.load(std::memory_order_acquire)) return true;
    if (!armed.load(std::memory_order_acquire)) return false;
    if (countdown.fetch_sub(1, std::memory_order_acq_rel) > 0) return false;
    failed.store(true, std::memory_order_release);
    return true;
  }
};

class CpuBuffer : public Buffer {
 public:
  CpuBuffer(StateArena* arena, size_t n) : bytes_(n, 0, StateAllocator<uint8_t>(arena)) {
    data_ = bytes_.data();
    size_ = n;
  }

 private:
  StateBytes bytes_;  // [n]
};

class CpuStream;

// KvCache driven by a CpuStream: attention runs on the stream's pool with its scratch, and
// region copies open an access span (they are the download/upload path of this backend).
class CpuKvStore : public KvStore {
 public:
  CpuKvStore(CpuStream* stream, StateArena* arena, std::unique_ptr<KvCache> cache)
      : stream_(stream), arena_(arena), cache_(std::move(cache)) {}
  KvMode mode() const override { return cache_->mode(); }
  int32_t max_seq_len() const override { return cache_->max_seq_len(); }
  void attend(int32_t il, const AttentionShape& s, const float* q, int64_t q_stride, int32_t n,
              int32_t pos, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
              float* out, int64_t out_stride) override;
  bool can_resume_at(int32_t pos) const override { return cache_->can_resume_at(pos); }
  int64_t bytes_per_token() const override { return cache_->bytes_per_token(); }
  void regions(int32_t n_pos, std::vector<KvRegion>* out) const override {
    cache_->regions(n_pos, out);
  }
  void download_region(const KvRegion& r, int32_t n_pos, uint8_t* host_dst) const override;
  void upload_region(const KvRegion& r, int32_t n_pos, const uint8_t* host_src) override;
  // What attend() does for one token at pos before its attention: the token's K and V rows
  // written; then *c is the attention_kv call attend() would make for it (a batched decode
  // step's row, CpuStream::rope_attend_rows).
  void write_one(int32_t il, int32_t pos, const float* q, const float* k, const float* v,
                 float* out, AttentionKvCall* c) {
    GEIST_CHECK(kv_attend_piece_end(cache_->mode(), pos, pos + 1) == pos + 1,
                "a one-token attend is one piece");
    cache_->write(il, pos, 1, k, 0, v, 0);
    cache_->view(il, pos + 1, &c->k, &c->v);
    c->q = q;
    c->q_stride = 0;
    c->n_tok = 1;
    c->pos0 = pos;
    c->out = out;
    c->out_stride = 0;
  }

 private:
  CpuStream* stream_;
  StateArena* arena_;
  std::unique_ptr<KvCache> cache_;
  std::vector<float> scratch_;  // attention_scratch_floats(shape, max_seq_len, n_threads)
};

class CpuStream : public Stream {
 public:
  CpuStream(bool device_local, std::shared_ptr<DeviceFault> fault)
      : arena_(device_local), fault_(std::move(fault)) {}
  ThreadPool& pool() { return *pool_; }
  bool failed() const {
    return fault_ != nullptr && fault_->failed.load(std::memory_order_acquire);
  }
  bool copy_fails() const { return fault_ != nullptr && fault_->copy_fails(); }

  void set_pool(ThreadPool* pool) override { pool_ = pool; }
  Status status() const override {
    return failed() ? Status(GEIST_E_BACKEND, fault_->what.c_str()) : Status::ok();
  }
  void begin() override { arena_.begin_access(); }
  void end() override { arena_.end_access(); }

  Status alloc(size_t nbytes, std::unique_ptr<Buffer>* out) override {
    StateAccess access(&arena_);
    try {
      *out = std::make_unique<CpuBuffer>(&arena_, nbytes);
    } catch (const std::bad_alloc&) {
      return Status::error(GEIST_E_OOM, "cpu backend: out of memory for %zu bytes", nbytes);
    }
    return Status::ok();
  }
  // After a device failure, as the CUDA stream: nothing is uploaded, downloads read 0xFF.
  void upload(void* dst, const void* src, size_t n) override {
    if (copy_fails() || n == 0 || defer(dst, src, n)) return;
    StateAccess access(&arena_);
    std::memcpy(dst, src, n);
  }
  void begin_uploads() override {
    deferring_ = true;
    deferred_.clear();
  }
  void end_uploads(ThreadPool* pool) override {
    deferring_ = false;
    if (deferred_.empty()) return;
    StateAccess access(&arena_);
    parallel_copy(deferred_.data(), deferred_.size(), pool);
    deferred_.clear();  // keeps its capacity: the next restore records without allocating
  }
  bool deferring() const { return deferring_; }
  // Inside begin_uploads / end_uploads: records a copy into state memory for end_uploads.
  // False outside a batch, or when the record cannot grow (the caller then copies at once).
  bool defer(void* dst, const void* src, size_t n) {
    if (!deferring_) return false;
    try {
      deferred_.push_back({static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n});
    } catch (const std::bad_alloc&) {
      return false;
    }
    return true;
  }
  void download(void* dst, const void* src, size_t n) override {
    if (copy_fails()) {
      if (n > 0) std::memset(dst, 0xFF, n);
      return;
    }
    StateAccess access(&arena_);
    if (n > 0) std::memcpy(dst, src, n);
  }
  void fill_zero(void* dst, size_t n) override {
    StateAccess access(&arena_);
    if (n > 0) std::memset(dst, 0, n);
  }
  Status create_kv(KvMode mode, const std::vector<KvLayerSpec>& layers, int32_t max_seq_len,
                   std::unique_ptr<KvStore>* out) override {
    StateAccess access(&arena_);
    std::unique_ptr<KvCache> cache;
    GEIST_RETURN_IF_ERROR(KvCache::create(mode, layers, max_seq_len, &cache, &arena_));
    std::unique_ptr<CpuKvStore> store(new (std::nothrow)
                                          CpuKvStore(this, &arena_, std::move(cache)));
    if (!store) return Status(GEIST_E_OOM, "cpu backend: out of memory for the KV store");
    *out = std::move(store);
    return Status::ok();
  }

  void get_rows(const WeightMatrix& w, const int32_t* ids, int32_t n, float* out) override {
    for (int32_t t = 0; t < n; ++t) get_row(w, ids[t], out + t * w.n_in);
  }
  void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int32_t n_tok, float* y,
              int64_t y_stride) override {
    float* scratch = grow(mm_scratch_, matmul_scratch_floats(w.n_in, pool_->n_threads()));
    geist::matmul(w, x, x_stride, n_tok, y, y_stride, scratch, *pool_);
  }
  void matmul_to_host(const WeightMatrix& w, const float* x, int64_t x_stride, int32_t n_tok,
                      float* host_y, int64_t y_stride) override {
    matmul(w, x, x_stride, n_tok, host_y, y_stride);
  }
  void rms_norm(const float* x, int64_t x_stride, const float* w, float* y, int64_t y_stride,
                int32_t n_rows, int64_t n, float eps) override {
    for (int32_t r = 0; r < n_rows; ++r)
      geist::rms_norm(x + r * x_stride, w, y + r * y_stride, n, eps);
  }
  void rope(float* x, int64_t x_stride, int32_t n_tok, int32_t n_head, int32_t head_dim,
            int32_t pos0, const RopeParams& p) override {
    for (int32_t t = 0; t < n_tok; ++t)
      geist::rope(x + t * x_stride, n_head, head_dim, pos0 + t, p);
  }
  void add(float* y, const float* x, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
  }
  // Element-wise, so the split over threads does not change a value (swiglu_simd).
  void swiglu(const float* gate, const float* up, float* out, int64_t n) override {
    constexpr int64_t kMinPerThread = 4096;  // below this one thread is faster
    if (n < kMinPerThread * 2) {
      swiglu_simd(gate, up, out, n);
      return;
    }
    pool_->parallel_for(n, [&](int64_t begin, int64_t end) {
      swiglu_simd(gate + begin, up + begin, out + begin, end - begin);
    });
  }
  void sigmoid_mul(float* x, int64_t x_stride, const float* gate, int64_t gate_stride,
                   int32_t n_rows, int64_t n) override {
    rows_maybe_parallel(n_rows, n, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float* o = x + r * x_stride;
        const float* g = gate + r * gate_stride;
        for (int64_t d = 0; d < n; ++d) o[d] *= sigmoid_f32(g[d]);
      }
    });
  }

  // A batched decode step's attention in one parallel region (was one per session): every
  // row's rope and KV write, then all rows' tiles dealt over the threads together. Each row
  // runs what its own KvStore::attend would (write_one, attention_kv_many), so its bits are
  // those of the default's calls. Rows that share a KV cache take the default.
  void rope_attend_rows(int32_t il, const AttentionShape& s, const RopeParams& p,
                        KvStore* const* kv, const int32_t* pos, int32_t n_rows, float* q,
                        int64_t q_stride, float* k, int64_t k_stride, const float* v,
                        int64_t v_stride, float* out, int64_t out_stride) override {
    constexpr int32_t kMaxRows = 64;  // attention_kv_many's calls
    bool distinct = n_rows >= 2 && n_rows <= kMaxRows;
    for (int32_t r = 0; distinct && r < n_rows; ++r) {
      distinct = dynamic_cast<CpuKvStore*>(kv[r]) != nullptr;
      for (int32_t o = 0; distinct && o < r; ++o) distinct = kv[o] != kv[r];
    }
    if (!distinct) {
      Stream::rope_attend_rows(il, s, p, kv, pos, n_rows, q, q_stride, k, k_stride, v, v_stride,
                               out, out_stride);
      return;
    }
    AttentionKvCall calls[kMaxRows];
    int32_t max_len = 0;
    for (int32_t r = 0; r < n_rows; ++r) {
      float* qr = q + r * q_stride;
      float* kr = k + r * k_stride;
      rope(qr, q_stride, 1, s.n_head, s.head_dim_k, pos[r], p);
      rope(kr, k_stride, 1, s.n_head_kv, s.head_dim_k, pos[r], p);
      static_cast<CpuKvStore*>(kv[r])->write_one(il, pos[r], qr, kr, v + r * v_stride,
                                                 out + r * out_stride, &calls[r]);
      max_len = std::max(max_len, kv[r]->max_seq_len());
    }
    float* scratch =
        grow(attn_scratch_, attention_kv_scratch_floats(s, max_len, pool_->n_threads()));
    attention_kv_many(s, calls, n_rows, scratch, *pool_);
  }

  void deltanet_gates(float* beta, float* g, int32_t n_tok, int32_t n_heads, const float* a,
                      const float* dt_bias) override {
    for (int32_t t = 0; t < n_tok; ++t) {
      for (int32_t h = 0; h < n_heads; ++h) {
        const int64_t i = int64_t{t} * n_heads + h;
        beta[i] = sigmoid_f32(beta[i]);
        g[i] = a[h] * softplus_f32(g[i] + dt_bias[h]);
      }
    }
  }
  void conv1d_silu(const float* x, int64_t x_stride, int32_t n_tok, int64_t n_ch, const float* w,
                   int32_t kernel, float* state, float* out, int64_t out_stride) override {
    pool_->run([&](int ti, int tn) {
      const int64_t c0 = n_ch * ti / tn, c1 = n_ch * (ti + 1) / tn;
      if (c0 >= c1) return;
      conv1d_causal(x, x_stride, n_tok, n_ch, w, kernel, state, out, out_stride, c0, c1);
      for (int32_t t = 0; t < n_tok; ++t) silu_inplace(out + t * out_stride + c0, c1 - c0);
    });
  }
  // A batched decode step's rows in one parallel region (was one per session and layer): each
  // thread takes, for every row, the channels it takes in conv1d_silu, so a row's bits are those
  // of its own call (a channel's output depends on nothing else).
  void conv1d_silu_rows(const float* x, int64_t x_stride, int32_t n_rows, int64_t n_ch,
                        const float* w, int32_t kernel, float* const* states, float* out,
                        int64_t out_stride) override {
    pool_->run([&](int ti, int tn) {
      const int64_t c0 = n_ch * ti / tn, c1 = n_ch * (ti + 1) / tn;
      if (c0 >= c1) return;
      for (int32_t r = 0; r < n_rows; ++r) {
        float* o = out + r * out_stride;
        conv1d_causal(x + r * x_stride, x_stride, 1, n_ch, w, kernel, states[r], o, out_stride, c0,
                      c1);
        silu_inplace(o + c0, c1 - c0);
      }
    });
  }
  void l2_norm_heads(float* x, int64_t x_stride, int32_t n_tok, int32_t n_heads, int32_t d,
                     float eps, float scale) override {
    for (int32_t t = 0; t < n_tok; ++t) {
      for (int32_t h = 0; h < n_heads; ++h) {
        float* p = x + t * x_stride + int64_t{h} * d;
        l2_norm_inplace(p, d, eps);
        if (scale != 1.0f) {
          for (int32_t i = 0; i < d; ++i) p[i] *= scale;
        }
      }
    }
  }
  void gated_delta_rule(const GatedDeltaArgs& a, int32_t chunk) override {
    const size_t per_thread = gated_delta_rule_scratch_doubles(chunk, a.d_k, a.d_v);
    double* scratch = grow(delta_scratch_, per_thread * static_cast<size_t>(pool_->n_threads()));
    pool_->run([&](int ti, int tn) {
      const int32_t h0 = a.n_v_heads * ti / tn, h1 = a.n_v_heads * (ti + 1) / tn;
      if (h0 >= h1) return;
      delta_heads(a, chunk, h0, h1, scratch + static_cast<size_t>(ti) * per_thread);
    });
  }
  // One parallel region for all sets: the (set, head) pairs, weighted by their tokens, cut
  // into one contiguous range per thread (which thread runs a head never changes its bits).
  void gated_delta_rule_many(const GatedDeltaArgs* a, int32_t n, int32_t chunk) override {
    if (n == 1) {
      gated_delta_rule(a[0], chunk);
      return;
    }
    size_t per_thread = 0;
    int64_t total = 0;  // tokens x heads over all sets
    for (int32_t i = 0; i < n; ++i) {
      for (int32_t j = 0; j < i; ++j) {
        GEIST_CHECK(a[i].state != a[j].state, "gated_delta_rule_many: two sets share a state");
      }
      per_thread =
          std::max(per_thread, gated_delta_rule_scratch_doubles(chunk, a[i].d_k, a[i].d_v));
      total += a[i].n_tokens * a[i].n_v_heads;
    }
    double* scratch = grow(delta_scratch_, per_thread * static_cast<size_t>(pool_->n_threads()));
    pool_->run([&](int ti, int tn) {
      const int64_t lo = total * ti / tn, hi = total * (ti + 1) / tn;
      double* s = scratch + static_cast<size_t>(ti) * per_thread;
      // Head h of set i starts at unit base + h * n_tokens; it is this thread's when that unit
      // lies in [lo, hi).
      auto first_head = [](int64_t units, int64_t w, int32_t n_heads) {
        const int64_t h = units <= 0 ? 0 : (units + w - 1) / w;
        return static_cast<int32_t>(std::min<int64_t>(h, n_heads));
      };
      int64_t base = 0;
      for (int32_t i = 0; i < n && base < hi; ++i) {
        const int64_t w = a[i].n_tokens;
        if (w <= 0) continue;
        const int32_t h0 = first_head(lo - base, w, a[i].n_v_heads);
        const int32_t h1 = first_head(hi - base, w, a[i].n_v_heads);
        if (h0 < h1) delta_heads(a[i], chunk, h0, h1, s);
        base += w * a[i].n_v_heads;
      }
    });
  }
  void rms_norm_gated(const float* x, const float* z, const float* w, int32_t n_rows, int32_t d,
                      float eps, float* out) override {
    rows_maybe_parallel(n_rows, d, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t o = r * d;
        geist::rms_norm_gated(x + o, z + o, w, d, eps, out + o);
      }
    });
  }

 private:
  // f(r0, r1) over rows [0, n_rows) of n elements each: split over the pool when there are
  // enough elements (a batched decode step's rows, each an exp per element), else inline. Rows
  // are computed alike either way.
  template <class F>
  void rows_maybe_parallel(int64_t n_rows, int64_t n, F&& f) {
    constexpr int64_t kMinPerThread = 8192;  // elements; below this one thread is faster
    if (n_rows < 2 || n_rows * n < kMinPerThread * 2) {
      f(int64_t{0}, n_rows);
      return;
    }
    pool_->parallel_for(n_rows, f);
  }
  static void delta_heads(const GatedDeltaArgs& a, int32_t chunk, int32_t h0, int32_t h1,
                          double* scratch) {
    if (a.n_tokens == 1) {
      gated_delta_rule_recurrent(a, h0, h1, scratch);
    } else {
      gated_delta_rule_chunked(a, chunk, h0, h1, scratch);
    }
  }
  template <class T>
  static T* grow(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);  // grows to the largest need once, then never again
    return v.data();
  }

  ThreadPool* pool_ = nullptr;
  StateArena arena_;                    // every state and activation buffer of the session
  std::shared_ptr<DeviceFault> fault_;  // the backend's (nullptr: plain CPU)
  std::vector<float> mm_scratch_;       // matmul_scratch_floats(n_in, n_threads)
  std::vector<double> delta_scratch_;   // [n_threads][gated_delta_rule_scratch_doubles]
  std::vector<float> attn_scratch_;     // attention_kv_scratch_floats of rope_attend_rows
  bool deferring_ = false;              // between begin_uploads and end_uploads
  std::vector<CopyRange> deferred_;     // the batch's copies into state memory, in order
};

void CpuKvStore::download_region(const KvRegion& r, int32_t n_pos, uint8_t* host_dst) const {
  if (stream_->copy_fails()) {
    std::memset(host_dst, 0xFF, r.nbytes);
    return;
  }
  StateAccess access(arena_);
  cache_->read_region(r, n_pos, host_dst);
}

void CpuKvStore::upload_region(const KvRegion& r, int32_t n_pos, const uint8_t* host_src) {
  if (stream_->copy_fails()) return;
  StateAccess access(arena_);
  // In an upload batch the plain parts are copied with the batch's other regions (Q4's window
  // rows, reordered on their way in, and empty parts go through write_region now).
  if (stream_->deferring()) {
    uint8_t* dst = cache_->write_region_dst(r, n_pos);
    if (dst != nullptr && stream_->defer(dst, host_src, r.nbytes)) return;
  }
  cache_->write_region(r, n_pos, host_src);
}

void CpuKvStore::attend(int32_t il, const AttentionShape& s, const float* q, int64_t q_stride,
                        int32_t n, int32_t pos, const float* k, int64_t k_stride, const float* v,
                        int64_t v_stride, float* out, int64_t out_stride) {
  ThreadPool& pool = stream_->pool();
  // Sized for the longest context once, so decode steps never allocate.
  const size_t want = KvCache::attention_scratch_floats(s, cache_->max_seq_len(), pool.n_threads());
  if (scratch_.size() < want) scratch_.resize(want);
  cache_->attend(il, s, q, q_stride, n, pos, k, k_stride, v, v_stride, out, out_stride,
                 scratch_.data(), pool);
}

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(bool device_local)
      : device_local_(device_local),
        fault_(device_local ? std::make_shared<DeviceFault>() : nullptr) {}
  BackendKind kind() const override {
    return device_local_ ? BackendKind::CPU_DEVICE_LOCAL : BackendKind::CPU;
  }
  std::string description() const override {
    return device_local_ ? "cpu-devlocal (CPU kernels, state reachable only through the backend)"
                         : "cpu";
  }
  // Q8_0 / Q4_0 / Q4_K / Q6_K matrices are repacked into the GROUPS16 layout (kernels/matmul.h),
  // which the 8-bit kernels read about twice as fast at decode, with the same bits; Q5_0 and
  // IQ4_NL too (codes packed, Q4_0's one-plane formula on their values), and Q4_1 / Q5_1 / Q5_K /
  // Q2_K / Q3_K / IQ4_XS in the I8M form (the 8-bit kernels instead of the int16 / f32 paths,
  // codes kept packed); other weights stay in the file mapping.
  Status upload_weight(const WeightMatrix& host, WeightMatrix* dev) override {
    if (!weight_groups16_useful(host)) {
      *dev = host;
      return Status::ok();
    }
    const size_t n = weight_groups16_bytes(host);
    try {
      weights_.reserve(weights_.size() + 1);  // so the push_back below cannot throw
    } catch (const std::bad_alloc&) {
      return Status(GEIST_E_OOM, "cpu backend: out of memory");
    }
    // Large matrices on transparent huge pages where the kernel allows them (best effort):
    // 512x fewer page faults while the repack first writes them, and fewer TLB misses while
    // decode streams them.
    const size_t align = n >= kHugePage ? kHugePage : kWeightAlign;
    std::unique_ptr<uint8_t, AlignedFree> buf(
        static_cast<uint8_t*>(::operator new (n, std::align_val_t{align}, std::nothrow)),
        AlignedFree{align});
    if (!buf) {
      return Status::error(GEIST_E_OOM,
                           "cpu backend: out of memory repacking a weight matrix "
                           "(%zu bytes)",
                           n);
    }
#ifdef MADV_HUGEPAGE
    if (n >= kHugePage) (void)madvise(buf.get(), n / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
    weight_to_groups16(host, buf.get(), dev);
    weights_.push_back(std::move(buf));
    return Status::ok();
  }
  Status upload_floats(const float* host, size_t, const float** dev) override {
    *dev = host;
    return Status::ok();
  }
  // cpu_devlocal_fail. The fault is shared with the streams, not part of the backend's value.
  Status fail(int64_t after_copies, const char* what) const {
    if (fault_ == nullptr || after_copies < 0) {
      return Status(GEIST_E_INVALID_ARG,
                    "cpu_devlocal_fail: not a cpu-devlocal backend, or a negative count");
    }
    if (fault_->armed.load(std::memory_order_acquire)) return Status::ok();  // the first stands
    fault_->what = std::string("cpu-devlocal: ") + (what != nullptr ? what : "device failed");
    fault_->countdown.store(after_copies, std::memory_order_relaxed);
    fault_->armed.store(true, std::memory_order_release);
    if (after_copies == 0) fault_->failed.store(true, std::memory_order_release);
    return Status::ok();
  }
  Status new_stream(std::unique_ptr<Stream>* out) const override {
    std::unique_ptr<CpuStream> s(new (std::nothrow) CpuStream(device_local_, fault_));
    if (!s) return Status(GEIST_E_OOM, "cpu backend: out of memory for a stream");
    *out = std::move(s);
    return Status::ok();
  }

 private:
  static constexpr size_t kWeightAlign = 64;  // a cache line: each 64-byte load is one line
  static constexpr size_t kHugePage = size_t{2} << 20;  // x86-64 / arm64 (4 KiB granule)
  struct AlignedFree {
    size_t align;
    void operator()(uint8_t* p) const { ::operator delete (p, std::align_val_t{align}); }
  };
  bool device_local_;
  std::shared_ptr<DeviceFault> fault_;                          // CPU_DEVICE_LOCAL only
  std::vector<std::unique_ptr<uint8_t, AlignedFree>> weights_;  // repacked matrices
};

}  // namespace

Status cpu_devlocal_fail(const Backend& backend, int64_t after_copies, const char* what) {
  const auto* b = dynamic_cast<const CpuBackend*>(&backend);
  if (b == nullptr) {
    return Status(GEIST_E_INVALID_ARG, "cpu_devlocal_fail: not a cpu-devlocal backend");
  }
  return b->fail(after_copies, what);
}

Status create_cpu_backend(bool device_local, std::unique_ptr<Backend>* out) {
  std::unique_ptr<CpuBackend> b(new (std::nothrow) CpuBackend(device_local));
  if (!b) return Status(GEIST_E_OOM, "cpu backend: out of memory");
  *out = std::move(b);
  return Status::ok();
}

}  // namespace geist
