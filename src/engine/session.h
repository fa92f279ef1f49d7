// A decoding session on a shared Model: KV/recurrent state, token history, pending logits,
// sampler settings and RNG. Not thread-safe; one session per thread at a time.
//
// Owed forward: decode() samples from the pending logits and appends the token without
// running it through the model; forward_owed_ records that the last history token is not yet
// in the state. Whatever next needs logits (decode, logits, prefill) pays it first. So the
// state always holds positions [0, position() - forward_owed_). When the sampler's choice is
// the argmax of the row (Sampler::is_argmax), decode() asks the owed forward for that alone.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "engine/model.h"
#include "engine/rng.h"
#include "engine/sampler.h"
#include "engine/snapshot.h"
#include "geist/geist.h"

namespace geist {

class Session {
 public:
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The model must outlive the session. params must come from geist_session_params_default
  // (struct sizes are checked). GEIST_E_INVALID_ARG, GEIST_E_OOM.
  static Status create(const Model& model, const geist_session_params& params,
                       std::unique_ptr<Session>* out);

  // Appends tokens[n] and runs them, leaving the last one's logits pending. When all_logits is
  // not null it receives every row, [n][n_vocab] (the caller checked its capacity).
  // Validates ids and capacity before changing anything: GEIST_E_INVALID_ARG,
  // GEIST_E_TOO_MANY_TOKENS. A failed forward leaves the history as it was.
  // The rows run in micro-batches cut on the prefill grid (ArchModel::micro_batch_end), each on
  // the model's shared pool under its lock. Between micro-batches the prefill honours cancel():
  // it keeps the tokens of the micro-batches that completed, with the logits of the last one
  // pending (a grid point, or where the previous call ended), and returns GEIST_E_CANCELLED
  // naming that position; the session is then as if prefill had been called with those tokens.
  Status prefill(const int32_t* tokens, size_t n, float* all_logits);
  // Asks the prefill running now (or the next one, if none is) to stop at its next
  // micro-batch boundary. The one call that any thread may make while another uses the
  // session. A prefill consumes the request when it returns, whether it stopped or finished.
  void cancel() { cancel_.store(true, std::memory_order_relaxed); }
  // Tokenizes (parse_special on; BOS only at position 0) and prefills.
  Status prefill_text(std::string_view text, bool add_special);
  // GEIST_E_INVALID_STATE with nothing pending, GEIST_E_TOO_MANY_TOKENS when full.
  Status decode(int32_t* out_token);
  // The token decode() would return now, the session unchanged (a copy of the RNG draws);
  // GEIST_E_INVALID_STATE also when a forward is owed (peek runs none).
  Status peek(int32_t* out_token);
  // Forgets the tokens from position n on (n <= position()): the session goes on from n as if
  // its history were its first n tokens, with no logits pending until a prefill (decode,
  // logits and snapshots refuse with GEIST_E_INVALID_STATE until then) and its sampler and
  // RNG as they are. GEIST_E_INVALID_ARG for n out of range, GEIST_E_INVALID_STATE (nothing
  // changed) where the state cannot continue at n (ArchState::can_continue_at).
  Status rewind(int32_t n);
  // Pending logits [n_vocab], paying an owed forward first. GEIST_E_INVALID_STATE if none.
  Status logits(const float** out);
  void reset();
  Status set_sampler(const geist_sampler_params& params);

