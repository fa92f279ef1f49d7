#include "engine/session.h"

#include <algorithm>
#include <new>
#include <string>
#include <thread>

#include "kv/kv_cache.h"

namespace geist {

Session::Session(const Model& model, int32_t max_seq_len, std::shared_ptr<SharedPool> pool)
    : model_(model),
      max_seq_len_(max_seq_len),
      pool_(std::move(pool)),
      logits_(static_cast<size_t>(model.n_vocab())),
      logits_scratch_(static_cast<size_t>(model.n_vocab())),
      sampler_params_(default_sampler_params()),
      sampler_(model.n_vocab()),
      rng_{} {
  tokens_.reserve(static_cast<size_t>(max_seq_len));
}

Session::~Session() = default;

Status Session::create(const Model& model, const geist_session_params& params,
                       std::unique_ptr<Session>* out) {
  out->reset();
  if (params.struct_size != sizeof(geist_session_params)) {
    return Status::error(GEIST_E_INVALID_ARG,
                         "geist_session_params.struct_size is %u, expected %zu (initialise "
                         "with geist_session_params_default)",
                         params.struct_size, sizeof(geist_session_params));
  }
  GEIST_RETURN_IF_ERROR(validate_sampler_params(params.sampler));
  if (params.max_seq_len < 0) {
    return Status::error(GEIST_E_INVALID_ARG, "max_seq_len %d is negative", params.max_seq_len);
  }
  // Checked before any thread exists: a huge count is refused, never attempted.
  if (params.n_threads < 0 || params.n_threads > kMaxThreads) {
    return Status::error(GEIST_E_INVALID_ARG, "n_threads %d is not in [0, %d] (0: all cores)",
                         params.n_threads, kMaxThreads);
  }
  if (!kv_mode_valid(params.kv_mode)) {
    return Status::error(GEIST_E_INVALID_ARG,
                         "kv_mode %d is not a geist_kv_mode (f32 0, f16 1, q8 2, q4 3, kivi4 4, "
                         "kivi2 5)",
                         params.kv_mode);
  }
  GEIST_RETURN_IF_ERROR(model.require_weights("a session"));
  int32_t max_seq_len = params.max_seq_len;
  if (max_seq_len == 0) {
    const int32_t n_ctx_train = model.info().n_ctx_train;
    max_seq_len = n_ctx_train > 0 ? std::min(n_ctx_train, 4096) : 4096;
  }
  if (model.info().n_ctx_train > 0 && max_seq_len > model.info().n_ctx_train) {
    model.logger().log(GEIST_LOG_WARN,
                       "max_seq_len %d exceeds the trained context %d; quality may degrade",
                       max_seq_len, model.info().n_ctx_train);
  }

  const unsigned hw = std::thread::hardware_concurrency();
  if (hw > 0 && static_cast<unsigned>(params.n_threads) > hw) {
    model.logger().log(GEIST_LOG_WARN,
                       "n_threads %d exceeds the %u hardware threads; they will oversubscribe",
                       params.n_threads, hw);
  }
  std::unique_ptr<Session> s(new Session(model, max_seq_len, model.thread_pool(params.n_threads)));
  GEIST_RETURN_IF_ERROR(
      model.arch().create_state(max_seq_len, static_cast<KvMode>(params.kv_mode), &s->state_));
  GEIST_CHECK(s->state_ && s->state_->max_seq_len() == max_seq_len,
              "architecture state has the wrong capacity");
  s->sampler_params_ = params.sampler;
  s->rng_.seed(params.sampler.seed);
  *out = std::move(s);
  return Status::ok();
}

Status Session::run_forward(const int32_t* tokens, int32_t n, int32_t pos, const LogitsOut& out) {
  std::lock_guard<std::mutex> lock(pool_->mu);
  return model_.arch().forward(*state_, tokens, n, pos, out, pool_->pool);
}

Status Session::pay_forward(int32_t* argmax) {
  if (!forward_owed_) return Status::ok();
  const int32_t pos = position() - 1;
  GEIST_RETURN_IF_ERROR(run_forward(&tokens_[static_cast<size_t>(pos)], 1, pos,
                                    LogitsOut{logits_scratch_.data(), false, argmax}));
  if (argmax == nullptr) std::swap(logits_, logits_scratch_);
  forward_owed_ = false;
  return Status::ok();
}

Status Session::prefill(const int32_t* tokens, size_t n, float* all_logits) {
  if (n == 0) return Status::ok();
  if (tokens == nullptr) return Status::error(GEIST_E_INVALID_ARG, "tokens is NULL");
  const int32_t n_vocab = model_.n_vocab();
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab) {
      return Status::error(GEIST_E_INVALID_ARG,
                           "token %d at index %zu is outside the vocabulary [0, %d)", tokens[i], i,
                           n_vocab);
    }
  }
  const size_t room = static_cast<size_t>(max_seq_len_) - tokens_.size();
  if (n > room) {
    return Status::error(GEIST_E_TOO_MANY_TOKENS,
                         "prefill of %zu tokens at position %d exceeds max_seq_len %d", n,
                         position(), max_seq_len_);
  }
  GEIST_RETURN_IF_ERROR(pay_forward());

  const size_t row = static_cast<size_t>(n_vocab);
  const int32_t pos0 = position();
  const int32_t end = pos0 + static_cast<int32_t>(n);
  Status st = Status::ok();
  int32_t p = pos0;
  while (p < end) {
    // Each micro-batch leaves its last row's logits in scratch (one row more than the last
    // micro-batch alone would need), so a cancelled prefill stops with its logits pending.
    const int32_t e = model_.arch().micro_batch_end(p, end);
    const size_t done = static_cast<size_t>(p - pos0);
    float* rows = all_logits ? all_logits + done * row : logits_scratch_.data();
    st = run_forward(tokens + done, e - p, p, LogitsOut{rows, all_logits != nullptr, nullptr});
    if (!st) break;
    if (all_logits)
      std::copy_n(all_logits + (static_cast<size_t>(e - pos0) - 1) * row, row,
                  logits_scratch_.data());
    p = e;
    if (p < end && cancel_.load(std::memory_order_relaxed)) {
      st = Status::error(GEIST_E_CANCELLED,
                         "prefill cancelled at position %d after %d of its %zu tokens (the state "
                         "and pending logits are those of position %d)",
                         p, p - pos0, n, p);
      break;
    }
  }
  cancel_.store(false, std::memory_order_relaxed);
  if (st.code() != GEIST_E_CANCELLED && !st) return st;  // history as it was
  // Only now, with the forwards done, does the session change observably.
  tokens_.insert(tokens_.end(), tokens, tokens + (p - pos0));
  if (p > pos0) n_generated_ = 0;  // prompt input: a new completion starts
  std::swap(logits_, logits_scratch_);
  has_logits_ = true;
  return st;
}

