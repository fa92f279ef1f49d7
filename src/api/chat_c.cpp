// The chat C ABI (geist_chat.h): templates and rendering.
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "api/handles.h"
#include "chat/chat.h"
#include "geist/geist_chat.h"

struct geist_chat_template {
  std::unique_ptr<geist::chat::ChatTemplate> tmpl;
  mutable std::mutex error_mu;
  mutable std::string error;  // guarded by error_mu

  void set_error(const std::string& msg) const noexcept {
    try {
      std::lock_guard<std::mutex> lock(error_mu);
      error = msg;
    } catch (...) {
    }
  }
};

namespace {

using geist::Status;

void write_err(char* err_buf, size_t err_cap, const std::string& msg) noexcept {
  if (err_buf == nullptr || err_cap == 0) return;
  const size_t n = msg.size() < err_cap - 1 ? msg.size() : err_cap - 1;
  std::memcpy(err_buf, msg.data(), n);
  err_buf[n] = '\0';
}

geist_status make_template(std::string source, std::string bos, std::string eos,
                           geist_chat_template** out, char* err_buf, size_t err_cap) {
  return geist::api::guarded(
      [&]() -> Status {
        std::unique_ptr<geist_chat_template> h(new geist_chat_template());
        GEIST_RETURN_IF_ERROR(geist::chat::ChatTemplate::create(std::move(source), std::move(bos),
                                                                std::move(eos), &h->tmpl)
                                  .with_prefix("chat template"));
        *out = h.release();
        return Status::ok();
      },
      [&](const std::string& msg) { write_err(err_buf, err_cap, msg); });
}

}  // namespace

extern "C" {

geist_status geist_chat_template_from_model(const geist_model* model, const char* name,
                                            geist_chat_template** out, int* out_is_fallback,
                                            char* err_buf, size_t err_cap) {
  if (out == nullptr || model == nullptr || model->model == nullptr) {
    write_err(err_buf, err_cap, "model or out is NULL");
    return GEIST_E_INVALID_ARG;
  }
  *out = nullptr;
  if (out_is_fallback != nullptr) *out_is_fallback = 0;
  std::string source, bos, eos;
  try {
    const geist::Model& m = *model->model;
    const std::string wanted = name == nullptr ? "" : name;
    const std::string* src = m.chat_template(wanted);
    if (src == nullptr && !wanted.empty()) {
      std::string have;
      for (const auto& [n, s] : m.chat_templates()) {
        have += have.empty() ? "" : ", ";
        have += n.empty() ? "(default)" : n;
      }
      write_err(err_buf, err_cap,
                "the model has no chat template named '" + wanted +
                    "' (it has: " + (have.empty() ? "none" : have) + ")");
      return GEIST_E_NOT_FOUND;
    }
    if (src == nullptr) {
      m.logger().log(GEIST_LOG_WARN,
                     "the model has no chat template (tokenizer.chat_template): using ChatML");
      if (out_is_fallback != nullptr) *out_is_fallback = 1;
      source = std::string(geist::chat::chatml_template_source());
    } else {
      source = *src;
    }
    bos = m.bos_text();
    eos = m.eos_text();
  } catch (const std::bad_alloc&) {
    write_err(err_buf, err_cap, "out of memory");
    return GEIST_E_OOM;
  }
  return make_template(std::move(source), std::move(bos), std::move(eos), out, err_buf, err_cap);
}

geist_status geist_chat_template_create(const char* source, size_t source_len,
                                        const char* bos_token, const char* eos_token,
                                        geist_chat_template** out, char* err_buf, size_t err_cap) {
  if (out == nullptr || (source == nullptr && source_len > 0)) {
    write_err(err_buf, err_cap, "source or out is NULL");
    return GEIST_E_INVALID_ARG;
  }
  *out = nullptr;
  try {
    return make_template(std::string(source == nullptr ? "" : source, source_len),
                         bos_token == nullptr ? "" : bos_token,
                         eos_token == nullptr ? "" : eos_token, out, err_buf, err_cap);
  } catch (const std::bad_alloc&) {
    write_err(err_buf, err_cap, "out of memory");
    return GEIST_E_OOM;
  }
}

geist_status geist_chat_template_create_for_model(const geist_model* model, const char* source,
                                                  size_t source_len, geist_chat_template** out,
                                                  char* err_buf, size_t err_cap) {
  if (out == nullptr || model == nullptr || model->model == nullptr ||
      (source == nullptr && source_len > 0)) {
    write_err(err_buf, err_cap, "model, source or out is NULL");
    return GEIST_E_INVALID_ARG;
  }
  *out = nullptr;
  try {
    return make_template(std::string(source == nullptr ? "" : source, source_len),
                         model->model->bos_text(), model->model->eos_text(), out, err_buf, err_cap);
  } catch (const std::bad_alloc&) {
    write_err(err_buf, err_cap, "out of memory");
    return GEIST_E_OOM;
  }
}

void geist_chat_template_free(geist_chat_template* tmpl) { delete tmpl; }

const char* geist_chat_template_last_error(const geist_chat_template* tmpl) {
  if (tmpl == nullptr) return "";
  std::lock_guard<std::mutex> lock(tmpl->error_mu);
  return tmpl->error.c_str();
}

const char* geist_chat_template_source(const geist_chat_template* tmpl) {
  return tmpl == nullptr ? "" : tmpl->tmpl->source().c_str();
}

geist_status geist_chat_render(geist_chat_template* tmpl, const char* request_json,
                               size_t request_len, char* out, size_t cap, size_t* n_out) {
  if (tmpl == nullptr) return GEIST_E_INVALID_ARG;
  return geist::api::guarded(
      [&]() -> Status {
        if (n_out == nullptr) return Status(GEIST_E_INVALID_ARG, "n_out is NULL");
        if (request_json == nullptr) return Status(GEIST_E_INVALID_ARG, "request_json is NULL");
        if (out == nullptr && cap > 0) {
          return Status::error(GEIST_E_INVALID_ARG, "out is NULL but cap is %zu", cap);
        }
        geist::chat::Json request = geist::chat::Json::parse(
            request_json, request_json + request_len, nullptr, /*allow_exceptions=*/false);
        if (request.is_discarded()) {
          return Status(GEIST_E_INVALID_ARG, "the request is not valid JSON");
        }
        std::string text;
        GEIST_RETURN_IF_ERROR(tmpl->tmpl->render(request, &text));
        return geist::api::write_string(text, out, cap, n_out);
      },
      [&](const std::string& msg) { tmpl->set_error(msg); });
}

}  // extern "C"
