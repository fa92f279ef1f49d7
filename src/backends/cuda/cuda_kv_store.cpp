// CudaKvStore: the KV cache in device memory in every KvMode, with KvCache's regions, byte
// layouts and write semantics (src/kv/kv_cache.h), so snapshot images move between the CPU and
// CUDA backends. Per attention layer (device buffers):
//   row modes (F32, F16, Q8, Q4): K [max_seq_len][k_row], V [max_seq_len][v_row] in the mode's
//     row encoding; Q8 / Q4 also K_REF [n_embd_k] f16, position 0's key, which K rows are
//     relative to (Q4: turned by the layer's RoPE to each position, with the cos / sin table
//     [max_seq_len][n_rot / 2][2] built on the host by kv_rope_table); Q4 also K_WIN and V_WIN
//     [kQ4Window][n_embd] f16 rings of the newest positions (KvCache's window).
//   KIVI4 / KIVI2: K [max_seq_len / G][k_row] key groups (CH4 / CH2), V [max_seq_len][v_row]
//     (A4 / A2, full groups only), K_RESID [G][n_embd_k] and V_RESID [G][n_embd_v] f16, row
//     p % G holding position p of the group being filled.
// Rows are quantized on the device (kv_cuda.cu, bitwise the CPU quantizer), and attention reads
// the encoded bytes (kv_attn_cuda.cu). KIVI's attend runs in pieces split where a group fills,
// as KvCache::attend does, so every query sees the cache as it is right after its own position
// was written, whatever the split into calls.
#include <algorithm>
#include <new>
#include <vector>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_stream.h"
#include "backends/cuda/cuda_util.h"

namespace geist::cuda {

namespace {

constexpr int32_t kGroup = kKvBlock;  // KIVI tokens per key group, as kv_cache.cpp

// Encodings of K rows (KIVI: full key groups) and V rows: KvCache's (kv_cache.h).
struct ModeEnc {
  KvEnc k, v;
};
ModeEnc mode_enc(KvMode m) { return {kv_mode_key_enc(m), kv_mode_value_enc(m)}; }

class CudaKvStore final : public KvStore {
 public:
  struct Layer {
    KvLayerSpec spec;
    uint8_t* k = nullptr;        // row modes: [max_seq_len][k_row]; KIVI: [max_seq_len / G][k_row]
    uint8_t* v = nullptr;        // [max_seq_len][v_row]
    uint8_t* k_resid = nullptr;  // KIVI: [G][n_embd_k] f16
    uint8_t* v_resid = nullptr;  // KIVI: [G][n_embd_v] f16
    uint8_t* k_ref = nullptr;    // Q8 / Q4: [n_embd_k] f16
    uint8_t* k_win = nullptr;    // Q4: [kQ4Window][n_embd_k] f16, row p % kQ4Window
    uint8_t* v_win = nullptr;    // Q4: [kQ4Window][n_embd_v] f16
    uint8_t* rope_cs = nullptr;  // Q4: [max_seq_len][n_rot / 2][2] float (kv_rope_table)
    int64_t k_row = 0;           // bytes per K row (KIVI: per key group)
    int64_t v_row = 0;           // bytes per V row
    int32_t k_block = 0;         // values per block of K rows
    int32_t v_block = 0;         // values per block of V rows
    int32_t written_end = 0;     // one past the last position written
  };

  CudaKvStore(std::shared_ptr<StreamCore> core, KvMode mode, int32_t max_seq_len)
      : core_(std::move(core)), mode_(mode), enc_(mode_enc(mode)), max_seq_len_(max_seq_len) {}
  ~CudaKvStore() override {
    cudaStreamSynchronize(core_->stream);
    for (Layer& l : layers_) {
      for (uint8_t* p : {l.k, l.v, l.k_resid, l.v_resid, l.k_ref, l.k_win, l.v_win, l.rope_cs}) {
        if (p != nullptr) cudaFree(p);
      }
    }
  }