Status Session::prefill_text(std::string_view text, bool add_special) {
  std::vector<int32_t> ids;
  GEIST_RETURN_IF_ERROR(model_.tokenizer().encode(text, add_special, true, &ids));
  if (add_special && position() > 0 && model_.adds_bos() && !ids.empty() &&
      ids[0] == model_.tokenizer().bos()) {
    ids.erase(ids.begin());
  }
  return prefill(ids.data(), ids.size(), nullptr);
}

Status Session::check_decode() const {
  if (!has_logits_) {
    return Status::error(GEIST_E_INVALID_STATE,
                         "decode needs pending logits: prefill at least one token first");
  }
  if (position() >= max_seq_len_) {
    return Status::error(GEIST_E_TOO_MANY_TOKENS, "session is full (max_seq_len %d)", max_seq_len_);
  }
  // Pending logits computed before a device failure would still give a token, but the session
  // cannot run the forward it then owes: say so now.
  return state_->status();
}

bool Session::next_is_argmax(size_t more) const {
  const size_t n_gen = more > 0 ? 0 : static_cast<size_t>(n_generated_);
  return Sampler::is_argmax(sampler_params_, tokens_.size() + more, n_gen);
}

int32_t Session::sample_pending(Rng& rng) {
  return sampler_.sample(logits_.data(), tokens_.data(), tokens_.size(),
                         static_cast<size_t>(n_generated_), sampler_params_, rng);
}

void Session::append_decoded(int32_t tok) {
  tokens_.push_back(tok);
  ++n_generated_;
  forward_owed_ = true;
}

Status Session::decode(int32_t* out_token) {
  GEIST_RETURN_IF_ERROR(check_decode());
  int32_t tok = 0;
  if (forward_owed_ && next_is_argmax(0)) {
    // The owed forward's row would be used for its argmax only and then go stale (the token
    // appended below owes the next forward), so only the argmax is asked for: a device
    // backend copies out 4 bytes instead of the row. logits_ stays stale; nothing reads it
    // once the token below is appended.
    GEIST_RETURN_IF_ERROR(pay_forward(&tok));
    GEIST_CHECK(tok >= 0 && tok < model_.n_vocab(), "a greedy choice lies in the vocabulary");
  } else {
    GEIST_RETURN_IF_ERROR(pay_forward());
    tok = sample_pending();
  }
  append_decoded(tok);
  *out_token = tok;
  return Status::ok();
}

Status Session::peek(int32_t* out_token) {
  GEIST_RETURN_IF_ERROR(check_decode());
  if (forward_owed_) {
    return Status::error(GEIST_E_INVALID_STATE,
                         "peek needs computed logits, but a forward is owed (the last decoded "
                         "token's): decode or geist_session_logits runs it");
  }
  Rng rng = rng_;  // decode() with nothing owed, on a copy of the RNG
  *out_token = sample_pending(rng);
  return Status::ok();
}

Status Session::rewind(int32_t n) {
  if (n < 0 || n > position()) {
    return Status::error(GEIST_E_INVALID_ARG, "rewind to %d: the session holds %d tokens", n,
                         position());
  }
  if (n == position()) return Status::ok();  // nothing to forget
  // Rows [0, n) are in the state (an owed forward is the last token's, past n).
  GEIST_RETURN_IF_ERROR(state_->can_continue_at(n));
  tokens_.resize(static_cast<size_t>(n));
  has_logits_ = false;
  forward_owed_ = false;
  n_generated_ = 0;
  if (pin_len_ > n) {  // the pin's KV prefix is no longer the cache's
    pin_image_.clear();
    pin_len_ = 0;
  }
  if (n == 0) state_->reset();
  return Status::ok();
}

Status Session::logits(const float** out) {
  if (!has_logits_) {
    return Status::error(GEIST_E_INVALID_STATE, "no logits pending: prefill first");
  }
  GEIST_RETURN_IF_ERROR(pay_forward());
  *out = logits_.data();
  return Status::ok();
}

void Session::reset() {
  pin_image_.clear();  // the pin relies on the cache's prefix, which a reset gives up
  tokens_.clear();
  n_generated_ = 0;
  state_->reset();
  has_logits_ = false;
  forward_owed_ = false;
  rng_.seed(sampler_params_.seed);
}

Status Session::set_sampler(const geist_sampler_params& params) {
  GEIST_RETURN_IF_ERROR(validate_sampler_params(params));
  sampler_params_ = params;
  rng_.seed(params.seed);
  return Status::ok();
}

}  // namespace geist
