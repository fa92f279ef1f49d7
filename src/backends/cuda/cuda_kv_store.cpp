// CudaKvStore: the F32 / F16 KV cache in device memory, with KvCache's byte layout and
// regions (src/kv/kv_cache.h), so snapshot images move between the CPU and CUDA backends.
//   layer il: K [max_seq_len][n_embd_k], V [max_seq_len][n_embd_v], elements f32 or f16,
//   position-major from offset 0; region KV_PART_K of n_pos = the first n_pos K rows.
#include <new>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_stream.h"
#include "backends/cuda/cuda_util.h"

namespace geist::cuda {

namespace {

class CudaKvStore final : public KvStore {
 public:
  struct Layer {
    KvLayerSpec spec;
    void* k = nullptr;  // device [max_seq_len][n_embd_k] f32 / f16
    void* v = nullptr;  // device [max_seq_len][n_embd_v] f32 / f16
    int64_t k_row = 0;  // bytes per K row
    int64_t v_row = 0;  // bytes per V row
  };

  CudaKvStore(std::shared_ptr<StreamCore> core, KvMode mode, int32_t max_seq_len)
      : core_(std::move(core)), mode_(mode), max_seq_len_(max_seq_len) {}
  ~CudaKvStore() override {
    cudaStreamSynchronize(core_->stream);
    for (Layer& l : layers_) {
      if (l.k != nullptr) cudaFree(l.k);
      if (l.v != nullptr) cudaFree(l.v);
    }
  }

  Status init(const std::vector<KvLayerSpec>& specs) {
    const int64_t esize = mode_ == KvMode::F16 ? 2 : 4;
    try {
      layers_.resize(specs.size());
    } catch (const std::bad_alloc&) {
      return Status(GEIST_E_OOM, "cuda kv: out of host memory");
    }
    for (size_t il = 0; il < specs.size(); ++il) {
      const KvLayerSpec& s = specs[il];
      if (s.n_embd_k < 0 || s.n_embd_v < 0 || (s.n_embd_k == 0) != (s.n_embd_v == 0)) {
        return Status::error(GEIST_E_INVALID_ARG, "kv cache: layer %zu has K/V sizes %d/%d", il,
                             s.n_embd_k, s.n_embd_v);
      }
      if (s.head_dim_k < 0 || s.head_dim_v < 0) {
        return Status::error(GEIST_E_INVALID_ARG, "kv cache: layer %zu has head dims %d/%d", il,
                             s.head_dim_k, s.head_dim_v);
      }
      Layer& l = layers_[il];
      l.spec = s;
      if (s.n_embd_k == 0) continue;
      l.k_row = esize * s.n_embd_k;
      l.v_row = esize * s.n_embd_v;
      const size_t kb = static_cast<size_t>(l.k_row) * static_cast<size_t>(max_seq_len_);
      const size_t vb = static_cast<size_t>(l.v_row) * static_cast<size_t>(max_seq_len_);
      GEIST_RETURN_IF_ERROR(alloc_zeroed(kb, &l.k));
      GEIST_RETURN_IF_ERROR(alloc_zeroed(vb, &l.v));
    }
    return Status::ok();
  }

  KvMode mode() const override { return mode_; }
  int32_t max_seq_len() const override { return max_seq_len_; }

  void attend(int32_t il, const AttentionShape& s, const float* q, int64_t q_stride, int32_t n,
              int32_t pos, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
              float* out, int64_t out_stride) override {
    GEIST_CHECK(has_layer(il), "cuda kv attend: layer has no KV");
    GEIST_CHECK(pos >= 0 && n >= 0 && pos + n <= max_seq_len_,
                "cuda kv attend: positions out of range");
    if (n == 0) return;
    const Layer& l = layers_[static_cast<size_t>(il)];
    const bool f16 = mode_ == KvMode::F16;
    auto* kdst = static_cast<uint8_t*>(l.k) + static_cast<int64_t>(pos) * l.k_row;
    auto* vdst = static_cast<uint8_t*>(l.v) + static_cast<int64_t>(pos) * l.v_row;
    if (!core_->ok(kv_store_rows(core_->stream, f16, k, k_stride, n, l.spec.n_embd_k, kdst),
                   "kv store K kernel launch") ||
        !core_->ok(kv_store_rows(core_->stream, f16, v, v_stride, n, l.spec.n_embd_v, vdst),
                   "kv store V kernel launch")) {
      return;
    }
    core_->ok(kv_attention(core_->stream, f16, s, q, q_stride, n, pos, l.k, l.spec.n_embd_k, l.v,
                           l.spec.n_embd_v, out, out_stride),
              "kv attention kernel launch");
  }

