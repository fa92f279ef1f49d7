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
      for (int32_t c = 0; c < nk; ++c) {
        uint16_t h;
        std::memcpy(&h, l.k_ref.data() + static_cast<size_t>(c) * 2, 2);
        rel[c] = k[i * k_stride + c] - fp16_to_fp32(h);
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
    int32_t b = end;
    if (kivi()) {
      // The position that fills a's group gets a piece of its own: it is the first query to
      // see the group quantized; the queries before it see the group's f16 residual rows.
      const int32_t fill = a - a % kGroup + kGroup - 1;
      if (fill < end) b = a < fill ? fill : fill + 1;
    }
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
  const uint64_t n = static_cast<uint64_t>(n_pos);
  const uint64_t full = n / kGroup;  // KIVI: quantized groups
  switch (part) {
    case KV_PART_K:
      return static_cast<uint64_t>(l.k_row) * (kivi() ? full : n);
    case KV_PART_V:
      return static_cast<uint64_t>(l.v_row) * (kivi() ? full * kGroup : n);
    case KV_PART_K_RESID:  // == KV_PART_K_REF
      if (centered()) return n > 0 ? static_cast<uint64_t>(l.spec.n_embd_k) * 2 : 0;
      return (n % kGroup) * static_cast<uint64_t>(l.spec.n_embd_k) * 2;
    default:
      return (n % kGroup) * static_cast<uint64_t>(l.spec.n_embd_v) * 2;
  }
}

void KvCache::regions(int32_t n_pos, std::vector<KvRegion>* out) const {
  GEIST_CHECK(n_pos >= 0 && n_pos <= max_seq_len_, "kv regions: n_pos out of range");
  out->clear();
  const uint32_t n_parts = kivi() ? 4 : centered() ? 3 : 2;
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
    case KV_PART_V_RESID:
      buf = &l.v_resid;
      break;
    default:
      break;
  }
  GEIST_CHECK(
      buf != nullptr && (r.part <= KV_PART_V || kivi() || (centered() && r.part == KV_PART_K_REF)),
      "kv region: unknown part");
  GEIST_CHECK(r.nbytes == part_bytes(r.layer, r.part, n_pos),
              "kv region: size differs from regions()");
  *nbytes = r.nbytes;
  return buf->data();
}

void KvCache::read_region(const KvRegion& r, int32_t n_pos, uint8_t* dst) const {
  uint64_t nb = 0;
  const uint8_t* p = const_cast<KvCache*>(this)->region_ptr(r, n_pos, &nb);
  if (nb > 0) std::memcpy(dst, p, nb);  // an empty region may come with a null buffer
}

void KvCache::write_region(const KvRegion& r, int32_t n_pos, const uint8_t* src) {
  uint64_t nb = 0;
  uint8_t* p = region_ptr(r, n_pos, &nb);
  if (nb > 0) std::memcpy(p, src, nb);
  layers_[static_cast<size_t>(r.layer)].written_end = n_pos;
}

size_t KvCache::size_bytes() const {
  size_t total = 0;
  for (const Layer& l : layers_) {
    total += l.k.size() + l.v.size() + l.k_resid.size() + l.v_resid.size() + l.k_ref.size();
  }
  return total;
}

}  // namespace geist
