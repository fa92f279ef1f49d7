// Session snapshots: binds the image format (engine/snapshot.h) to a Session.
#include <cstring>
#include <mutex>

#include "engine/session.h"

namespace geist {

SnapshotSource Session::snapshot_source(bool nested) const {
  SnapshotSource s;
  s.snapshot_id = model_.snapshot_id();
  s.n_vocab = model_.n_vocab();
  s.max_seq_len = max_seq_len_;
  s.state = state_.get();
  s.tokens = tokens_.data();
  s.n_tokens = position();
  s.logits = logits_.data();
  s.logits_pending = has_logits_ && !forward_owed_;
  s.forward_owed = forward_owed_;
  s.n_generated = n_generated_;
  s.sampler = &sampler_params_;
  s.rng = &rng_;
  s.nested = nested;
  if (!nested && !pin_image_.empty()) {
    s.pin = pin_image_.data();
    s.pin_size = pin_image_.size();
    s.pin_len = pin_len_;
  }
  return s;
}

SnapshotTarget Session::snapshot_target() const {
  SnapshotTarget t;
  t.snapshot_id = model_.snapshot_id();
  t.n_vocab = model_.n_vocab();
  t.max_seq_len = max_seq_len_;
  t.state = state_.get();
  return t;
}

Status Session::check_snapshot() const {
  if (position() > 0 && !has_logits_) {
    return Status::error(GEIST_E_INVALID_STATE,
                         "the session was rewound to %d tokens and has no logits pending: "
                         "prefill at least one token before a snapshot",
                         position());
  }
  return Status::ok();
}

Status Session::snapshot_size(size_t* out) const {
  GEIST_RETURN_IF_ERROR(check_snapshot());
  return snapshot_image_size(snapshot_source(false), out);
}

Status Session::snapshot(uint8_t* buf, size_t cap, size_t* out_written) const {
  GEIST_RETURN_IF_ERROR(check_snapshot());
  const SnapshotSource src = snapshot_source(false);
  size_t size = 0;
  GEIST_RETURN_IF_ERROR(snapshot_image_size(src, &size));
  if (buf == nullptr || cap < size) {
    return Status::error(GEIST_E_INVALID_ARG, "snapshot needs %zu bytes, the buffer holds %zu",
                         size, buf == nullptr ? size_t{0} : cap);
  }
  GEIST_RETURN_IF_ERROR(snapshot_write(src, buf, size));
  *out_written = size;
  return Status::ok();
}

Status Session::apply_snapshot(const ParsedSnapshot& p, bool keep_sampler, const char* what) {
  GEIST_RETURN_IF_ERROR(state_->status());  // a failed device: the session is left as it is
  const size_t n = static_cast<size_t>(p.n_tokens);
  GEIST_CHECK(n <= tokens_.capacity(), "snapshot: token history exceeds the reserved capacity");
  tokens_.resize(n);  // within the reserved capacity: no allocation
  if (n > 0) std::memcpy(tokens_.data(), p.tokens, 4 * n);
  if (p.flags & kSnapFlagLogitsPending) {
    std::memcpy(logits_.data(), p.logits, logits_.size() * sizeof(float));
  }
  has_logits_ = n > 0;
  forward_owed_ = (p.flags & kSnapFlagForwardOwed) != 0;
  n_generated_ = p.n_generated;
#ifdef GEIST_SNAPSHOT_MUTATION_DROP_OWED
  forward_owed_ = false;  // test-only mutation build: forget the owed forward
#endif
  if (!keep_sampler) sampler_params_ = p.sampler;
#ifndef GEIST_SNAPSHOT_MUTATION_DROP_RNG
  rng_ = p.rng;
#endif
  if (p.kv_len == 0) state_->reset();
  {
    // The regions are copied together on the session's threads (the CPU backends: one
    // contiguous byte range of them per thread, base/parallel_copy.h), on the model's shared
    // pool when it is free. A restore never waits for another session's forward: while one
    // runs on the pool, the copy runs on this thread alone (the same bytes either way).
    std::unique_lock<std::mutex> lock(pool_->mu, std::try_to_lock);
    UploadBatch batch(state_->compute_stream(), lock.owns_lock() ? &pool_->pool : nullptr);
    for (const SnapshotRegion& r : p.regions) {
      state_->upload_region(r.region, p.kv_len, r.data);
    }
  }
  state_->set_positions(p.kv_len);
  // A device that failed while the regions were uploaded leaves a state that matches neither
  // the image nor the session before.
  const Status st = state_->status();
  if (st.is_ok()) return st;
  return Status::error(st.code(),
                       "%s: the device failed while the state was written, so the "
                       "session's state is undefined: %s",
                       what, st.message().c_str());
}

Status Session::restore(const uint8_t* buf, size_t size, bool verify_checksum) {
  ParsedSnapshot p;
  GEIST_RETURN_IF_ERROR(snapshot_parse(buf, size, snapshot_target(), false, &p, verify_checksum));
  // The only allocation comes before the first write, so an OOM leaves the session as it was.
  std::vector<uint8_t> pin;
  if (p.pin != nullptr) pin.assign(p.pin, p.pin + p.pin_size);
  GEIST_RETURN_IF_ERROR(apply_snapshot(p, false, "restore"));
  pin_image_ = std::move(pin);
  pin_len_ = p.pin_len;
  return Status::ok();
}

Status Session::pin_prefix() {
  GEIST_RETURN_IF_ERROR(check_snapshot());
  const SnapshotSource src = snapshot_source(true);
  size_t size = 0;
  GEIST_RETURN_IF_ERROR(snapshot_image_size(src, &size));
  std::vector<uint8_t> img(size);
  GEIST_RETURN_IF_ERROR(snapshot_write(src, img.data(), size));
  pin_image_ = std::move(img);
  pin_len_ = position();
  return Status::ok();
}

Status Session::reset_to_prefix() {
  if (pin_image_.empty()) {
    return Status::error(GEIST_E_INVALID_STATE, "reset_to_prefix: no prefix is pinned");
  }
  ParsedSnapshot p;
  GEIST_RETURN_IF_ERROR(
      snapshot_parse(pin_image_.data(), pin_image_.size(), snapshot_target(), true, &p));
  return apply_snapshot(p, true, "reset_to_prefix");
}

}  // namespace geist