  bool can_resume_at(int32_t) const override { return true; }  // row modes only

  int64_t bytes_per_token() const override {
    int64_t total = 0;
    for (const Layer& l : layers_) total += l.k_row + l.v_row;
    return total;
  }

  // KvCache::regions for a row mode: per attention layer, K then V, the first n_pos rows.
  void regions(int32_t n_pos, std::vector<KvRegion>* out) const override {
    GEIST_CHECK(n_pos >= 0 && n_pos <= max_seq_len_, "cuda kv regions: n_pos out of range");
    out->clear();
    for (int32_t il = 0; il < static_cast<int32_t>(layers_.size()); ++il) {
      if (!has_layer(il)) continue;
      out->push_back({il, KV_PART_K, part_bytes(il, KV_PART_K, n_pos)});
      out->push_back({il, KV_PART_V, part_bytes(il, KV_PART_V, n_pos)});
    }
  }

  void download_region(const KvRegion& r, int32_t n_pos, uint8_t* host_dst) const override {
    core_->download(host_dst, region_ptr(r, n_pos), r.nbytes);
  }
  void upload_region(const KvRegion& r, int32_t n_pos, const uint8_t* host_src) override {
    core_->upload(region_ptr(r, n_pos), host_src, r.nbytes);
  }

 private:
  bool has_layer(int32_t il) const {
    return il >= 0 && il < static_cast<int32_t>(layers_.size()) &&
           layers_[static_cast<size_t>(il)].spec.n_embd_k > 0;
  }
  uint64_t part_bytes(int32_t il, uint32_t part, int32_t n_pos) const {
    const Layer& l = layers_[static_cast<size_t>(il)];
    const int64_t row = part == KV_PART_K ? l.k_row : l.v_row;
    return static_cast<uint64_t>(row) * static_cast<uint64_t>(n_pos);
  }
  void* region_ptr(const KvRegion& r, int32_t n_pos) const {
    GEIST_CHECK(has_layer(r.layer), "cuda kv region: layer has no KV");
    GEIST_CHECK(n_pos >= 0 && n_pos <= max_seq_len_, "cuda kv region: n_pos out of range");
    GEIST_CHECK(r.part == KV_PART_K || r.part == KV_PART_V, "cuda kv region: unknown part");
    GEIST_CHECK(r.nbytes == part_bytes(r.layer, r.part, n_pos),
                "cuda kv region: size differs from regions()");
    const Layer& l = layers_[static_cast<size_t>(r.layer)];
    return r.part == KV_PART_K ? l.k : l.v;
  }
  Status alloc_zeroed(size_t bytes, void** out) {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return Status::error(e == cudaErrorMemoryAllocation ? GEIST_E_OOM : GEIST_E_BACKEND,
                           "cuda kv: cudaMalloc(%zu bytes) for %d positions failed: %s", bytes,
                           max_seq_len_, cudaGetErrorString(e));
    }
    *out = p;  // owned by the layer from here on, freed by the destructor
    GEIST_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, bytes == 0 ? 1 : bytes, core_->stream));
    return Status::ok();
  }

  std::shared_ptr<StreamCore> core_;
  KvMode mode_;
  int32_t max_seq_len_;
  std::vector<Layer> layers_;  // [n_layer]; null buffers for layers without attention
};

}  // namespace

Status create_cuda_kv_store(std::shared_ptr<StreamCore> core, KvMode mode,
                            const std::vector<KvLayerSpec>& layers, int32_t max_seq_len,
                            std::unique_ptr<KvStore>* out) {
  if (max_seq_len <= 0) {
    return Status::error(GEIST_E_INVALID_ARG, "kv cache: max_seq_len %d must be positive",
                         max_seq_len);
  }
  if (!kv_mode_valid(static_cast<int32_t>(mode))) {
    return Status::error(GEIST_E_INVALID_ARG, "kv cache: unknown kv mode %d",
                         static_cast<int32_t>(mode));
  }
  if (mode != KvMode::F32 && mode != KvMode::F16) {
    return Status::error(GEIST_E_UNSUPPORTED, "KV mode %s is not yet supported on the cuda backend",
                         kv_mode_name(mode));
  }
  std::unique_ptr<CudaKvStore> kv(new (std::nothrow)
                                      CudaKvStore(std::move(core), mode, max_seq_len));
  if (!kv) return Status(GEIST_E_OOM, "cuda kv: out of host memory");
  GEIST_RETURN_IF_ERROR(kv->init(layers));
  *out = std::move(kv);
  return Status::ok();
}

}  // namespace geist::cuda