  Status init(const std::vector<KvLayerSpec>& specs) {
    GEIST_CUDA_RETURN_IF_ERROR(kv_attention_setup());
    try {
      layers_.resize(specs.size());
    } catch (const std::bad_alloc&) {
      return Status(GEIST_E_OOM, "cuda kv: out of host memory");
    }
    const size_t n_pos = static_cast<size_t>(max_seq_len_);
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
      l.k_block = kv_block_for_head_dim(s.head_dim_k);
      l.v_block = kv_block_for_head_dim(s.head_dim_v);
      l.v_row = kv_row_bytes(enc_.v, s.n_embd_v, l.v_block);
      GEIST_RETURN_IF_ERROR(alloc_zeroed(n_pos * static_cast<size_t>(l.v_row), &l.v));
      if (kivi()) {
        l.k_row = kv_group_bytes(enc_.k, s.n_embd_k);
        GEIST_RETURN_IF_ERROR(alloc_zeroed(n_pos / kGroup * static_cast<size_t>(l.k_row), &l.k));
        GEIST_RETURN_IF_ERROR(alloc_zeroed(size_t{kGroup} * s.n_embd_k * 2, &l.k_resid));
        GEIST_RETURN_IF_ERROR(alloc_zeroed(size_t{kGroup} * s.n_embd_v * 2, &l.v_resid));
      } else {
        l.k_row = kv_row_bytes(enc_.k, s.n_embd_k, l.k_block);
        GEIST_RETURN_IF_ERROR(alloc_zeroed(n_pos * static_cast<size_t>(l.k_row), &l.k));
        if (centered()) GEIST_RETURN_IF_ERROR(alloc_zeroed(size_t{2} * s.n_embd_k, &l.k_ref));
      }
      if (windowed()) {
        const RopeParams& rp = s.rope;
        if (rp.n_rot < 0 || rp.n_rot % 2 != 0 ||
            (rp.n_rot > 0 &&
             (s.head_dim_k <= 0 || rp.n_rot > s.head_dim_k || s.n_embd_k % s.head_dim_k != 0))) {
          return Status::error(GEIST_E_INVALID_ARG,
                               "kv cache: layer %zu has RoPE dims %d for heads of %d", il, rp.n_rot,
                               s.head_dim_k);
        }
        GEIST_RETURN_IF_ERROR(alloc_zeroed(size_t{2} * kQ4Window * s.n_embd_k, &l.k_win));
        GEIST_RETURN_IF_ERROR(alloc_zeroed(size_t{2} * kQ4Window * s.n_embd_v, &l.v_win));
        std::vector<float> cs;
        try {
          cs.resize(n_pos * static_cast<size_t>(rp.n_rot));
        } catch (const std::bad_alloc&) {
          return Status(GEIST_E_OOM, "cuda kv: out of host memory");
        }
        kv_rope_table(rp, max_seq_len_, cs.data());
        GEIST_RETURN_IF_ERROR(alloc_zeroed(cs.size() * sizeof(float), &l.rope_cs));
        GEIST_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(l.rope_cs, cs.data(), cs.size() * sizeof(float),
                                                   cudaMemcpyHostToDevice, core_->stream));
        GEIST_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(core_->stream));  // cs is freed next
        l.spec.rope.freq_factors = nullptr;  // the caller's memory: not kept
      }
    }
    return Status::ok();
  }

  KvMode mode() const override { return mode_; }
  int32_t max_seq_len() const override { return max_seq_len_; }

  void attend(int32_t il, const AttentionShape& s, const float* q, int64_t q_stride, int32_t n,
              int32_t pos, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
              float* out, int64_t out_stride) override {
    attend_core(*core_, nullptr, il, s, q, q_stride, n, pos, k, k_stride, v, v_stride, out,
                out_stride);
  }
  // On the forward's stream (a batched forward's lead): every launch is ordered with the ops
  // around it there.
  void attend_on(Stream& on, int32_t il, const AttentionShape& s, const float* q, int64_t q_stride,
                 int32_t n, int32_t pos, const float* k, int64_t k_stride, const float* v,
                 int64_t v_stride, float* out, int64_t out_stride) override {
    StreamCore* c = stream_core(on);
    GEIST_CHECK(c != nullptr, "cuda kv attend: a stream of another backend");
    attend_core(*c, nullptr, il, s, q, q_stride, n, pos, k, k_stride, v, v_stride, out, out_stride);
  }

  // cuda_kv_attend_rope (cuda_stream.h).
  void attend_rope(StreamCore& c, RopePair* r, int32_t il, const AttentionShape& s, const float* q,
                   int64_t q_stride, int32_t n, int32_t pos, const float* k, int64_t k_stride,
                   const float* v, int64_t v_stride, float* out, int64_t out_stride) {
    attend_core(c, r, il, s, q, q_stride, n, pos, k, k_stride, v, v_stride, out, out_stride);
  }

  // cuda_kv_rope_row / cuda_kv_row_written (cuda_stream.h).
  bool rope_row(int32_t il, int32_t pos, const float* v, int64_t v_stride, int32_t row_off,
                const int32_t* row_dev, RopeRow* row) const {
    if (!plain_rows() || !has_layer(il) || pos < 0 || pos >= max_seq_len_) return false;
    row->st.kv = rows_out(layers_[static_cast<size_t>(il)], v, v_stride, row_off, row_dev);
    view(il, pos + 1, &row->k, &row->v);
    return true;
  }
  void row_written(int32_t il, int32_t pos) {
    GEIST_CHECK(has_layer(il) && pos >= 0 && pos < max_seq_len_,
                "cuda kv row written: layer or position out of range");
    layers_[static_cast<size_t>(il)].written_end = pos + 1;
  }

  bool can_resume_at(int32_t pos) const override {
    if (windowed()) {  // KvCache::can_resume_at
      const int32_t start = kv_q4_window_start(pos + 1);
      for (const Layer& l : layers_) {
        if (l.spec.n_embd_k > 0 && start < pos && l.written_end > start + kQ4Window) return false;
      }
      return true;
    }
    if (!kivi() || pos % kGroup == 0) return true;
    for (const Layer& l : layers_) {
      if (l.spec.n_embd_k == 0) continue;
      if (l.written_end <= 0 || pos > l.written_end ||
          pos / kGroup != (l.written_end - 1) / kGroup) {
        return false;
      }
    }
    return true;
  }

  int64_t bytes_per_token() const override {
    int64_t total = 0;
    for (const Layer& l : layers_) {
      if (l.spec.n_embd_k > 0) total += (kivi() ? l.k_row / kGroup : l.k_row) + l.v_row;
    }
    return total;
  }

  // KvCache::regions: per attention layer, its parts in ascending order.
  void regions(int32_t n_pos, std::vector<KvRegion>* out) const override {
    GEIST_CHECK(n_pos >= 0 && n_pos <= max_seq_len_, "cuda kv regions: n_pos out of range");
    out->clear();
    const uint32_t n_parts = n_parts_of_mode();
    for (int32_t il = 0; il < static_cast<int32_t>(layers_.size()); ++il) {
      if (!has_layer(il)) continue;
      for (uint32_t part = 0; part < n_parts; ++part) {
        out->push_back({il, part, part_bytes(il, part, n_pos)});
      }
    }
  }

  void download_region(const KvRegion& r, int32_t n_pos, uint8_t* host_dst) const override {
    const uint8_t* p = region_ptr(r, n_pos);
    if (windowed() && r.part >= KV_PART_K_WIN) {
      window_runs(r, n_pos, [&](int64_t dev_off, int64_t host_off, size_t n) {
        core_->download(host_dst + host_off, p + dev_off, n);
      });
    } else if (r.nbytes > 0) {
      core_->download(host_dst, p, r.nbytes);
    }
  }
  void upload_region(const KvRegion& r, int32_t n_pos, const uint8_t* host_src) override {
    uint8_t* p = region_ptr(r, n_pos);
    if (windowed() && r.part >= KV_PART_K_WIN) {
      window_runs(r, n_pos, [&](int64_t dev_off, int64_t host_off, size_t n) {
        core_->upload(p + dev_off, host_src + host_off, n);
      });
    } else if (r.nbytes > 0) {
      core_->upload(p, host_src, r.nbytes);
    }
    layers_[static_cast<size_t>(r.layer)].written_end = n_pos;
  }

 private:
  bool kivi() const { return mode_ == KvMode::KIVI4 || mode_ == KvMode::KIVI2; }
  bool centered() const { return mode_ == KvMode::Q8 || mode_ == KvMode::Q4; }
  bool plain_rows() const { return mode_ == KvMode::F32 || mode_ == KvMode::F16; }
  bool windowed() const { return mode_ == KvMode::Q4; }
  uint32_t n_parts_of_mode() const { return kv_mode_parts(mode_); }

  KvKeyRef key_ref(const Layer& l) const {
    KvKeyRef r;
    r.c = l.k_ref;
    r.cs = reinterpret_cast<const float*>(l.rope_cs);
    r.n_rot = l.spec.rope.n_rot;
    r.head_dim = l.spec.head_dim_k;
    r.neox = l.spec.rope.style == RopeStyle::NEOX;
    return r;
  }

  // The window rows of [kv_q4_window_start(n_pos), n_pos) as at most two runs of consecutive
  // ring rows: f(byte offset in the ring, byte offset in the region, bytes).
  template <class F>
  void window_runs(const KvRegion& r, int32_t n_pos, F f) const {
    const KvLayerSpec& sp = layers_[static_cast<size_t>(r.layer)].spec;
    const int64_t row = int64_t{r.part == KV_PART_K_WIN ? sp.n_embd_k : sp.n_embd_v} * 2;
    const int32_t start = kv_q4_window_start(n_pos);
    for (int32_t p = start; p < n_pos;) {
      const int32_t ring_row = p % kQ4Window;
      const int32_t len = std::min(n_pos - p, kQ4Window - ring_row);
      f(ring_row * row, (p - start) * row, static_cast<size_t>(len * row));
      p += len;
    }
  }
  bool has_layer(int32_t il) const {
    return il >= 0 && il < static_cast<int32_t>(layers_.size()) &&
           layers_[static_cast<size_t>(il)].spec.n_embd_k > 0;
  }

  // A plain cache's rows of a position at row_off (+ *row_dev), the values from v.
  KvRowsOut rows_out(const Layer& l, const float* v, int64_t v_stride, int32_t row_off,
                     const int32_t* row_dev) const {
    KvRowsOut o;
    o.f16 = mode_ == KvMode::F16;
    o.v = v;
    o.v_stride = v_stride;
    o.nv = l.spec.n_embd_v;
    o.k_dst = l.k + int64_t{row_off} * l.k_row;
    o.k_row_bytes = l.k_row;
    o.v_dst = l.v + int64_t{row_off} * l.v_row;
    o.v_row_bytes = l.v_row;
    o.row_dev = row_dev;
    return o;
  }

  // attend() on core c's stream: the launches and the step record are c's. rp: the rope pair of
  // q and k to launch first (cuda_kv_attend_rope; nullptr: none), which plain rows may take into
  // their write (write(), StreamCore::rope_kv) or the attention (rope_attend()).
  void attend_core(StreamCore& c, RopePair* rp, int32_t il, const AttentionShape& s, const float* q,
                   int64_t q_stride, int32_t n, int32_t pos, const float* k, int64_t k_stride,
                   const float* v, int64_t v_stride, float* out, int64_t out_stride) {
    GEIST_CHECK(has_layer(il), "cuda kv attend: layer has no KV");
    GEIST_CHECK(pos >= 0 && n >= 0 && pos + n <= max_seq_len_,
                "cuda kv attend: positions out of range");
    if (!plain_rows()) c.launch_rope(rp);
    // Row layouts (but for a centred cache's first key) write and read at offsets of the
    // position alone: a graph step can take it from the device (StreamCore::pos_ref) and be
    // replayed at any position. KIVI's groups and q4's window bake positions into the launches.
    const bool relative = !kivi() && !windowed() && !(centered() && pos == 0);
    if (c.mode != StepMode::PLAIN) {
      Layer& l = layers_[static_cast<size_t>(il)];
      int32_t off = pos;
      const int32_t* pd = relative ? c.pos_ref(pos, &off) : nullptr;
      const bool skip = relative
                            ? c.note_op(kRecAttend, il, mode_, s.n_head, s.n_head_kv, s.head_dim_k,
                                        s.head_dim_v, s.scale, q, q_stride, n, off, pd, k, k_stride,
                                        v, v_stride, out, out_stride, l.k, l.v, l.k_ref)
                            : c.note_absolute();
      if (skip) {  // a replayed step: the graph writes the rows
        if (n > 0) l.written_end = pos + n;
        return;
      }
      if (relative) {
        if (rope_attend(c, rp, il, s, q, n, pos, off, pd, k, k_stride, v, v_stride, out,
                        out_stride)) {
          return;
        }
        if (!write(c, rp, il, pos, n, k, k_stride, v, v_stride, off, pd)) return;
        KvDevSrc ks, vs;
        view(il, pos + n, &ks, &vs);
        c.ok(kv_attention(c.stream, s, q, q_stride, n, off, ks, vs, out, out_stride, pd),
             "kv attention kernel launch");
        return;
      }
    }
    if (rope_attend(c, rp, il, s, q, n, pos, pos, nullptr, k, k_stride, v, v_stride, out,
                    out_stride)) {
      return;
    }
    const int32_t end = pos + n;
    for (int32_t a = pos; a < end;) {
      const int32_t b = kv_attend_piece_end(mode_, a, end);  // the CPU's pieces
      const int64_t i = a - pos;
      if (!write(c, rp, il, a, b - a, k + i * k_stride, k_stride, v + i * v_stride, v_stride, a,
                 nullptr)) {
        return;
      }
      KvDevSrc ks, vs;
      view(il, b, &ks, &vs);
      if (!c.ok(kv_attention(c.stream, s, q + i * q_stride, q_stride, b - a, a, ks, vs,
                             out + i * out_stride, out_stride),
                "kv attention kernel launch")) {
        return;
      }
      a = b;
    }
  }

  // attend's one-token step of a plain cache as one launch with the rope pair rp
  // (StreamCore::rope_attention): true when it went that way (the rows written unless the
  // launch failed, which the stream records).
  bool rope_attend(StreamCore& c, RopePair* rp, int32_t il, const AttentionShape& s, const float* q,
                   int32_t n, int32_t pos, int32_t off, const int32_t* pd, const float* k,
                   int64_t k_stride, const float* v, int64_t v_stride, float* out,
                   int64_t out_stride) {
    if (!plain_rows() || n != 1 || rp == nullptr) return false;
    Layer& l = layers_[static_cast<size_t>(il)];
    KvDevSrc ks, vs;
    view(il, pos + n, &ks, &vs);
    bool good = true;
    if (!c.rope_attention(rp, s, q, k, k_stride, rows_out(l, v, v_stride, off, pd), ks, vs, off, pd,
                          out, out_stride, &good)) {
      return false;
    }
    if (good) l.written_end = pos + n;
    return true;
  }

  // Positions [pos, pos + n) of layer il into the store (KvCache::write); within one KIVI group
  // (attend's pieces never cross one). False when a launch failed (recorded on the stream).
  // Row layouts put the rows at row_off (+ *row_dev when set: a graph step's position read on
  // the device) instead of pos. Plain rows take rope pair rp in (StreamCore::rope_kv) or launch
  // it first.
  bool write(StreamCore& c, RopePair* rp, int32_t il, int32_t pos, int32_t n, const float* k,
             int64_t k_stride, const float* v, int64_t v_stride, int32_t row_off,
             const int32_t* row_dev) {
    Layer& l = layers_[static_cast<size_t>(il)];
    const int32_t nk = l.spec.n_embd_k, nv = l.spec.n_embd_v;
    cudaStream_t st = c.stream;
    if (kivi()) {
      const int64_t r = pos % kGroup;
      GEIST_CHECK(r + n <= kGroup, "cuda kv write: a KIVI piece crosses a group");
      if (!c.ok(kv_encode_rows(st, KvEnc::F16, kKvBlock, k, k_stride, n, nk, nullptr,
                               l.k_resid + r * nk * 2, int64_t{nk} * 2),
                "kv residual K kernel launch") ||
          !c.ok(kv_encode_rows(st, KvEnc::F16, kKvBlock, v, v_stride, n, nv, nullptr,
                               l.v_resid + r * nv * 2, int64_t{nv} * 2),
                "kv residual V kernel launch")) {
        return false;
      }
      if (r + n == kGroup) {
        const int64_t g = (pos + n - 1) / kGroup;
        if (!c.ok(kv_quantize_group(st, enc_.k, enc_.v, l.v_block,
                                    reinterpret_cast<const uint16_t*>(l.k_resid), nk,
                                    reinterpret_cast<const uint16_t*>(l.v_resid), nv,
                                    l.k + g * l.k_row, l.v + g * kGroup * l.v_row, l.v_row),
                  "kv group quantize kernel launch")) {
          return false;
        }
      }
    } else {
      if (plain_rows()) {
        const KvRowsOut o = rows_out(l, v, v_stride, row_off, row_dev);
        bool good = true;
        if (c.rope_kv(rp, k, k_stride, n, nk, o, &good)) {
          if (good && n > 0) l.written_end = pos + n;
          return good;
        }
      }
      const uint16_t* ref = nullptr;
      if (centered()) {
        // Position 0 sets the reference, rounded to f16 as stored (KvCache::write).
        if (pos == 0 && n > 0 &&
            !c.ok(kv_encode_rows(st, KvEnc::F16, kKvBlock, k, k_stride, 1, nk, nullptr, l.k_ref,
                                 int64_t{nk} * 2),
                  "kv K_REF kernel launch")) {
          return false;
        }
        ref = reinterpret_cast<const uint16_t*>(l.k_ref);
      }
      if (windowed()) {
        // Q4: keys minus R_p c; the f16 window rows of K and V, in runs that do not wrap.
        if (!c.ok(kv_encode_rows_rel(st, enc_.k, l.k_block, k, k_stride, n, nk, key_ref(l), pos,
                                     l.k + int64_t{pos} * l.k_row, l.k_row),
                  "kv store K kernel launch")) {
          return false;
        }
        for (int32_t a = 0; a < n;) {
          const int32_t w = (pos + a) % kQ4Window, len = std::min(n - a, kQ4Window - w);
          if (!c.ok(kv_encode_rows(st, KvEnc::F16, kKvBlock, k + a * k_stride, k_stride, len, nk,
                                   nullptr, l.k_win + int64_t{w} * nk * 2, int64_t{nk} * 2),
                    "kv window K kernel launch") ||
              !c.ok(kv_encode_rows(st, KvEnc::F16, kKvBlock, v + a * v_stride, v_stride, len, nv,
                                   nullptr, l.v_win + int64_t{w} * nv * 2, int64_t{nv} * 2),
                    "kv window V kernel launch")) {
            return false;
          }
          a += len;
        }
      } else if (!c.ok(kv_encode_rows(st, enc_.k, l.k_block, k, k_stride, n, nk, ref,
                                      l.k + int64_t{row_off} * l.k_row, l.k_row, row_dev),
                       "kv store K kernel launch")) {
        return false;
      }
      if (!c.ok(kv_encode_rows(st, enc_.v, l.v_block, v, v_stride, n, nv, nullptr,
                               l.v + int64_t{row_off} * l.v_row, l.v_row, row_dev),
                "kv store V kernel launch")) {
        return false;
      }
    }
    if (n > 0) l.written_end = pos + n;
    return true;
  }

  // KvCache::view: K and V for queries whose last key is at n_pos - 1.
  void view(int32_t il, int32_t n_pos, KvDevSrc* k, KvDevSrc* v) const {
    const Layer& l = layers_[static_cast<size_t>(il)];
    *k = KvDevSrc{};
    *v = KvDevSrc{};
    k->lo = KvDevSeg{enc_.k, l.k, l.k_row, l.k_block, 0};
    v->lo = KvDevSeg{enc_.v, l.v, l.v_row, l.v_block, 0};
    if (windowed()) {  // KvCache::view
      k->split = v->split = kv_q4_window_start(n_pos);
      k->ref = key_ref(l);
      k->hi = KvDevSeg{KvEnc::F16, l.k_win, int64_t{l.spec.n_embd_k} * 2, kKvBlock, 0, kQ4Window};
      v->hi = KvDevSeg{KvEnc::F16, l.v_win, int64_t{l.spec.n_embd_v} * 2, kKvBlock, 0, kQ4Window};
    }
    if (!kivi()) return;
    k->lo.block = kKvBlock;
    const int32_t split = n_pos / kGroup * kGroup;
    k->split = v->split = split;
    k->hi = KvDevSeg{KvEnc::F16, l.k_resid, int64_t{l.spec.n_embd_k} * 2, kKvBlock, split};
    v->hi = KvDevSeg{KvEnc::F16, l.v_resid, int64_t{l.spec.n_embd_v} * 2, kKvBlock, split};
  }

  uint64_t part_bytes(int32_t il, uint32_t part, int32_t n_pos) const {
    const Layer& l = layers_[static_cast<size_t>(il)];
    return kv_part_bytes(mode_, l.spec, l.k_row, l.v_row, part, n_pos);
  }

  uint8_t* region_ptr(const KvRegion& r, int32_t n_pos) const {
    GEIST_CHECK(has_layer(r.layer), "cuda kv region: layer has no KV");
    GEIST_CHECK(n_pos >= 0 && n_pos <= max_seq_len_, "cuda kv region: n_pos out of range");
    GEIST_CHECK(r.part < n_parts_of_mode(), "cuda kv region: unknown part");
    GEIST_CHECK(r.nbytes == part_bytes(r.layer, r.part, n_pos),
                "cuda kv region: size differs from regions()");
    const Layer& l = layers_[static_cast<size_t>(r.layer)];
    switch (r.part) {
      case KV_PART_K:
        return l.k;
      case KV_PART_V:
        return l.v;
      case KV_PART_K_RESID:  // == KV_PART_K_REF
        return centered() ? l.k_ref : l.k_resid;
      case KV_PART_V_RESID:  // == KV_PART_K_WIN
        return windowed() ? l.k_win : l.v_resid;
      default:  // KV_PART_V_WIN
        return l.v_win;
    }
  }

  Status alloc_zeroed(size_t bytes, uint8_t** out) {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return Status::error(e == cudaErrorMemoryAllocation ? GEIST_E_OOM : GEIST_E_BACKEND,
                           "cuda kv: cudaMalloc(%zu bytes) for %d positions failed: %s", bytes,
                           max_seq_len_, cudaGetErrorString(e));
    }
    *out = static_cast<uint8_t*>(p);  // owned by the layer from here on, freed by the destructor
    GEIST_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, bytes == 0 ? 1 : bytes, core_->stream));
    return Status::ok();
  }

  std::shared_ptr<StreamCore> core_;
  KvMode mode_;
  ModeEnc enc_;
  int32_t max_seq_len_;
  std::vector<Layer> layers_;  // [n_layer]; null buffers for layers without attention
};

}  // namespace

