#include "kv/kv_cache.h"

#include <cstring>
#include <new>

namespace geist {

Status KvCache::create(KvMode mode, const std::vector<KvLayerSpec>& layers, int32_t max_seq_len,
                       std::unique_ptr<KvCache>* out) {
  if (max_seq_len <= 0) {
    return Status::error(GEIST_E_INVALID_ARG, "kv cache: max_seq_len %d must be positive",
                         max_seq_len);
  }
  std::unique_ptr<KvCache> c(new (std::nothrow) KvCache());
  if (!c) return Status(GEIST_E_OOM, "kv cache: out of memory");
  c->mode_ = mode;
  c->max_seq_len_ = max_seq_len;
  try {
    c->layers_.resize(layers.size());
    for (size_t il = 0; il < layers.size(); ++il) {
      const KvLayerSpec& s = layers[il];
      if (s.n_embd_k < 0 || s.n_embd_v < 0 || (s.n_embd_k == 0) != (s.n_embd_v == 0)) {
        return Status::error(GEIST_E_INVALID_ARG, "kv cache: layer %zu has K/V sizes %d/%d", il,
                             s.n_embd_k, s.n_embd_v);
      }
      Layer& l = c->layers_[il];
      l.spec = s;
      l.k.resize(static_cast<size_t>(max_seq_len) * static_cast<size_t>(s.n_embd_k));
      l.v.resize(static_cast<size_t>(max_seq_len) * static_cast<size_t>(s.n_embd_v));
    }
  } catch (const std::bad_alloc&) {
    return Status::error(GEIST_E_OOM, "kv cache: out of memory for %d positions", max_seq_len);
  }
  *out = std::move(c);
  return Status::ok();
}

bool KvCache::has_layer(int32_t il) const {
  return il >= 0 && il < n_layer() && layers_[static_cast<size_t>(il)].spec.n_embd_k > 0;
}

void KvCache::write(int32_t il, int32_t pos, int32_t n, const float* k, int64_t k_stride,
                    const float* v, int64_t v_stride) {
  GEIST_CHECK(has_layer(il), "kv write: layer has no KV");
  GEIST_CHECK(pos >= 0 && n >= 0 && pos + n <= max_seq_len_, "kv write: positions out of range");
  Layer& l = layers_[static_cast<size_t>(il)];
  const size_t nk = static_cast<size_t>(l.spec.n_embd_k);
  const size_t nv = static_cast<size_t>(l.spec.n_embd_v);
  for (int32_t i = 0; i < n; ++i) {
    const size_t p = static_cast<size_t>(pos + i);
    std::memcpy(l.k.data() + p * nk, k + i * k_stride, nk * sizeof(float));
    std::memcpy(l.v.data() + p * nv, v + i * v_stride, nv * sizeof(float));
  }
}

KvLayerView KvCache::view(int32_t il, int32_t n_pos) const {
  GEIST_CHECK(has_layer(il), "kv view: layer has no KV");
  GEIST_CHECK(n_pos >= 0 && n_pos <= max_seq_len_, "kv view: n_pos out of range");
  const Layer& l = layers_[static_cast<size_t>(il)];
  return KvLayerView{l.k.data(), l.spec.n_embd_k, l.v.data(), l.spec.n_embd_v};
}

size_t KvCache::size_bytes() const {
  size_t total = 0;
  for (const Layer& l : layers_) total += (l.k.size() + l.v.size()) * sizeof(float);
  return total;
}

}  // namespace geist
