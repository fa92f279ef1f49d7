// Qwen3.5 session state as snapshot regions: the attention layers' KV parts and, per DeltaNet
// layer, its conv and recurrent buffers (f32 whatever the KV mode).
#include <cstring>

#include "archs/qwen35.h"

namespace geist {

void Qwen35State::state_regions(int32_t n_pos, std::vector<StateRegion>* out) const {
  out->clear();
  std::vector<StateRegion> kv_regions;
  kv_state_regions(*kv, n_pos, &kv_regions);
  size_t next_kv = 0;
  const int32_t n_layer = static_cast<int32_t>(rec_slot_.size());
  for (int32_t il = 0; il < n_layer; ++il) {
    if (rec_slot_[static_cast<size_t>(il)] < 0) {
      while (next_kv < kv_regions.size() && kv_regions[next_kv].layer == il) {
        out->push_back(kv_regions[next_kv++]);
      }
      continue;
    }
    // Before any position the recurrent state is zero by definition (forward at position 0
    // resets it), so an empty state has no recurrent bytes to carry.
    if (n_pos == 0) continue;
    out->push_back({kStateConv, il, static_cast<uint64_t>(conv_layer_floats) * sizeof(float)});
    out->push_back({kStateRecurrent, il, static_cast<uint64_t>(ssm_layer_floats) * sizeof(float)});
  }
  GEIST_CHECK(next_kv == kv_regions.size(), "qwen35: KV region of a layer without attention");
}

float* Qwen35State::recurrent_slice(const StateRegion& r) const {
  GEIST_CHECK(r.layer >= 0 && static_cast<size_t>(r.layer) < rec_slot_.size(),
              "qwen35: state region layer out of range");
  const int32_t slot = rec_slot_[static_cast<size_t>(r.layer)];
  GEIST_CHECK(slot >= 0, "qwen35: recurrent region of an attention layer");
  if (r.kind == kStateConv) {
    GEIST_CHECK(r.nbytes == static_cast<uint64_t>(conv_layer_floats) * sizeof(float),
                "qwen35: conv region size");
    return conv->f32() + slot * conv_layer_floats;
  }
  GEIST_CHECK(r.kind == kStateRecurrent, "qwen35: unknown state region kind");
  GEIST_CHECK(r.nbytes == static_cast<uint64_t>(ssm_layer_floats) * sizeof(float),
              "qwen35: recurrent region size");
  return ssm->f32() + slot * ssm_layer_floats;
}

void Qwen35State::download_region(const StateRegion& r, int32_t n_pos, uint8_t* dst) const {
  if (r.kind < kStateConv) {
    kv->download_region(kv_region_of(r), n_pos, dst);
    return;
  }
  stream->download(dst, recurrent_slice(r), r.nbytes);
}

void Qwen35State::upload_region(const StateRegion& r, int32_t n_pos, const uint8_t* src) {
  if (r.kind < kStateConv) {
    kv->upload_region(kv_region_of(r), n_pos, src);
    return;
  }
  stream->upload(recurrent_slice(r), src, r.nbytes);
}

}  // namespace geist
