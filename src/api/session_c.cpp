// C ABI: sessions and sampler settings (geist.h, geist_util.h).
#include <string>

#include "api/handles.h"
#include "engine/sampler.h"
#include "geist/geist.h"
#include "geist/geist_util.h"

using geist::Status;
using geist::api::guarded;

namespace {

// Runs a session call: failures land in the session's error slot.
template <class F>
geist_status session_call(const geist_session* s, F&& f) noexcept {
  if (s == nullptr || !s->session) return GEIST_E_INVALID_ARG;
  return guarded(f, [s](const std::string& m) { s->set_error(m); });
}

}  // namespace

extern "C" {

void geist_sampler_params_default(geist_sampler_params* params) {
  if (params != nullptr) *params = geist::default_sampler_params();
}

void geist_session_params_default(geist_session_params* params) {
  if (params == nullptr) return;
  *params = geist_session_params{};
  params->struct_size = sizeof(geist_session_params);
  params->max_seq_len = 0;
  params->n_threads = 0;
  params->sampler = geist::default_sampler_params();
  params->kv_mode = GEIST_KV_F16;
}

geist_status geist_session_create(geist_model* model, const geist_session_params* params,
                                  geist_session** out_session) {
  if (model == nullptr || !model->model) {
    if (out_session != nullptr) *out_session = nullptr;
    return GEIST_E_INVALID_ARG;
  }
  return guarded(
      [&]() -> Status {
        if (out_session == nullptr) {
          return Status::error(GEIST_E_INVALID_ARG, "out_session is NULL");
        }
        *out_session = nullptr;
        geist_session_params p;
        geist_session_params_default(&p);
        if (params != nullptr) p = *params;
        auto handle = std::make_unique<geist_session>();
        GEIST_RETURN_IF_ERROR(geist::Session::create(*model->model, p, &handle->session));
        handle->owner = model;
        model->n_sessions.fetch_add(1);
        *out_session = handle.release();
        return Status::ok();
      },
      [model](const std::string& m) { model->set_error(m); });
}

void geist_session_destroy(geist_session* session) {
  if (session == nullptr) return;
  if (session->owner != nullptr) session->owner->n_sessions.fetch_sub(1);
  delete session;
}

void geist_session_cancel(geist_session* session) {
  if (session != nullptr && session->session) session->session->cancel();
}

const char* geist_session_last_error(const geist_session* session) {
  return session == nullptr ? "" : session->error.c_str();
}

geist_status geist_session_prefill(geist_session* session, const geist_token* tokens,
                                   size_t n_tokens) {
  return session_call(session,
                      [&]() { return session->session->prefill(tokens, n_tokens, nullptr); });
}

geist_status geist_session_prefill_all_logits(geist_session* session, const geist_token* tokens,
                                              size_t n_tokens, float* out_logits, size_t out_cap) {
  return session_call(session, [&]() -> Status {
    if (n_tokens == 0) return Status::ok();
    const size_t n_vocab = static_cast<size_t>(session->session->model().n_vocab());
    if (out_logits == nullptr) return Status::error(GEIST_E_INVALID_ARG, "out_logits is NULL");
    if (n_tokens > out_cap / n_vocab) {
      return Status::error(GEIST_E_INVALID_ARG,
                           "out_logits holds %zu floats but %zu tokens x %zu logits are needed",
                           out_cap, n_tokens, n_vocab);
    }
    return session->session->prefill(tokens, n_tokens, out_logits);
  });
}

geist_status geist_session_prefill_text(geist_session* session, const char* text, size_t text_len,
                                        int add_special) {
  return session_call(session, [&]() -> Status {
    if (text == nullptr && text_len > 0) {
      return Status::error(GEIST_E_INVALID_ARG, "text is NULL but text_len is %zu", text_len);
    }
    return session->session->prefill_text(std::string_view(text ? text : "", text_len),
                                          add_special != 0);
  });
}

geist_status geist_session_decode(geist_session* session, geist_token* out_token) {
  return session_call(session, [&]() -> Status {
    if (out_token == nullptr) return Status::error(GEIST_E_INVALID_ARG, "out_token is NULL");
    return session->session->decode(out_token);
  });
}

geist_status geist_session_peek(geist_session* session, geist_token* out_token) {
  return session_call(session, [&]() -> Status {
    if (out_token == nullptr) return Status::error(GEIST_E_INVALID_ARG, "out_token is NULL");
    return session->session->peek(out_token);
  });
}

geist_status geist_session_rewind(geist_session* session, int32_t n_tokens) {
  return session_call(session, [&]() -> Status { return session->session->rewind(n_tokens); });
}

geist_status geist_session_logits(geist_session* session, const float** out_logits,
                                  int32_t* out_n_vocab) {
  return session_call(session, [&]() -> Status {
    if (out_logits == nullptr) return Status::error(GEIST_E_INVALID_ARG, "out_logits is NULL");
    GEIST_RETURN_IF_ERROR(session->session->logits(out_logits));
    if (out_n_vocab != nullptr) *out_n_vocab = session->session->model().n_vocab();
    return Status::ok();
  });
}

geist_status geist_session_reset(geist_session* session) {
  return session_call(session, [&]() -> Status {
    session->session->reset();
    return Status::ok();
  });
}

int32_t geist_session_position(const geist_session* session) {
  return session && session->session ? session->session->position() : 0;
}

int32_t geist_session_max_seq_len(const geist_session* session) {
  return session && session->session ? session->session->max_seq_len() : 0;
}

int32_t geist_session_prefill_grid(const geist_session* session) {
  return session && session->session ? session->session->prefill_grid() : 0;
}

geist_status geist_session_set_sampler(geist_session* session, const geist_sampler_params* params) {
  return session_call(session, [&]() -> Status {
    if (params == nullptr) return Status::error(GEIST_E_INVALID_ARG, "params is NULL");
    return session->session->set_sampler(*params);
  });
}

geist_status geist_session_tokens(const geist_session* session, const geist_token** out_tokens,
                                  size_t* out_n) {
  return session_call(session, [&]() -> Status {
    if (out_tokens == nullptr || out_n == nullptr) {
      return Status::error(GEIST_E_INVALID_ARG, "out_tokens or out_n is NULL");
    }
    const std::vector<int32_t>& t = session->session->tokens();
    *out_tokens = t.data();
    *out_n = t.size();
    return Status::ok();
  });
}

}  // extern "C"
