#include "kv/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "kernels/quant.h"

namespace geist {

namespace {

constexpr int32_t kGroup = kKvBlock;  // KIVI tokens per key group (see kv_cache.h)

struct ModeEntry {
  KvMode mode;
  const char* name;
  KvEnc k_enc;
  KvEnc v_enc;
};

constexpr ModeEntry kModes[kKvModeCount] = {
    {KvMode::F32, "f32", KvEnc::F32, KvEnc::F32},
    {KvMode::F16, "f16", KvEnc::F16, KvEnc::F16},
    {KvMode::Q8, "q8", KvEnc::Q8A, KvEnc::Q8},
    {KvMode::Q4, "q4", KvEnc::Q4, KvEnc::Q4},
    {KvMode::KIVI4, "kivi4", KvEnc::CH4, KvEnc::A4},
    {KvMode::KIVI2, "kivi2", KvEnc::CH2, KvEnc::A2},
};

const ModeEntry& entry(KvMode m) { return kModes[static_cast<int32_t>(m)]; }

void to_f16_row(const float* x, int32_t n, uint8_t* dst) { kv_quantize_row(KvEnc::F16, x, n, dst); }

// The Q4 window rows (row_bytes each) of positions [kv_q4_window_start(n_pos), n_pos), between
// a ring (position p at row p % kQ4Window) and a buffer in position order.
void window_out(const uint8_t* ring, int64_t row_bytes, int32_t n_pos, uint8_t* buf) {
  const int32_t start = kv_q4_window_start(n_pos);
  for (int32_t p = start; p < n_pos; ++p) {
    std::memcpy(buf + (p - start) * row_bytes, ring + (p % kQ4Window) * row_bytes,
                static_cast<size_t>(row_bytes));
  }
}
void window_in(const uint8_t* buf, int64_t row_bytes, int32_t n_pos, uint8_t* ring) {
  const int32_t start = kv_q4_window_start(n_pos);
  for (int32_t p = start; p < n_pos; ++p) {
    std::memcpy(ring + (p % kQ4Window) * row_bytes, buf + (p - start) * row_bytes,
                static_cast<size_t>(row_bytes));
  }
}

}  // namespace

const char* kv_mode_name(KvMode m) {
  return kv_mode_valid(static_cast<int32_t>(m)) ? entry(m).name : "?";
}

bool kv_mode_from_name(std::string_view name, KvMode* out) {
  for (const ModeEntry& e : kModes) {
    if (name == e.name) {
      *out = e.mode;
      return true;
    }
  }
  return false;
}

bool kv_mode_valid(int32_t m) { return m >= 0 && m < kKvModeCount; }

KvEnc kv_mode_key_enc(KvMode m) { return entry(m).k_enc; }
KvEnc kv_mode_value_enc(KvMode m) { return entry(m).v_enc; }

int32_t kv_mode_split_grid(KvMode /*m*/) { return 1; }

uint32_t kv_mode_parts(KvMode m) {
  if (m == KvMode::KIVI4 || m == KvMode::KIVI2) return 4;  // K, V, K_RESID, V_RESID
  if (m == KvMode::Q4) return 5;                           // K, V, K_REF, K_WIN, V_WIN
  return m == KvMode::Q8 ? 3 : 2;                          // K, V (+ K_REF)
}

Status KvCache::create(KvMode mode, const std::vector<KvLayerSpec>& layers, int32_t max_seq_len,
                       std::unique_ptr<KvCache>* out, StateArena* arena) {
  if (max_seq_len <= 0) {
    return Status::error(GEIST_E_INVALID_ARG, "kv cache: max_seq_len %d must be positive",
                         max_seq_len);
  }
  if (!kv_mode_valid(static_cast<int32_t>(mode))) {
    return Status::error(GEIST_E_INVALID_ARG, "kv cache: unknown kv mode %d",
                         static_cast<int32_t>(mode));
  }
  std::unique_ptr<KvCache> c(new (std::nothrow) KvCache());
  if (!c) return Status(GEIST_E_OOM, "kv cache: out of memory");
  c->mode_ = mode;
  c->k_enc_ = entry(mode).k_enc;
  c->v_enc_ = entry(mode).v_enc;
  c->max_seq_len_ = max_seq_len;
  const bool kivi = c->kivi();
  const size_t n_pos = static_cast<size_t>(max_seq_len);
  try {
    c->layers_.resize(layers.size());
    int32_t widest = 0;
    for (size_t il = 0; il < layers.size(); ++il) {
      const KvLayerSpec& s = layers[il];
      if (s.n_embd_k < 0 || s.n_embd_v < 0 || (s.n_embd_k == 0) != (s.n_embd_v == 0)) {
        return Status::error(GEIST_E_INVALID_ARG, "kv cache: layer %zu has K/V sizes %d/%d", il,
                             s.n_embd_k, s.n_embd_v);
      }
      Layer& l = c->layers_[il];
      l.spec = s;
      const StateAllocator<uint8_t> alloc(arena);
      l.k = StateBytes(alloc);
      l.v = StateBytes(alloc);
      l.k_resid = StateBytes(alloc);
      l.v_resid = StateBytes(alloc);
      l.k_ref = StateBytes(alloc);
      l.k_win = StateBytes(alloc);
      l.v_win = StateBytes(alloc);
      if (s.n_embd_k == 0) continue;
      widest = std::max({widest, s.n_embd_k, s.n_embd_v});
      if (s.head_dim_k < 0 || s.head_dim_v < 0) {
        return Status::error(GEIST_E_INVALID_ARG, "kv cache: layer %zu has head dims %d/%d", il,
                             s.head_dim_k, s.head_dim_v);
      }
      l.k_block = kv_block_for_head_dim(s.head_dim_k);
      l.v_block = kv_block_for_head_dim(s.head_dim_v);
      l.v_row = kv_row_bytes(c->v_enc_, s.n_embd_v, l.v_block);
      l.v.resize(n_pos * static_cast<size_t>(l.v_row));
      if (kivi) {
        l.k_row = kv_group_bytes(c->k_enc_, s.n_embd_k);
        l.k.resize(n_pos / kGroup * static_cast<size_t>(l.k_row));
        l.k_resid.resize(static_cast<size_t>(kGroup) * static_cast<size_t>(s.n_embd_k) * 2);
        l.v_resid.resize(static_cast<size_t>(kGroup) * static_cast<size_t>(s.n_embd_v) * 2);
      } else {
        l.k_row = kv_row_bytes(c->k_enc_, s.n_embd_k, l.k_block);
        l.k.resize(n_pos * static_cast<size_t>(l.k_row));
        if (c->centered()) l.k_ref.resize(static_cast<size_t>(s.n_embd_k) * 2);
      }
      if (c->windowed()) {
        const RopeParams& rp = s.rope;
        if (rp.n_rot < 0 || rp.n_rot % 2 != 0 ||
            (rp.n_rot > 0 &&
             (s.head_dim_k <= 0 || rp.n_rot > s.head_dim_k || s.n_embd_k % s.head_dim_k != 0))) {
          return Status::error(GEIST_E_INVALID_ARG,
                               "kv cache: layer %zu has RoPE dims %d for heads of %d", il, rp.n_rot,
                               s.head_dim_k);
        }
        l.k_win.resize(size_t{kQ4Window} * static_cast<size_t>(s.n_embd_k) * 2);
        l.v_win.resize(size_t{kQ4Window} * static_cast<size_t>(s.n_embd_v) * 2);
        l.rope_cs.resize(n_pos * static_cast<size_t>(rp.n_rot));
        kv_rope_table(rp, max_seq_len, l.rope_cs.data());
        l.spec.rope.freq_factors = nullptr;  // the caller's memory: not kept
      }
    }
    if (kivi) c->group_tmp_.resize(static_cast<size_t>(kGroup) * static_cast<size_t>(widest));
    if (c->centered()) c->group_tmp_.resize(static_cast<size_t>(widest));
  } catch (const std::bad_alloc&) {
    return Status::error(GEIST_E_OOM, "kv cache: out of memory for %d positions", max_seq_len);
  }
  *out = std::move(c);
  return Status::ok();
}

bool KvCache::has_layer(int32_t il) const {
  return il >= 0 && il < n_layer() && layers_[static_cast<size_t>(il)].spec.n_embd_k > 0;
}

bool KvCache::can_resume_at(int32_t pos) const {
  if (windowed()) {
    // The window positions pos's query reads, [start, pos), are intact unless a later
    // position took their ring rows.
    const int32_t start = kv_q4_window_start(pos + 1);
    for (const Layer& l : layers_) {
      if (l.spec.n_embd_k > 0 && start < pos && l.written_end > start + kQ4Window) return false;
    }
    return true;
  }
  if (!kivi() || pos % kGroup == 0) return true;
  for (const Layer& l : layers_) {
    if (l.spec.n_embd_k == 0) continue;
    if (l.written_end <= 0 || pos > l.written_end || pos / kGroup != (l.written_end - 1) / kGroup)
      return false;
  }
  return true;
}

// Group g's f16 residual rows -> f32 -> quantized keys (per channel) and values (per token).
void KvCache::quantize_group(Layer& l, int32_t g) {
  const int32_t nk = l.spec.n_embd_k;
  const int32_t nv = l.spec.n_embd_v;
  float* tmp = group_tmp_.data();  // [G][nk] then [G][nv]
  const auto* kr = l.k_resid.data();
  for (int32_t t = 0; t < kGroup; ++t) {
    for (int32_t c = 0; c < nk; ++c) {
      uint16_t h;
      std::memcpy(&h, kr + (static_cast<size_t>(t) * nk + c) * 2, 2);
      tmp[t * nk + c] = fp16_to_fp32(h);
    }
  }
  kv_quantize_group(k_enc_, tmp, nk, nk, l.k.data() + g * l.k_row);
  const auto* vr = l.v_resid.data();
  for (int32_t t = 0; t < kGroup; ++t) {
    for (int32_t c = 0; c < nv; ++c) {
      uint16_t h;
      std::memcpy(&h, vr + (static_cast<size_t>(t) * nv + c) * 2, 2);
      tmp[c] = fp16_to_fp32(h);
    }
    kv_quantize_row(v_enc_, tmp, nv, l.v.data() + (static_cast<int64_t>(g) * kGroup + t) * l.v_row,
                    l.v_block);
  }
}

void KvCache::write(int32_t il, int32_t pos, int32_t n, const float* k, int64_t k_stride,
                    const float* v, int64_t v_stride) {
  GEIST_CHECK(has_layer(il), "kv write: layer has no KV");
  GEIST_CHECK(pos >= 0 && n >= 0 && pos + n <= max_seq_len_, "kv write: positions out of range");
  Layer& l = layers_[static_cast<size_t>(il)];
  const int32_t nk = l.spec.n_embd_k;
  const int32_t nv = l.spec.n_embd_v;
  for (int32_t i = 0; i < n; ++i) {
    const int64_t p = pos + i;
    if (centered()) {
      // Position 0 sets the reference (rounded to f16, as stored, so that a cache restored
      // from its regions subtracts the same numbers).
      if (p == 0) to_f16_row(k + i * k_stride, nk, l.k_ref.data());
      float* rel = group_tmp_.data();  // [nk]
      if (windowed()) {
        // Q4: minus the reference turned to p (R_0 = identity); the f16 window rows too.
        kv_ref_row(key_ref(l), static_cast<int32_t>(p), 0, nk, rel);
        for (int32_t c = 0; c < nk; ++c) rel[c] = k[i * k_stride + c] - rel[c];
        const int64_t w = p % kQ4Window;
        to_f16_row(k + i * k_stride, nk, l.k_win.data() + w * nk * 2);
        to_f16_row(v + i * v_stride, nv, l.v_win.data() + w * nv * 2);
      } else {
        for (int32_t c = 0; c < nk; ++c) {
          uint16_t h;
          std::memcpy(&h, l.k_ref.data() + static_cast<size_t>(c) * 2, 2);
          rel[c] = k[i * k_stride + c] - fp16_to_fp32(h);
        }
      }
      kv_quantize_row(k_enc_, rel, nk, l.k.data() + p * l.k_row, l.k_block);
      kv_quantize_row(v_enc_, v + i * v_stride, nv, l.v.data() + p * l.v_row, l.v_block);
      continue;
    }
    if (!kivi()) {
      kv_quantize_row(k_enc_, k + i * k_stride, nk, l.k.data() + p * l.k_row, l.k_block);
      kv_quantize_row(v_enc_, v + i * v_stride, nv, l.v.data() + p * l.v_row, l.v_block);
      continue;
    }
    const int64_t r = p % kGroup;
    to_f16_row(k + i * k_stride, nk, l.k_resid.data() + r * nk * 2);
    to_f16_row(v + i * v_stride, nv, l.v_resid.data() + r * nv * 2);
    if (r == kGroup - 1) quantize_group(l, static_cast<int32_t>(p / kGroup));
  }
  if (n > 0) l.written_end = pos + n;
}

void KvCache::view(int32_t il, int32_t n_pos, KvSource* k, KvSource* v) const {
  GEIST_CHECK(has_layer(il), "kv view: layer has no KV");
  GEIST_CHECK(n_pos >= 0 && n_pos <= max_seq_len_, "kv view: n_pos out of range");
  const Layer& l = layers_[static_cast<size_t>(il)];
  *k = KvSource{};
  *v = KvSource{};
  k->lo.enc = k_enc_;
  k->lo.data = l.k.data();
  v->lo.enc = v_enc_;
  v->lo.data = l.v.data();
  v->lo.row_bytes = l.v_row;
  v->lo.block = l.v_block;
  if (!kivi()) {
    k->lo.row_bytes = l.k_row;
    k->lo.block = l.k_block;
    if (windowed()) {
      const int32_t split = kv_q4_window_start(n_pos);
      k->split = v->split = split;
      k->ref = key_ref(l);
      k->hi = KvSegment{KvEnc::F16, l.k_win.data(), int64_t{l.spec.n_embd_k} * 2, 0, 0,
                        kKvBlock,   kQ4Window};
      v->hi = KvSegment{KvEnc::F16, l.v_win.data(), int64_t{l.spec.n_embd_v} * 2, 0, 0,
                        kKvBlock,   kQ4Window};
    }
    return;
  }
  k->lo.n_chan = l.spec.n_embd_k;
  const int32_t split = n_pos / kGroup * kGroup;
  k->split = v->split = split;
  k->hi = KvSegment{KvEnc::F16, l.k_resid.data(), int64_t{l.spec.n_embd_k} * 2, 0, split};
  v->hi = KvSegment{KvEnc::F16, l.v_resid.data(), int64_t{l.spec.n_embd_v} * 2, 0, split};
}

void KvCache::attend(int32_t il, const AttentionShape& s, const float* q, int64_t q_stride,
                     int32_t n, int32_t pos, const float* k, int64_t k_stride, const float* v,
                     int64_t v_stride, float* out, int64_t out_stride, float* scratch,
                     ThreadPool& pool) {
  const int32_t end = pos + n;
  for (int32_t a = pos; a < end;) {
    const int32_t b = kv_attend_piece_end(mode_, a, end);
    const int32_t i = a - pos;
    write(il, a, b - a, k + i * k_stride, k_stride, v + i * v_stride, v_stride);
    KvSource ks, vs;
    view(il, b, &ks, &vs);
    attention_kv(s, q + i * q_stride, q_stride, b - a, a, ks, vs, out + i * out_stride, out_stride,
                 scratch, pool);
    a = b;
  }
}

int64_t KvCache::layer_bytes_per_token(int32_t il) const {
  if (!has_layer(il)) return 0;
  const Layer& l = layers_[static_cast<size_t>(il)];
  return (kivi() ? l.k_row / kGroup : l.k_row) + l.v_row;
}

int64_t KvCache::bytes_per_token() const {
  int64_t total = 0;
  for (int32_t il = 0; il < n_layer(); ++il) total += layer_bytes_per_token(il);
  return total;
}

uint64_t KvCache::part_bytes(int32_t il, uint32_t part, int32_t n_pos) const {
  const Layer& l = layers_[static_cast<size_t>(il)];
  return kv_part_bytes(mode_, l.spec, l.k_row, l.v_row, part, n_pos);
}

uint64_t kv_part_bytes(KvMode m, const KvLayerSpec& spec, int64_t k_row, int64_t v_row,
                       uint32_t part, int32_t n_pos) {
  const bool kivi = m == KvMode::KIVI4 || m == KvMode::KIVI2;
  const bool centered = m == KvMode::Q8 || m == KvMode::Q4;
  const bool windowed = m == KvMode::Q4;
  const uint64_t n = static_cast<uint64_t>(n_pos);
  const uint64_t full = n / kGroup;  // KIVI: quantized groups
  switch (part) {
    case KV_PART_K:
      return static_cast<uint64_t>(k_row) * (kivi ? full : n);
    case KV_PART_V:
      return static_cast<uint64_t>(v_row) * (kivi ? full * kGroup : n);
    case KV_PART_K_RESID:  // == KV_PART_K_REF
      if (centered) return n > 0 ? static_cast<uint64_t>(spec.n_embd_k) * 2 : 0;
      return (n % kGroup) * static_cast<uint64_t>(spec.n_embd_k) * 2;
    case KV_PART_V_RESID:  // == KV_PART_K_WIN
      if (windowed) {
        return (n - static_cast<uint64_t>(kv_q4_window_start(n_pos))) *
               static_cast<uint64_t>(spec.n_embd_k) * 2;
      }
      return (n % kGroup) * static_cast<uint64_t>(spec.n_embd_v) * 2;
    default:  // KV_PART_V_WIN
      return (n - static_cast<uint64_t>(kv_q4_window_start(n_pos))) *
             static_cast<uint64_t>(spec.n_embd_v) * 2;
  }
}

int64_t KvCache::win_row_bytes(const KvRegion& r) const {
  const KvLayerSpec& s = layers_[static_cast<size_t>(r.layer)].spec;
  return int64_t{r.part == KV_PART_K_WIN ? s.n_embd_k : s.n_embd_v} * 2;
}

KvKeyRef KvCache::key_ref(const Layer& l) const {
  KvKeyRef r;
  r.c = l.k_ref.data();
  r.cs = l.rope_cs.data();
  r.n_rot = l.spec.rope.n_rot;
  r.head_dim = l.spec.head_dim_k;
  r.neox = l.spec.rope.style == RopeStyle::NEOX;
  return r;
}

void KvCache::regions(int32_t n_pos, std::vector<KvRegion>* out) const {
  GEIST_CHECK(n_pos >= 0 && n_pos <= max_seq_len_, "kv regions: n_pos out of range");
  out->clear();
  const uint32_t n_parts = kv_mode_parts(mode_);
  for (int32_t il = 0; il < n_layer(); ++il) {
    if (!has_layer(il)) continue;
    for (uint32_t part = 0; part < n_parts; ++part) {
      out->push_back({il, part, part_bytes(il, part, n_pos)});
    }
  }
}

uint8_t* KvCache::region_ptr(const KvRegion& r, int32_t n_pos, uint64_t* nbytes) {
  GEIST_CHECK(has_layer(r.layer), "kv region: layer has no KV");
  GEIST_CHECK(n_pos >= 0 && n_pos <= max_seq_len_, "kv region: n_pos out of range");
  Layer& l = layers_[static_cast<size_t>(r.layer)];
  StateBytes* buf = nullptr;
  switch (r.part) {
    case KV_PART_K:
      buf = &l.k;
      break;
    case KV_PART_V:
      buf = &l.v;
      break;
    case KV_PART_K_RESID:  // == KV_PART_K_REF
      buf = centered() ? &l.k_ref : &l.k_resid;
      break;
    case KV_PART_V_RESID:  // == KV_PART_K_WIN
      buf = windowed() ? &l.k_win : &l.v_resid;
      break;
    case KV_PART_V_WIN:
      buf = windowed() ? &l.v_win : nullptr;
      break;
    default:
      break;
  }
  GEIST_CHECK(buf != nullptr && (r.part <= KV_PART_V || kivi() ||
                                 (centered() && r.part == KV_PART_K_REF) || windowed()),
              "kv region: unknown part");
  GEIST_CHECK(r.nbytes == part_bytes(r.layer, r.part, n_pos),
              "kv region: size differs from regions()");
  *nbytes = r.nbytes;
  return buf->data();
}

void KvCache::read_region(const KvRegion& r, int32_t n_pos, uint8_t* dst) const {
  uint64_t nb = 0;
  const uint8_t* p = const_cast<KvCache*>(this)->region_ptr(r, n_pos, &nb);
  if (windowed() && r.part >= KV_PART_K_WIN) {
    window_out(p, win_row_bytes(r), n_pos, dst);
  } else if (nb > 0) {
    std::memcpy(dst, p, nb);  // an empty region may come with a null buffer
  }
}

void KvCache::write_region(const KvRegion& r, int32_t n_pos, const uint8_t* src) {
  uint64_t nb = 0;
  uint8_t* p = region_ptr(r, n_pos, &nb);
  if (windowed() && r.part >= KV_PART_K_WIN) {
    window_in(src, win_row_bytes(r), n_pos, p);
  } else if (nb > 0) {
    std::memcpy(p, src, nb);
  }
  layers_[static_cast<size_t>(r.layer)].written_end = n_pos;
}

uint8_t* KvCache::write_region_dst(const KvRegion& r, int32_t n_pos) {
  uint64_t nb = 0;
  uint8_t* p = region_ptr(r, n_pos, &nb);
  if ((windowed() && r.part >= KV_PART_K_WIN) || nb == 0) return nullptr;
  layers_[static_cast<size_t>(r.layer)].written_end = n_pos;
  return p;
}

size_t KvCache::size_bytes() const {
  size_t total = 0;
  for (const Layer& l : layers_) {
    total += l.k.size() + l.v.size() + l.k_resid.size() + l.v_resid.size() + l.k_ref.size() +
             l.k_win.size() + l.v_win.size() + l.rope_cs.size() * sizeof(float);
  }
  return total;
}

}  // namespace geist