void cuda_kv_attend_rope(KvStore& kv, StreamCore& c, RopePair* r, int32_t il,
                         const AttentionShape& s, const float* q, int64_t q_stride, int32_t n,
                         int32_t pos, const float* k, int64_t k_stride, const float* v,
                         int64_t v_stride, float* out, int64_t out_stride) {
  auto* st = dynamic_cast<CudaKvStore*>(&kv);
  GEIST_CHECK(st != nullptr, "cuda kv attend: a store of another backend");
  st->attend_rope(c, r, il, s, q, q_stride, n, pos, k, k_stride, v, v_stride, out, out_stride);
}

bool cuda_kv_rope_row(KvStore& kv, int32_t il, int32_t pos, const float* v, int64_t v_stride,
                      int32_t row_off, const int32_t* row_dev, RopeRow* row) {
  const auto* c = dynamic_cast<const CudaKvStore*>(&kv);
  return c != nullptr && c->rope_row(il, pos, v, v_stride, row_off, row_dev, row);
}

void cuda_kv_row_written(KvStore& kv, int32_t il, int32_t pos) {
  auto* c = dynamic_cast<CudaKvStore*>(&kv);
  GEIST_CHECK(c != nullptr, "cuda kv row written: a store of another backend");
  c->row_written(il, pos);
}

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
  std::unique_ptr<CudaKvStore> kv(new (std::nothrow)
                                      CudaKvStore(std::move(core), mode, max_seq_len));
  if (!kv) return Status(GEIST_E_OOM, "cuda kv: out of host memory");
  GEIST_RETURN_IF_ERROR(kv->init(layers));
  *out = std::move(kv);
  return Status::ok();
}

}  // namespace geist::cuda