  const Model& model() const { return model_; }
  int32_t position() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t max_seq_len() const { return max_seq_len_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const geist_sampler_params& sampler_params() const { return sampler_params_; }
  bool forward_owed() const { return forward_owed_; }
  bool has_logits() const { return has_logits_; }

  // Snapshots (engine/snapshot_session.cpp; format in docs/SNAPSHOT_FORMAT.md). None of them
  // changes the session on failure.
  // GEIST_E_UNSUPPORTED when the model has too many state sections for the format.
  // GEIST_E_INVALID_STATE after a rewind until a prefill: no image can hold that state.
  Status snapshot_size(size_t* out) const;
  // GEIST_E_INVALID_ARG when cap < snapshot_size.
  Status snapshot(uint8_t* buf, size_t cap, size_t* out_written) const;
  // Validates everything, then replaces the whole state (sampler settings and pin included).
  // verify_checksum false: all but the image checksum (snapshot_parse).
  Status restore(const uint8_t* buf, size_t size, bool verify_checksum = true);
  Status pin_prefix();
  // GEIST_E_INVALID_STATE without a pin. Sampler settings are kept, the RNG reverts.
  Status reset_to_prefix();
  int32_t pin_len() const { return pin_image_.empty() ? -1 : pin_len_; }
  KvMode kv_mode() const { return state_->kv_mode(); }
  // The prefill grid of this session's model and KV mode (ArchModel::prefill_grid).
  int32_t prefill_grid() const { return model_.arch().prefill_grid(kv_mode()); }

 private:
  friend struct BatchRunner;  // engine/batch.cpp: runs the owed and prefill rows of many
  Session(const Model& model, int32_t max_seq_len, std::shared_ptr<SharedPool> pool);
  // One ArchModel::forward on the shared pool, holding its lock.
  Status run_forward(const int32_t* tokens, int32_t n, int32_t pos, const LogitsOut& out);
  // Runs the owed token (the last of tokens_) if any, its logits becoming the pending ones; or,
  // with argmax, writes only their argmax_first() there (LogitsOut::argmax) and leaves logits_
  // stale: for decode() alone, which appends a token right after.
  Status pay_forward(int32_t* argmax = nullptr);
  // decode()'s checks before it samples: pending logits, room, a healthy state.
  Status check_decode() const;
  // GEIST_E_INVALID_STATE when the history has tokens but neither pending logits nor an owed
  // forward (after rewind, before a prefill): the snapshot format has no such state.
  Status check_snapshot() const;
  // Whether the next token is a greedy choice (Sampler::is_argmax), with `more` tokens
  // appended first (a prompt input then starts a new completion).
  bool next_is_argmax(size_t more) const;
  // decode()'s end: tok is the next token; its forward is owed.
  void append_decoded(int32_t tok);
  // The next token from the pending logits_ (the sampler, its settings and history), drawn with
  // rng: the session's own, or a copy of it (peek).
  int32_t sample_pending(Rng& rng);
  int32_t sample_pending() { return sample_pending(rng_); }
  // The session as the snapshot writer sees it (nested: a PIN image, without the pin).
  SnapshotSource snapshot_source(bool nested) const;
  SnapshotTarget snapshot_target() const;
  // Writes a validated image's state; allocates nothing (that happened before). Fails only
  // for the device: GEIST_E_BACKEND before anything is written when it had failed already
  // (session untouched), or after the writes when it failed under them (`what` names the call;
  // the state is then undefined).
  Status apply_snapshot(const ParsedSnapshot& p, bool keep_sampler, const char* what);

  const Model& model_;
  int32_t max_seq_len_;
  std::shared_ptr<SharedPool> pool_;  // the model's, shared with its sessions of this count
  std::atomic<bool> cancel_{false};   // cancel() asked; consumed by prefill
  std::unique_ptr<ArchState> state_;
  std::vector<int32_t> tokens_;        // [position] history; capacity max_seq_len
  std::vector<float> logits_;          // [n_vocab] pending logits (stale while forward_owed_)
  std::vector<float> logits_scratch_;  // [n_vocab] forward target, swapped in on success
  bool has_logits_ = false;            // something was prefilled since create/reset
  bool forward_owed_ = false;          // tokens_.back() is not yet in state_
  int32_t n_generated_ = 0;  // last tokens_ that decode sampled since the last prompt input
                             // (the presence / frequency penalties' completion)
  geist_sampler_params sampler_params_;
  Sampler sampler_;
  Rng rng_;
  // The pinned state as a nested snapshot image (SNAPSHOT_FORMAT.md §3.3: KV parts 0 and 1 are
  // the live cache's prefix), empty when nothing is pinned.
  std::vector<uint8_t> pin_image_;
  int32_t pin_len_ = 0;  // tokens of the pinned prefix
};

}  // namespace geist
