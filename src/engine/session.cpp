#include "engine/session.h"

#include <algorithm>
#include <new>
#include <string>

#include "kv/kv_cache.h"

namespace geist {
namespace {

// Bounds the activation scratch a single forward call needs (a backend may ask for longer
// calls: Backend::micro_batch). Chunking changes no row of an attention-only model and rounds
// a recurrent state where calls end (ArchModel::forward's split contract).
constexpr int32_t kMaxBatch = 512;

}  // namespace

Session::Session(const Model& model, int32_t max_seq_len, int n_threads)
    : model_(model),
      max_seq_len_(max_seq_len),
      pool_(n_threads),
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
  if (params.n_threads < 0) {
    return Status::error(GEIST_E_INVALID_ARG, "n_threads %d is negative", params.n_threads);
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

  std::unique_ptr<Session> s(new Session(model, max_seq_len, params.n_threads));
  GEIST_RETURN_IF_ERROR(
      model.arch().create_state(max_seq_len, static_cast<KvMode>(params.kv_mode), &s->state_));
  GEIST_CHECK(s->state_ && s->state_->max_seq_len() == max_seq_len,
              "architecture state has the wrong capacity");
  s->sampler_params_ = params.sampler;
  s->rng_.seed(params.sampler.seed);
  *out = std::move(s);
  return Status::ok();
}

Status Session::pay_forward(int32_t* argmax) {
  if (!forward_owed_) return Status::ok();
  const int32_t pos = position() - 1;
  GEIST_RETURN_IF_ERROR(model_.arch().forward(*state_, &tokens_[static_cast<size_t>(pos)], 1, pos,
                                              LogitsOut{logits_scratch_.data(), false, argmax},
                                              pool_));
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
  const int32_t max_call = model_.arch().backend().micro_batch(kMaxBatch);
  for (size_t done = 0; done < n;) {
    const int32_t chunk = static_cast<int32_t>(std::min(n - done, static_cast<size_t>(max_call)));
    const bool last = done + static_cast<size_t>(chunk) == n;
    // Rows go straight to the caller's buffer; the last row also goes to the pending logits
    // (via scratch, so a failure leaves the pending logits intact).
    float* dst = all_logits ? all_logits + done * row : logits_scratch_.data();
    GEIST_RETURN_IF_ERROR(model_.arch().forward(*state_, tokens + done, chunk,
                                                pos0 + static_cast<int32_t>(done),
                                                all_logits != nullptr, dst, pool_));
    if (last && all_logits) {
      std::copy_n(all_logits + (n - 1) * row, row, logits_scratch_.data());
    }
    done += static_cast<size_t>(chunk);
  }
  // Only now, with every forward done, does the session change observably.
  tokens_.insert(tokens_.end(), tokens, tokens + n);
  std::swap(logits_, logits_scratch_);
  has_logits_ = true;
  return Status::ok();
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

Status Session::decode(int32_t* out_token) {
  if (!has_logits_) {
    return Status::error(GEIST_E_INVALID_STATE,
                         "decode needs pending logits: prefill at least one token first");
  }
  if (position() >= max_seq_len_) {
    return Status::error(GEIST_E_TOO_MANY_TOKENS, "session is full (max_seq_len %d)", max_seq_len_);
  }
  // Pending logits computed before a device failure would still give a token, but the session
  // cannot run the forward it then owes: say so now.
  GEIST_RETURN_IF_ERROR(state_->status());
  int32_t tok = 0;
  if (forward_owed_ && Sampler::is_argmax(sampler_params_, tokens_.size())) {
    // The owed forward's row would be used for its argmax only and then go stale (the token
    // appended below owes the next forward), so only the argmax is asked for: a device
    // backend copies out 4 bytes instead of the row. logits_ stays stale; nothing reads it
    // once the token below is appended.
    GEIST_RETURN_IF_ERROR(pay_forward(&tok));
  } else {
    GEIST_RETURN_IF_ERROR(pay_forward());
    tok = sampler_.sample(logits_.data(), tokens_.data(), tokens_.size(), sampler_params_, rng_);
  }
  tokens_.push_back(tok);
  forward_owed_ = true;
  *out_token = tok;
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
